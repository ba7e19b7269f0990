// Package parsetest holds the helpers that the tests of the format
// packages (index/numpy, index/torch, index/safetensors) and of formats
// share: in-memory files, zip, .npy and safetensors builders,
// the checks every parser's Index must pass, and reading
// tensors back from a file's bytes. Only tests import it.
package parsetest

import (
	"archive/zip"
	"bytes"
	"compress/flate"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/lazyweights/tensorfs/index"
	"github.com/lazyweights/tensorfs/internal/testenv"
)

type MemFile struct {
	*bytes.Reader
	name string
}

func (f MemFile) Name() string { return f.name }

func Mem(name string, b []byte) MemFile { return MemFile{bytes.NewReader(b), name} }

// Gather returns tensor tn's logical row-major little-endian bytes from
// the file bytes data, following Offset/Strides/BigEndian as the view
// layer must.
func Gather(t testing.TB, data []byte, tn index.Tensor) []byte {
	t.Helper()
	es := tn.DType.ElemSize()
	if es <= 0 {
		t.Fatalf("%s: dtype %s has no element size", tn.Name, tn.DType)
	}
	n := tn.NumElements()
	if n*es != tn.Size {
		t.Fatalf("%s: size %d, want %d elements of %d bytes", tn.Name, tn.Size, n, es)
	}
	out := make([]byte, 0, tn.Size)
	if tn.Strides == nil {
		if tn.Offset < 0 || tn.Offset+tn.Size > int64(len(data)) {
			t.Fatalf("%s: [%d,+%d) outside the %d-byte file", tn.Name, tn.Offset, tn.Size, len(data))
		}
		out = append(out, data[tn.Offset:tn.Offset+tn.Size]...)
	} else {
		if len(tn.Strides) != len(tn.Shape) {
			t.Fatalf("%s: %d strides for shape %v", tn.Name, len(tn.Strides), tn.Shape)
		}
		idx := make([]int64, len(tn.Shape))
		for k := int64(0); k < n; k++ {
			off := tn.Offset
			for i := range idx {
				off += idx[i] * tn.Strides[i] * es
			}
			if off < 0 || off+es > int64(len(data)) {
				t.Fatalf("%s: element %v at byte %d outside the %d-byte file", tn.Name, idx, off, len(data))
			}
			out = append(out, data[off:off+es]...)
			for i := len(idx) - 1; i >= 0; i-- {
				idx[i]++
				if idx[i] < tn.Shape[i] {
					break
				}
				idx[i] = 0
			}
		}
	}
	if tn.BigEndian {
		u := tn.DType.Info().Unit
		for i := 0; i+u <= len(out); i += u {
			for a, b := i, i+u-1; a < b; a, b = a+1, b-1 {
				out[a], out[b] = out[b], out[a]
			}
		}
	}
	return out
}

