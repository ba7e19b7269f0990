package paddle

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"

	"github.com/lazyweights/tensorfs/dtype"
	"github.com/lazyweights/tensorfs/index"
	"github.com/lazyweights/tensorfs/index/numpy"
	"github.com/lazyweights/tensorfs/index/pickle"
	"github.com/lazyweights/tensorfs/internal/testenv/parsetest"
)

var npDTypes = map[string]dtype.DType{
	"<f4": dtype.F32, "<f2": dtype.F16, "<f8": dtype.F64, "<i8": dtype.I64, "<i4": dtype.I32, "|b1": dtype.Bool,
}

// TestPaddleFixtures parses the fixtures gen.py wrote the way paddle.save
// does (protocols 2 to 4, state dicts with StructuredToParameterName@@,
// parameters split into NAME@@.N, nested optimizer states with the
// tuple and eval forms) and compares every tensor with what paddle.load
// gives (EXPECTED.json): names, dtypes, shapes and the sha256 of the
// bytes, gathered through members (Latin-1 strs, joined slices).
func TestPaddleFixtures(t *testing.T) {
	raw, err := os.ReadFile("testdata/EXPECTED.json")
	if err != nil {
		t.Fatal(err)
	}
	var exp map[string]map[string][]json.RawMessage
	if err := json.Unmarshal(raw, &exp); err != nil {
		t.Fatal(err)
	}
	concat, latin1 := 0, 0
	for file, want := range exp {
		t.Run(file, func(t *testing.T) {
			data, err := os.ReadFile(filepath.Join("testdata", file))
			if err != nil {
				t.Fatal(err)
			}
			if !Sniff(data[:min(len(data), index.SniffLen)]) {
				t.Fatal("not sniffed as Paddle")
			}
			idx, err := Parse(parsetest.Mem(file, data))
			if err != nil {
				t.Fatal(err)
			}
			parsetest.CheckIndex(t, idx, file, int64(len(data)), numpy.DeflateMaxRatio)
			if idx.Format != "paddle" {
				t.Errorf("format %q", idx.Format)
			}
			if got, w := parsetest.Names(idx), sortedKeys(want); !reflect.DeepEqual(got, w) {
				t.Fatalf("tensors %v, paddle.load gives %v", got, w)
			}
			for _, tn := range idx.Tensors {
				var dt string
				var shape []int64
				var sum string
				json.Unmarshal(want[tn.Name][0], &dt)
				json.Unmarshal(want[tn.Name][1], &shape)
				json.Unmarshal(want[tn.Name][2], &sum)
				if npDTypes[dt] != tn.DType || !reflect.DeepEqual(append([]int64{}, shape...), append([]int64{}, tn.Shape...)) {
					t.Errorf("%s: %s%v, paddle.load gives %s%v", tn.Name, tn.DType, tn.Shape, dt, shape)
				}
				if got := parsetest.SHA(parsetest.MemberGather(t, data, idx, tn)); got != sum {
					t.Errorf("%s: bytes differ from paddle.load's", tn.Name)
				}
			}
			for _, m := range idx.Members {
				switch m.Kind.(type) {
				case *index.Tiles:
					concat++
				case *index.Latin1:
					latin1++
				}
			}
			if _, ok := idx.Metadata[unpackInfo]; ok {
				t.Errorf("%s left in the metadata", unpackInfo)
			}
			if strings.HasPrefix(file, "state") || strings.HasPrefix(file, "big") {
				if _, ok := idx.Metadata["StructuredToParameterName@@"]; !ok {
					t.Errorf("no StructuredToParameterName@@ in the metadata: %v", idx.Metadata)
				}
			}
		})
	}
	if concat == 0 || latin1 == 0 {
		t.Errorf("fixtures did not exercise joined slices in several places (%d) or Latin-1 arrays (%d)", concat, latin1)
	}
}

func sortedKeys(m map[string][]json.RawMessage) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// pk builds a protocol-2 pickle from its pieces.
func pk(parts ...string) []byte { return []byte("\x80\x02" + strings.Join(parts, "") + ".") }

// npArr is a pickled float32 numpy array of n elements (protocol 3
// bytes), as numpy reduces it.
func npArr(n int) string {
	data := strings.Repeat("\x00\x00\x80\x3f", n)
	return "cnumpy.core.multiarray\n_reconstruct\n" + "cnumpy\nndarray\n" + "K\x00\x85" + "C\x01b" + "\x87R" +
		"(K\x01K" + string(rune(n)) + "\x85cnumpy\ndtype\nX\x02\x00\x00\x00f4K\x00K\x01\x87R(K\x03X\x01\x00\x00\x00<NNNJ\xff\xff\xff\xffJ\xff\xff\xff\xffK\x00tb\x89C" + string(rune(len(data))) + data + "tb"
}

