package gguf

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/rand"
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/lazyweights/tensorfs/dtype"
	"github.com/lazyweights/tensorfs/index"
	"github.com/lazyweights/tensorfs/internal/testenv"
)

func TestGGUFSniff(t *testing.T) {
	for _, tc := range []struct {
		head string
		want bool
	}{
		{"GGUF\x03\x00\x00\x00", true},
		{"GGUF", true},
		{"GGU", false},
		{"", false},
		{"ggjt", false},
		{"FUUG\x00\x00\x00\x03", false},
	} {
		if got := Sniff([]byte(tc.head)); got != tc.want {
			t.Errorf("sniffGGUF(%q) = %v", tc.head, got)
		}
	}
}

// ggufCheckInvariants checks what every successful parse promises.
func ggufCheckInvariants(t testing.TB, idx *index.Index, name string, size int64) {
	t.Helper()
	if idx.Format != "gguf" || len(idx.Sources) != 1 || idx.Sources[0] != name || idx.Metadata == nil {
		t.Fatalf("format %q sources %v metadata nil %v", idx.Format, idx.Sources, idx.Metadata == nil)
	}
	if _, err := json.Marshal(idx.Metadata); err != nil {
		t.Fatalf("metadata not JSON-encodable: %v", err)
	}
	for k, v := range idx.Metadata {
		if fv, ok := v.(*index.FileValue); ok && (fv.Source != 0 || fv.Offset < 0 || fv.Size < 0 || fv.Offset+fv.Size > size) {
			t.Fatalf("metadata %q: %+v outside file of %d", k, fv, size)
		}
	}
	for _, budget := range []int{1 << 10, index.MetadataJSONBudget} {
		js, err := index.RenderMetadata(idx.Metadata, budget)
		if err != nil || !json.Valid(js) {
			t.Fatalf("RenderMetadata: %v: %.200s", err, js)
		}
	}
	if !sort.SliceIsSorted(idx.Tensors, func(i, j int) bool { return idx.Tensors[i].Name < idx.Tensors[j].Name }) {
		t.Fatalf("tensors not sorted by name")
	}
	ts := append([]index.Tensor(nil), idx.Tensors...)
	sort.Slice(ts, func(i, j int) bool { return ts[i].Offset < ts[j].Offset })
	var end int64
	for i, tn := range ts {
		if tn.Source != 0 || tn.Strides != nil || tn.BigEndian || !tn.DType.Valid() || len(tn.Shape) > 4 {
			t.Fatalf("tensor %q: %+v", tn.Name, tn)
		}
		if tn.Offset < 0 || tn.Size < 0 || tn.Offset+tn.Size > size {
			t.Fatalf("tensor %q [%d,+%d) outside file of %d", tn.Name, tn.Offset, tn.Size, size)
		}
		if want, ok := tn.DType.TensorSize(tn.NumElements(), dtype.RowLen(tn.Shape)); !ok || want != tn.Size {
			t.Fatalf("tensor %q: size %d, dtype says %d", tn.Name, tn.Size, want)
		}
		if i > 0 && tn.Size > 0 && tn.Offset < end {
			t.Fatalf("tensor %q overlaps", tn.Name)
		}
		if tn.Size > 0 {
			end = tn.Offset + tn.Size
		}
	}
}

func TestGGUFValid(t *testing.T) {
	for _, version := range []uint32{2, 3} {
		t.Run(fmt.Sprint("v", version), func(t *testing.T) {
			g := ggufValidBuild()
			g.version = version
			b := g.bytes()
			idx, err := Parse(ggufFile("m.gguf", b))
			if err != nil {
				t.Fatal(err)
			}
			ggufCheckInvariants(t, idx, "m.gguf", int64(len(b)))
			want := ggufAllTypesWant()
			want["general.architecture"] = "llama"
			want["general.alignment"] = uint64(64)
			if !reflect.DeepEqual(idx.Metadata, want) {
				for k, v := range want {
					if !reflect.DeepEqual(idx.Metadata[k], v) {
						t.Errorf("metadata %q = %#v, want %#v", k, idx.Metadata[k], v)
					}
				}
				t.Fatalf("metadata has %d keys, want %d", len(idx.Metadata), len(want))
			}
			js, _ := json.Marshal(idx.Metadata)
			for _, frag := range []string{`"arr.u8":[1,2,255]`, `"u64":9223372036854775813`, `"f32.nan":"NaN"`, `"arr.nested":[["x"],[[9]]]`} {
				if !strings.Contains(string(js), frag) {
					t.Errorf("metadata JSON lacks %s", frag)
				}
			}

			wantT := []struct {
				name  string
				dt    dtype.DType
				shape []int64
				size  int64
				spec  int // index in ggufValidBuild's specs: data pattern
			}{
				{"a.scalar", dtype.F32, []int64{}, 4, 3},
				{"bf16", dtype.BF16, []int64{2, 3}, 12, 5},
				{"blk.0.attn_norm.weight", dtype.F32, []int64{5}, 20, 1},
				{"blk.0.ffn_up.weight", dtype.Q4_K, []int64{2, 1, 2, 256}, 576, 2},
				{"empty", dtype.F16, []int64{7, 0}, 0, 4},
				{"ints", dtype.I32, []int64{2}, 8, 6},
				{"token_embd.weight", dtype.Q8_0, []int64{3, 64}, 204, 0},
			}
			if len(idx.Tensors) != len(wantT) {
				t.Fatalf("%d tensors, want %d", len(idx.Tensors), len(wantT))
			}
			for i, w := range wantT {
				tn := idx.Tensors[i]
				if tn.Name != w.name || tn.DType != w.dt || !reflect.DeepEqual(tn.Shape, w.shape) || tn.Size != w.size {
					t.Errorf("tensor %d = %s %s %v %d, want %s %s %v %d", i, tn.Name, tn.DType, tn.Shape, tn.Size, w.name, w.dt, w.shape, w.size)
					continue
				}
				if tn.Offset%64 != 0 {
					t.Errorf("%s: offset %d not aligned", tn.Name, tn.Offset)
				}
				for k := int64(0); k < tn.Size; k++ {
					if b[tn.Offset+k] != byte(w.spec*37+int(k)) {
						t.Fatalf("%s: byte %d of its data is wrong: the offset points elsewhere", tn.Name, k)
					}
				}
			}
		})
	}
}

