package index

import (
	"fmt"
	"io"
	"strings"
)

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

// ReadHead reads the first n bytes of f (fewer when f is shorter) for
// sniffing its format. A read that fails is that error, naming f: a
// file that cannot be read (a remote GET refused, an I/O error) is never
// taken for a file that is not a checkpoint. The error is the read's
// own (wrapped, so that its kind is still known), prefixed with f's name
// where it does not say it already.
func ReadHead(f File, n int) ([]byte, error) {
	head := make([]byte, n)
	got, err := f.ReadAt(head, 0)
	if got < n && err != nil && err != io.EOF {
		if strings.Contains(err.Error(), f.Name()) {
			return nil, err
		}
		return nil, fmt.Errorf("%s: cannot read: %w", f.Name(), err)
	}
	return head[:got], nil
}

// Opener opens a file that a checkpoint file names beside it (an ONNX
// model's external data "location"), by a path relative to the
// checkpoint file's directory. The loader confines it to that
// directory: a path with "..", an absolute path or a symbolic link
// leading out is refused (one line naming the path). Opening the same
// path twice returns the same File; the files opened are the Sources
// after the checkpoint file, in the order first opened (see Env). A nil
// Opener opens nothing: parsing
// one file alone (formats.ParseFile, a fuzz target).
type Opener func(rel string) (File, error)

// MemberOpener opens m, a compressed member of file (Kind *Deflated;
// m.File is file's Sources entry), as a File that a parser reads while
// parsing: decoded whole before it returns, within the budgets of the
// loader's cache of decoded members (--inflate-mem, --inflate-disk), its
// size and CRC-32 checked; a member whose data is bad is an error of
// one line naming the file, the member and the problem (a
// *FormatError), before the parser reads any of it. The loader then
// serves the member from this same File, so that it is decoded once (see
// Env).
type MemberOpener func(file File, m *Member) (File, error)

// Env is what a format's parser may open besides its file (the one
// parse signature of package formats' table, Parse(file, env)).
type Env struct {
	// Siblings opens the files the file names beside it (ONNX external
	// data), confined to its directory; nil when the file is parsed
	// alone (formats.ParseFile, a fuzz target): a file that needs
	// others is then refused, one line. The returned Index's Sources
	// are the file's name, then the names of the files opened, in the
	// order first opened, then its Members.
	Siblings Opener
	// Members opens a compressed member of the file that holds its
	// structure (a .keras zip's deflated model.weights.h5) through the
	// cache of decoded members; never nil from the loader.
	Members MemberOpener
}
