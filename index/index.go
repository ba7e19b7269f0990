package index

import (
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/lazyweights/tensorfs/dtype"
)

// Tensor is one tensor of a checkpoint: plain data, no behaviour.
//
// The tensor's elements, in row-major (C) order, are found in source file
// Sources[Source]. When Strides is nil the tensor is one contiguous range
// [Offset, Offset+Size) of that file. When Strides is non-nil, element with
// multi-index (i0..in-1) lives at byte Offset + sum(ik*Strides[k])*elemsize,
// and the parser has checked that every such byte lies inside the file.
type Tensor struct {
	Name    string      // exact name in the checkpoint (keys joined by "/")
	Path    string      // path in the mounted tree (see names.go)
	DType   dtype.DType // stored dtype
	Shape   []int64     // row-major; [] for a scalar
	Source  int         // index into Index.Sources
	Offset  int64       // byte offset of element 0 in the source
	Size    int64       // bytes of the row-major native representation
	Strides []int64     // in elements; nil when contiguous row-major
	// BigEndian is set when the stored bytes are big-endian; they are
	// served little-endian (swapped per dtype.Info.Unit).
	BigEndian bool
	// Check, when set, is the CRC-32 of the stored zip member holding
	// the tensor (header included), for a reader that reads it whole.
	Check *Check
	// Role says which listings show the tensor (Listed): stored (the
	// zero value), a part of a logical tensor, or a logical tensor.
	Role Role
}

// Role is what a tensor is to the model a checkpoint encodes. Only the
// listings consult it (the mounted tree, the exports, index.json, the
// client's tensor list); every reader reads any tensor alike.
type Role uint8

const (
	// RoleStored is a tensor as the checkpoint stores it, which is
	// also a tensor of the model: in every view.
	RoleStored Role = iota
	// RolePart is a stored tensor that is one part of a logical
	// tensor (a quantized weight's codes, its scales): in the native
	// tree and its export only.
	RolePart
	// RoleLogical is a tensor of the model that the checkpoint does
	// not store as such but as parts (a quantized weight, read as its
	// values): in the converted views and their exports only, never
	// in the native tree.
	RoleLogical
)

func (r Role) String() string {
	switch r {
	case RoleStored:
		return "stored"
	case RolePart:
		return "part"
	case RoleLogical:
		return "logical"
	}
	return fmt.Sprintf("Role(%d)", uint8(r))
}

// docName is the role as DocTensor.Role holds it: "" for RoleStored.
func (r Role) docName() string {
	if r == RoleStored {
		return ""
	}
	return r.String()
}

// ParseRole returns the role a DocTensor.Role names ("", "part",
// "logical"); ok is false for any other string.
func ParseRole(s string) (r Role, ok bool) {
	switch s {
	case "":
		return RoleStored, true
	case "part":
		return RolePart, true
	case "logical":
		return RoleLogical, true
	}
	return RoleStored, false
}

// Listed reports whether a listing shows t: the native listing
// (converted false: the stored tree, its export, .npy/) shows every
// stored tensor, parts included; a converted one (.f32/ and the other
// float views, their exports, convert and load with a dtype) shows the
// stored tensors that are not parts, and the logical ones.
func (t *Tensor) Listed(converted bool) bool {
	if converted {
		return t.Role != RolePart
	}
	return t.Role != RoleLogical
}

// Contiguous reports whether the tensor is one contiguous byte range of its
// source, stored little-endian, so a read can be served as a plain slice.
func (t *Tensor) Contiguous() bool { return t.Strides == nil && !t.BigEndian }

// NumElements returns the product of the shape (1 for a scalar).
func (t *Tensor) NumElements() int64 {
	n, _ := Elements(t.Shape)
	return n
}