// ggufNest returns an array value nested depth arrays deep.
func ggufNest(depth int) []byte {
	inner := ggufArr(ggufTypeU8, 1, []byte{1})
	for i := 1; i < depth; i++ {
		inner = ggufArr(ggufTypeArray, 1, inner)
	}
	return inner
}

func TestGGUFNesting(t *testing.T) {
	ok := &ggufBuild{kvs: []ggufKV{{"deep", ggufTypeArray, ggufNest(index.MaxNesting)}}}
	idx, err := Parse(ggufFile("m.gguf", ok.bytes()))
	if err != nil {
		t.Fatalf("%d-deep arrays: %v", index.MaxNesting, err)
	}
	v := idx.Metadata["deep"]
	for d := 1; d < index.MaxNesting; d++ {
		v = v.([]any)[0]
	}
	if !reflect.DeepEqual(v, index.Uint8s{1}) {
		t.Fatalf("innermost %#v", v)
	}
	bad := &ggufBuild{kvs: []ggufKV{{"deep", ggufTypeArray, ggufNest(index.MaxNesting + 1)}}}
	if _, err := Parse(ggufFile("m.gguf", bad.bytes())); err == nil || !strings.Contains(err.Error(), "nested more than") {
		t.Fatalf("%d-deep arrays: %v", index.MaxNesting+1, err)
	}
}

// ggufOneTensor is a file with one tensor info and data bytes.
func ggufOneTensor(name string, dims []uint64, typ uint32, offset uint64, data int) []byte {
	g := &ggufBuild{tensors: []ggufTI{{name, dims, typ, offset}}, data: make([]byte, data)}
	return g.bytes()
}

