package gguf

import (
	"bytes"
	"encoding/json"
	"io"
	"reflect"
	"runtime"
	"strings"
	"testing"

	"github.com/lazyweights/tensorfs/index"
)

// TestGGUFLargeValues: strings and arrays over the inline limit are left
// in the file as FileValues that point at exactly their bytes, and the
// keys after them are read as usual.
func TestGGUFLargeValues(t *testing.T) {
	const inline = 64
	u8s := bytes.Repeat([]byte{1, 2, 3}, 30) // 90 bytes
	long := strings.Repeat("s", 100)
	strs := ggufCat(ggufStr(strings.Repeat("a", 40)), ggufStr(""), ggufStr(strings.Repeat("b", 40)))
	nested := ggufCat(ggufArr(ggufTypeU8, 40, make([]byte, 40)), ggufArr(ggufTypeString, 1, ggufStr(strings.Repeat("c", 30))))
	tests := []struct {
		name    string
		typ     uint32
		payload []byte
		want    index.FileValue // Offset: relative to the payload
		content []byte          // the bytes the value points at
	}{
		{"u8 array", ggufTypeArray, ggufArr(ggufTypeU8, 90, u8s), index.FileValue{Offset: 12, Size: 90, Type: "array", ElemType: "uint8", Count: 90}, u8s},
		{"f32 array", ggufTypeArray, ggufArr(ggufTypeF32, 17, make([]byte, 68)), index.FileValue{Offset: 12, Size: 68, Type: "array", ElemType: "float32", Count: 17}, make([]byte, 68)},
		{"string", ggufTypeString, ggufStr(long), index.FileValue{Offset: 8, Size: 100, Type: "string"}, []byte(long)},
		{"string array", ggufTypeArray, ggufArr(ggufTypeString, 3, strs), index.FileValue{Offset: 12, Size: int64(len(strs)), Type: "array", ElemType: "string", Count: 3}, strs},
		{"array of arrays", ggufTypeArray, ggufArr(ggufTypeArray, 2, nested), index.FileValue{Offset: 12, Size: int64(len(nested)), Type: "array", ElemType: "array", Count: 2}, nested},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			g := &ggufBuild{kvs: []ggufKV{{"a.before", ggufTypeU8, []byte{5}}, {"big", tc.typ, tc.payload}, {"z.after", ggufTypeString, ggufStr("ok")}}}
			b := g.bytes()
			idx, err := parseGGUFInline(ggufFile("m.gguf", b), inline)
			if err != nil {
				t.Fatal(err)
			}
			ggufCheckInvariants(t, idx, "m.gguf", int64(len(b)))
			fv, ok := idx.Metadata["big"].(*index.FileValue)
			if !ok {
				t.Fatalf("big = %T, want *FileValue", idx.Metadata["big"])
			}
			start := int64(bytes.Index(b, tc.payload))
			want := tc.want
			want.Offset += start
			if *fv != want {
				t.Fatalf("FileValue %+v, want %+v", *fv, want)
			}
			if got := b[fv.Offset : fv.Offset+fv.Size]; !bytes.Equal(got, tc.content) {
				t.Fatalf("points at %q, want %q", got, tc.content)
			}
			if idx.Metadata["a.before"] != uint64(5) || idx.Metadata["z.after"] != "ok" {
				t.Fatalf("neighbours %v %v", idx.Metadata["a.before"], idx.Metadata["z.after"])
			}
			// At the limit itself the value is read.
			small, err := parseGGUFInline(ggufFile("m.gguf", b), fv.Size)
			if err != nil {
				t.Fatal(err)
			}
			if _, lazy := small.Metadata["big"].(*index.FileValue); lazy {
				t.Fatalf("a value of %d bytes left in the file with a limit of %d", fv.Size, fv.Size)
			}
		})
	}
}

// sparseFile is a File of size bytes: head, then zeros (a sparse file).
type sparseFile struct {
	head []byte
	size int64
	read int64 // bytes read past head
}