// Index is a parsed checkpoint.
type Index struct {
	Format   string         // "safetensors", "pytorch", "gguf", "numpy", ...
	Sources  []string       // backing files (absolute, from Load)
	Metadata map[string]any // checkpoint's own metadata; JSON-encodable
	Tensors  []Tensor       // sorted by Name; Path set by AssignPaths
	// Members are the Sources that are not files but derived from a
	// range of one (see Member), in Source order; nil for most
	// checkpoints.
	Members []Member
	// Unserved lists, sorted by Name, what the checkpoint holds that
	// tensorfs does not serve (see Unserved); nil for most checkpoints.
	Unserved []Unserved
	// Notes are what a parser left out of the tensors without failing,
	// one line each without the file name (the .npz members of no
	// tensor dtype it put in Metadata instead); every command that opens
	// the checkpoint logs them. nil for most checkpoints.
	Notes []string
	// Keys maps a name to the format's own key of it, where a format
	// keys its entries by something else than the name tensorfs gives
	// them (a distributed checkpoint's dotted keys), for tensors and
	// Metadata entries alike; nil for most checkpoints. It is apart from
	// Metadata so that no key of the checkpoint can take its place.
	Keys map[string]string
	// Quantization is what the loader made of a quantized checkpoint
	// (the logical weights it added, those left out); nil when nothing
	// is quantized.
	Quantization *Quantization
	// NotRead lists, by name, the tensors a checkpoint holds that
	// tensorfs lists without serving and without the checkpoint being
	// incomplete (a tensor Megatron saved in a reformulated shape, whose
	// model tensor is another): why, one line each. Unlike Unserved,
	// `convert` and `load` go on without them. In index.json
	// ("not_read"), apart from Metadata; nil for most checkpoints.
	NotRead map[string]string
}

// Unserved is one entry of a checkpoint that tensorfs lists but does not
// serve, so that one thing it cannot read never costs the rest of the file:
// a tensor of a type it does not know (a GGUF type code newer than this
// build: its size cannot be computed), a PyTorch tensor of a dtype
// tensorfs has no type for (float4_e2m1fn_x2). (An .npz member of no
// tensor dtype is Metadata and a Note instead: it has no tensor to miss.)
// It is in index.json ("unserved"), each
// command that opens the checkpoint logs one line for it, `convert` refuses
// to write an incomplete OUT and `load` fails after the rest.
type Unserved struct {
	Name   string  // exact name in the checkpoint
	Type   string  // the stored type as the format names it: "ggml type 43"
	Shape  []int64 // row-major where known, nil otherwise
	Source int     // index into Sources
	Offset int64   // byte offset of its data in the source where known, else -1
	Why    string  // why it is not served: one line, no file name
	// More is how many entries of its kind (the same Type and Why) the
	// list left out past MaxUnservedBytes (UnservedList): this entry
	// stands for 1+More.
	More int64
}

// Member is a source that is not a file of its own but derived from
// other sources: a deflated .npy in an .npz written by
// numpy.savez_compressed, a deflated data.pkl of a torch zip file, the
// bytes of a numpy array that a protocol-2 pickle holds as a Latin-1 str
// in UTF-8, a tensor tiled from a distributed checkpoint's chunks, or
// a tensor a writer split into slices. Its Sources entry is ""
// (SourceName gives "HOLDER:NAME"); its bytes (Size of them) are what
// Kind says, served by the loader through one backing source
// (formats.OpenMember). Tensors in it have Offsets into those bytes:
// they are not ranges of any file.
type Member struct {
	Source int // the Sources entry it is
	// File is the Sources entry that holds it: a file, or a member
	// before it (an array's str inside a deflated data.pkl); for Tiles,
	// the first chunk's.
	File int
	Name string // its name in the zip; for Latin1 and Tiles, the tensor's name
	Size int64  // bytes it decodes to
	// Kind says how its bytes are made: *Deflated, *Zstd, *Latin1,
	// *Tiles, *Decoded or *Dequantized (one type per kind; a switch on
	// Kind is exhaustive over these).
	Kind MemberKind
}

// MemberKind is how a Member's bytes are made from other sources: one of
// *Deflated, *Zstd, *Latin1, *Tiles, *Decoded, *Dequantized. Only this
// package defines kinds.
type MemberKind interface {
	// Ranges returns the byte ranges of other sources that the
	// member's bytes are computed from, in order.
	Ranges(m *Member) []Part
	// Shifted returns the kind with every source number it holds moved
	// by n (the kind itself where it holds none: it refers to
	// Member.File only), for an index whose sources are placed after n
	// others (Member.Shifted). A new kind that names sources says so
	// here, so that no loader renumbers kinds by hand.
	Shifted(n int) MemberKind
	kind()
}