func TestGGUFHostile(t *testing.T) {
	valid := ggufValidBuild().bytes()
	header := func(version uint32) []byte {
		return ggufCat([]byte("GGUF"), ggufLE32(version), ggufLE64b(0), ggufLE64b(0))
	}
	kv := func(kvs ...ggufKV) []byte { return (&ggufBuild{kvs: kvs}).bytes() }
	raw := func(nTensors, nKV uint64, rest ...[]byte) []byte {
		return ggufCat([]byte("GGUF"), ggufLE32(3), ggufLE64b(nTensors), ggufLE64b(nKV), ggufCat(rest...))
	}
	longName := strings.Repeat("n", index.MaxNameLength+1)
	// Offsets of the first key/value's parts in a file with no tensors.
	const kv0 = 24              // first key's length
	const kv0Type = kv0 + 8 + 1 // after a 1-byte key

	tests := []struct {
		name string
		b    []byte
		want []string
		at   int64 // byte offset the error must name; -1: do not check
	}{
		{"empty", nil, []string{"truncated"}, 0},
		{"magic only", []byte("GGUF"), []string{"truncated"}, 4},
		{"ollama truncated header", []byte("GGUF\x02\x00"), []string{"truncated", "header"}, 4},
		{"bad magic", ggufCat([]byte("GGUX"), valid[4:]), []string{"bad magic"}, 0},
		{"version 1", header(1), []string{"version 1", "not supported"}, 4},
		{"big-endian v3", ggufCat([]byte("GGUF"), []byte{0, 0, 0, 3}, valid[8:]), []string{"big-endian", "version 3 byte-swapped"}, 4},
		{"big-endian v2", ggufCat([]byte("GGUF"), []byte{0, 0, 0, 2}), []string{"big-endian", "version 2"}, 4},
		{"version 0", header(0), []string{"unsupported version 0"}, 4},
		{"version 4", header(4), []string{"unsupported version 4"}, 4},
		{"truncated counts", header(3)[:20], []string{"truncated"}, 16},
		{"tensor count over cap", (&ggufBuild{nTensors: ggufU64p(index.MaxTensors + 1)}).bytes(), []string{"tensor count", "over the limit"}, 8},
		{"tensor count 2^63", (&ggufBuild{nTensors: ggufU64p(1 << 63)}).bytes(), []string{"tensor count"}, 8},
		{"tensor count past file", raw(2, 0, make([]byte, 47)), []string{"tensor count 2 is impossible"}, 8},
		{"kv count 2^64-1", (&ggufBuild{nKV: ggufU64p(math.MaxUint64)}).bytes(), []string{"metadata count", "impossible"}, 16},
		{"kv count past file", raw(0, 3, make([]byte, 38)), []string{"metadata count 3 is impossible"}, 16},
		{"kv and tensor counts together", raw(1, 2, make([]byte, 49)), []string{"2 key/values and 1 tensor infos"}, 8},
		{"more kvs than written", raw(0, 2, ggufStr("a"), ggufLE32(ggufTypeU8), []byte{1}, make([]byte, 12)), []string{"truncated in metadata entry 1 (key \"\")"}, 24 + 14 + 12},
		{"more kvs than written, in key", raw(0, 2, ggufStr("abcdefghijkl"), ggufLE32(ggufTypeU8), []byte{1}, make([]byte, 7)), []string{"truncated in metadata entry 1:"}, 24 + 25},
		{"more tensors than written", raw(2, 0, ggufStr("t"), ggufLE32(0), ggufLE32(0), ggufLE64b(0), make([]byte, 23)), []string{"truncated in tensor info 1 (\"\")"}, 24 + 25 + 16},
		{"key length 2^62", ggufCat(header(3)[:16], ggufLE64b(1), ggufLE64b(1<<62), make([]byte, 16)), []string{"metadata key length", "past the end"}, kv0},
		{"key length over cap", kv(ggufKV{longName, ggufTypeU8, []byte{1}}), []string{"metadata key length 65537 is over the limit"}, kv0},
		{"string value length 2^63", kv(ggufKV{"k", ggufTypeString, ggufLE64b(1 << 63)}), []string{"string value length", "past the end"}, kv0Type + 4},
		{"string value truncated", kv(ggufKV{"k", ggufTypeString, ggufCat(ggufLE64b(10), []byte("abc"))}), []string{"past the end"}, kv0Type + 4},
		{"unknown value type 13", kv(ggufKV{"k", 13, make([]byte, 16)}), []string{"unknown metadata value type 13", `key "k"`}, kv0Type},
		{"unknown value type 2^32-1", kv(ggufKV{"k", math.MaxUint32, nil}), []string{"unknown metadata value type 4294967295"}, kv0Type},
		{"unknown array element type", kv(ggufKV{"k", ggufTypeArray, ggufArr(13, 1, []byte{0})}), []string{"unknown array element type 13"}, kv0Type + 4},
		{"array of u32 count 2^61", kv(ggufKV{"k", ggufTypeArray, ggufArr(ggufTypeU32, 1<<61)}), []string{"array of 2305843009213693952 uint32"}, kv0Type + 8},
		{"array of u8 one short", kv(ggufKV{"k", ggufTypeArray, ggufArr(ggufTypeU8, 5, []byte{1, 2, 3, 4})}), []string{"array of 5 uint8"}, kv0Type + 8},
		{"array of strings count past file", kv(ggufKV{"k", ggufTypeArray, ggufArr(ggufTypeString, 3, ggufStr(""), ggufStr(""))}), []string{"array of 3 string"}, kv0Type + 8},
		{"array of arrays count 2^40", kv(ggufKV{"k", ggufTypeArray, ggufArr(ggufTypeArray, 1<<40, make([]byte, 100))}), []string{"array of 1099511627776 array"}, kv0Type + 8},
		{"string in array too long", kv(ggufKV{"k", ggufTypeArray, ggufArr(ggufTypeString, 2, ggufStr("ok"), ggufLE64b(1<<40), make([]byte, 8))}), []string{"string in array length 1099511627776", `(key "k", at byte 59)`}, 59},
		{"arrays nested too deep", kv(ggufKV{"k", ggufTypeArray, ggufNest(index.MaxNesting + 1)}), []string{"nested more than 256"}, -1},
		{"duplicate key", kv(ggufKV{"k", ggufTypeU8, []byte{1}}, ggufKV{"k", ggufTypeU8, []byte{2}}), []string{"duplicate metadata key", `key "k"`}, kv0 + 8 + 1 + 4 + 1},
		{"alignment 0", kv(ggufKV{"general.alignment", ggufTypeU32, ggufLE32(0)}), []string{"non-zero power of two, got 0"}, -1},
		{"alignment 48", kv(ggufKV{"general.alignment", ggufTypeU32, ggufLE32(48)}), []string{"power of two, got 48"}, -1},
		{"alignment -32", kv(ggufKV{"general.alignment", ggufTypeI32, ggufLE32(uint32(0xffffffe0))}), []string{"power of two, got -32"}, -1},
		{"alignment 2^63", kv(ggufKV{"general.alignment", ggufTypeU64, ggufLE64b(1 << 63)}), []string{"over the limit"}, -1},
		{"alignment 2^40", kv(ggufKV{"general.alignment", ggufTypeU64, ggufLE64b(1 << 40)}), []string{"over the limit"}, -1},
		{"alignment string", kv(ggufKV{"general.alignment", ggufTypeString, ggufStr("32")}), []string{"must be an unsigned integer"}, -1},
		{"tensor name too long", ggufOneTensor(longName, []uint64{1}, 0, 0, 4), []string{"tensor name length 65537 is over the limit"}, 24},
		{"tensor name past file", ggufCat(header(3)[:8], ggufLE64b(1), ggufLE64b(0), ggufLE64b(1<<50), make([]byte, 16)), []string{"tensor name length", "past the end"}, 24},
		{"5 dims", ggufOneTensor("t", []uint64{1, 1, 1, 1, 1}, 0, 0, 4), []string{"5 dimensions (at most 4)", `tensor "t"`}, 24 + 9},
		{"n_dims 2^32-1", ggufCat(header(3)[:8], ggufLE64b(1), ggufLE64b(0), ggufStr("t"), ggufLE32(math.MaxUint32), make([]byte, 24)), []string{"4294967295 dimensions"}, 24 + 9},
		{"dim over int64", ggufOneTensor("t", []uint64{1 << 63}, 0, 0, 4), []string{"dimension 0 is 9223372036854775808"}, 24 + 9 + 4},
		{"dim product overflow", ggufOneTensor("t", []uint64{1 << 32, 1 << 32}, 0, 0, 4), []string{"element count", "overflows"}, 24},
		{"byte size overflow", ggufOneTensor("t", []uint64{1 << 62}, 0, 0, 4), []string{"byte size", "overflows"}, 24},
		{"unknown ggml type 999", ggufOneTensor("t", []uint64{4}, 999, 0, 16), []string{"unknown ggml type code 999", `tensor "t"`}, 24},
		{"removed ggml type 4", ggufOneTensor("t", []uint64{32}, 4, 0, 64), []string{"unknown ggml type code 4"}, 24},
		{"row not whole blocks", ggufOneTensor("t", []uint64{33, 32}, 2, 0, 18*33), []string{"innermost dimension 33 is not a multiple of the Q4_0 block size 32"}, 24},
		{"quant scalar", ggufOneTensor("t", nil, 8, 0, 34), []string{"innermost dimension 1"}, 24},
		{"offset unaligned", ggufOneTensor("t", []uint64{4}, 0, 8, 64), []string{"data offset 8 is not a multiple of the alignment 32"}, 24},
		{"offset past end", ggufOneTensor("t", []uint64{4}, 0, 64, 64), []string{"run past the end of the file"}, 24},
		{"offset 2^64-32", ggufOneTensor("t", []uint64{4}, 0, math.MaxUint64-31, 64), []string{"run past the end of the file"}, 24},
		{"data past end", ggufOneTensor("t", []uint64{17}, 0, 0, 64), []string{"68 data bytes", "past the end"}, 24},
		{"data huge", ggufOneTensor("t", []uint64{1 << 40, 1 << 20}, 0, 0, 64), []string{"past the end"}, 24},
		{"overlap", (&ggufBuild{tensors: []ggufTI{{"a", []uint64{16}, 0, 0}, {"b", []uint64{4}, 0, 32}}, data: make([]byte, 96)}).bytes(), []string{"overlaps tensor"}, -1},
		{"same offset", (&ggufBuild{tensors: []ggufTI{{"a", []uint64{4}, 0, 0}, {"b", []uint64{4}, 0, 0}}, data: make([]byte, 32)}).bytes(), []string{"overlaps tensor"}, -1},
		{"duplicate tensor", (&ggufBuild{tensors: []ggufTI{{"a", []uint64{4}, 0, 0}, {"a", []uint64{4}, 0, 32}}, data: make([]byte, 64)}).bytes(), []string{"duplicate tensor name", `tensor "a"`}, -1},
		{"split.count 2^31-1", kv(ggufKV{"split.no", ggufTypeU16, []byte{0, 0}}, ggufKV{"split.count", ggufTypeI32, ggufLE32(math.MaxInt32)}), []string{"split.count 2147483647 is over the limit of 100000 parts", `key "split.count"`}, kv0 + 8 + 8 + 4 + 2 + 8 + 11 + 4},
		{"split.count MaxShards+1", kv(ggufKV{"split.count", ggufTypeU32, ggufLE32(index.MaxShards + 1)}), []string{"split.count 100001 is over the limit"}, kv0 + 8 + 11 + 4},
		{"split.count 2^64-1", kv(ggufKV{"split.count", ggufTypeU64, ggufLE64b(math.MaxUint64)}), []string{"split.count 18446744073709551615 is over the limit"}, kv0 + 8 + 11 + 4},
		{"array of u8 2^34 past file", kv(ggufKV{"k", ggufTypeArray, ggufArr(ggufTypeU8, 1<<34, make([]byte, 64))}), []string{"array of 17179869184 uint8"}, kv0Type + 8},
		{"string array 2^40 walked past file", kv(ggufKV{"k", ggufTypeArray, ggufArr(ggufTypeString, 2, ggufStr("ok"), ggufLE64b(1<<40))}), []string{"string in array length 1099511627776"}, kv0Type + 4 + 12 + 10},
		{"big alignment data past end", (&ggufBuild{kvs: []ggufKV{{"general.alignment", ggufTypeU32, ggufLE32(1 << 30)}}, tensors: []ggufTI{{"a", []uint64{4}, 0, 0}}, data: make([]byte, 16)}).bytes(), []string{"past the end"}, -1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			idx, err := Parse(ggufFile("bad.gguf", tc.b))
			runtime.ReadMemStats(&after)
			if err == nil {
				t.Fatalf("parsed: %d tensors", len(idx.Tensors))
			}
			msg := err.Error()
			var fe *index.FormatError
			if !errors.As(err, &fe) || !errors.Is(err, index.ErrFormat) {
				t.Fatalf("not a *FormatError: %T %v", err, err)
			}
			if strings.ContainsAny(msg, "\n\r") || !strings.HasPrefix(msg, "bad.gguf: gguf: ") {
				t.Fatalf("not one line starting with the file name: %q", msg)
			}
			for _, w := range tc.want {
				if !strings.Contains(msg, w) {
					t.Errorf("error %q lacks %q", msg, w)
				}
			}
			if tc.at >= 0 && fe.Offset != tc.at {
				t.Errorf("error at byte %d, want %d: %s", fe.Offset, tc.at, msg)
			}
			// Memory in proportion to the file: a few buffers at most.
			if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 1<<20+4*uint64(len(tc.b)) {
				t.Errorf("allocated %d bytes for a %d-byte file", alloc, len(tc.b))
			}
		})
	}
}

