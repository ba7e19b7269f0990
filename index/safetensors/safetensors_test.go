package safetensors

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/lazyweights/tensorfs/dtype"
	"github.com/lazyweights/tensorfs/index"
	"github.com/lazyweights/tensorfs/internal/testenv"
	"github.com/lazyweights/tensorfs/internal/testenv/parsetest"
)

func TestSafetensorsEveryDType(t *testing.T) {
	// Every dtype of the reference, with its byte count for shape [2,3].
	want := map[string]struct {
		dt    dtype.DType
		bytes int
	}{
		"BOOL": {dtype.Bool, 6}, "U8": {dtype.U8, 6}, "I8": {dtype.I8, 6},
		"F8_E5M2": {dtype.F8E5M2, 6}, "F8_E4M3": {dtype.F8E4M3, 6}, "F8_E8M0": {dtype.F8E8M0, 6},
		"I16": {dtype.I16, 12}, "U16": {dtype.U16, 12}, "F16": {dtype.F16, 12}, "BF16": {dtype.BF16, 12},
		"I32": {dtype.I32, 24}, "U32": {dtype.U32, 24}, "F32": {dtype.F32, 24},
		"C64": {dtype.C64, 48}, "F64": {dtype.F64, 48}, "I64": {dtype.I64, 48}, "U64": {dtype.U64, 48},
		"F4": {dtype.F4, 3},
	}
	if len(want) != len(safetensorsDTypes) {
		t.Fatalf("test covers %d dtypes, parser knows %d", len(want), len(safetensorsDTypes))
	}
	var ts []stT
	names := make([]string, 0, len(want))
	for name := range want {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		ts = append(ts, stT{Name: "t_" + name, DType: name, Shape: []int{2, 3}, Bytes: want[name].bytes})
	}
	raw := stBuild(nil, true, ts...)
	idx, err := Parse(stFile("all.safetensors", raw))
	if err != nil {
		t.Fatal(err)
	}
	if idx.Format != "safetensors" || !reflect.DeepEqual(idx.Sources, []string{"all.safetensors"}) {
		t.Errorf("format %q sources %v", idx.Format, idx.Sources)
	}
	if len(idx.Tensors) != len(want) {
		t.Fatalf("%d tensors, want %d", len(idx.Tensors), len(want))
	}
	n := binary.LittleEndian.Uint64(raw)
	off := int64(8 + n)
	for i, tn := range idx.Tensors {
		w := want[names[i]]
		if tn.Name != "t_"+names[i] || tn.DType != w.dt || tn.Size != int64(w.bytes) || !reflect.DeepEqual(tn.Shape, []int64{2, 3}) {
			t.Errorf("tensor %d = %+v, want %s %v %d bytes", i, tn, names[i], w.dt, w.bytes)
		}
		if tn.Offset != off || tn.Source != 0 || tn.Strides != nil || tn.BigEndian || tn.Path != "" {
			t.Errorf("tensor %s at %d source %d strides %v, want offset %d", tn.Name, tn.Offset, tn.Source, tn.Strides, off)
		}
		off += tn.Size
	}
	if off != int64(len(raw)) {
		t.Errorf("tensors end at %d, file is %d", off, len(raw))
	}
}

