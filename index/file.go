package index

import "io"

// File is what parsers read: a random-access file of known size.
// backing.Source satisfies it.
type File interface {
	io.ReaderAt
	Size() int64
	Name() string
}

// SniffLen is how many leading bytes of a file the format rooms' Sniff
// functions look at (formats.Detect reads them).
const SniffLen = 64