func (s *sparseFile) Name() string { return "sparse.gguf" }
func (s *sparseFile) Size() int64  { return s.size }
func (s *sparseFile) ReadAt(p []byte, off int64) (int, error) {
	if off >= s.size {
		return 0, io.EOF
	}
	n := 0
	for n < len(p) && off+int64(n) < s.size {
		if i := off + int64(n); i < int64(len(s.head)) {
			p[n] = s.head[i]
		} else {
			p[n] = 0
			s.read++
		}
		n++
	}
	if n < len(p) {
		return n, io.EOF
	}
	return n, nil
}

// TestGGUFSparseArray: a 16 GiB file (sparse: its bytes are really there)
// whose one key declares a 2^34-element u8 array is parsed without
// allocating or reading the array (main asked for 32 GiB: a []uint16 of
// 2^34), and renders to a short index.json.
func TestGGUFSparseArray(t *testing.T) {
	const n = 1 << 34
	for _, et := range []uint32{ggufTypeU8, ggufTypeU16, ggufTypeF64} {
		head := (&ggufBuild{kvs: []ggufKV{{"sparse", ggufTypeArray, ggufArr(et, n/uint64(ggufMinSize[et]))}}}).bytes()
		f := &sparseFile{head: head, size: int64(len(head)) + n}
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		idx, err := Parse(f)
		runtime.ReadMemStats(&after)
		if err != nil {
			t.Fatal(err)
		}
		if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 1<<20 {
			t.Errorf("%s: allocated %d bytes", ggufTypeName(et), alloc)
		}
		if f.read > ggufBufSize { // the reader's window may look ahead
			t.Errorf("%s: read %d bytes of the array", ggufTypeName(et), f.read)
		}
		fv, ok := idx.Metadata["sparse"].(*index.FileValue)
		if !ok || fv.Size != n || fv.Offset != int64(len(head)) {
			t.Fatalf("%s: sparse = %#v", ggufTypeName(et), idx.Metadata["sparse"])
		}
		js, err := index.RenderMetadata(idx.Metadata, index.MetadataJSONBudget)
		if err != nil || len(js) > 300 {
			t.Fatalf("%s: RenderMetadata: %d bytes, %v: %s", ggufTypeName(et), len(js), err, js)
		}
		var m map[string]map[string]any
		if err := json.Unmarshal(js, &m); err != nil {
			t.Fatal(err)
		}
		want := map[string]any{index.ElidedKey: true, "type": "array", "element_type": ggufTypeName(et), "count": float64(fv.Count), "bytes": float64(n), "encoding": "gguf", "path": ".tensorfs/metadata/sparse"}
		if !reflect.DeepEqual(m["sparse"], want) {
			t.Fatalf("%s: elision %v, want %v", ggufTypeName(et), m["sparse"], want)
		}
	}
}

// TestGGUFBigArrayCost: a file that is one large u8 array, read into
// memory (limit raised), costs one byte per element: main widened it to
// two (a []uint16).
func TestGGUFBigArrayCost(t *testing.T) {
	const n = 4 << 20
	b := (&ggufBuild{kvs: []ggufKV{{"a", ggufTypeArray, ggufArr(ggufTypeU8, n, make([]byte, n))}}}).bytes()
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	idx, err := parseGGUFInline(ggufFile("m.gguf", b), n)
	runtime.ReadMemStats(&after)
	if err != nil {
		t.Fatal(err)
	}
	if u, ok := idx.Metadata["a"].(index.Uint8s); !ok || len(u) != n {
		t.Fatalf("a = %T", idx.Metadata["a"])
	}
	ratio := float64(after.TotalAlloc-before.TotalAlloc) / float64(len(b))
	t.Logf("%.2f bytes allocated per file byte", ratio)
	if ratio > 1.5 {
		t.Errorf("%.2f bytes allocated per file byte (want about 1)", ratio)
	}
}