func TestSafetensorsGood(t *testing.T) {
	oddHeader := `{"test":{"dtype":"I32","shape":[2,2],"data_offsets":[0,16]}}`
	cases := []struct {
		name string
		raw  []byte
		want []index.Tensor // Name, DType, Shape, Offset (in the data section), Size
		meta map[string]any
	}{
		{
			name: "unpadded header, data at an odd offset",
			raw:  stRaw(oddHeader, make([]byte, 16)),
			want: []index.Tensor{{Name: "test", DType: dtype.I32, Shape: []int64{2, 2}, Size: 16}},
		},
		{
			name: "padding of every JSON whitespace",
			raw:  stRaw(oddHeader+" \t\r\n  ", make([]byte, 16)),
			want: []index.Tensor{{Name: "test", DType: dtype.I32, Shape: []int64{2, 2}, Size: 16}},
		},
		{
			name: "empty checkpoint",
			raw:  stRaw("{}      ", nil),
		},
		{
			name: "metadata",
			raw:  stBuild(map[string]string{"format": "pt", "x": ""}, true, stT{Name: "a", DType: "F16", Shape: []int{3}, Bytes: 6}),
			meta: map[string]any{"format": "pt", "x": ""},
			want: []index.Tensor{{Name: "a", DType: dtype.F16, Shape: []int64{3}, Size: 6}},
		},
		{
			name: "null metadata",
			raw:  stRaw(`{"__metadata__":null,"a":{"dtype":"U8","shape":[1],"data_offsets":[0,1]}}`, []byte{7}),
			want: []index.Tensor{{Name: "a", DType: dtype.U8, Shape: []int64{1}, Size: 1}},
		},
		{
			name: "scalar and zero-size tensors",
			raw: stBuild(nil, true,
				stT{Name: "empty_first", DType: "F32", Shape: []int{0}, Bytes: 0},
				stT{Name: "scalar", DType: "F64", Shape: nil, Bytes: 8},
				stT{Name: "empty_mid", DType: "BF16", Shape: []int{4, 0, 2}, Bytes: 0},
				stT{Name: "empty_mid2", DType: "I8", Shape: []int{0}, Bytes: 0},
				stT{Name: "v", DType: "U8", Shape: []int{3}, Bytes: 3},
				stT{Name: "empty_last", DType: "F4", Shape: []int{0, 7}, Bytes: 0}),
			want: []index.Tensor{
				{Name: "empty_first", DType: dtype.F32, Shape: []int64{0}, Size: 0},
				{Name: "empty_last", DType: dtype.F4, Shape: []int64{0, 7}, Offset: 11, Size: 0},
				{Name: "empty_mid", DType: dtype.BF16, Shape: []int64{4, 0, 2}, Offset: 8, Size: 0},
				{Name: "empty_mid2", DType: dtype.I8, Shape: []int64{0}, Offset: 8, Size: 0},
				{Name: "scalar", DType: dtype.F64, Shape: []int64{}, Size: 8},
				{Name: "v", DType: dtype.U8, Shape: []int64{3}, Offset: 8, Size: 3},
			},
		},
		{
			name: "entries out of offset order, unknown fields ignored",
			raw: stRaw(`{"b":{"data_offsets":[4,6],"shape":[1],"dtype":"F16","extra":{"x":[1,{"y":null}]}},`+
				`"a":{"dtype":"F32","extra2":"s","shape":[],"data_offsets":[0,4]}}`, make([]byte, 6)),
			want: []index.Tensor{
				{Name: "a", DType: dtype.F32, Shape: []int64{}, Size: 4},
				{Name: "b", DType: dtype.F16, Shape: []int64{1}, Offset: 4, Size: 2},
			},
		},
		{
			name: "F4: an even number of elements in any shape",
			raw:  stBuild(nil, false, stT{Name: "a", DType: "F4", Shape: []int{3, 2}, Bytes: 3}, stT{Name: "b", DType: "F4", Shape: []int{2, 3}, Bytes: 3}, stT{Name: "c", DType: "F4", Shape: []int{1, 1, 4}, Bytes: 2}),
			want: []index.Tensor{
				{Name: "a", DType: dtype.F4, Shape: []int64{3, 2}, Size: 3},
				{Name: "b", DType: dtype.F4, Shape: []int64{2, 3}, Offset: 3, Size: 3},
				{Name: "c", DType: dtype.F4, Shape: []int64{1, 1, 4}, Offset: 6, Size: 2},
			},
		},
		{
			name: "names that need path escaping",
			raw:  stBuild(nil, true, stT{Name: "", DType: "U8", Shape: []int{1}, Bytes: 1}, stT{Name: "a/../b", DType: "U8", Shape: []int{1}, Bytes: 1}, stT{Name: "x\u0000y%", DType: "U8", Shape: []int{1}, Bytes: 1}),
			want: []index.Tensor{
				{Name: "", DType: dtype.U8, Shape: []int64{1}, Size: 1},
				{Name: "a/../b", DType: dtype.U8, Shape: []int64{1}, Offset: 1, Size: 1},
				{Name: "x\u0000y%", DType: dtype.U8, Shape: []int64{1}, Offset: 2, Size: 1},
			},
		},
		{
			name: "escaped key",
			raw:  stRaw(`{"\u00e9\n\"":{"dtype":"U8","shape":[1],"data_offsets":[0,1]}}`, []byte{1}),
			want: []index.Tensor{{Name: "é\n\"", DType: dtype.U8, Shape: []int64{1}, Size: 1}},
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			idx, err := Parse(stFile("f.safetensors", c.raw))
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(idx.Metadata, c.meta) && !(len(idx.Metadata) == 0 && len(c.meta) == 0) {
				t.Errorf("metadata %v, want %v", idx.Metadata, c.meta)
			}
			dataStart := int64(8 + binary.LittleEndian.Uint64(c.raw))
			if len(idx.Tensors) != len(c.want) {
				t.Fatalf("%d tensors, want %d: %+v", len(idx.Tensors), len(c.want), idx.Tensors)
			}
			for i, w := range c.want {
				g := idx.Tensors[i]
				w.Offset += dataStart // want offsets are relative to the data section
				if g.Name != w.Name || g.DType != w.DType || !reflect.DeepEqual(g.Shape, w.Shape) || g.Offset != w.Offset || g.Size != w.Size {
					t.Errorf("tensor %d = %q %v %v @%d+%d, want %q %v %v @%d+%d", i, g.Name, g.DType, g.Shape, g.Offset, g.Size, w.Name, w.DType, w.Shape, w.Offset, w.Size)
				}
			}
		})
	}
}