// TestGGUFTruncatedEverywhere parses every proper prefix of a valid file:
// each must fail with a one-line error, none may panic.
func TestGGUFTruncatedEverywhere(t *testing.T) {
	for _, version := range []uint32{2, 3} {
		g := ggufValidBuild()
		g.version = version
		b := g.bytes()
		if _, err := Parse(ggufFile("m.gguf", b)); err != nil {
			t.Fatal(err)
		}
		for n := 0; n < len(b); n++ {
			_, err := Parse(ggufFile("m.gguf", b[:n]))
			if err == nil {
				t.Fatalf("v%d: prefix of %d of %d bytes parsed", version, n, len(b))
			}
			if strings.ContainsAny(err.Error(), "\n\r") || !errors.Is(err, index.ErrFormat) {
				t.Fatalf("v%d: prefix %d: %q", version, n, err)
			}
		}
	}
}

// TestGGUFCorruptBytes flips bytes of a valid file: any result is fine but
// a panic, an invariant broken or a multi-line error.
func TestGGUFCorruptBytes(t *testing.T) {
	b := ggufValidBuild().bytes()
	rng := rand.New(rand.NewSource(3))
	for i := 0; i < 3000; i++ {
		c := append([]byte(nil), b...)
		for k := 0; k < 1+rng.Intn(3); k++ {
			p := rng.Intn(len(c))
			if rng.Intn(2) == 0 {
				c[p] = byte(rng.Intn(256))
			} else {
				c[p] ^= 0x80
			}
		}
		idx, err := Parse(ggufFile("m.gguf", c))
		if err != nil {
			if strings.ContainsAny(err.Error(), "\n\r") {
				t.Fatalf("multi-line error %q", err)
			}
			continue
		}
		ggufCheckInvariants(t, idx, "m.gguf", int64(len(c)))
	}
}

