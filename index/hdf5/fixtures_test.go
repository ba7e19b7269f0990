package hdf5

import (
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/lazyweights/tensorfs/index"
)

// expected is testdata/EXPECTED.json: per file, every dataset h5py
// lists (path: shape and sha256 of its C-order little-endian bytes),
// and the links it does not follow.
type expected map[string]struct {
	Datasets map[string]struct {
		Shape  []int64
		SHA256 string
	}
	Links         []string
	ListingSHA256 string `json:"listing_sha256"` // of "path\tshape\tsha256\n", sorted: for deep.h5's 3 KB names
}

func loadExpected(t testing.TB) expected {
	t.Helper()
	b, err := os.ReadFile("testdata/EXPECTED.json")
	if err != nil {
		t.Fatal(err)
	}
	var e expected
	if err := json.Unmarshal(b, &e); err != nil {
		t.Fatal(err)
	}
	return e
}

// gunzipFixture returns testdata/NAME.gz inflated.
func gunzipFixture(t testing.TB, name string) []byte {
	t.Helper()
	f, err := os.Open(filepath.Join("testdata", name+".gz"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	z, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	b, err := io.ReadAll(z)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// tensorBytes returns tensor tn's bytes, C-order little-endian.
func tensorBytes(t *testing.T, idx *index.Index, tn *index.Tensor, file memFile) []byte {
	t.Helper()
	var b []byte
	if m := idx.Member(tn.Source); m != nil {
		var out bytes.Buffer
		if err := m.Kind.(*index.Decoded).Decode(&out, file); err != nil {
			t.Fatalf("%s: %v", tn.Name, err)
		}
		b = out.Bytes()
	} else {
		b = make([]byte, tn.Size)
		if _, err := file.ReadAt(b, tn.Offset); err != nil {
			t.Fatalf("%s: %v", tn.Name, err)
		}
	}
	if int64(len(b)) != tn.Size {
		t.Fatalf("%s: %d bytes, want %d", tn.Name, len(b), tn.Size)
	}
	if e := tn.DType.ElemSize(); tn.BigEndian && e > 1 {
		for i := 0; i < len(b); i += int(e) {
			slices.Reverse(b[i : i+int(e)])
		}
	}
	return b
}

// unservedFixtures are the datasets of the fixtures listed as unserved.
var unservedFixtures = map[string]string{"missing/farray": "1 of its 2 chunks are stored"}

// TestFixtures: every dataset of the h5py fixtures (libver='latest':
// dense groups, a track_order group, a huge link name, layout-4 chunk
// indexes) is a tensor of h5py's shape whose bytes have h5py's sha256,
// and the names are exactly h5py's listing.
func TestFixtures(t *testing.T) {
	exp := loadExpected(t)
	for _, name := range []string{"dense.h5", "deep.h5", "chunks.h5", "chunks114.h5"} {
		e, ok := exp[name]
		if !ok {
			t.Fatalf("%s not in EXPECTED.json", name)
		}
		t.Run(name, func(t *testing.T) {
			b := gunzipFixture(t, name)
			file := mem(b)
			idx, err := Parse(file)
			if err != nil {
				t.Fatal(err)
			}
			if e.ListingSHA256 != "" {
				var lines strings.Builder
				names := map[string]*index.Tensor{}
				for i := range idx.Tensors {
					names[idx.Tensors[i].Name] = &idx.Tensors[i]
				}
				for _, n := range slices.Sorted(maps.Keys(names)) {
					tn := names[n]
					sum := sha256.Sum256(tensorBytes(t, idx, tn, file))
					shape := strings.ReplaceAll(fmt.Sprint(tn.Shape), " ", ", ")
					fmt.Fprintf(&lines, "%s\t%s\t%x\n", n, shape, sum)
				}
				if sum := sha256.Sum256([]byte(lines.String())); hex.EncodeToString(sum[:]) != e.ListingSHA256 {
					t.Errorf("%d datasets: listing sha256 %x, want %s", len(names), sum, e.ListingSHA256)
				}
				return
			}
			got := map[string]bool{}
			for i := range idx.Tensors {
				tn := &idx.Tensors[i]
				got[tn.Name] = true
				want, ok := e.Datasets[tn.Name]
				if !ok {
					t.Errorf("%s: not a dataset h5py lists", tn.Name)
					continue
				}
				if !slices.Equal(tn.Shape, want.Shape) {
					t.Errorf("%s: shape %v, want %v", tn.Name, tn.Shape, want.Shape)
					continue
				}
				sum := sha256.Sum256(tensorBytes(t, idx, tn, file))
				if hex.EncodeToString(sum[:]) != want.SHA256 {
					t.Errorf("%s: sha256 %x, want %s", tn.Name, sum, want.SHA256)
				}
			}
			uns := map[string]string{}
			for _, u := range idx.Unserved {
				uns[u.Name] = u.Why
			}
			for p := range e.Datasets {
				if got[p] {
					continue
				}
				if w, ok := unservedFixtures[p]; ok && strings.Contains(uns[p], w) {
					continue
				}
				t.Errorf("%s: not served (%q)", p, uns[p])
			}
			for _, l := range e.Links {
				if _, ok := uns[l]; !ok {
					t.Errorf("link %s: not listed as unserved", l)
				}
			}
		})
	}
}

// TestSingleChunkRange: an unfiltered dataset stored as one chunk of its
// shape (libver='latest”s single-chunk index) is a range of the file,
// not decoded; filtered ones are decoded.
func TestSingleChunkRange(t *testing.T) {
	b := gunzipFixture(t, "chunks.h5")
	idx, err := Parse(mem(b))
	if err != nil {
		t.Fatal(err)
	}
	for _, tn := range idx.Tensors {
		if !strings.HasPrefix(tn.Name, "single/") {
			continue
		}
		if decoded := idx.Member(tn.Source) != nil; decoded != (tn.Name != "single/plain") {
			t.Errorf("%s: decoded %v", tn.Name, decoded)
		}
	}
}