func TestSafetensorsBad(t *testing.T) {
	one := func(entry string) []byte { return stRaw(`{"t":`+entry+`}`, make([]byte, 8)) }
	huge := binary.LittleEndian.AppendUint64(nil, 1<<64-1)
	cases := []struct {
		name string
		raw  []byte
		want string
	}{
		{"empty file", nil, "too short for the 8-byte header length (at byte 0)"},
		{"7 bytes", []byte{2, 0, 0, 0, 0, 0, 0}, "too short"},
		{"header over the cap", append(binary.LittleEndian.AppendUint64(nil, index.MaxSafetensorsHeader+1), '{', '}'), "header length 100000001 is over the limit of 100000000 bytes"},
		{"header length 2^64-1", append(huge, "{}"...), "over the limit"},
		{"header past the end", append(binary.LittleEndian.AppendUint64(nil, 100), "{}"...), "header length 100 runs past the end of the file (10 bytes) (at byte 0)"},
		{"zero header", binary.LittleEndian.AppendUint64(nil, 0), "header length 0 is too short for a JSON object (at byte 8)"},
		{"one-byte header", stRaw("{", nil), "header length 1 is too short"},
		{"leading space", stRaw(` {}`, nil), "does not start with '{' (at byte 8)"},
		{"not UTF-8", stRaw("{\"a\xff\":1}", nil), "header is not valid UTF-8 (at byte 11)"},
		{"top-level array", stRaw(`[]`, nil), "does not start with '{'"},
		{"truncated JSON", stRaw(`{"a":{"dtype":"F32"`, nil), "JSON ends early"},
		{"bad JSON", stRaw(`{"a" 1}`, nil), "invalid JSON"},
		{"trailing data after JSON", stRaw(`{}x`, nil), "data after the end of the JSON object"},
		{"second JSON value", stRaw(`{}{}`, nil), "an object after the end of the JSON object"},
		{"NUL padding", stRaw("{}\x00\x00", nil), "after the end of the JSON object"},
		{"duplicate tensor", stRaw(`{"a":{"dtype":"U8","shape":[1],"data_offsets":[0,1]},"a":{"dtype":"U8","shape":[1],"data_offsets":[1,2]}}`, []byte{1, 2}), `duplicate key "a"`},
		{"duplicate __metadata__", stRaw(`{"__metadata__":{},"__metadata__":{}}`, nil), `duplicate key "__metadata__"`},
		{"duplicate metadata key", stRaw(`{"__metadata__":{"k":"1","k":"2"}}`, nil), `__metadata__: duplicate key "k"`},
		{"metadata number", stRaw(`{"__metadata__":{"k":1}}`, nil), `__metadata__ "k": want a string, found a number`},
		{"metadata nested", stRaw(`{"__metadata__":{"k":{"x":"y"}}}`, nil), `want a string, found an object`},
		{"metadata array", stRaw(`{"__metadata__":["a"]}`, nil), "__metadata__: want an object, found an array (at byte 24)"},
		{"duplicate field", one(`{"dtype":"U8","dtype":"U8","shape":[8],"data_offsets":[0,8]}`), `tensor "t": duplicate key "dtype"`},
		{"entry not an object", one(`["U8",[8],[0,8]]`), `tensor "t": want an object, found an array`},
		{"entry null", one(`null`), `want an object, found null`},
		{"unknown dtype", one(`{"dtype":"F128","shape":[8],"data_offsets":[0,8]}`), `tensor "t": unknown dtype "F128"`},
		{"lower-case dtype", one(`{"dtype":"u8","shape":[8],"data_offsets":[0,8]}`), `unknown dtype "u8"`},
		{"ggml dtype", one(`{"dtype":"Q4_0","shape":[8],"data_offsets":[0,8]}`), `unknown dtype "Q4_0"`},
		{"C128 is not safetensors", one(`{"dtype":"C128","shape":[],"data_offsets":[0,16]}`), `unknown dtype "C128"`},
		{"F6 alone", stRaw(`{"t":{"dtype":"F6_E2M3","shape":[4],"data_offsets":[0,3]}}`, make([]byte, 3)), `safetensors: nothing to serve: every tensor is F6_E2M3 or F6_E3M2 (this one F6_E2M3): 6-bit floats`},
		{"F6 E3M2 alone", stRaw(`{"t":{"dtype":"F6_E3M2","shape":[2,2],"data_offsets":[0,3]}}`, make([]byte, 3)), `(this one F6_E3M2)`},
		{"F6 not whole bytes", one(`{"dtype":"F6_E2M3","shape":[3],"data_offsets":[0,8]}`), `F6_E2M3 packs 6 bits an element, but shape [3] has 3 elements, not a whole number of bytes`},
		{"F6 bytes", one(`{"dtype":"F6_E3M2","shape":[8],"data_offsets":[0,8]}`), `F6_E3M2 [8] needs 6 bytes, but data_offsets [0,8] hold 8`},
		{"F6 overflow", one(`{"dtype":"F6_E3M2","shape":[4611686018427387904],"data_offsets":[0,8]}`), `not a whole number of bytes`},
		{"dtype number", one(`{"dtype":4,"shape":[8],"data_offsets":[0,8]}`), `dtype: want a string, found a number`},
		{"negative dim", one(`{"dtype":"U8","shape":[-8],"data_offsets":[0,8]}`), `want a non-negative integer below 2^64, found -8`},
		{"float dim", one(`{"dtype":"U8","shape":[8.0],"data_offsets":[0,8]}`), `found 8.0`},
		{"exponent dim", one(`{"dtype":"U8","shape":[8e0],"data_offsets":[0,8]}`), `found 8e0`},
		{"dim over 2^64", one(`{"dtype":"U8","shape":[18446744073709551616],"data_offsets":[0,8]}`), `below 2^64`},
		{"dim over 2^63", one(`{"dtype":"U8","shape":[9223372036854775808],"data_offsets":[0,8]}`), `shape dimension 9223372036854775808 is too large`},
		{"string dim", one(`{"dtype":"U8","shape":["8"],"data_offsets":[0,8]}`), `found a string`},
		{"shape object", one(`{"dtype":"U8","shape":{},"data_offsets":[0,8]}`), `shape: want an array, found an object`},
		{"too many dims", one(`{"dtype":"U8","shape":[` + strings.Repeat("1,", index.MaxDims) + `1],"data_offsets":[0,1]}`), `more than 64 dimensions`},
		{"shape overflow", one(`{"dtype":"U8","shape":[4294967296,4294967296],"data_offsets":[0,8]}`), `shape [4294967296,4294967296] overflows`},
		{"bytes overflow", one(`{"dtype":"F64","shape":[4611686018427387904],"data_offsets":[0,8]}`), `F64 [4611686018427387904] overflows`},
		{"three offsets", one(`{"dtype":"U8","shape":[8],"data_offsets":[0,8,8]}`), `data_offsets has more than 2 numbers`},
		{"one offset", one(`{"dtype":"U8","shape":[8],"data_offsets":[8]}`), `data_offsets has 1 numbers`},
		{"negative offset", one(`{"dtype":"U8","shape":[8],"data_offsets":[-1,8]}`), `found -1`},
		{"missing dtype", one(`{"shape":[8],"data_offsets":[0,8]}`), `tensor "t": missing dtype`},
		{"missing shape", one(`{"dtype":"U8","data_offsets":[0,8]}`), `missing shape`},
		{"missing offsets", one(`{"dtype":"U8","shape":[8]}`), `missing data_offsets`},
		{"null shape", one(`{"dtype":"U8","shape":null,"data_offsets":[0,8]}`), `shape: want an array, found null`},
		{"end before begin", one(`{"dtype":"U8","shape":[0],"data_offsets":[8,0]}`), `data_offsets [8,0] end before they begin (tensor "t", at byte`},
		{"end past data", one(`{"dtype":"U8","shape":[9],"data_offsets":[0,9]}`), `data_offsets [0,9] run past the end of the data section (8 bytes)`},
		{"offset past 2^63", one(`{"dtype":"U8","shape":[0],"data_offsets":[18446744073709551615,18446744073709551615]}`), `run past the end`},
		{"size mismatch", one(`{"dtype":"F32","shape":[3],"data_offsets":[0,8]}`), `F32 [3] needs 12 bytes, but data_offsets [0,8] hold 8`},
		{"F4 odd elements", stRaw(`{"t":{"dtype":"F4","shape":[3,1],"data_offsets":[0,2]}}`, make([]byte, 2)), `F4 packs two elements per byte, but shape [3,1] has an odd number of elements (3)`},
		{"first tensor not at 0", one(`{"dtype":"U8","shape":[4],"data_offsets":[4,8]}`), `the data section starts with 4 bytes that belong to no tensor`},
		{"gap", stRaw(`{"a":{"dtype":"U8","shape":[2],"data_offsets":[0,2]},"b":{"dtype":"U8","shape":[2],"data_offsets":[3,5]}}`, make([]byte, 5)), `1 byte between tensor "a" (ends at data offset 2) and this tensor (begins at 3) belong to no tensor (tensor "b"`},
		{"overlap", stRaw(`{"a":{"dtype":"U8","shape":[4],"data_offsets":[0,4]},"b":{"dtype":"U8","shape":[2],"data_offsets":[2,4]}}`, make([]byte, 4)), `tensors "a" and "b" overlap: their data_offsets are [0,4] and [2,4], 2 bytes in both (tensor "b"`},
		{"same range twice", stRaw(`{"a":{"dtype":"U8","shape":[4],"data_offsets":[0,4]},"b":{"dtype":"U8","shape":[4],"data_offsets":[0,4]}}`, make([]byte, 4)), `tensors "a" and "b" overlap`},
		{"trailing bytes", stRaw(`{"a":{"dtype":"U8","shape":[4],"data_offsets":[0,4]}}`, make([]byte, 7)), `3 bytes after the last tensor's data belong to no tensor`},
		{"data but no tensors", stRaw(`{}`, make([]byte, 1)), `1 byte after the last tensor's data belong to no tensor (the data section is 1 byte, tensors end at data offset 0) (at byte 10)`},
		{"key not a string", stRaw(`{1:2}`, nil), `invalid JSON`},
		{"deep unknown field", one(`{"x":` + strings.Repeat("[", index.MaxNesting+1) + strings.Repeat("]", index.MaxNesting+1) + `}`), `nested deeper than 256`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := Parse(stFile("bad.safetensors", c.raw))
			stCheckError(t, err, c.want)
			if err != nil && !strings.HasPrefix(err.Error(), "bad.safetensors: safetensors") {
				t.Errorf("error %q does not start with the file name and format", err)
			}
		})
	}
}