func TestGGUFSplitInfo(t *testing.T) {
	u16 := func(v uint16) []byte { return ggufLE32(uint32(v))[:2] }
	tests := []struct {
		name      string
		kvs       []ggufKV
		no, count int
		ok        bool
	}{
		{"part 2 of 3", []ggufKV{{"split.no", ggufTypeU16, u16(1)}, {"split.count", ggufTypeU16, u16(3)}, {"split.tensors.count", ggufTypeI32, ggufLE32(7)}}, 1, 3, true},
		{"single", []ggufKV{{"split.no", ggufTypeU16, u16(0)}, {"split.count", ggufTypeU16, u16(1)}}, 0, 1, true},
		{"count MaxShards", []ggufKV{{"split.no", ggufTypeU32, ggufLE32(0)}, {"split.count", ggufTypeU32, ggufLE32(index.MaxShards)}}, 0, index.MaxShards, true},
		{"i32 keys", []ggufKV{{"split.no", ggufTypeI32, ggufLE32(0)}, {"split.count", ggufTypeI32, ggufLE32(2)}}, 0, 2, true},
		{"not split", nil, 0, 0, false},
		{"no count", []ggufKV{{"split.no", ggufTypeU16, u16(0)}}, 0, 0, false},
		{"no >= count", []ggufKV{{"split.no", ggufTypeU16, u16(3)}, {"split.count", ggufTypeU16, u16(3)}}, 0, 0, false},
		{"count 0", []ggufKV{{"split.no", ggufTypeU16, u16(0)}, {"split.count", ggufTypeU16, u16(0)}}, 0, 0, false},
		{"negative no", []ggufKV{{"split.no", ggufTypeI32, ggufLE32(uint32(0xffffffff))}, {"split.count", ggufTypeU16, u16(2)}}, 0, 0, false},
		{"string count", []ggufKV{{"split.no", ggufTypeU16, u16(0)}, {"split.count", ggufTypeString, ggufStr("2")}}, 0, 0, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			idx, err := Parse(ggufFile("m-00002-of-00003.gguf", (&ggufBuild{kvs: tc.kvs}).bytes()))
			if err != nil {
				t.Fatal(err)
			}
			no, count, ok := SplitInfo(idx)
			if no != tc.no || count != tc.count || ok != tc.ok {
				t.Fatalf("GGUFSplitInfo = %d, %d, %v; want %d, %d, %v", no, count, ok, tc.no, tc.count, tc.ok)
			}
			if ok {
				if _, has := idx.Metadata["split.count"]; !has {
					t.Fatal("split.count not kept in metadata")
				}
			}
		})
	}
	if _, _, ok := SplitInfo(&index.Index{Format: "safetensors", Metadata: map[string]any{"split.no": uint64(0), "split.count": uint64(2)}}); ok {
		t.Fatal("split info from a non-GGUF index")
	}
	if _, _, ok := SplitInfo(nil); ok {
		t.Fatal("split info from nil")
	}
}

func ggufReadTestdata(t *testing.T, rel string) ([]string, map[string][]byte) {
	t.Helper()
	dir := testenv.Path(t, rel)
	paths, _ := filepath.Glob(filepath.Join(dir, "*.gguf"))
	if len(paths) == 0 {
		testenv.SkipOrFail(t, "no GGUF files in "+dir)
	}
	files := map[string][]byte{}
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		files[p] = b
	}
	return paths, files
}

// TestGGUFLlamaCppVocab parses llama.cpp's vocab-only files: no tensors,
// large string/int/float arrays.
func TestGGUFLlamaCppVocab(t *testing.T) {
	want := map[string]struct {
		kvs, tokens int
		arch        string
	}{
		"ggml-vocab-bert-bge.gguf":  {20, 30522, "bert"},
		"ggml-vocab-gpt-2.gguf":     {16, 50257, "gpt2"},
		"ggml-vocab-llama-spm.gguf": {22, 32000, "llama"},
		"ggml-vocab-phi-3.gguf":     {26, 32064, "phi3"},
	}
	paths, files := ggufReadTestdata(t, "gguf/llama.cpp")
	for _, p := range paths {
		base := filepath.Base(p)
		t.Run(base, func(t *testing.T) {
			b := files[p]
			idx, err := Parse(ggufFile(p, b))
			if err != nil {
				t.Fatal(err)
			}
			ggufCheckInvariants(t, idx, p, int64(len(b)))
			w, known := want[base]
			if !known {
				t.Skip("no expectations for this file")
			}
			if len(idx.Tensors) != 0 || len(idx.Metadata) != w.kvs {
				t.Fatalf("%d tensors, %d keys; want 0, %d", len(idx.Tensors), len(idx.Metadata), w.kvs)
			}
			if idx.Metadata["general.architecture"] != w.arch {
				t.Errorf("architecture %v", idx.Metadata["general.architecture"])
			}
			toks, _ := idx.Metadata["tokenizer.ggml.tokens"].([]string)
			if len(toks) != w.tokens {
				t.Errorf("%d tokens, want %d", len(toks), w.tokens)
			}
			types, _ := idx.Metadata["tokenizer.ggml.token_type"].([]int32)
			if len(types) != w.tokens {
				t.Errorf("%d token types, want %d", len(types), w.tokens)
			}
			if s, ok := idx.Metadata["tokenizer.ggml.scores"]; ok {
				if f, _ := s.([]float32); len(f) != w.tokens {
					t.Errorf("scores %T of %d", s, len(f))
				}
			}
		})
	}
}

