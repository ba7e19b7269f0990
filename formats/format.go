package formats

import (
	"bytes"

	"errors"
	"fmt"
	"github.com/lazyweights/tensorfs/backing"
	"io"
	"strconv"
	"strings"

	"github.com/lazyweights/tensorfs/index"
	"github.com/lazyweights/tensorfs/index/gguf"
	"github.com/lazyweights/tensorfs/index/hdf5"
	"github.com/lazyweights/tensorfs/index/keras"
	"github.com/lazyweights/tensorfs/index/numpy"
	"github.com/lazyweights/tensorfs/index/onnx"
	"github.com/lazyweights/tensorfs/index/paddle"
	"github.com/lazyweights/tensorfs/index/safetensors"
	"github.com/lazyweights/tensorfs/index/torch"
)

// Format is one row of the format table: how to recognise a checkpoint by
// its first bytes, how to parse it, and what the loader must know of it.
type Format struct {
	Name string
	// Sniff reports whether head (the file's first bytes, up to SniffLen)
	// looks like this format.
	Sniff func(head []byte) bool
	// Parse reads the whole structure of one file and validates it,
	// opening what env hands it (index.Env: the files beside it, nil
	// when parsed alone; its compressed members, read through the
	// cache of decoded members and served by the loader from the same
	// source, decoded once). The returned Index's Sources are f's name,
	// then the files it opened, in the order first opened, then its
	// Members; Source is 0 in every tensor of f; paths are not assigned
	// yet.
	Parse func(f index.File, env index.Env) (*index.Index, error)
	// OpensSiblings says Parse opens files beside f (env.Siblings: ONNX
	// external data). In a directory such a file is parsed as soon as
	// it is sniffed, so that the files it names are its own, never
	// checkpoints of their own, however their first bytes look.
	OpensSiblings bool
	// NoFallback says the row is not tried on a file whose first bytes
	// another row also sniffs and fails to parse (ParseFile): the zip
	// rows, whose parsers tell torch.save zips from .npz ones by the
	// central directory themselves.
	NoFallback bool
	// Join, where set, joins this format's parsed parts into one index
	// instead of merging them in order (loader.join): the parts of a
	// directory (in file name order), or the one file a SOURCE names
	// (alone), which may open the other parts beside it. GGUF: a split
	// model's parts in split.no order (split.go); safetensors: the
	// pieces a distributed checkpoint's storage writer placed
	// (hfshards.go).
	Join joiner
}

// joiner is a row's Join (a type whose method joins, rather than a
// function, so that a Join that parses, as GGUF's finding the other
// parts does, may refer to Table).
type joiner interface {
	join(l *loader, dir string, parts []part, alone bool) (*index.Index, error)
}

// alone is a row's Parse for a parser that opens nothing beside its file.
func alone(parse func(index.File) (*index.Index, error)) func(index.File, index.Env) (*index.Index, error) {
	return func(f index.File, _ index.Env) (*index.Index, error) { return parse(f) }
}

// SniffLen is how many leading bytes Detect needs (index.SniffLen).
const SniffLen = index.SniffLen

// Table is the explicit table of supported formats, in detection order.
// Order matters only where magic bytes could overlap: zip-based formats
// (PyTorch, npz) are told apart by their members, inside their parsers'
// Sniff.
var Table = []Format{
	{Name: "gguf", Sniff: gguf.Sniff, Parse: alone(gguf.Parse), Join: ggufSplit{}},
	{Name: "numpy", Sniff: numpy.SniffNPY, Parse: alone(numpy.ParseNPY)},
	{Name: "pytorch", Sniff: torch.Sniff, Parse: alone(torch.Parse), NoFallback: true},
	{Name: "npz", Sniff: numpy.SniffNPZ, Parse: alone(parseNPZ), NoFallback: true},
	{Name: "safetensors", Sniff: safetensors.Sniff, Parse: alone(safetensors.Parse), Join: storagePieces{}},
	{Name: "hdf5", Sniff: hdf5.Sniff, Parse: alone(hdf5.Parse)},
	// A Keras 3 .keras zip: its model.weights.h5, read in place when
	// stored, through the cache of decoded members when deflated.
	{Name: "keras", Sniff: keras.Sniff, Parse: keras.Parse},
	// Protobuf has no magic: ONNX is told by its first fields (ir_version,
	// then another ModelProto field), after the formats with magic bytes.
	{Name: "onnx", Sniff: onnx.Sniff, Parse: onnx.ParseEnv, OpensSiblings: true},
	// Last: any pickle of a dict is sniffed; Parse tells a Paddle file
	// (numpy arrays) from other pickles, which are not claimed.
	{Name: "paddle", Sniff: paddle.Sniff, Parse: alone(parsePaddle)},
}

// unknownMsg is the message for a file no row of Table reads.
const unknownMsg = "not a checkpoint tensorfs knows (want safetensors, PyTorch, GGUF, .npy, .npz, ONNX, HDF5 (Keras) or PaddlePaddle)"