// stShortReader is a File whose ReadAt fails: a file that shrank.
type stShortReader struct{ size int64 }

func (s stShortReader) ReadAt(p []byte, off int64) (int, error) {
	return 0, errors.New("input/output error")
}
func (s stShortReader) Size() int64  { return s.size }
func (s stShortReader) Name() string { return "short" }

// stNoAlloc is a File that claims a large size but has only its first
// bytes; reading past them fails the test (nothing may read a header
// before checking its length).
type stNoAlloc struct {
	t    *testing.T
	head []byte
	size int64
}

func (s stNoAlloc) ReadAt(p []byte, off int64) (int, error) {
	if off+int64(len(p)) > int64(len(s.head)) {
		s.t.Fatalf("read of %d bytes at %d: the parser reads a length it has not checked", len(p), off)
	}
	return copy(p, s.head[off:]), nil
}
func (s stNoAlloc) Size() int64  { return s.size }
func (s stNoAlloc) Name() string { return "huge" }

func TestSafetensorsReadErrorsAndNoAlloc(t *testing.T) {
	_, err := Parse(stShortReader{100})
	stCheckError(t, err, "cannot read the header length: input/output error")

	// Header length over the cap in a file big enough to hold it.
	head := binary.LittleEndian.AppendUint64(nil, index.MaxSafetensorsHeader+1)
	head = append(head, '{')
	_, err = Parse(stNoAlloc{t, head, 1 << 40})
	stCheckError(t, err, "over the limit")

	// A header length beyond the file.
	head = binary.LittleEndian.AppendUint64(nil, 1<<20)
	head = append(head, '{')
	_, err = Parse(stNoAlloc{t, head, 1 << 19})
	stCheckError(t, err, "runs past the end of the file")
}

