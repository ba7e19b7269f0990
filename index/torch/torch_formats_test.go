package torch_test

// Tests of the PyTorch reader through formats (detection, Load): an
// external test package, as formats imports torch.

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/lazyweights/tensorfs/backing"
	"github.com/lazyweights/tensorfs/formats"
	"github.com/lazyweights/tensorfs/index"
	"github.com/lazyweights/tensorfs/index/torch"
	"github.com/lazyweights/tensorfs/internal/testenv"
)

// npzParse is the format table's npz parser.
func npzParse(f index.File) (*index.Index, error) {
	for _, fm := range formats.Table {
		if fm.Name == "npz" {
			return fm.Parse(f, index.Env{})
		}
	}
	panic("no npz format")
}

// TestTorchSniffDetect: (from TestTorchSniff) detection and the parsers
// hand zips of the other kind to each other.
func TestTorchSniffDetect(t *testing.T) {
	// A root name cut off by the 64-byte head may sniff as npz; the parsers
	// hand such files to each other, so detection still ends as pytorch.
	long := torch.PtGoodZip(t, strings.Repeat("r", 60)+"/")
	if idx, err := formats.ParseFile(torch.PtMem("long.pt", long)); err != nil || idx.Format != "pytorch" || len(idx.Tensors) != 4 {
		t.Fatalf("%v %+v", err, idx)
	}
	// A zip of .npy members reaching parseTorch goes to the npz parser,
	// and a torch zip reaching parseNPZ goes to the torch parser.
	npz := torch.PtZip1(t, "a/b.npy", torch.NpyBuild("{'descr': '<f4', 'fortran_order': False, 'shape': (1,), }", 1, torch.PtF32(1)))
	if idx, err := torch.Parse(torch.PtMem("x.npz", npz)); err != nil || idx.Format != "numpy" || idx.Tensors[0].Name != "a/b" {
		t.Fatalf("%v %+v", err, idx)
	}
	if idx, err := npzParse(torch.PtMem("x.pt", torch.PtGoodZip(t, "archive/"))); err != nil || idx.Format != "pytorch" {
		t.Fatalf("%v", err)
	}
}

// ptLoadSHA loads path through Load and returns the sha256 of each
// tensor's logical bytes as read through the loader's sources (members
// decoded by backing, not by the test).
func ptLoadSHA(t *testing.T, path string) (*index.Index, map[string]string) {
	t.Helper()
	idx, files, err := formats.Load(path, func(p string) (index.File, error) {
		data, err := os.ReadFile(p)
		if err != nil {
			return nil, err
		}
		return torch.PtMem(p, data), nil
	}, formats.Options{Inflate: backing.DefaultInflateCache()})
	if err != nil {
		t.Fatalf("Load %s: %v", path, err)
	}
	defer func() {
		for _, f := range files {
			if c, ok := f.(interface{ Close() error }); ok {
				c.Close()
			}
		}
	}()
	out := map[string]string{}
	for _, tn := range idx.Tensors {
		f := files[tn.Source]
		b := make([]byte, f.Size())
		if n, err := f.ReadAt(b, 0); n != len(b) {
			t.Fatalf("%s: tensor %s: read %d of %d bytes of its source: %v", path, tn.Name, n, len(b), err)
		}
		out[tn.Name] = torch.PtSHA(torch.PtGather(t, b, tn))
	}
	return idx, out
}

// TestTorchNumpyProtocol2: numpy arrays saved with torch.save's default
// pickle protocol 2, whose bytes are not a range of the file (a Latin-1
// str held as UTF-8), and arrays in a deflated data.pkl, are tensors
// under their keys with their dtypes and shapes, byte-identical with
// torch.load: decoded independently from the members the index
// describes, and read through Load's sources (backing decodes them on
// first read). numpy 1 and numpy 2 pickles, zip and legacy; a 40 MiB
// array, past pickle.MaxValue, is checked while skipped over. On the old
// main these arrays were a line in the metadata.
func TestTorchNumpyProtocol2(t *testing.T) {
	ref := torch.PtRunRef(t, testenv.TorchNumpyProtocol2Script, "torch", "numpy")
	if len(ref) != 6 {
		t.Fatalf("python made %d files, want 6", len(ref))
	}
	idxs, n := torch.PtCompareRef(t, ref)
	for p, idx := range idxs {
		base := filepath.Base(p)
		want := map[string]int{"p2_zip.pt": 11, "p2_legacy.pt": 11, "np2_p2_zip.pt": 3, "np2_p2_legacy.pt": 3, "p2_deflated.pt": 10, "p4_deflated.pt": 10}[base]
		if len(idx.Tensors) != want || len(idx.Members) == 0 {
			t.Errorf("%s: %d tensors (want %d), %d members: %v", base, len(idx.Tensors), want, len(idx.Members), torch.PtNames(idx))
		}
		if np, ok := idx.Metadata["np"]; ok {
			t.Errorf("%s: metadata np = %v, want no arrays in the metadata", base, np)
		}
		_, shas := ptLoadSHA(t, p)
		for name, r := range ref[p] {
			var sha string
			json.Unmarshal(r[2], &sha)
			if shas[name] != sha {
				t.Errorf("%s: %s through Load's sources differs from torch.load", base, name)
			}
		}
		var big *index.Tensor
		for i := range idx.Tensors {
			if idx.Tensors[i].Name == "np/big" {
				big = &idx.Tensors[i]
			}
		}
		if strings.HasPrefix(base, "p2_") && !strings.Contains(base, "deflated") {
			if big == nil || big.Size != 40<<20 || idx.Member(big.Source) == nil || !isLatin1(*idx.Member(big.Source)) {
				t.Errorf("%s: np/big %+v, want 40 MiB in a Latin-1 member", base, big)
			}
		}
		if strings.Contains(base, "deflated") {
			// The inflated data.pkl is a member; protocol 2's strs are
			// members of it.
			if m := idx.Members[0]; !isDeflated(m) || !strings.HasSuffix(m.Name, "data.pkl") {
				t.Errorf("%s: first member %+v, want the deflated data.pkl", base, m)
			}
			nested := 0
			for _, m := range idx.Members {
				if m.File != 0 {
					nested++
				}
			}
			if want := map[bool]int{true: 1, false: 0}[strings.HasPrefix(base, "p2")]; (nested > 0) != (want > 0) {
				t.Errorf("%s: %d members of a member", base, nested)
			}
		}
	}
	t.Logf("%d tensors and arrays match torch.load in %d files", n, len(idxs))
}

func isDeflated(m index.Member) bool { _, ok := m.Kind.(*index.Deflated); return ok }
func isLatin1(m index.Member) bool   { _, ok := m.Kind.(*index.Latin1); return ok }
