package numpy

import (
	"archive/zip"
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/lazyweights/tensorfs/index"
	"github.com/lazyweights/tensorfs/internal/testdata"
)

// Helpers copied from index/torch's tests (torch_helpers_test.go,
// torch_python_test.go): a test package cannot import another's test files.

type ptMemFile struct {
	*bytes.Reader
	name string
}

func (f ptMemFile) Name() string { return f.name }

func ptMem(name string, b []byte) ptMemFile { return ptMemFile{bytes.NewReader(b), name} }

// ptGather returns tensor tn's logical row-major little-endian bytes from
// the file bytes data, following Offset/Strides/BigEndian as the view
// layer must.
func ptGather(t testing.TB, data []byte, tn index.Tensor) []byte {
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

func ptSHA(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// ptCheckIndex checks what every parser promises about an Index.
func ptCheckIndex(t testing.TB, idx *index.Index, name string, size int64) {
	t.Helper()
	if len(idx.Sources) != 1+len(idx.Members) || idx.Sources[0] != name {
		t.Fatalf("%s: sources %v", name, idx.Sources)
	}
	npzCheckMembers(t, idx, name, size) // numpy_test.go
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

// ptErrContains fails unless err is a one-line *FormatError containing
// every want.
func ptErrContains(t testing.TB, err error, wants ...string) {
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

// ptTestdataDir returns the shared test data directory for fuzz seeding,
// or "" when absent (fuzz targets never fail for missing seeds).
func ptTestdataDir() string {
	d := os.Getenv("TENSORFS_TESTDATA")
	if d == "" {
		d = filepath.Join(testdata.RepoRoot(), "..", "shared", "testdata")
	}
	if st, err := os.Stat(d); err != nil || !st.IsDir() {
		return ""
	}
	return d
}

// ptSeedFiles reads the test data files matching the globs (relative to
// the test data directory); none when it is absent.
func ptSeedFiles(globs ...string) [][]byte {
	d := ptTestdataDir()
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

// ptMember is one member of a hand-built zip.
type ptMember struct {
	name    string
	data    []byte
	deflate bool
}

func ptZip(t testing.TB, members ...ptMember) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	for _, m := range members {
		h := &zip.FileHeader{Name: m.name, Method: zip.Store}
		if m.deflate {
			h.Method = zip.Deflate
		}
		w, err := zw.CreateHeader(h)
		if err != nil {
			t.Fatal(err)
		}
		w.Write(m.data)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// ptF32 is little-endian float32 storage bytes 0, 1, 2, ... n-1.
func ptF32(n int) []byte {
	b := make([]byte, 0, 4*n)
	for i := 0; i < n; i++ {
		b = binary.LittleEndian.AppendUint32(b, uint32(i)*0x01010101)
	}
	return b
}

func ptNames(idx *index.Index) []string {
	var n []string
	for _, t := range idx.Tensors {
		n = append(n, t.Name)
	}
	return n
}

// ptParse parses b as a file named name: an .npy file by its magic, else
// an .npz archive (what format detection picks for each).
func ptParse(name string, b []byte) (*index.Index, error) {
	if SniffNPY(b) {
		return ParseNPY(ptMem(name, b))
	}
	return ParseNPZ(ptMem(name, b))
}
