package torch

import (
	"bytes"
	"compress/flate"
	"encoding/binary"
	"hash/crc32"
	"io"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/lazyweights/tensorfs/index"
	"github.com/lazyweights/tensorfs/index/numpy"
)

// Helpers copied from index/numpy's tests (numpy_test.go): a test
// package cannot import another's test files.

// npyBuild makes a .npy of format major.0 with header text hdr (padded as
// numpy pads: spaces, then '\n', to a multiple of 64 bytes) and data.
func npyBuild(hdr string, major int, data []byte) []byte {
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

// npzCheckMembers checks idx's members (ptCheckIndex): deflated members
// of the file, deflated data.pkl, Latin-1 strs of a pickle.
func npzCheckMembers(t testing.TB, idx *index.Index, name string, size int64) {
	t.Helper()
	for i, m := range idx.Members {
		if m.Source != 1+i || m.File < 0 || m.File >= m.Source || idx.Sources[m.Source] != idx.Sources[m.File]+":"+m.Name || (m.Method != index.MethodDeflate && m.Method != index.MethodLatin1) {
			t.Fatalf("%s: member %d: %+v, source %q", name, i, m, idx.Sources[m.Source])
		}
		holder := size
		if h := idx.Member(m.File); h != nil {
			holder = h.Size
		}
		ratio := int64(numpy.DeflateMaxRatio)
		if m.Method == index.MethodLatin1 {
			ratio = 1 // each byte is one or two of UTF-8
		}
		if m.Offset < 0 || m.CompressedSize < 0 || m.Offset+m.CompressedSize > holder || m.Size < 0 || m.Size > m.CompressedSize*ratio+258 {
			t.Fatalf("%s: member %s: %+v in a %d-byte holder", name, m.Name, m, holder)
		}
	}
}

// npzGather is ptGather for a tensor that may be in a member: the member
// is decoded from data first (npzSourceBytes).
func npzGather(t testing.TB, data []byte, idx *index.Index, tn index.Tensor) []byte {
	t.Helper()
	return ptGather(t, npzSourceBytes(t, data, idx, tn.Source), tn)
}

// npzSourceBytes returns the bytes of source i of idx, decoding members
// from data (the file's bytes) independently of backing: deflate with
// its size and CRC-32 checked, Latin-1 strs through Go's UTF-8 decoder.
func npzSourceBytes(t testing.TB, data []byte, idx *index.Index, i int) []byte {
	t.Helper()
	m := idx.Member(i)
	if m == nil {
		return data
	}
	in := npzSourceBytes(t, data, idx, m.File)[m.Offset : m.Offset+m.CompressedSize]
	switch m.Method {
	case index.MethodDeflate:
		b, err := io.ReadAll(io.LimitReader(flate.NewReader(bytes.NewReader(in)), m.Size+1))
		if err != nil || int64(len(b)) != m.Size || crc32.ChecksumIEEE(b) != m.CRC32 {
			t.Fatalf("member %s: %d bytes, want %d; crc ok %v; %v", m.Name, len(b), m.Size, crc32.ChecksumIEEE(b) == m.CRC32, err)
		}
		return b
	case index.MethodLatin1:
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
	t.Fatalf("member %s: method %d", m.Name, m.Method)
	return nil
}