// Shifted returns m with its own, its holder's and its kind's source
// numbers moved by n: m as an index placed after n sources sees it
// (formats' merge of several files' indexes, a .keras zip around an
// HDF5 file).
func (m Member) Shifted(n int) Member {
	m.Source += n
	m.File += n
	m.Kind = m.Kind.Shifted(n)
	return m
}

// Rebase moves every source number x holds by n, in place: its
// tensors', its unserved entries', its members' (Member.Shifted: each
// kind moves the numbers it holds) and its metadata's file values
// (WithSource), for x placed after n sources of another index (formats'
// merge of several files' indexes, a .keras zip around an HDF5 file).
// Its Sources are the caller's to place.
func (x *Index) Rebase(n int) {
	if n == 0 {
		return
	}
	for i := range x.Tensors {
		x.Tensors[i].Source += n
	}
	for i := range x.Unserved {
		x.Unserved[i].Source += n
	}
	for i := range x.Members {
		x.Members[i] = x.Members[i].Shifted(n)
	}
	for k, v := range x.Metadata {
		x.Metadata[k] = WithSource(v, n)
	}
}

// Shifted: a deflated member's bytes are in Member.File.
func (k *Deflated) Shifted(int) MemberKind { return k }

// Shifted: a zstd member's bytes are in Member.File.
func (k *Zstd) Shifted(int) MemberKind { return k }

// Shifted: a Latin-1 member's bytes are in Member.File.
func (k *Latin1) Shifted(int) MemberKind { return k }

// Shifted returns a copy whose chunks name their sources moved by n.
func (k *Tiles) Shifted(n int) MemberKind {
	c := *k
	c.Chunks = make([]Chunk, len(k.Chunks))
	for i, ch := range k.Chunks {
		ch.Source += n
		c.Chunks[i] = ch
	}
	return &c
}

// Shifted returns a copy whose Read ranges name their sources moved by n.
func (k *Decoded) Shifted(n int) MemberKind {
	c := *k
	c.Read = shiftParts(k.Read, n)
	return &c
}

// shiftParts returns a copy of parts with their sources moved by n (nil
// for nil).
func shiftParts(parts []Part, n int) []Part {
	if parts == nil {
		return nil
	}
	out := make([]Part, len(parts))
	for i, p := range parts {
		p.Source += n
		out[i] = p
	}
	return out
}

// Deflated is zip's deflate (method 8): the encoded bytes are
// [Offset, Offset+CompressedSize) of Member.File; they decode to
// Member.Size bytes with this CRC-32 (IEEE).
type Deflated struct {
	Offset         int64
	CompressedSize int64
	CRC32          uint32
}

// Latin1 is a Python str of code points below 256 held as UTF-8 (a
// pickle's BINUNICODE) at [Offset, Offset+Len) of Member.File, each code
// point one byte of the member: the bytes pickle protocol 2 writes as
// _codecs.encode(str, "latin1").
type Latin1 struct {
	Offset int64
	Len    int64 // bytes of UTF-8
}

// ConcatTiles returns the Tiles of byte ranges end to end: one tensor
// that a writer split into slices (PaddlePaddle's name@@.N slices of a
// parameter over 1 GiB), as pieces of a 1-D whole of bytes (ElemSize 1,
// each part's Start its position). Their Sizes add up to Member.Size;
// nothing is decoded.
func ConcatTiles(parts []Part) *Tiles {
	k := &Tiles{ElemSize: 1, Chunks: make([]Chunk, len(parts))}
	var pos int64
	for i, p := range parts {
		k.Chunks[i] = Chunk{Source: p.Source, Offset: p.Offset, Start: []int64{pos}, Shape: []int64{p.Size}}
		pos += p.Size
	}
	k.Shape = []int64{pos}
	return k
}

// Zstd is a zstd stream (RFC 8878; one or more frames) at [Offset,
// Offset+CompressedSize) of Member.File, of which the member is the
// Member.Size decoded bytes after the first Skip, with this CRC-32
// (IEEE): a torch >= 2.7 distributed checkpoint's zstd item, a torch.save
// zip whose storage record is the member (the zip's CRC-32 of it).
type Zstd struct {
	Offset         int64
	CompressedSize int64
	Skip           int64
	CRC32          uint32
}