// TestGGUFQuantizedFiles parses the ggml-quantized fixtures and, where the
// dtype converter exists, checks that the tensors the parser locates
// dequantize to the .f32ref beside each file (tensors in file order).
func TestGGUFQuantizedFiles(t *testing.T) {
	paths, files := ggufReadTestdata(t, "gguf/quantized")
	for _, p := range paths {
		t.Run(filepath.Base(p), func(t *testing.T) {
			b := files[p]
			idx, err := Parse(ggufFile(p, b))
			if err != nil {
				t.Fatal(err)
			}
			ggufCheckInvariants(t, idx, p, int64(len(b)))
			kind := strings.ToUpper(strings.TrimSuffix(strings.TrimPrefix(filepath.Base(p), "ollama-ggml-"), ".gguf"))
			byName := map[string]index.Tensor{}
			for _, tn := range idx.Tensors {
				byName[tn.Name] = tn
			}
			for name, shape := range map[string][]int64{"blk.0.ffn_up.weight": {3, 256}, "blk.1.ffn_up.weight": {2, 2, 512}} {
				tn, ok := byName[name]
				if !ok || tn.DType.String() != kind || !reflect.DeepEqual(tn.Shape, shape) {
					t.Errorf("%s: %v %v, want %s %v", name, tn.DType, tn.Shape, kind, shape)
				}
			}
			if tn := byName["output_norm.weight"]; tn.DType != dtype.F32 || !reflect.DeepEqual(tn.Shape, []int64{256}) {
				t.Errorf("output_norm.weight: %v %v", tn.DType, tn.Shape)
			}
			if idx.Metadata["general.architecture"] != "llama" {
				t.Errorf("metadata %v", idx.Metadata)
			}

			ref, err := os.ReadFile(p + ".f32ref")
			if err != nil {
				t.Fatal(err)
			}
			ts := append([]index.Tensor(nil), idx.Tensors...)
			sort.Slice(ts, func(i, j int) bool { return ts[i].Offset < ts[j].Offset })
			var got []byte
			for _, tn := range ts {
				conv, ok := dtype.ConverterFor(tn.DType, dtype.F32)
				if tn.DType == dtype.F32 {
					got = append(got, b[tn.Offset:tn.Offset+tn.Size]...)
					continue
				}
				if !ok {
					t.Skipf("no %s→F32 converter", tn.DType)
				}
				out := make([]byte, 4*tn.NumElements())
				conv(out, b[tn.Offset:tn.Offset+tn.Size])
				got = append(got, out...)
			}
			if len(got) != len(ref) {
				t.Fatalf("%d bytes of float32, .f32ref has %d", len(got), len(ref))
			}
			for i := 0; i < len(ref); i += 4 {
				if g, w := binary.LittleEndian.Uint32(got[i:]), binary.LittleEndian.Uint32(ref[i:]); g != w {
					t.Fatalf("element %d: %#08x, ggml gives %#08x", i/4, g, w)
				}
			}
		})
	}
}

// TestGGUFNegativeFiles: the real-world bad files fail with one line.
func TestGGUFNegativeFiles(t *testing.T) {
	want := map[string]string{
		"test_writer.gguf": "unknown metadata value type 13",
		"truncated.gguf":   "truncated",
	}
	paths, files := ggufReadTestdata(t, "gguf/negative")
	for _, p := range paths {
		t.Run(filepath.Base(p), func(t *testing.T) {
			_, err := Parse(ggufFile(p, files[p]))
			if err == nil {
				t.Fatal("parsed")
			}
			msg := err.Error()
			if strings.ContainsAny(msg, "\n\r") || !strings.HasPrefix(msg, p+": gguf: ") || !errors.Is(err, index.ErrFormat) {
				t.Fatalf("error %q", msg)
			}
			if w := want[filepath.Base(p)]; !strings.Contains(msg, w) {
				t.Fatalf("error %q lacks %q", msg, w)
			}
		})
	}
}

// TestGGUFRealTruncated cuts the real files at random points: always an
// error, never a panic.
func TestGGUFRealTruncated(t *testing.T) {
	rng := rand.New(rand.NewSource(4))
	for _, rel := range []string{"gguf/llama.cpp", "gguf/quantized"} {
		paths, files := ggufReadTestdata(t, rel)
		for _, p := range paths {
			b := files[p]
			for i := 0; i < 40; i++ {
				n := rng.Intn(len(b))
				if _, err := Parse(ggufFile(p, b[:n])); err == nil {
					t.Fatalf("%s cut at %d of %d parsed", p, n, len(b))
				}
			}
		}
	}
}