func TestSniffSafetensors(t *testing.T) {
	good := stBuild(nil, true, stT{Name: "a", DType: "F32", Shape: []int{1}, Bytes: 4})
	cases := []struct {
		head []byte
		want bool
	}{
		{good, true},
		{stRaw("{}", nil), true},
		{good[:9], true},
		{good[:8], false},
		{nil, false},
		{stRaw(" {}", nil), false},
		{stRaw("{", nil), false}, // N = 1 cannot hold a JSON object
		{append(binary.LittleEndian.AppendUint64(nil, index.MaxSafetensorsHeader+1), '{'), false},
		{[]byte("GGUF\x03\x00\x00\x00\x00\x00"), false},
		{[]byte("PK\x03\x04\x14\x00\x00\x00\x08\x00"), false},
		{[]byte("\x93NUMPY\x01\x00{"), false},
		{[]byte("{\"weight_map\": {}}"), false},
	}
	for i, c := range cases {
		if got := Sniff(c.head); got != c.want {
			t.Errorf("case %d %q: sniff = %v, want %v", i, c.head, got, c.want)
		}
	}
}

// stPythonHeader is an independent reading of safetensors headers: one
// JSON line per tensor [file, name, dtype, shape, offset, size], name
// order, then [file, "__metadata__", metadata].
const stPythonHeader = `
import json, struct, sys
for p in sys.argv[1:]:
    b = open(p, "rb").read()
    n = struct.unpack("<Q", b[:8])[0]
    h = json.loads(b[8:8 + n])
    meta = h.pop("__metadata__", None)
    for k in sorted(h, key=lambda s: s.encode()):
        v = h[k]
        print(json.dumps([p, k, v["dtype"], v["shape"], 8 + n + v["data_offsets"][0], v["data_offsets"][1] - v["data_offsets"][0]]))
    print(json.dumps([p, "__metadata__", meta]))
`