// Decoded is bytes the format's own decoder writes: an HDF5 dataset's
// gzip chunks, an ONNX tensor's varint-packed int64_data. Decode writes
// the member's Size bytes to w, reading them from file (the Sources
// entry Member.File) however the format stores them; it writes no more
// than Size bytes and says what is wrong in one line without the file's
// name. Called on first read, through the inflate cache (its budgets),
// like a deflated member.
type Decoded struct {
	// Decode writes the bytes to w, which may be a DecodeTarget.
	Decode func(w io.Writer, file io.ReaderAt) error
	Read   []Part // the ranges of Member.File it reads, where known
}

// DecodeTarget is what the writer a Decode is given may offer beyond
// io.Writer (backing's does, for the cache of decoded members): WriteAt
// writes bytes of the member at their offsets, so that a decoder that
// makes them out of order (an HDF5 dataset's chunks) needs no buffer of
// its own to put them in order; Scratch returns n bytes of working
// memory counted in the budgets that hold decoded members, until Decode
// returns, or an error where those cannot hold them. A decoder uses
// Write or WriteAt, not both; given a plain io.Writer (tests), it
// allocates what it needs itself.
type DecodeTarget interface {
	io.Writer
	io.WriterAt
	Scratch(n int64) ([]byte, error)
}

func (*Deflated) kind() {}
func (*Zstd) kind()     {}
func (*Latin1) kind()   {}
func (*Tiles) kind()    {}
func (*Decoded) kind()  {}

// Ranges is what the decoder reads, where the format says.
func (k *Decoded) Ranges(*Member) []Part { return k.Read }

// Ranges is the compressed bytes.
func (k *Deflated) Ranges(m *Member) []Part {
	return []Part{{Source: m.File, Offset: k.Offset, Size: k.CompressedSize}}
}

// Ranges is the compressed bytes.
func (k *Zstd) Ranges(m *Member) []Part {
	return []Part{{Source: m.File, Offset: k.Offset, Size: k.CompressedSize}}
}

// Ranges is the str's UTF-8 bytes.
func (k *Latin1) Ranges(m *Member) []Part {
	return []Part{{Source: m.File, Offset: k.Offset, Size: k.Len}}
}

// Ranges is the chunks' bytes in their files (chunks of a bad shape are
// left out).
func (k *Tiles) Ranges(*Member) []Part {
	out := make([]Part, 0, len(k.Chunks))
	for _, ch := range k.Chunks {
		if n, ok := Elements(ch.Shape); ok && n > 0 {
			out = append(out, Part{Source: ch.Source, Offset: ch.Offset, Size: n * k.ElemSize})
		}
	}
	return out
}

// Part is one byte range [Offset, Offset+Size) of Sources[Source], a
// file or a member before it.
type Part struct {
	Source       int
	Offset, Size int64
}

// Tiles is pieces placed in a whole: a tensor tiled from chunks, as a
// distributed checkpoint saves a tensor sharded over ranks (Shape the
// tensor's, in elements), or byte ranges end to end (ConcatTiles: a 1-D
// whole of bytes). Every element lies in exactly one chunk, and each
// chunk's elements are stored contiguously, row-major. It is read by
// gathering (backing.Tiled), never decoded whole.
type Tiles struct {
	Shape    []int64 // the whole tensor's
	ElemSize int64   // bytes per element
	Chunks   []Chunk
}

// Chunk is one chunk of a tiled tensor: the box [Start[k], Start[k] +
// Shape[k]) along each dim k, stored row-major at Offset of Source (a
// file).
type Chunk struct {
	Source int
	Offset int64
	Start  []int64
	Shape  []int64
}

// SourceName returns the name of Sources[i]: a file's path, or for a
// Member "HOLDER:NAME", joined here. Parsers leave a member's Sources
// entry "" so that 100,000 members of one file do not each hold a copy
// of its path; a non-empty entry is returned as it is.
func (x *Index) SourceName(i int) string {
	if i < 0 || i >= len(x.Sources) {
		return ""
	}
	if s := x.Sources[i]; s != "" {
		return s
	}
	if m := x.Member(i); m != nil && m.File != i {
		return x.SourceName(m.File) + ":" + m.Name
	}
	return ""
}

// Member returns the member that source is, or nil when it is a file.
func (x *Index) Member(source int) *Member {
	ms := x.Members
	i := sort.Search(len(ms), func(i int) bool { return ms[i].Source >= source })
	if i < len(ms) && ms[i].Source == source {
		return &ms[i]
	}
	return nil
}