// FuzzGGUF: no input may panic, and a parse that succeeds keeps every
// invariant.
func FuzzGGUF(f *testing.F) {
	for _, v := range []uint32{2, 3} {
		g := ggufValidBuild()
		g.version = v
		f.Add(g.bytes())
	}
	f.Add((&ggufBuild{kvs: []ggufKV{{"deep", ggufTypeArray, ggufNest(5)}}}).bytes())
	f.Add((&ggufBuild{kvs: []ggufKV{{"k", 13, make([]byte, 16)}}}).bytes())
	f.Add([]byte("GGUF\x02\x00"))
	dir, _ := testenv.Optional()
	for _, sub := range []string{"gguf/quantized", "gguf/negative"} {
		paths, _ := filepath.Glob(filepath.Join(dir, sub, "*.gguf"))
		for _, p := range paths {
			if b, err := os.ReadFile(p); err == nil && len(b) < 1<<16 {
				f.Add(b)
			}
		}
	}
	// Large values, split counts and sparse lengths (inline limit 8 in
	// the fuzz function makes every long value a FileValue).
	f.Add((&ggufBuild{kvs: []ggufKV{{"big", ggufTypeArray, ggufArr(ggufTypeU8, 40, make([]byte, 40))}, {"after", ggufTypeU8, []byte{7}}}}).bytes())
	f.Add((&ggufBuild{kvs: []ggufKV{{"strs", ggufTypeArray, ggufArr(ggufTypeString, 3, ggufStr("abcdef"), ggufStr(""), ggufStr("xyz"))}, {"s", ggufTypeString, ggufStr("a long string value")}}}).bytes())
	f.Add((&ggufBuild{kvs: []ggufKV{{"split.no", ggufTypeU16, []byte{0, 0}}, {"split.count", ggufTypeU32, ggufLE32(math.MaxInt32)}}}).bytes())
	f.Add((&ggufBuild{kvs: []ggufKV{{"sparse", ggufTypeArray, ggufArr(ggufTypeU8, 1<<34)}}}).bytes())
	f.Fuzz(func(t *testing.T, b []byte) {
		for _, inline := range []int64{index.MaxInlineMetadata, 8} {
			idx, err := parseGGUFInline(ggufFile("fuzz.gguf", b), inline)
			if err != nil {
				if strings.ContainsAny(err.Error(), "\n\r") || !errors.Is(err, index.ErrFormat) {
					t.Fatalf("bad error %q", err)
				}
				return
			}
			ggufCheckInvariants(t, idx, "fuzz.gguf", int64(len(b)))
		}
	})
}

// TestGGUFHostileCost parses large files made of the smallest possible
// entries (the worst case of memory per file byte) and checks that the
// memory allocated stays within a small multiple of the file's size.
func TestGGUFHostileCost(t *testing.T) {
	const n = 1 << 16
	rep := func(n int, b []byte) []byte { return bytes.Repeat(b, n) }
	var keys []byte
	for i := 0; i < n; i++ {
		keys = append(keys, ggufCat(ggufStr(fmt.Sprintf("%06d", i)), ggufLE32(ggufTypeU8), []byte{1})...)
	}
	var tensors []byte
	for i := 0; i < n; i++ {
		tensors = append(tensors, ggufCat(ggufStr(fmt.Sprintf("%06d", i)), ggufLE32(1), ggufLE64b(8), ggufLE32(0), ggufLE64b(uint64(i)*32))...)
	}
	tests := []struct {
		name string
		b    []byte
		ok   bool
	}{
		{"empty arrays", ggufCat([]byte("GGUF"), ggufLE32(3), ggufLE64b(0), ggufLE64b(1), ggufStr("k"), ggufLE32(ggufTypeArray), ggufArr(ggufTypeArray, n, rep(n, ggufArr(ggufTypeU8, 0)))), true},
		{"empty strings", ggufCat([]byte("GGUF"), ggufLE32(3), ggufLE64b(0), ggufLE64b(1), ggufStr("k"), ggufLE32(ggufTypeArray), ggufArr(ggufTypeString, n, rep(n, ggufStr("")))), true},
		{"bools", ggufCat([]byte("GGUF"), ggufLE32(3), ggufLE64b(0), ggufLE64b(1), ggufStr("k"), ggufLE32(ggufTypeArray), ggufArr(ggufTypeBool, 8*n, make([]byte, 8*n))), true},
		{"u8 key/values", ggufCat([]byte("GGUF"), ggufLE32(3), ggufLE64b(0), ggufLE64b(n), keys), true},
		{"tensors without data", ggufCat([]byte("GGUF"), ggufLE32(3), ggufLE64b(n), ggufLE64b(0), tensors), false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var before, after runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&before)
			_, err := Parse(ggufFile("big.gguf", tc.b))
			runtime.ReadMemStats(&after)
			if (err == nil) != tc.ok {
				t.Fatalf("err = %v", err)
			}
			ratio := float64(after.TotalAlloc-before.TotalAlloc) / float64(len(tc.b))
			t.Logf("%d-byte file: %.1f bytes allocated per file byte", len(tc.b), ratio)
			if ratio > 16 {
				t.Errorf("%.1f bytes allocated per file byte", ratio)
			}
		})
	}
}

// BenchmarkGGUFParse parses llama.cpp's GPT-2 vocab file (1.7 MB of
// metadata: 100k strings).
func BenchmarkGGUFParse(b *testing.B) {
	p := testenv.Path(b, "gguf/llama.cpp/ggml-vocab-gpt-2.gguf")
	data, err := os.ReadFile(p)
	if err != nil {
		testenv.SkipOrFail(b, err.Error())
	}
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		if _, err := Parse(ggufFile(p, data)); err != nil {
			b.Fatal(err)
		}
	}
}

