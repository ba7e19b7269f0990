package index

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/lazyweights/tensorfs/index/pickle"
	"github.com/lazyweights/tensorfs/internal/testdata"
)

// ptLoadSHA loads path through Load and returns the sha256 of each
// tensor's logical bytes as read through the loader's sources (members
// decoded by backing, not by the test).
func ptLoadSHA(t *testing.T, path string) (*Index, map[string]string) {
	t.Helper()
	idx, files, err := Load(path, func(p string) (File, error) {
		data, err := os.ReadFile(p)
		if err != nil {
			return nil, err
		}
		return stFile(p, data), nil
	})
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
		out[tn.Name] = ptSHA(ptGather(t, b, tn))
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
	ref := ptRunRef(t, testdata.TorchNumpyProtocol2Script, "torch", "numpy")
	if len(ref) != 6 {
		t.Fatalf("python made %d files, want 6", len(ref))
	}
	idxs, n := ptCompareRef(t, ref)
	for p, idx := range idxs {
		base := filepath.Base(p)
		want := map[string]int{"p2_zip.pt": 11, "p2_legacy.pt": 11, "np2_p2_zip.pt": 3, "np2_p2_legacy.pt": 3, "p2_deflated.pt": 10, "p4_deflated.pt": 10}[base]
		if len(idx.Tensors) != want || len(idx.Members) == 0 {
			t.Errorf("%s: %d tensors (want %d), %d members: %v", base, len(idx.Tensors), want, len(idx.Members), ptNames(idx))
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
		var big *Tensor
		for i := range idx.Tensors {
			if idx.Tensors[i].Name == "np/big" {
				big = &idx.Tensors[i]
			}
		}
		if strings.HasPrefix(base, "p2_") && !strings.Contains(base, "deflated") {
			if big == nil || big.Size != 40<<20 || idx.Member(big.Source) == nil || idx.Member(big.Source).Method != MethodLatin1 {
				t.Errorf("%s: np/big %+v, want 40 MiB in a Latin-1 member", base, big)
			}
		}
		if strings.Contains(base, "deflated") {
			// The inflated data.pkl is a member; protocol 2's strs are
			// members of it.
			if m := idx.Members[0]; m.Method != MethodDeflate || !strings.HasSuffix(m.Name, "data.pkl") {
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

// ptLatin1Array is a protocol-2 numpy array of descr and shape whose
// data is _codecs.encode(utf8 as a BINUNICODE str, "latin1").
func ptLatin1Array(descr string, shape []int64, utf8 []byte) []byte {
	str := append([]byte{pickle.OpBINUNICODE, 0, 0, 0, 0}, utf8...)
	n := len(utf8)
	str[1], str[2], str[3], str[4] = byte(n), byte(n>>8), byte(n>>16), byte(n>>24)
	enc := ptCat(ptPkGlobal("_codecs", "encode"), ptPkTuple(str, ptPkStr("latin1")), []byte{'R'})
	return ptPkArray(descr, "<", shape, enc)
}

// TestTorchNumpyLatin1Bad: a protocol-2 array whose str is not Latin-1
// as UTF-8 (a code point above U+00FF, invalid UTF-8, a character cut
// off by the str's end) or decodes to a length other than the array's
// is refused in one line naming its key and the byte, both for a str
// the unpickler keeps and for one past pickle.MaxValue that it skips
// over. Python's unpickler fails on the first three too; the old main
// served wrong bytes (a code point above U+00FF truncated) or nothing.
func TestTorchNumpyLatin1Bad(t *testing.T) {
	big := (pickle.MaxValue + 8) / 4 * 4
	for _, c := range []struct {
		name  string
		shape []int64
		utf8  []byte
		bad   int // index in utf8 of the offending byte, -1 for a length error
		want  string
	}{
		{"code point U+0100", []int64{2}, []byte{'a', 0xc4, 0x80, 'b', 'c', 'd', 'e', 'f'}, 1, `_codecs.encode(str, "latin1") of a str with code point U+0100, which is not Latin-1`},
		{"invalid UTF-8", []int64{2}, []byte{'a', 'b', 0xff, 'c', 'd', 'e', 'f', 'g'}, 2, `_codecs.encode(str, "latin1") of a str with invalid UTF-8`},
		{"cut off", []int64{2}, []byte{'a', 'b', 'c', 'd', 'e', 'f', 'g', 0xc3}, 7, `_codecs.encode(str, "latin1") of a str with invalid UTF-8`},
		{"short", []int64{3}, []byte{'a', 0xc3, 0xa9, 'b', 'c', 'd', 'e', 'f', 'g'}, -1, `numpy array: f4[3] needs 12 bytes, its data has 8`},
		{"big code point", []int64{int64(big / 4)}, append(make([]byte, big-1), 0xe2, 0x82, 0xac), big - 1, `_codecs.encode(str, "latin1") of a str that is not Latin-1 as UTF-8`},
		{"big cut off", []int64{int64(big / 4)}, append(make([]byte, big-1), 0xc2), big - 1, `_codecs.encode(str, "latin1") of a str that is not Latin-1 as UTF-8`},
		{"big short", []int64{int64(big/4) + 1}, append(make([]byte, big-2), 0xc2, 0xa0), -1, `needs`},
	} {
		head := ptCat([]byte{pickle.OpPROTO, 2, '}'}, ptPkStr("np"), []byte{'}'}, ptPkStr("a"))
		arr := ptLatin1Array("f4", c.shape, c.utf8)
		p := ptCat(head, arr, []byte{'s', 's', '.'})
		b := ptZip(t, ptMember{name: "r/data.pkl", data: p})
		_, err := ptParse("m.pt", b)
		ptErrContains(t, err, "m.pt: ", c.want, `"np/a"`)
		if c.bad >= 0 {
			// The offset names the byte in the file.
			off := int64(strings.Index(string(b), string(c.utf8))) + int64(c.bad)
			ptErrContains(t, err, "at byte "+strconv.FormatInt(off, 10))
		}
	}
}
