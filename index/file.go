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

// Opener opens a file that a checkpoint file names beside it (an ONNX
// model's external data "location"), by a path relative to the
// checkpoint file's directory. The loader confines it to that
// directory: a path with "..", an absolute path or a symbolic link
// leading out is refused (one line naming the path). Opening the same
// path twice returns the same File; the files opened are the Sources
// after the checkpoint file, in the order first opened (see
// formats.Format.ParseSiblings). A nil Opener opens nothing: parsing
// one file alone (formats.ParseFile, a fuzz target).
type Opener func(rel string) (File, error)