// TestGGUFUnknownTypeCode: a tensor of a ggml type code this build does not
// know (the next one ggml adds) is listed in Unserved and in index.json
// (name, type code, shape, offset, why), and costs nothing else: the other
// tensors are served. Only a file whose every tensor is unknown is refused.
func TestGGUFUnknownTypeCode(t *testing.T) {
	g := &ggufBuild{
		kvs: []ggufKV{{"general.architecture", ggufTypeString, ggufStr("llama")}},
		tensors: []ggufTI{
			{"a.weight", []uint64{4}, 0, 0},          // F32
			{"b.future", []uint64{256, 3}, 4242, 32}, // not a ggml type (yet)
			{"c.nvfp4", []uint64{64}, 40, 32 + 7*32}, // NVFP4: 36 bytes
			{"d.gone", []uint64{32}, 4, 1 << 40},     // Q4_2, removed; data past the end
		},
		data: make([]byte, 32+7*32+36),
	}
	b := g.bytes()
	idx, err := Parse(ggufFile("mix.gguf", b))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tn := range idx.Tensors {
		names = append(names, tn.Name+" "+tn.DType.String())
	}
	if want := []string{"a.weight F32", "c.nvfp4 NVFP4"}; !slices.Equal(names, want) {
		t.Fatalf("tensors %v, want %v", names, want)
	}
	dataStart := int64(len(b) - len(g.data))
	want := []index.Unserved{
		{Name: "b.future", Type: "ggml type 4242", Shape: []int64{3, 256}, Offset: dataStart + 32},
		{Name: "d.gone", Type: "ggml type 4", Shape: []int64{32}, Offset: -1},
	}
	if len(idx.Unserved) != len(want) {
		t.Fatalf("unserved %+v, want %+v", idx.Unserved, want)
	}
	for i, u := range idx.Unserved {
		w := want[i]
		if u.Name != w.Name || u.Type != w.Type || !slices.Equal(u.Shape, w.Shape) || u.Offset != w.Offset || u.Source != 0 ||
			!strings.Contains(u.Why, "unknown ggml type code") {
			t.Errorf("unserved %d: %+v, want %+v", i, u, w)
		}
	}
	if err := index.AssignPaths(idx); err != nil {
		t.Fatal(err)
	}
	js, err := idx.Document().JSON()
	if err != nil {
		t.Fatal(err)
	}
	wantJS := `"unserved":[{"name":"b.future","type":"ggml type 4242","shape":[3,256],"source":"mix.gguf","offset":` +
		strconv.FormatInt(dataStart+32, 10) + `,"why":"unknown ggml type code 4242 (newer than this tensorfs: its block size, so the tensor's size, is not known)"},` +
		`{"name":"d.gone","type":"ggml type 4","shape":[32],"why":"unknown ggml type code 4 (newer than this tensorfs: its block size, so the tensor's size, is not known)"}]}`
	if !strings.HasSuffix(strings.TrimSpace(string(js)), wantJS) {
		t.Errorf("index.json ends\n%s\nwant\n%s", js[max(0, len(js)-len(wantJS)-40):], wantJS)
	}
	doc, err := index.ParseDocument(js)
	if err != nil || len(doc.Unserved) != 2 || doc.Unserved[0].Name != "b.future" {
		t.Errorf("ParseDocument: %+v, %v", doc, err)
	}
}

// TestForkTypeCodes: forks reuse ggml type codes 41–43 for layouts of
// their own (issue 44: a TurboQuant tensor of type 42 made the whole
// file refused as "overlaps tensor", naming no type). A tensor of such a
// code whose data does not have the mainline type's size (overrunning
// the next tensor, or leaving more than the alignment's padding) is
// listed, named with its code, never read as Q1_0/Q2_0, and the file's
// other tensors are served; one of the mainline size is served.
func TestForkTypeCodes(t *testing.T) {
	f32 := func(name string, off uint64) ggufTI {
		return ggufTI{name: name, dims: []uint64{8}, typ: 0, offset: off}
	}
	for _, c := range []struct {
		name    string
		tensors []ggufTI
		data    int
		served  []string
		fork    string // the tensor listed as a fork's, "" for none
		err     string // the whole file refused
	}{
		// Q2_0 [512] is 8 blocks of 18 bytes (144); the fork's is 64
		{"smaller than Q2_0", []ggufTI{f32("a", 0), {name: "t", dims: []uint64{512}, typ: 42, offset: 32}, f32("c", 96)}, 128, []string{"a", "c"}, "t", ""},
		// Q2_0 [256] is 72 bytes; the fork's is 128 (a gap of 56 > 32)
		{"larger than Q2_0", []ggufTI{f32("a", 0), {name: "t", dims: []uint64{256}, typ: 42, offset: 32}, f32("c", 160)}, 192, []string{"a", "c"}, "t", ""},
		// Q1_0 [128] is 18 bytes: 18 and 14 bytes of padding to the next
		{"mainline Q1_0", []ggufTI{f32("a", 0), {name: "q", dims: []uint64{128}, typ: 41, offset: 32}, f32("c", 64)}, 96, []string{"a", "c", "q"}, "", ""},
		// the last tensor overrunning the file
		{"last, past the end", []ggufTI{f32("a", 0), {name: "t", dims: []uint64{512}, typ: 42, offset: 32}}, 96, []string{"a"}, "t", ""},
		{"only a fork's", []ggufTI{{name: "t", dims: []uint64{512}, typ: 42, offset: 0}, {name: "u", dims: []uint64{512}, typ: 42, offset: 64}}, 128, nil, "", "ggml type code 42 is Q2_0 in ggml"},
	} {
		g := &ggufBuild{tensors: c.tensors, data: make([]byte, c.data)}
		idx, err := Parse(ggufFile("fork.gguf", g.bytes()))
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) || strings.Count(err.Error(), "\n") != 0 {
				t.Errorf("%s: error %v, want one line with %q", c.name, err, c.err)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s: %v", c.name, err)
			continue
		}
		var served []string
		for _, tn := range idx.Tensors {
			served = append(served, tn.Name)
		}
		if !slices.Equal(served, c.served) {
			t.Errorf("%s: served %v, want %v", c.name, served, c.served)
		}
		var forks []string
		for _, u := range idx.Unserved {
			forks = append(forks, u.Name)
			if !strings.Contains(u.Why, "a fork's type reusing code 42") || u.Type != "ggml type 42" {
				t.Errorf("%s: %s unserved as %q: %s", c.name, u.Name, u.Type, u.Why)
			}
		}
		if want := []string{c.fork}; (c.fork == "" && len(forks) != 0) || (c.fork != "" && !slices.Equal(forks, want)) {
			t.Errorf("%s: unserved %v, want %q", c.name, forks, c.fork)
		}
	}
}