func TestSafetensorsRealFiles(t *testing.T) {
	files := stRealFiles(t)
	py := testenv.Python(t)
	out, err := exec.Command(py, append([]string{"-c", stPythonHeader}, files...)...).Output()
	if err != nil {
		t.Fatalf("python: %v", err)
	}
	var want []string
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(nil, 1<<24)
	for sc.Scan() {
		var v any // re-encode so both sides are Go's JSON spelling
		if err := json.Unmarshal(sc.Bytes(), &v); err != nil {
			t.Fatalf("python output %q: %v", sc.Text(), err)
		}
		line, _ := json.Marshal(v)
		want = append(want, string(line))
	}
	var got []string
	tensors := 0
	for _, p := range files {
		data, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		idx, err := Parse(stFile(p, data))
		if err != nil {
			t.Errorf("%v", err)
			continue
		}
		if idx.Format != "safetensors" {
			t.Errorf("%s: format %q", p, idx.Format)
		}
		for _, tn := range idx.Tensors {
			line, _ := json.Marshal([]any{p, tn.Name, tn.DType.Name(), tn.Shape, tn.Offset, tn.Size})
			got = append(got, string(line))
			tensors++
		}
		var meta any
		if idx.Metadata != nil {
			meta = idx.Metadata
		}
		line, _ := json.Marshal([]any{p, "__metadata__", meta})
		got = append(got, string(line))
	}
	if !reflect.DeepEqual(got, want) {
		for i := 0; i < len(got) || i < len(want); i++ {
			var g, w string
			if i < len(got) {
				g = got[i]
			}
			if i < len(want) {
				w = want[i]
			}
			if g != w {
				t.Errorf("line %d:\n got %s\nwant %s", i, g, w)
				break
			}
		}
	}
	t.Logf("%d files, %d tensors agree with an independent Python reading", len(files), tensors)
}