func SHA(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// CheckIndex checks what every parser promises about an Index.
func CheckIndex(t testing.TB, idx *index.Index, name string, size, deflateMaxRatio int64) {
	t.Helper()
	if len(idx.Sources) != 1+len(idx.Members) || idx.Sources[0] != name {
		t.Fatalf("%s: sources %v", name, idx.Sources)
	}
	CheckMembers(t, idx, name, size, deflateMaxRatio)
	if _, err := json.Marshal(idx.Metadata); err != nil {
		t.Fatalf("%s: metadata is not JSON-encodable: %v", name, err)
	}
	for i, tn := range idx.Tensors {
		if i > 0 && idx.Tensors[i-1].Name >= tn.Name {
			t.Fatalf("%s: tensors not sorted/distinct at %q", name, tn.Name)
		}
		size := size
		if m := idx.Member(tn.Source); m != nil {
			size = m.Size // a compressed member's tensors are in its inflated bytes
		}
		if err := index.CheckTensor(&tn, name, size); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if tn.Strides != nil {
			// Every reachable element lies inside the file.
			es := tn.DType.ElemSize()
			last := tn.Offset
			for k, d := range tn.Shape {
				if d == 0 {
					last = -1
					break
				}
				if tn.Strides[k] < 0 {
					t.Fatalf("%s: %s has a negative stride", name, tn.Name)
				}
				last += (d - 1) * tn.Strides[k] * es
			}
			if last >= 0 && last+es > size {
				t.Fatalf("%s: %s reaches byte %d of a %d-byte file", name, tn.Name, last+es, size)
			}
		}
		if tn.BigEndian && tn.DType.Info().Unit == 1 {
			t.Fatalf("%s: %s is big-endian with 1-byte units", name, tn.Name)
		}
	}
}

// ErrContains fails unless err is a one-line *FormatError containing
// every want.
func ErrContains(t testing.TB, err error, wants ...string) {
	t.Helper()
	if err == nil {
		t.Fatalf("no error, want one containing %q", wants)
	}
	if _, ok := err.(*index.FormatError); !ok {
		t.Fatalf("error %T %v is not a *FormatError", err, err)
	}
	msg := err.Error()
	if strings.ContainsAny(msg, "\n\r") {
		t.Fatalf("error has a line break: %q", msg)
	}
	for _, w := range wants {
		if !strings.Contains(msg, w) {
			t.Fatalf("error %q does not contain %q", msg, w)
		}
	}
}

// TestdataDir returns the shared test data directory for fuzz seeding,
// or "" when absent (fuzz targets never fail for missing seeds).
func TestdataDir() string {
	d := os.Getenv("TENSORFS_TESTDATA")
	if d == "" {
		d = filepath.Join(testenv.RepoRoot(), "..", "shared", "testdata")
	}
	if st, err := os.Stat(d); err != nil || !st.IsDir() {
		return ""
	}
	return d
}

// SeedFiles reads the test data files matching the globs (relative to
// the test data directory); none when it is absent.
func SeedFiles(globs ...string) [][]byte {
	d := TestdataDir()
	if d == "" {
		return nil
	}
	var out [][]byte
	for _, g := range globs {
		m, _ := filepath.Glob(filepath.Join(d, g))
		for _, p := range m {
			if b, err := os.ReadFile(p); err == nil && len(b) < 1<<20 {
				out = append(out, b)
			}
		}
	}
	return out
}

// Member is one member of a hand-built zip.
type Member struct {
	Name    string
	Data    []byte
	Deflate bool
}

func Zip(t testing.TB, members ...Member) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	for _, m := range members {
		h := &zip.FileHeader{Name: m.Name, Method: zip.Store}
		if m.Deflate {
			h.Method = zip.Deflate
		}
		w, err := zw.CreateHeader(h)
		if err != nil {
			t.Fatal(err)
		}
		w.Write(m.Data)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// F32 is little-endian float32 storage bytes 0, 1, 2, ... n-1.
func F32(n int) []byte {
	b := make([]byte, 0, 4*n)
	for i := 0; i < n; i++ {
		b = binary.LittleEndian.AppendUint32(b, uint32(i)*0x01010101)
	}
	return b
}

func Names(idx *index.Index) []string {
	var n []string
	for _, t := range idx.Tensors {
		n = append(n, t.Name)
	}
	return n
}

// NPYBuild makes a .npy of format major.0 with header text hdr (padded as
// numpy pads: spaces, then '\n', to a multiple of 64 bytes) and data.
func NPYBuild(hdr string, major int, data []byte) []byte {
	pre := 10
	if major > 1 {
		pre = 12
	}
	total := pre + len(hdr) + 1
	if r := total % 64; r != 0 {
		hdr += strings.Repeat(" ", 64-r)
	}
	hdr += "\n"
	b := []byte("\x93NUMPY")
	b = append(b, byte(major), 0)
	if major == 1 {
		b = binary.LittleEndian.AppendUint16(b, uint16(len(hdr)))
	} else {
		b = binary.LittleEndian.AppendUint32(b, uint32(len(hdr)))
	}
	return append(append(b, hdr...), data...)
}

// CheckMembers checks idx's members (CheckIndex): deflated members
// of the file, deflated data.pkl, Latin-1 strs of a pickle.
func CheckMembers(t testing.TB, idx *index.Index, name string, size, deflateMaxRatio int64) {
	t.Helper()
	for i, m := range idx.Members {
		if c, ok := m.Kind.(*index.Tiles); ok {
			total := int64(0)
			for _, p := range c.Ranges(&m) {
				if p.Source < 0 || p.Source >= m.Source || p.Offset < 0 || p.Size < 0 {
					t.Fatalf("%s: member %s: part %+v", name, m.Name, p)
				}
				total += p.Size
			}
			if m.Source != 1+i || len(c.Chunks) == 0 || m.File != c.Chunks[0].Source || total != m.Size || idx.SourceName(m.Source) != idx.Sources[0]+":"+m.Name {
				t.Fatalf("%s: member %d: %+v, source %q", name, i, m, idx.SourceName(m.Source))
			}
			continue
		}
		var off, csize int64
		switch k := m.Kind.(type) {
		case *index.Deflated:
			off, csize = k.Offset, k.CompressedSize
		case *index.Latin1:
			off, csize = k.Offset, k.Len
		default:
			t.Fatalf("%s: member %d: %+v of kind %T", name, i, m, m.Kind)
		}
		if m.Source != 1+i || m.File < 0 || m.File >= m.Source || idx.SourceName(m.Source) != idx.SourceName(m.File)+":"+m.Name {
			t.Fatalf("%s: member %d: %+v, source %q", name, i, m, idx.SourceName(m.Source))
		}
		holder := size
		if h := idx.Member(m.File); h != nil {
			holder = h.Size
		}
		ratio := deflateMaxRatio
		if _, ok := m.Kind.(*index.Latin1); ok {
			ratio = 1 // each byte is one or two of UTF-8
		}
		if off < 0 || csize < 0 || off+csize > holder || m.Size < 0 || m.Size > csize*ratio+258 {
			t.Fatalf("%s: member %s: %+v in a %d-byte holder", name, m.Name, m, holder)
		}
	}
}

// MemberGather is Gather for a tensor that may be in a member: the member
// is decoded from data first (SourceBytes).
func MemberGather(t testing.TB, data []byte, idx *index.Index, tn index.Tensor) []byte {
	t.Helper()
	return Gather(t, SourceBytes(t, data, idx, tn.Source), tn)
}

// SourceBytes returns the bytes of source i of idx, decoding members
// from data (the file's bytes) independently of backing: deflate with
// its size and CRC-32 checked, Latin-1 strs through Go's UTF-8 decoder.
func SourceBytes(t testing.TB, data []byte, idx *index.Index, i int) []byte {
	t.Helper()
	m := idx.Member(i)
	if m == nil {
		return data
	}
	if c, ok := m.Kind.(*index.Tiles); ok {
		// Byte ranges end to end (index.ConcatTiles): each piece at its
		// Start of a 1-D whole of bytes.
		if len(c.Shape) != 1 || c.ElemSize != 1 {
			t.Fatalf("member %s: tiles of shape %v, %d-byte elements", m.Name, c.Shape, c.ElemSize)
		}
		b := make([]byte, c.Shape[0])
		for _, ch := range c.Chunks {
			copy(b[ch.Start[0]:], SourceBytes(t, data, idx, ch.Source)[ch.Offset:ch.Offset+ch.Shape[0]])
		}
		return b
	}
	rs := m.Kind.Ranges(m)
	if len(rs) != 1 || rs[0].Source != m.File {
		t.Fatalf("member %s: kind %T", m.Name, m.Kind)
	}
	in := SourceBytes(t, data, idx, m.File)[rs[0].Offset : rs[0].Offset+rs[0].Size]
	switch k := m.Kind.(type) {
	case *index.Deflated:
		b, err := io.ReadAll(io.LimitReader(flate.NewReader(bytes.NewReader(in)), m.Size+1))
		if err != nil || int64(len(b)) != m.Size || crc32.ChecksumIEEE(b) != k.CRC32 {
			t.Fatalf("member %s: %d bytes, want %d; crc ok %v; %v", m.Name, len(b), m.Size, crc32.ChecksumIEEE(b) == k.CRC32, err)
		}
		return b
	case *index.Latin1:
		if !utf8.Valid(in) {
			t.Fatalf("member %s: invalid UTF-8", m.Name)
		}
		b := make([]byte, 0, m.Size)
		for _, r := range string(in) {
			if r > 255 {
				t.Fatalf("member %s: code point %U", m.Name, r)
			}
			b = append(b, byte(r))
		}
		if int64(len(b)) != m.Size {
			t.Fatalf("member %s: %d bytes, want %d", m.Name, len(b), m.Size)
		}
		return b
	}
	t.Fatalf("member %s: kind %T", m.Name, m.Kind)
	return nil
}