// TestPaddleRefuses: what is not a Paddle checkpoint is not claimed, and
// what is broken or hostile is one line; eval is never called.
func TestPaddleRefuses(t *testing.T) {
	ok := pk("}X\x01\x00\x00\x00w", npArr(2), "s")
	if idx, err := Parse(parsetest.Mem("ok.pdparams", ok)); err != nil || len(idx.Tensors) != 1 || idx.Tensors[0].Size != 8 {
		t.Fatalf("the hand-built pickle does not parse: %v %v", idx, err)
	}
	for _, c := range []struct {
		name string
		data []byte
		want []string
	}{
		{"eval of a string", pk("}X\x01\x00\x00\x00wc__builtin__\neval\nX\x10\x00\x00\x00__import__('os')\x85Rs"),
			[]string{"refused global builtins.eval: called with", "never called"}},
		{"eval with another dict", pk("}X\x01\x00\x00\x00wc__builtin__\neval\nX\x04\x00\x00\x00data}X\x01\x00\x00\x00xK\x01s\x86Rs"),
			[]string{"refused global builtins.eval"}},
		{"os.system", pk("}X\x01\x00\x00\x00wcposix\nsystem\nX\x02\x00\x00\x00id\x85Rs"), []string{"refused global posix.system"}},
		{"trailing bytes", append(ok, 'x'), []string{"1 bytes after the end of the pickle"}},
		{"truncated", ok[:len(ok)/2], []string{"ok.pdparams: "}},
		{"slices missing", pk("}(X\x01\x00\x00\x00w", npArr(2), "X\x15\x00\x00\x00UnpackBigParamInfor@@}X\x01\x00\x00\x00v}(X\x0b\x00\x00\x00OriginShapeK\x04\x85X\x06\x00\x00\x00slices]X\x05\x00\x00\x00v@@.0aus", "u"),
			[]string{`slice "v@@.0" is not an array of the file`}},
		{"slices short", pk("}(X\x05\x00\x00\x00v@@.0", npArr(2), "X\x15\x00\x00\x00UnpackBigParamInfor@@}X\x01\x00\x00\x00v}(X\x0b\x00\x00\x00OriginShapeK\x04\x85X\x06\x00\x00\x00slices]X\x05\x00\x00\x00v@@.0aus", "u"),
			[]string{"slices hold 2 elements, OriginShape [4] needs 4"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := Parse(parsetest.Mem("ok.pdparams", c.data))
			parsetest.ErrContains(t, err, append([]string{"ok.pdparams: "}, c.want...)...)
		})
	}
	// Not claimed: a dict of ints, and pickles that are not dicts.
	data, err := os.ReadFile("testdata/ints_only.pkl")
	if err != nil {
		t.Fatal(err)
	}
	if !Sniff(data) {
		t.Error("a dict pickle is not sniffed (Parse is what tells it apart)")
	}
	if _, err := Parse(parsetest.Mem("ints_only.pkl", data)); !errors.Is(err, ErrNotPaddle) {
		t.Errorf("a dict of ints: %v, want ErrNotPaddle", err)
	}
	for _, head := range [][]byte{[]byte("\x80\x02]q\x00."), []byte("\x80\x02\x8a\x0al\xfc\x9cF\xf9 j\xa8P\x19."), []byte("\x80\x05}."), []byte("}."), []byte("PK\x03\x04")} {
		if Sniff(head) {
			t.Errorf("%q sniffed as Paddle", head)
		}
	}
}

func FuzzPaddle(f *testing.F) {
	for _, g := range []string{"testdata/*.pd*", "testdata/*.pkl"} {
		m, _ := filepath.Glob(g)
		for _, p := range m {
			if b, err := os.ReadFile(p); err == nil {
				f.Add(b)
			}
		}
	}
	f.Add(pk("}X\x01\x00\x00\x00w", npArr(2), "s"))
	f.Fuzz(func(t *testing.T, data []byte) {
		if !Sniff(data[:min(len(data), index.SniffLen)]) {
			return
		}
		idx, err := Parse(parsetest.Mem("fuzz.pdparams", data))
		if err != nil {
			var fe *index.FormatError
			if !errors.Is(err, ErrNotPaddle) && (!errors.As(err, &fe) || strings.ContainsAny(err.Error(), "\n\r")) {
				t.Fatalf("bad error %T %q", err, err)
			}
			return
		}
		parsetest.CheckIndex(t, idx, "fuzz.pdparams", int64(len(data)), numpy.DeflateMaxRatio)
		for _, tn := range idx.Tensors {
			parsetest.MemberGather(t, data, idx, tn)
		}
	})
}

var _ = pickle.OpPROTO