// FileOf returns the Sources entry of the file that source is, or that
// holds it (through members of members).
func (x *Index) FileOf(source int) int {
	for m := x.Member(source); m != nil && m.File < m.Source; m = x.Member(source) {
		source = m.File
	}
	return source
}

// Files returns the Sources that are files (all but the Members), in
// order.
func (x *Index) Files() []string {
	if len(x.Members) == 0 {
		return x.Sources
	}
	out := make([]string, 0, len(x.Sources)-len(x.Members))
	for i, s := range x.Sources {
		if x.Member(i) == nil {
			out = append(out, s)
		}
	}
	return out
}

// Errors that callers may test with errors.Is.
var (
	ErrUnknownFormat = errors.New("index: unknown checkpoint format")
	ErrFormat        = errors.New("index: malformed checkpoint")
)

// FormatError says what is wrong in a file and where. Offset is the byte
// offset the problem was found at, or -1 when Where says it instead (a
// tensor name, a key).
type FormatError struct {
	File   string
	Offset int64
	Where  string
	Msg    string
}

func (e *FormatError) Error() string {
	loc := ""
	switch {
	case e.Where != "" && e.Offset >= 0:
		loc = fmt.Sprintf(" (%s, at byte %d)", e.Where, e.Offset)
	case e.Where != "":
		loc = " (" + e.Where + ")"
	case e.Offset >= 0:
		loc = fmt.Sprintf(" (at byte %d)", e.Offset)
	}
	if e.File != "" {
		return Printable(e.File + ": " + e.Msg + loc)
	}
	return Printable(e.Msg + loc)
}

// Printable returns s with what a terminal would not show as text
// escaped, Go style: invalid UTF-8 as \xNN, control and other
// non-printing characters (newlines, escape sequences, bidirectional
// overrides) as \uNNNN or \UNNNNNNNN. Messages quote bytes taken from a
// checkpoint, and a crafted file must not be able to write to the
// user's terminal through them, nor split a message into two lines.
func Printable(s string) string {
	clean := true
	for _, r := range s {
		if r == utf8.RuneError || (r != ' ' && !unicode.IsPrint(r)) {
			clean = false
			break
		}
	}
	if clean {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && n <= 1:
			fmt.Fprintf(&b, "\\x%02x", s[i])
		case r == ' ' || unicode.IsPrint(r):
			b.WriteString(s[i : i+n])
		case r < 0x10000:
			fmt.Fprintf(&b, "\\u%04x", r)
		default:
			fmt.Fprintf(&b, "\\U%08x", r)
		}
		i += n
	}
	return b.String()
}

func (e *FormatError) Unwrap() error { return ErrFormat }

// Errorf returns a *FormatError at a byte offset.
func Errorf(file string, off int64, format string, args ...any) error {
	return &FormatError{File: file, Offset: off, Msg: fmt.Sprintf(format, args...)}
}

// ErrorAt returns a *FormatError located by a name (tensor, key).
func ErrorAt(file, where string, format string, args ...any) error {
	return &FormatError{File: file, Offset: -1, Where: where, Msg: fmt.Sprintf(format, args...)}
}

// Elements returns the product of dims, and false on a negative dim or
// overflow past int64.
func Elements(shape []int64) (int64, bool) {
	n := int64(1)
	for _, d := range shape {
		if d < 0 {
			return 0, false
		}
		if d != 0 && n > (1<<63-1)/d {
			return 0, false
		}
		n *= d
	}
	return n, true
}

// NamesByKey inverts Index.Keys: the name of each of the format's own
// keys (a distributed checkpoint's dotted "model.layers.0.w" for the
// name "model/layers.0.w"), so that a key is taken wherever a name is. A
// key that two names share is left out (ambiguous); nil for no keys.
func NamesByKey(keys map[string]string) map[string]string {
	if len(keys) == 0 {
		return nil
	}
	out := make(map[string]string, len(keys))
	shared := map[string]bool{}
	for name, key := range keys {
		if _, dup := out[key]; dup {
			shared[key] = true
		}
		out[key] = name
	}
	for key := range shared {
		delete(out, key)
	}
	return out
}