func TestSafetensorsRealFileDetails(t *testing.T) {
	p := testenv.Path(t, "safetensors/swift/data.safetensors")
	data, err := os.ReadFile(p)
	if err != nil {
		testenv.SkipOrFail(t, err.Error())
	}
	idx, err := Parse(stFile(p, data))
	if err != nil {
		t.Fatal(err)
	}
	// Header of 60 bytes: data at 68, not 8-aligned.
	if len(idx.Tensors) != 1 || idx.Tensors[0].Offset != 68 || idx.Tensors[0].Size != 16 || idx.Tensors[0].DType != dtype.I32 {
		t.Errorf("swift/data.safetensors: %+v", idx.Tensors)
	}
	p = testenv.Path(t, "safetensors/fluxml/non_sharded/model.with_metadata.safetensors")
	data, err = os.ReadFile(p)
	if err != nil {
		testenv.SkipOrFail(t, err.Error())
	}
	idx, err = Parse(stFile(p, data))
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(idx.Metadata, map[string]any{"test": "metadata", "version": "2.2"}) {
		t.Errorf("metadata %v", idx.Metadata)
	}
}

// stSeeds returns generated and real files to seed fuzz targets.
func stSeeds() [][]byte {
	seeds := [][]byte{
		stBuild(nil, true, stT{Name: "a", DType: "F32", Shape: []int{2}, Bytes: 8}),
		stBuild(map[string]string{"format": "pt"}, false, stT{Name: "a/b", DType: "F4", Shape: []int{2}, Bytes: 1}, stT{Name: "s", DType: "BF16", Shape: nil, Bytes: 2}, stT{Name: "z", DType: "U8", Shape: []int{0}, Bytes: 0}),
		stRaw(`{"b":{"data_offsets":[4,6],"shape":[1],"dtype":"F16","x":[{}]},"a":{"dtype":"F32","shape":[],"data_offsets":[0,4]}}  `, make([]byte, 6)),
		stRaw(`{}`, nil),
	}
	dir, _ := testenv.Optional()
	filepath.WalkDir(filepath.Join(dir, "safetensors"), func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			if b, err := os.ReadFile(p); err == nil && len(b) < 1<<16 {
				seeds = append(seeds, b)
			}
		}
		return nil
	})
	return seeds
}

