package index

import (
	"bytes"
	"io"
)

// File is what parsers read: a random-access file of known size.
// backing.Source satisfies it.
type File interface {
	io.ReaderAt
	Size() int64
	Name() string
}

// Format is one row of the format table: how to recognise a checkpoint by
// its first bytes, and how to parse it.
type Format struct {
	Name string
	// Sniff reports whether head (the file's first bytes, up to SniffLen)
	// looks like this format.
	Sniff func(head []byte) bool
	// Parse reads the whole structure of one file and validates it. The
	// returned Index has Sources == []string{f.Name()} and Source == 0 in
	// every tensor; paths are not assigned yet.
	Parse func(f File) (*Index, error)
}

// SniffLen is how many leading bytes Detect needs.
const SniffLen = 64

// Formats is the explicit table of supported formats, in detection order.
// Order matters only where magic bytes could overlap: zip-based formats
// (PyTorch, npz) are told apart by their members, inside their parsers'
// Sniff.
var Formats = []Format{
	{Name: "gguf", Sniff: sniffGGUF, Parse: parseGGUF},
	{Name: "numpy", Sniff: sniffNPY, Parse: parseNPY},
	{Name: "pytorch", Sniff: sniffTorch, Parse: parseTorch},
	{Name: "npz", Sniff: sniffNPZ, Parse: parseNPZ},
	{Name: "safetensors", Sniff: sniffSafetensors, Parse: parseSafetensors},
}

// Detect returns the format whose Sniff accepts head.
func Detect(head []byte) (*Format, bool) {
	for i := range Formats {
		if Formats[i].Sniff(head) {
			return &Formats[i], true
		}
	}
	return nil, false
}

// ParseFile detects f's format by content and parses it.
func ParseFile(f File) (*Index, error) {
	head := make([]byte, SniffLen)
	n, err := f.ReadAt(head, 0)
	if n < len(head) && err != nil && err != io.EOF {
		return nil, Errorf(f.Name(), 0, "cannot read: %v", err)
	}
	head = head[:n]
	fm, ok := Detect(head)
	if !ok {
		return nil, &FormatError{File: f.Name(), Offset: -1, Msg: "not a checkpoint tensorfs knows (want safetensors, PyTorch, GGUF, .npy or .npz)" + describeHead(head)}
	}
	return fm.Parse(f)
}

func describeHead(head []byte) string {
	if len(head) == 0 {
		return "; the file is empty"
	}
	n := len(head)
	if n > 8 {
		n = 8
	}
	var b bytes.Buffer
	b.WriteString("; it starts with")
	for _, c := range head[:n] {
		b.WriteString(" ")
		const hex = "0123456789abcdef"
		b.WriteByte(hex[c>>4])
		b.WriteByte(hex[c&15])
	}
	return b.String()
}