// parsePaddle is paddle.Parse, which leaves a pickle without numpy
// arrays (paddle.ErrNotPaddle) unclaimed: it is reported as a file that
// is no checkpoint, not as a broken Paddle one.
func parsePaddle(f index.File) (*index.Index, error) {
	idx, err := paddle.Parse(f)
	if errors.Is(err, paddle.ErrNotPaddle) {
		return nil, unclaimed{&index.FormatError{File: f.Name(), Offset: -1, Msg: unknownMsg + "; it is a pickle of a dict without numpy arrays"}}
	}
	return idx, err
}

// unclaimed is the error for a file that a row sniffed but is not of its
// format after all (a pickle without numpy arrays): a *index.FormatError
// that is also paddle.ErrNotPaddle, so that a directory skips the file
// as it skips any file that is not a checkpoint.
type unclaimed struct{ *index.FormatError }

func (u unclaimed) Unwrap() []error { return []error{u.FormatError, paddle.ErrNotPaddle} }

// parseNPZ parses a zip archive that the npz row's Sniff claimed. The
// first bytes cannot tell the zip formats apart (a torch.save root
// folder named after a long file stem hides its data.pkl past them): the
// central directory decides. An archive with a torch data.pkl is a
// torch.save checkpoint (torch.ParseZip); otherwise it is an .npz, and
// numpy.ParseNPZ hands one with no arrays but a data.pkl deeper down to
// torch.ParseZip too.
func parseNPZ(f index.File) (*index.Index, error) {
	zr, spans, err := index.OpenZip(f)
	if err != nil {
		return nil, err
	}
	if torch.ZipPickle(zr) != nil {
		return torch.ParseZipOpened(f, zr, spans)
	}
	idx, err := numpy.ParseNPZOpened(f, zr, spans)
	if errors.Is(err, numpy.ErrTorchZip) {
		return torch.ParseZipOpened(f, zr, spans)
	}
	return idx, err
}

// Detect returns the format whose Sniff accepts head.
func Detect(head []byte) (*Format, bool) {
	for i := range Table {
		if Table[i].Sniff(head) {
			return &Table[i], true
		}
	}
	return nil, false
}

// ParseFile detects f's format by content and parses it, alone: a file
// that names others beside it (ONNX external data) is refused; Load
// opens them. A compressed member the parser reads (a .keras zip's
// deflated model.weights.h5) is decoded through the process's cache of
// decoded members (backing.DefaultInflateCache) and freed on return.
func ParseFile(f index.File) (*index.Index, error) {
	l := &loader{inflate: backing.DefaultInflateCache()}
	defer l.closePrepared(nil)
	return parseFile(f, index.Env{Members: l.parseMember})
}

func parseFile(f index.File, env index.Env) (*index.Index, error) {
	head := make([]byte, SniffLen)
	n, err := f.ReadAt(head, 0)
	if n < len(head) && err != nil && err != io.EOF {
		return nil, index.Errorf(f.Name(), 0, "cannot read: %v", err)
	}
	head = head[:n]
	fm, ok := Detect(head)
	if !ok && IsLFSPointer(head) {
		return nil, &index.FormatError{File: f.Name(), Offset: -1, Msg: describeLFSPointer(f)}
	}
	if !ok {
		if msg, known := describeRefusedFile(f, head); known { // refused.go
			return nil, &index.FormatError{File: f.Name(), Offset: -1, Msg: msg}
		}
	}
	if !ok {
		return nil, &index.FormatError{File: f.Name(), Offset: -1, Msg: unknownMsg + describeHead(head)}
	}
	idx, err := fm.Parse(f, env)
	if err == nil {
		return idx, nil
	}
	// Where the first bytes fit two formats (a safetensors header whose
	// length spells a zip's "PK\x03\x04"), the file is what the other
	// reader reads in full; if none does, the first reader's error
	// stands.
	for i := range Table {
		if other := &Table[i]; other != fm && !other.NoFallback && other.Sniff(head) {
			if idx, err2 := other.Parse(f, env); err2 == nil {
				return idx, nil
			}
		}
	}
	return nil, err
}

// lfsPrefix begins every Git LFS pointer file
// (https://github.com/git-lfs/git-lfs/blob/main/docs/spec.md).
const lfsPrefix = "version https://git-lfs.github.com/spec/"

// IsLFSPointer reports whether head, the start of a file, is a Git LFS
// pointer: the small text file git leaves in place of a large file that
// was not downloaded (a Hugging Face repository cloned without git-lfs).
func IsLFSPointer(head []byte) bool { return bytes.HasPrefix(head, []byte(lfsPrefix)) }

// describeLFSPointer is the message for a Git LFS pointer file f: what it
// is, the size of the real file where the pointer says, and what to run.
func describeLFSPointer(f index.File) string {
	buf := make([]byte, min(f.Size(), 1024))
	n, _ := f.ReadAt(buf, 0)
	size := ""
	for _, line := range strings.Split(string(buf[:n]), "\n") {
		if v, ok := strings.CutPrefix(line, "size "); ok {
			if b, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64); err == nil && b >= 0 {
				size = fmt.Sprintf(" of a %d-byte file", b)
			}
		}
	}
	return "a Git LFS pointer" + size + ", not the checkpoint itself: the file was not downloaded; run `git lfs pull` in its repository (or download the file directly)"
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