func FuzzSafetensors(f *testing.F) {
	for _, s := range stSeeds() {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		idx, err := Parse(stFile("fuzz", raw))
		if err != nil {
			var fe *index.FormatError
			if !errors.As(err, &fe) || strings.ContainsAny(err.Error(), "\n\r") {
				t.Fatalf("bad error %T %q", err, err)
			}
			return
		}
		dataStart := int64(8 + binary.LittleEndian.Uint64(raw))
		var total int64
		for i, tn := range idx.Tensors {
			if i > 0 && idx.Tensors[i-1].Name >= tn.Name {
				t.Fatalf("tensors not sorted or duplicate: %q %q", idx.Tensors[i-1].Name, tn.Name)
			}
			if tn.Offset < dataStart || tn.Offset+tn.Size > int64(len(raw)) || tn.Size < 0 {
				t.Fatalf("tensor %q [%d,+%d) outside data [%d,%d)", tn.Name, tn.Offset, tn.Size, dataStart, len(raw))
			}
			if err := index.CheckTensor(&idx.Tensors[i], "fuzz", int64(len(raw))); err != nil {
				t.Fatal(err)
			}
			total += tn.Size
		}
		if total != int64(len(raw))-dataStart {
			t.Fatalf("tensors hold %d bytes, data section is %d", total, int64(len(raw))-dataStart)
		}
		if err := index.AssignPaths(idx); err != nil {
			t.Fatal(err)
		}
		doc, err := idx.Document().JSON()
		if err != nil {
			t.Fatal(err)
		}
		if _, err := index.ParseDocument(doc); err != nil {
			t.Fatalf("%v\n%s", err, doc)
		}
	})
}

// BenchmarkSafetensorsHeader parses the header of a checkpoint with 10,000
// tensors (about the largest real headers, ~1 MB).
func BenchmarkSafetensorsHeader(b *testing.B) {
	ts := make([]stT, 10000)
	for i := range ts {
		ts[i] = stT{Name: fmt.Sprintf("model.layers.%d.self_attn.q_proj.weight", i), DType: "BF16", Shape: []int{2, 2}, Bytes: 8}
	}
	raw := stBuild(map[string]string{"format": "pt"}, true, ts...)
	f := stFile("bench.safetensors", raw)
	b.SetBytes(int64(binary.LittleEndian.Uint64(raw)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Parse(f); err != nil {
			b.Fatal(err)
		}
	}
}

// The safetensors helpers shared with the other packages' tests
// (internal/testenv/parsetest), under the names these tests use.

var (
	stFile       = parsetest.STFile
	stBuild      = parsetest.STBuild
	stRaw        = parsetest.STRaw
	stCheckError = parsetest.CheckError
	stRealFiles  = parsetest.SafetensorsFiles
)

// stT describes one tensor for stBuild.
type stT = parsetest.STensor

// TestF6Unserved: an F6_E2M3 / F6_E3M2 tensor (safetensors defines the
// width, not the bit order, and nothing writes one) is listed in
// Index.Unserved with its dtype, shape, data offset and why; the file's
// other tensors are served and the layout is checked with its bytes.
func TestF6Unserved(t *testing.T) {
	raw := stBuild(nil, false, stT{Name: "w", DType: "F32", Shape: []int{2}, Bytes: 8},
		stT{Name: "b6", DType: "F6_E3M2", Shape: []int{2, 4}, Bytes: 6}, stT{Name: "a6", DType: "F6_E2M3", Shape: []int{4}, Bytes: 3})
	idx, err := Parse(stFile("f6.safetensors", raw))
	if err != nil {
		t.Fatal(err)
	}
	if len(idx.Tensors) != 1 || idx.Tensors[0].Name != "w" || idx.Tensors[0].DType != dtype.F32 {
		t.Fatalf("tensors %+v, want w alone", idx.Tensors)
	}
	if len(idx.Unserved) != 2 {
		t.Fatalf("unserved %+v", idx.Unserved)
	}
	hdr := int64(len(raw)) - 17
	for i, want := range []struct {
		name, typ string
		shape     []int64
		off       int64
	}{{"a6", "F6_E2M3", []int64{4}, hdr + 14}, {"b6", "F6_E3M2", []int64{2, 4}, hdr + 8}} {
		u := idx.Unserved[i]
		if u.Name != want.name || u.Type != want.typ || !slices.Equal(u.Shape, want.shape) || u.Offset != want.off || u.Source != 0 ||
			!strings.Contains(u.Why, "not the order of their bits") {
			t.Errorf("unserved %d: %+v, want %s %s %v at %d", i, u, want.name, want.typ, want.shape, want.off)
		}
	}
}
