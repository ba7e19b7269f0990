package integration

import (
	"archive/tar"
	"archive/zip"
	"bytes"
	"compress/gzip"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/lazyweights/tensorfs/fs"
	"github.com/lazyweights/tensorfs/internal/testenv"
)

// The hostile corpus: one generated file (or sharded directory) per attack
// class and format, fed to the real binary. Each must make `tensorfs ls`
// and `tensorfs mount` exit 1 with one "tensorfs: " line naming the file,
// quickly, without a crash, under an address-space limit, and mount
// nothing. The parsers' own tests (index/*_test.go) go deeper per format;
// this checks what a user sees, end to end.

// hostileFile is one malformed checkpoint.
type hostileFile struct {
	class string            // the attack class
	name  string            // file name; unique in the corpus
	data  []byte            // the file, or
	dir   map[string][]byte // a sharded directory: relative path -> bytes
	want  string            // a fragment the error must contain ("" for none)
	// special files made in the directory (special_test.go): relative
	// path -> symbolic link target, or "" for a named pipe; source is the
	// path inside the directory given as SOURCE ("": the directory).
	special map[string]string
	source  string
}

// --- little builders ---

func hLE32(v uint32) []byte { return binary.LittleEndian.AppendUint32(nil, v) }
func hLE64(v uint64) []byte { return binary.LittleEndian.AppendUint64(nil, v) }

func hCat(parts ...[]byte) []byte {
	var b []byte
	for _, p := range parts {
		b = append(b, p...)
	}
	return b
}

// hRecorder builds a file and remembers where each structure ends: the
// structural boundaries that truncation cuts at.
type hRecorder struct {
	b    []byte
	cuts []int
}

func (r *hRecorder) add(parts ...[]byte) *hRecorder {
	for _, p := range parts {
		r.b = append(r.b, p...)
		r.cuts = append(r.cuts, len(r.b))
	}
	return r
}

// truncations returns b cut at every recorded boundary, at one byte
// inside every structure, and one byte short of the end.
func (r *hRecorder) truncations() map[int][]byte {
	out := map[int][]byte{}
	prev := 0
	for _, c := range r.cuts {
		for _, n := range []int{c, prev + 1, c - 1} {
			if n > 0 && n < len(r.b) {
				out[n] = r.b[:n]
			}
		}
		prev = c
	}
	return out
}

// hStRaw is a safetensors file with the header given verbatim.
func hStRaw(header string, data []byte) []byte {
	return hCat(hLE64(uint64(len(header))), []byte(header), data)
}

// hStValid is a good two-tensor safetensors file, with its boundaries.
func hStValid() *hRecorder {
	h := `{"__metadata__":{"format":"pt"},"w":{"dtype":"F32","shape":[2,2],"data_offsets":[0,16]},"b":{"dtype":"F16","shape":[4],"data_offsets":[16,24]}}`
	r := &hRecorder{}
	return r.add(hLE64(uint64(len(h))), []byte(h), pattern(16, 1), pattern(8, 2))
}

// GGUF type codes.
const (
	hGU32    = 4
	hGString = 8
	hGArray  = 9
	hGU64    = 10
)

func hGStr(s string) []byte { return hCat(hLE64(uint64(len(s))), []byte(s)) }

func hGKV(key string, typ uint32, payload []byte) []byte {
	return hCat(hGStr(key), hLE32(typ), payload)
}

// hGTI is a tensor info: dims innermost first.
func hGTI(name string, typ uint32, off uint64, dims ...uint64) []byte {
	b := hCat(hGStr(name), hLE32(uint32(len(dims))))
	for _, d := range dims {
		b = append(b, hLE64(d)...)
	}
	return hCat(b, hLE32(typ), hLE64(off))
}

// hGGUF is a v3 file: header, key/values, tensor infos, padding to 32,
// data.
func hGGUF(nTensors, nKV uint64, kvs, infos, data []byte) []byte {
	b := hCat([]byte("GGUF"), hLE32(3), hLE64(nTensors), hLE64(nKV), kvs, infos)
	for len(b)%32 != 0 {
		b = append(b, 0)
	}
	return append(b, data...)
}

// hGGUFValid is a good file: two key/values, an F32 and an F16 tensor.
func hGGUFValid() *hRecorder {
	r := &hRecorder{}
	r.add([]byte("GGUF"), hLE32(3), hLE64(2), hLE64(2),
		hGKV("general.architecture", hGString, hGStr("llama")),
		hGKV("general.alignment", hGU32, hLE32(32)),
		hGTI("t0", 0, 0, 4), hGTI("t1", 1, 32, 4))
	pad := make([]byte, (32-len(r.b)%32)%32)
	return r.add(pad, pattern(16, 3), make([]byte, 16), pattern(8, 4))
}

// hNPY is a version 1.0 .npy file: the header dict padded to a multiple
// of 64, then data.
func hNPY(dict string, data []byte) []byte {
	h := dict
	for (10+len(h)+1)%64 != 0 {
		h += " "
	}
	h += "\n"
	return hCat([]byte("\x93NUMPY\x01\x00"), []byte{byte(len(h)), byte(len(h) >> 8)}, []byte(h), data)
}

func hNPYValid() *hRecorder {
	b := hNPY("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }", pattern(24, 5))
	r := &hRecorder{}
	return r.add(b[:6], b[6:8], b[8:10], b[10:len(b)-24], b[len(b)-24:len(b)-12], b[len(b)-12:])
}

// hMember is one stored zip hMember.
type hMember struct {
	name string
	data []byte
}

func hZip(t *testing.T, members ...hMember) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	for _, m := range members {
		w, err := zw.CreateHeader(&zip.FileHeader{Name: m.name, Method: zip.Store})
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

// hZipBoundaries returns a hRecorder for a zip: each local header, each
// member's data, the central directory entries and its end record.
func hZipBoundaries(t *testing.T, b []byte) *hRecorder {
	t.Helper()
	zr, err := zip.NewReader(bytes.NewReader(b), int64(len(b)))
	if err != nil {
		t.Fatal(err)
	}
	var cuts []int
	for _, f := range zr.File {
		off, err := f.DataOffset()
		if err != nil {
			t.Fatal(err)
		}
		cuts = append(cuts, int(off), int(off)+int(f.CompressedSize64))
	}
	for i := 0; i+4 <= len(b); i++ {
		if s := string(b[i : i+4]); s == "PK\x01\x02" || s == "PK\x05\x06" {
			cuts = append(cuts, i)
		}
	}
	sort.Ints(cuts)
	return &hRecorder{b: b, cuts: cuts}
}

// Pickle, protocol 2, built by hand.
func hPkStr(s string) []byte { return hCat([]byte{'X'}, hLE32(uint32(len(s))), []byte(s)) }
func hPkInt(n int64) []byte {
	if n >= -1<<31 && n < 1<<31 {
		return hCat([]byte{'J'}, hLE32(uint32(int32(n))))
	}
	return hCat([]byte{0x8a, 8}, hLE64(uint64(n)))
}
func hPkGlobal(mod, name string) []byte { return []byte("c" + mod + "\n" + name + "\n") }
func hPkTuple(items ...[]byte) []byte {
	return hCat([]byte{'('}, hCat(items...), []byte{'t'})
}
func hPkInts(ns ...int64) []byte {
	var items [][]byte
	for _, n := range ns {
		items = append(items, hPkInt(n))
	}
	return hPkTuple(items...)
}

// hPkTensor is torch._utils._rebuild_tensor_v2 of a storage (persistent
// id), an offset, a shape and strides. legacy adds the view slot.
func hPkTensor(storage, key string, numel, offset int64, shape, strides []int64, legacy bool) []byte {
	pid := [][]byte{hPkStr("storage"), hPkGlobal("torch", storage), hPkStr(key), hPkStr("cpu"), hPkInt(numel)}
	if legacy {
		pid = append(pid, []byte{'N'})
	}
	return hCat(hPkGlobal("torch._utils", "_rebuild_tensor_v2"),
		hPkTuple(hCat(hPkTuple(pid...), []byte{'Q'}), hPkInt(offset), hPkInts(shape...), hPkInts(strides...),
			[]byte{0x89}, hCat(hPkGlobal("collections", "OrderedDict"), []byte(")R"))),
		[]byte{'R'})
}

// hPkFanout pickles v, then n times (x, x) of the value before: one
// value reached by 2^n paths, in 2n bytes more.
func hPkFanout(v []byte, n int) []byte {
	return hCat(v, bytes.Repeat([]byte{'2', 0x86}, n))
}

// hPkDict pickles {k: v, ...} from raw pickled keys and values.
func hPkDict(kv ...[]byte) []byte {
	return hCat([]byte{0x80, 2, '}', '('}, hCat(kv...), []byte("u."))
}

func hTorchZip(t *testing.T, pkl []byte, storages ...hMember) []byte {
	t.Helper()
	ms := []hMember{{"archive/data.pkl", pkl}}
	for _, s := range storages {
		ms = append(ms, hMember{"archive/data/" + s.name, s.data})
	}
	ms = append(ms, hMember{"archive/version", []byte("3\n")})
	return hZip(t, ms...)
}

func hTorchValidPickle() []byte {
	return hPkDict(hPkStr("w"), hPkTensor("FloatStorage", "0", 4, 0, []int64{2, 2}, []int64{2, 1}, false))
}

// hLegacyTorch is a pre-1.6 torch.save file: magic, protocol, sys_info,
// the main pickle, the storage key list, then each storage (u64 count,
// bytes).
func hLegacyTorch(main []byte, keys []string, storages ...[]byte) *hRecorder {
	magic := hCat([]byte{0x80, 2, 0x8a, 10}, []byte{0x6c, 0xfc, 0x9c, 0x46, 0xf9, 0x20, 0x6a, 0xa8, 0x50, 0x19}, []byte{'.'})
	proto := []byte{0x80, 2, 'M', 0xe9, 0x03, '.'}
	sys := []byte{0x80, 2, '}', '.'}
	kl := []byte{0x80, 2, ']', '('}
	for _, k := range keys {
		kl = append(kl, hPkStr(k)...)
	}
	kl = append(kl, 'e', '.')
	r := &hRecorder{}
	r.add(magic, proto, sys, main, kl)
	for _, s := range storages {
		r.add(s)
	}
	return r
}

func hLegacyValid() *hRecorder {
	main := hPkDict(hPkStr("w"), hPkTensor("FloatStorage", "1", 4, 0, []int64{4}, []int64{1}, true))
	return hLegacyTorch(main, []string{"1"}, hCat(hLE64(4), pattern(16, 6)))
}

// hNest returns open repeated n times, then inner, then close n times.
func hNest(open, inner, close string, n int) string {
	return strings.Repeat(open, n) + inner + strings.Repeat(close, n)
}

// hWeightMap is a sharded directory: a weight map and shards.
func hWeightMap(index string, shards map[string][]byte) map[string][]byte {
	d := map[string][]byte{"model.safetensors.index.json": []byte(index)}
	for k, v := range shards {
		d[k] = v
	}
	return d
}

// hostileCorpus generates the corpus.
func hostileCorpus(t *testing.T) []hostileFile {
	t.Helper()
	var c []hostileFile
	add := func(class, name string, data []byte, want string) {
		c = append(c, hostileFile{class: class, name: name, data: data, want: want})
	}
	const huge = uint64(1) << 62
	sixteen := pattern(16, 1)
	st := func(tensors string) []byte { return hStRaw(`{`+tensors+`}`, sixteen) }

	// Safetensors.
	add("length past the file", "st-header-len.safetensors", hCat(hLE64(1<<40), []byte(`{"w":{}}`)), "not a checkpoint")
	add("length past the file", "st-header-len-max.safetensors", hCat(hLE64(^uint64(0)), []byte(`{}`)), "not a checkpoint")
	add("length past the file", "st-header-len-past-file.safetensors", hCat(hLE64(99_999_999), []byte(`{"w":{"dtype":"U8","shape":[16],"data_offsets":[0,16]}}`), sixteen), "runs past the end of the file")
	add("length past the file", "st-offsets-past-end.safetensors", st(`"w":{"dtype":"F32","shape":[1099511627776],"data_offsets":[0,4398046511104]}`), "run past the end")
	add("length past the file", "st-unterminated-string.safetensors", hStRaw(`{"w`+strings.Repeat("a", 4096), nil), "JSON ends early")
	add("size overflow", "st-shape-overflow.safetensors", st(`"w":{"dtype":"F32","shape":[4294967296,4294967296,4294967296],"data_offsets":[0,16]}`), "overflows")
	add("size overflow", "st-bytes-overflow.safetensors", st(`"w":{"dtype":"F64","shape":[2305843009213693952],"data_offsets":[0,16]}`), "overflows")
	add("size overflow", "st-many-dims.safetensors", st(`"w":{"dtype":"U8","shape":[`+strings.Repeat("1,", 100000)+`16],"data_offsets":[0,16]}`), "more than 64 dimensions")
	add("size overflow", "st-offset-too-big-for-json.safetensors", st(`"w":{"dtype":"U8","shape":[16],"data_offsets":[0,1e400]}`), "1e400")
	add("size mismatch", "st-shape-vs-offsets.safetensors", st(`"w":{"dtype":"F32","shape":[3,3],"data_offsets":[0,16]}`), "needs 36 bytes")
	add("negative offset", "st-negative-offset.safetensors", st(`"w":{"dtype":"U8","shape":[16],"data_offsets":[-16,0]}`), "found -16")
	add("negative offset", "st-negative-dim.safetensors", st(`"w":{"dtype":"U8","shape":[-16],"data_offsets":[0,16]}`), "found -16")
	add("misaligned offset", "st-reversed-offsets.safetensors", st(`"w":{"dtype":"U8","shape":[0],"data_offsets":[16,0]}`), "end before they begin")
	add("overlap", "st-overlap.safetensors", st(`"a":{"dtype":"U8","shape":[10],"data_offsets":[0,10]},"b":{"dtype":"U8","shape":[10],"data_offsets":[6,16]}`), "overlap")
	add("overlap", "st-gap.safetensors", st(`"a":{"dtype":"U8","shape":[4],"data_offsets":[0,4]},"b":{"dtype":"U8","shape":[4],"data_offsets":[12,16]}`), "belong to no tensor")
	add("duplicate name", "st-duplicate.safetensors", st(`"w":{"dtype":"U8","shape":[8],"data_offsets":[0,8]},"w":{"dtype":"U8","shape":[8],"data_offsets":[8,16]}`), "duplicate key")
	add("unknown dtype", "st-dtype.safetensors", st(`"w":{"dtype":"F128","shape":[1],"data_offsets":[0,16]}`), "unknown dtype")
	add("deep nesting", "st-deep-shape.safetensors", st(`"w":{"dtype":"U8","shape":`+hNest("[", "16", "]", 100000)+`,"data_offsets":[0,16]}`), "found an array")
	add("deep nesting", "st-deep-field.safetensors", st(`"w":{"dtype":"U8","shape":[16],"data_offsets":[0,16],"x":`+hNest(`[{"a":`, `1`, `}]`, 100000)+`}`), "nested deeper than 256")
	add("deep nesting", "st-deep-tensor.safetensors", st(`"w":`+hNest(`{"a":`, `1`, `}`, 100000)), "nested deeper than 256")
	add("not UTF-8", "st-bad-utf8.safetensors", st("\"w\xff\":{\"dtype\":\"U8\",\"shape\":[16],\"data_offsets\":[0,16]}"), "UTF-8")

	// GGUF.
	ti := hGTI("t", 0, 0, 4)
	arch := hGKV("general.architecture", hGString, hGStr("llama"))
	add("count past the file", "gguf-tensor-count.gguf", hGGUF(huge, 1, arch, nil, sixteen), "tensor count")
	add("count past the file", "gguf-kv-count.gguf", hGGUF(0, huge, arch, nil, nil), "metadata count")
	add("length past the file", "gguf-key-length.gguf", hGGUF(0, 1, hCat(hLE64(huge), []byte("k")), nil, nil), "runs past the end")
	add("length past the file", "gguf-string-length.gguf", hGGUF(0, 1, hCat(hGStr("k"), hLE32(hGString), hLE64(huge), []byte("v")), nil, nil), "runs past the end")
	add("count past the file", "gguf-array-count.gguf", hGGUF(0, 1, hGKV("k", hGArray, hCat(hLE32(hGU64), hLE64(huge), hLE64(1))), nil, nil), "array of 4611686018427387904")
	add("count past the file", "gguf-string-array-count.gguf", hGGUF(0, 1, hGKV("k", hGArray, hCat(hLE32(hGString), hLE64(huge), hGStr("x"))), nil, nil), "array of 4611686018427387904")
	add("count past the file", "gguf-dims-count.gguf", hGGUF(1, 0, nil, hCat(hGStr("t"), hLE32(1<<31), hLE64(4)), sixteen), "dimensions")
	add("size overflow", "gguf-dims-overflow.gguf", hGGUF(1, 0, nil, hGTI("t", 0, 0, 1<<32, 1<<32, 1<<32, 1<<32), sixteen), "overflows")
	add("size overflow", "gguf-offset-overflow.gguf", hGGUF(1, 0, nil, hGTI("t", 0, ^uint64(0)-31, 4), sixteen), "run past the end")
	add("length past the file", "gguf-offset-past-end.gguf", hGGUF(1, 0, nil, hGTI("t", 0, 1<<50, 4), sixteen), "run past the end")
	add("misaligned offset", "gguf-misaligned.gguf", hGGUF(1, 0, nil, hGTI("t", 0, 3, 2), sixteen), "not a multiple of the alignment")
	add("misaligned offset", "gguf-alignment-zero.gguf", hGGUF(1, 1, hGKV("general.alignment", hGU32, hLE32(0)), ti, sixteen), "power of two")
	add("misaligned offset", "gguf-alignment-odd.gguf", hGGUF(1, 1, hGKV("general.alignment", hGU32, hLE32(3)), ti, sixteen), "power of two")
	add("overlap", "gguf-overlap.gguf", hGGUF(2, 0, nil, hCat(hGTI("a", 0, 0, 4), hGTI("b", 0, 0, 4)), sixteen), "overlaps")
	add("duplicate name", "gguf-duplicate-tensor.gguf", hGGUF(2, 0, nil, hCat(hGTI("a", 0, 0, 2), hGTI("a", 0, 32, 2)), hCat(sixteen, sixteen, sixteen)), "duplicate tensor name")
	add("duplicate name", "gguf-duplicate-key.gguf", hGGUF(0, 2, hCat(arch, arch), nil, nil), "duplicate metadata key")
	add("unknown type code", "gguf-kv-type.gguf", hGGUF(0, 1, hGKV("k", 99, hLE64(1)), nil, nil), "unknown metadata value type 99")
	add("unknown type code", "gguf-array-type.gguf", hGGUF(0, 1, hGKV("k", hGArray, hCat(hLE32(99), hLE64(1), hLE64(1))), nil, nil), "unknown array element type 99")
	add("unknown dtype", "gguf-ggml-type.gguf", hGGUF(1, 0, nil, hGTI("t", 99, 0, 4), sixteen), "unknown ggml type code 99")
	add("unknown version", "gguf-version.gguf", hCat([]byte("GGUF"), hLE32(99), hLE64(0), hLE64(0)), "version 99")
	var deep []byte
	for i := 0; i < 100000; i++ {
		deep = append(deep, hCat(hLE32(hGArray), hLE64(1))...)
	}
	// A split.count that would size the list of parts (main: a fatal
	// out-of-memory from a 200-byte file), and array lengths that a
	// sparse file could back but this one does not.
	splitNo := hGKV("split.no", hGU32, hLE32(0))
	add("huge split.count", "gguf-split-00001-of-2147483647.gguf", hGGUF(1, 2, hCat(splitNo, hGKV("split.count", hGU32, hLE32(1<<31-1))), ti, sixteen), "split.count 2147483647 is over the limit of 100000 parts")
	add("huge split.count", "gguf-split-u64-00001-of-99999999999.gguf", hGGUF(1, 2, hCat(splitNo, hGKV("split.count", hGU64, hLE64(99999999999))), ti, sixteen), "split.count 99999999999 is over the limit")
	add("sparse declared length", "gguf-u8-array-2-34.gguf", hGGUF(0, 1, hGKV("big", hGArray, hCat(hLE32(0), hLE64(1<<34), sixteen)), nil, nil), "array of 17179869184 uint8")
	add("sparse declared length", "gguf-string-array-walk.gguf", hGGUF(0, 2, hCat(hGKV("big", hGArray, hCat(hLE32(hGString), hLE64(2), hGStr("x"), hLE64(1<<40))), arch), nil, nil), "string in array length 1099511627776")
	add("deep nesting", "gguf-deep-arrays.gguf", hGGUF(0, 1, hGKV("k", hGArray, hCat(deep, hLE32(hGU32), hLE64(0))), nil, nil), "nested more than 256")

	// NumPy.
	f4 := pattern(8, 7)
	add("not a literal", "np-call.npy", hNPY("{'descr': __import__('os').system('touch PWNED'), 'fortran_order': False, 'shape': (2,), }", f4), "not a Python literal")
	add("not a literal", "np-eval.npy", hNPY("{'descr': '<f4', 'fortran_order': False, 'shape': eval('(2,)'), }", f4), "not a Python literal")
	add("not a literal", "np-name.npy", hNPY("{'descr': '<f4', 'fortran_order': False, 'shape': (n,), }", f4), "not a Python literal")
	add("not a literal", "np-attribute.npy", hNPY("{'descr': numpy.float32, 'fortran_order': False, 'shape': (2,), }", f4), "not a Python literal")
	add("not a literal", "np-expression.npy", hNPY("{'descr': '<f4', 'fortran_order': False, 'shape': (1+1,), }", f4), "not a Python literal")
	add("length past the file", "np-header-len.npy", hCat([]byte("\x93NUMPY\x01\x00\xff\xff{'descr'"), f4), "runs past the end")
	add("length past the file", "np-header-len-v2.npy", hCat([]byte("\x93NUMPY\x02\x00\xff\xff\xff\xff{'descr'"), f4), "runs past the end")
	add("length past the file", "np-data-short.npy", hNPY("{'descr': '<f4', 'fortran_order': False, 'shape': (1000000,), }", f4), "runs past the end")
	add("size overflow", "np-shape-overflow.npy", hNPY("{'descr': '<f4', 'fortran_order': False, 'shape': (4294967296, 4294967296, 4294967296), }", f4), "overflows")
	add("size overflow", "np-huge-number.npy", hNPY("{'descr': '<f4', 'fortran_order': False, 'shape': ("+strings.Repeat("9", 9000)+",), }", f4), "9000 digits")
	add("negative offset", "np-negative-dim.npy", hNPY("{'descr': '<f4', 'fortran_order': False, 'shape': (-2,), }", f4), "(-2,)")
	add("unknown dtype", "np-object.npy", hNPY("{'descr': '|O', 'fortran_order': False, 'shape': (1,), }", f4), "object array")
	add("unknown dtype", "np-dtype.npy", hNPY("{'descr': '<q9', 'fortran_order': False, 'shape': (1,), }", f4), "not supported")
	add("duplicate name", "np-duplicate-key.npy", hNPY("{'descr': '<f4', 'descr': '<f8', 'fortran_order': False, 'shape': (2,), }", f4), "appears twice")
	add("deep nesting", "np-deep-shape.npy", hNPY("{'descr': '<f4', 'fortran_order': False, 'shape': "+hNest("(", "2,", ",)", 3000)+", }", f4), "nests deeper than 256")
	add("deep nesting", "np-deep-descr.npy", hNPY("{'descr': "+hNest("[('a', ", "'<f4'", ")]", 1000)+", 'fortran_order': False, 'shape': (2,), }", f4), "nests deeper than 256")
	add("unknown version", "np-version.npy", hCat([]byte("\x93NUMPY\x09\x09\x10\x00"), []byte("{}              "), f4), "version 9.9")
	npyOK := hNPY("{'descr': '<f4', 'fortran_order': False, 'shape': (2,), }", f4)
	add("duplicate name", "npz-duplicate.npz", hZip(t, hMember{"w.npy", npyOK}, hMember{"w.npy", npyOK}), "appears twice")
	add("not a literal", "npz-member-call.npz", hZip(t, hMember{"w.npy", hNPY("{'descr': __import__('os').getcwd(), 'fortran_order': False, 'shape': (2,), }", f4)}), "not a Python literal")
	npz := hZip(t, hMember{"w.npy", npyOK})
	add("count past the file", "npz-cd-count.npz", hPatchEOCD(npz, func(e []byte) {
		binary.LittleEndian.PutUint16(e[8:], 0xffff)
		binary.LittleEndian.PutUint16(e[10:], 0xffff)
	}), "zip")
	add("length past the file", "npz-cd-size.npz", hPatchEOCD(npz, func(e []byte) { binary.LittleEndian.PutUint32(e[12:], 0x7fffffff) }), "zip")
	add("length past the file", "npz-member-size.npz", hPatchCentral(npz, "w.npy", func(h []byte) {
		binary.LittleEndian.PutUint32(h[20:], 0x7fffffff)
		binary.LittleEndian.PutUint32(h[24:], 0x7fffffff)
	}), "runs past the end")
	add("negative offset", "npz-member-offset.npz", hPatchCentral(npz, "w.npy", func(h []byte) { binary.LittleEndian.PutUint32(h[42:], 0xfffffff0) }), "local header")

	// Issue 28: numpy's 10,000-character header cap; members that share
	// bytes or whose local header names another member (zipfile refuses
	// both; many entries on one deflate stream inflate it many times).
	bigDict := "{'descr': '<f4', 'fortran_order': False, 'shape': (4,), }"
	bigHdr := bigDict + strings.Repeat(" ", 10047-len(bigDict)) + "\n"
	bigHeader := hCat([]byte("\x93NUMPY\x01\x00"), binary.LittleEndian.AppendUint16(nil, uint16(len(bigHdr))), []byte(bigHdr), f4)
	add("huge header", "np-header-10048.npy", bigHeader, "numpy reads at most 10000 characters")
	add("huge header", "npz-header-10048.npz", hZip(t, hMember{"w.npy", bigHeader}), "numpy reads at most 10000 characters")
	two := hZip(t, hMember{"a.npy", npyOK}, hMember{"b.npy", npyOK})
	add("overlapping members", "npz-two-entries-one-member.npz", hPatchCentral(two, "b.npy", func(h []byte) { binary.LittleEndian.PutUint32(h[42:], 0) }), `its local header names it "a.npy"`)
	add("overlapping members", "npz-local-name.npz", hPatchCentral(two, "b.npy", func(h []byte) { copy(h[46:], "c.npy") }), `its local header names it "b.npy", the central directory "c.npy"`)
	{
		inner := hZip(t, hMember{"b.npy", npyOK})
		outer := hZip(t, hMember{"a.npy", hCat(npyOK, inner[:30+5+len(npyOK)])}, hMember{"c.npy", npyOK})
		at := uint32(30 + 5 + len(npyOK))
		add("overlapping members", "npz-nested-member.npz", hPatchCentral(outer, "c.npy", func(h []byte) {
			binary.LittleEndian.PutUint32(h[42:], at)
			copy(h[46:], "b.npy")
		}), "overlaps member a.npy")
	}

	// PyTorch zip.
	f32x4 := pattern(16, 8)
	add("dangerous global", "pt-os-system.pt", hTorchZip(t, []byte("\x80\x02cposix\nsystem\nX\x0b\x00\x00\x00touch PWNED\x85R."), hMember{"0", f32x4}), "refused global posix.system")
	add("dangerous global", "pt-builtins-exec.pt", hTorchZip(t, hCat([]byte{0x80, 4}, []byte("\x8c\x08builtins\x8c\x04exec\x93"), hPkTuple(hPkStr("import os")), []byte("R.")), hMember{"0", f32x4}), "refused global builtins.exec")
	add("dangerous global", "pt-nested-popen.pt", hTorchZip(t, hPkDict(hPkStr("w"), hPkTensor("FloatStorage", "0", 4, 0, []int64{4}, []int64{1}, false),
		hPkStr("cfg"), hCat(hPkGlobal("subprocess", "Popen"), hPkTuple(hPkStr("id")), []byte("R"))), hMember{"0", f32x4}), "refused global subprocess.Popen")
	add("dangerous global", "pt-getattr.pt", hTorchZip(t, hCat([]byte{0x80, 2}, hPkGlobal("builtins", "getattr"), hPkTuple(hPkGlobal("torch", "FloatStorage"), hPkStr("__init__")), []byte("R.")), hMember{"0", f32x4}), "refused global builtins.getattr")
	add("length past the file", "pt-storage-numel.pt", hTorchZip(t, hPkDict(hPkStr("w"), hPkTensor("FloatStorage", "0", 1<<60, 0, []int64{4}, []int64{1}, false)), hMember{"0", f32x4}), "holds 16 bytes")
	add("length past the file", "pt-pickle-string.pt", hTorchZip(t, []byte("\x80\x02X\xff\xff\xff\x7f")), "runs past the end")
	add("length past the file", "pt-pickle-bytes8.pt", hTorchZip(t, []byte("\x80\x04\x8e\xff\xff\xff\xff\xff\xff\xff\x7f")), "runs past the end")
	add("length past the file", "pt-memo-index.pt", hTorchZip(t, []byte("\x80\x02j\xff\xff\xff\xff.")), "memo has no entry")
	add("size overflow", "pt-shape-overflow.pt", hTorchZip(t, hPkDict(hPkStr("w"), hPkTensor("FloatStorage", "0", 4, 0, []int64{1 << 40, 1 << 40, 1 << 40}, []int64{0, 0, 0}, false)), hMember{"0", f32x4}), "overflows")
	add("size overflow", "pt-stride-overflow.pt", hTorchZip(t, hPkDict(hPkStr("w"), hPkTensor("FloatStorage", "0", 4, 0, []int64{3, 2}, []int64{1 << 62, 1}, false)), hMember{"0", f32x4}), "overflow")
	add("negative offset", "pt-negative-stride.pt", hTorchZip(t, hPkDict(hPkStr("w"), hPkTensor("FloatStorage", "0", 4, 3, []int64{4}, []int64{-1}, false)), hMember{"0", f32x4}), "negative stride")
	add("negative offset", "pt-negative-offset.pt", hTorchZip(t, hPkDict(hPkStr("w"), hPkTensor("FloatStorage", "0", 4, -2, []int64{2}, []int64{1}, false)), hMember{"0", f32x4}), "storage offset -2")
	add("overlap", "pt-storage-twice.pt", hTorchZip(t, hPkDict(hPkStr("a"), hPkTensor("FloatStorage", "0", 4, 0, []int64{4}, []int64{1}, false),
		hPkStr("b"), hPkTensor("LongStorage", "0", 2, 0, []int64{2}, []int64{1}, false)), hMember{"0", f32x4}), "declared twice")
	add("duplicate name", "pt-duplicate-member.pt", hZip(t, hMember{"archive/data.pkl", hTorchValidPickle()}, hMember{"archive/data/0", f32x4}, hMember{"archive/data/0", f32x4}), "appears twice")
	add("unknown dtype", "pt-storage-class.pt", hTorchZip(t, hPkDict(hPkStr("w"), hPkTensor("QInt8Storage", "0", 4, 0, []int64{4}, []int64{1}, false)), hMember{"0", f32x4}), "QInt8Storage is not supported")
	add("unknown type code", "pt-opcode.pt", hTorchZip(t, []byte("\x80\x02\xff.")), "unknown pickle opcode")
	add("unknown type code", "pt-protocol.pt", hTorchZip(t, []byte("\x80\x09}.")), "protocol 9")
	add("path traversal", "pt-storage-key.pt", hTorchZip(t, hPkDict(hPkStr("w"), hPkTensor("FloatStorage", "../../../../etc/passwd", 4, 0, []int64{4}, []int64{1}, false)), hMember{"0", f32x4}), "missing from the archive")
	add("deep nesting", "pt-deep-marks.pt", hTorchZip(t, hCat([]byte{0x80, 2}, bytes.Repeat([]byte{'('}, 100000), []byte{'.'})), "deeper than 256")
	add("deep nesting", "pt-deep-lists.pt", hTorchZip(t, hCat([]byte{0x80, 2}, bytes.Repeat([]byte{']'}, 50000), bytes.Repeat([]byte{'a'}, 49999), []byte{'.'})), "deeper than 256")
	add("deep nesting", "pt-deep-dicts.pt", hTorchZip(t, hCat([]byte{0x80, 2}, bytes.Repeat(hCat([]byte{'}'}, hPkStr("k")), 20000), bytes.Repeat([]byte{'}', 's'}, 1), bytes.Repeat([]byte{'s'}, 19999), []byte{'.'})), "deeper than 256")
	// Shared references: a few bytes standing for 2^19 paths, or for one
	// big value many times. Refused by the walk's budgets, which follow the
	// pickle's size (index/pickle/budget.go), naming the limit.
	w4 := hPkTensor("FloatStorage", "0", 4, 0, []int64{4}, []int64{1}, false)
	add("shared-reference fan-out", "pt-fanout-tensor.pt", hTorchZip(t, hCat([]byte{0x80, 2}, hPkFanout(w4, 19), []byte{'.'}), hMember{"0", f32x4}), "shared references multiply")
	// Issue 28: budgets follow the file's bytes, memo and tensors too.
	add("shared-reference fan-out", "pt-list-200000.pt", hTorchZip(t, hCat([]byte{0x80, 2, ']', '('}, w4, []byte("q\x01"), bytes.Repeat([]byte("h\x01"), 199_999), []byte("e.")), hMember{"0", f32x4}), "pickle.MaxTensors")
	add("memo flood", "pt-memoize-flood.pt", hTorchZip(t, hCat([]byte("\x80\x04}"), bytes.Repeat([]byte{0x94}, 1<<20), []byte("."))), "pickle.MaxMemo")
	add("shared-reference fan-out", "pt-fanout-long-key.pt", hTorchZip(t, hPkDict(hPkStr(strings.Repeat("k", 60<<10)), hPkFanout(w4, 19)), hMember{"0", f32x4}), "pickle.MaxNameBytes")
	add("shared-reference fan-out", "pt-fanout-meta-string.pt", hTorchZip(t, hCat([]byte{0x80, 2, ']', '('}, hPkStr(strings.Repeat("m", 1<<20)),
		bytes.Repeat([]byte{'2'}, 9999), []byte("e."))), "pickle.MaxMetaBytes")
	add("shared-reference fan-out", "pt-shared-key.pt", hTorchZip(t, hCat([]byte{0x80, 2, ']', '(', '}'}, hPkStr(strings.Repeat("k", 15<<20)), []byte("q\x00K\x01s"),
		bytes.Repeat([]byte("}h\x00K\x01s"), 1999), []byte("e."))), "pickle.MaxMetaBytes")
	add("shared-reference fan-out", "pt-copy-list.pt", hTorchZip(t, hCat([]byte{0x80, 2}, hPkGlobal("builtins", "list"), []byte("q\x01]q\x00("),
		bytes.Repeat([]byte{'N'}, 100_000), []byte("e0"), bytes.Repeat([]byte("h\x01h\x00\x85R0"), 100_000), []byte("N."))), "pickle.MaxWork")
	pt := hTorchZip(t, hTorchValidPickle(), hMember{"0", f32x4})
	add("length past the file", "pt-member-size.pt", hPatchCentral(pt, "archive/data/0", func(h []byte) {
		binary.LittleEndian.PutUint32(h[20:], 0x7ffffff0)
		binary.LittleEndian.PutUint32(h[24:], 0x7ffffff0)
	}), "runs past the end")
	add("count past the file", "pt-cd-count.pt", hPatchEOCD(pt, func(e []byte) {
		binary.LittleEndian.PutUint16(e[8:], 0xfff0)
		binary.LittleEndian.PutUint16(e[10:], 0xfff0)
	}), "zip")

	// Legacy PyTorch.
	add("dangerous global", "legacy-os-system.pt", hLegacyTorch([]byte("\x80\x02cos\nsystem\nX\x0b\x00\x00\x00touch PWNED\x85R."), nil).b, "refused global os.system")
	legacyMain := hPkDict(hPkStr("w"), hPkTensor("FloatStorage", "1", 4, 0, []int64{4}, []int64{1}, true))
	add("length past the file", "legacy-storage-count.pt", hLegacyTorch(legacyMain, []string{"1"}, hCat(hLE64(huge), f32x4)).b, "runs past the end")
	add("duplicate name", "legacy-key-twice.pt", hLegacyTorch(legacyMain, []string{"1", "1"}, hCat(hLE64(4), f32x4), hCat(hLE64(4), f32x4)).b, "listed twice")

	// Old and foreign formats: recognised by content and named, with what
	// to do, in one line (index/refused.go), not a hex dump of their first
	// bytes. Headers as their writers laid them out: every field a
	// little-endian uint32 (whisper.cpp's convert-pt-to-ggml.py, llama.cpp's
	// llama_file_saver), GGUF's magic reversed, torch.save's tar of 0.1.
	ggmlHead := func(magic uint32, fields ...uint32) []byte {
		b := hLE32(magic)
		for _, f := range fields {
			b = append(b, hLE32(f)...)
		}
		return append(b, sixteen...)
	}
	add("old or foreign format", "ggml-model-tiny.en.bin", ggmlHead(0x67676d6c, 51864, 1500, 384, 6, 4, 448, 384, 6, 4, 80, 1), "GGML model file (magic 'ggml'")
	add("old or foreign format", "ggmf-7b.bin", ggmlHead(0x67676d66, 1, 32000, 4096, 256, 32, 32, 128, 2), "GGMF model file")
	add("old or foreign format", "ggjt-7b-q4_0.bin", ggmlHead(0x67676a74, 3, 32000, 4096, 256, 32, 32, 128, 2), "GGJT model file (magic 'ggjt', llama.cpp's format of April to August 2023, before GGUF), version 3")
	add("old or foreign format", "ggjt-be.bin", hCat([]byte("ggjt\x00\x00\x00\x01"), sixteen), "version 1, big-endian")
	add("old or foreign format", "ggla-adapter.bin", ggmlHead(0x67676c61, 1, 8, 16), "LoRA adapter")
	add("old or foreign format", "ggsn-session.bin", ggmlHead(0x6767736e, 1), "session file")
	add("old or foreign format", "fugg-v1.gguf", hCat([]byte("FUGG"), hLE32(1), hLE64(0), hLE64(0)), "GGUF with its magic byte-swapped")
	add("old or foreign format", "gguf-v1.gguf", hCat([]byte("GGUF"), hLE32(1), hLE32(0), hLE32(0)), "convert_hf_to_gguf.py")
	add("old or foreign format", "gguf-big-endian.gguf", hCat([]byte("GGUF"), []byte{0, 0, 0, 3}, hLE64(0), hLE64(0)), "gguf_convert_endian.py")
	add("old or foreign format", "torch-0.1-tar.pt", hTar(t, true, "sys_info", "pickle", "tensors", "storages"), "PyTorch checkpoint in the tar format of torch.save before PyTorch 0.1.10")
	add("old or foreign format", "checkpoint.tar", hTar(t, false, "model.safetensors"), `a tar archive (first member "model.safetensors")`)
	add("old or foreign format", "model.keras", hZip(t, hMember{"metadata.json", []byte("{}")}, hMember{"model.weights.h5", []byte("x")}), `model.keras:model.weights.h5: HDF5: not an HDF5 file`) // a .keras zip: read since issue 37
	add("old or foreign format", "model.safetensors.gz", hGzip(t, "model.safetensors", hStValid().b), `gzip-compressed data (of "model.safetensors")`)
	add("old or foreign format", "model.safetensors.zst", hCat([]byte("\x28\xb5\x2f\xfd\x24\x08\x41\x00"), sixteen), "zstd-compressed")
	add("old or foreign format", "weights.h5", hCat([]byte("\x89HDF\r\n\x1a\n\x00\x00\x00\x00\x00\x08\x08\x00"), sixteen), "HDF5: the superblock is cut off") // read since issue 37
	add("old or foreign format", "model.onnx", hCat([]byte("\x08\x07\x12\x07pytorch\x1a\x061.13.0:\xd6\x01\n\\\n"), sixteen), "ONNX model: ")                 // read since issue 37

	// Sharded directories.
	shard := hStRaw(`{"w":{"dtype":"U8","shape":[16],"data_offsets":[0,16]}}`, sixteen)
	dirs := []struct {
		class, name, index string
		shards             map[string][]byte
		want               string
	}{
		{"path traversal", "wm-dotdot", `{"weight_map":{"w":"../../../../../etc/passwd"}}`, nil, "not a relative path inside the directory"},
		{"path traversal", "wm-absolute", `{"weight_map":{"w":"/etc/passwd"}}`, nil, "not a relative path inside the directory"},
		{"path traversal", "wm-inner-dotdot", `{"weight_map":{"w":"sub/../../x.safetensors"}}`, map[string][]byte{"x.safetensors": shard}, "not a relative path inside the directory"},
		{"missing file", "wm-missing-shard", `{"weight_map":{"w":"nope.safetensors"}}`, map[string][]byte{"s.safetensors": shard}, "no such file"},
		{"duplicate name", "wm-duplicate-key", `{"weight_map":{"w":"s.safetensors","w":"s.safetensors"}}`, map[string][]byte{"s.safetensors": shard}, "duplicate key"},
		{"duplicate name", "wm-two-shards", `{"weight_map":{"w":"s1.safetensors","x":"s2.safetensors"}}`, map[string][]byte{"s1.safetensors": shard,
			"s2.safetensors": hStRaw(`{"w":{"dtype":"U8","shape":[8],"data_offsets":[0,8]},"x":{"dtype":"U8","shape":[8],"data_offsets":[8,16]}}`, sixteen)}, "puts this tensor in shard"},
		{"deep nesting", "wm-deep", `{"metadata":` + hNest(`{"a":`, `1`, `}`, 100000) + `,"weight_map":{"w":"s.safetensors"}}`, map[string][]byte{"s.safetensors": shard}, "nested deeper than 256"},
		{"truncated", "wm-bad-json", `{"weight_map":{"w":"s.safetensors"`, map[string][]byte{"s.safetensors": shard}, "JSON ends early"},
	}
	for _, d := range dirs {
		c = append(c, hostileFile{class: d.class, name: d.name, dir: hWeightMap(d.index, d.shards), want: d.want})
	}

	// Truncated at every structural boundary of a good file of each
	// format.
	for _, v := range []struct {
		ext string
		r   *hRecorder
	}{
		{"safetensors", hStValid()},
		{"gguf", hGGUFValid()},
		{"npy", hNPYValid()},
		{"npz", hZipBoundaries(t, hZip(t, hMember{"w.npy", npyOK}, hMember{"b.npy", npyOK}))},
		{"pt", hZipBoundaries(t, pt)},
		{"legacy.pt", hLegacyValid()},
	} {
		for n, b := range v.r.truncations() {
			add("truncated", fmt.Sprintf("cut-%s-%04d.%s", strings.Split(v.ext, ".")[0], n, v.ext), b, "")
		}
	}
	c = append(c, hSpecialCorpus()...)
	sort.Slice(c, func(i, j int) bool { return c[i].name < c[j].name })
	return c
}

// hTar is a tar archive of the members named, each holding a few bytes;
// pax gives each a PAX header first, as Python's tarfile does in
// PAX_FORMAT (torch.save's tar format of PyTorch 0.1 used it).
func hTar(t *testing.T, pax bool, names ...string) []byte {
	var b bytes.Buffer
	w := tar.NewWriter(&b)
	for _, n := range names {
		h := &tar.Header{Name: n, Mode: 0o644, Size: 16, ModTime: time.Unix(1485000000, 0)}
		if pax {
			h.Format, h.PAXRecords = tar.FormatPAX, map[string]string{"mtime": "1485000000.5"}
		}
		if err := w.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		w.Write(pattern(16, 3))
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// hGzip is data gzipped, with the file name recorded in the header as
// gzip(1) does.
func hGzip(t *testing.T, name string, data []byte) []byte {
	var b bytes.Buffer
	w := gzip.NewWriter(&b)
	w.Name = name
	w.Write(data)
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// hPatchEOCD returns a copy of the zip b with its end-of-central-directory
// record changed by fn.
func hPatchEOCD(b []byte, fn func(eocd []byte)) []byte {
	b = append([]byte(nil), b...)
	i := bytes.LastIndex(b, []byte("PK\x05\x06"))
	fn(b[i:])
	return b
}

// hPatchCentral returns a copy of the zip b with the central directory
// header of hMember name changed by fn.
func hPatchCentral(b []byte, name string, fn func(h []byte)) []byte {
	b = append([]byte(nil), b...)
	i := len(b)
	for i = bytes.LastIndex(b[:i], []byte("PK\x01\x02")); i >= 0; i = bytes.LastIndex(b[:i], []byte("PK\x01\x02")) {
		n := int(binary.LittleEndian.Uint16(b[i+28:]))
		if string(b[i+46:i+46+n]) == name {
			fn(b[i:])
			return b
		}
	}
	panic("no hMember " + name)
}

// hostileTimeout bounds one run on a hostile file. Not a timing
// assertion (they take milliseconds, seconds on a loaded CI machine): it
// catches a hang, or a mount that was not refused.
const hostileTimeout = time.Minute

// hRunResult is what one limited run of tensorfs did.
type hRunResult struct {
	result
	maxRSS  int64 // peak resident memory, bytes
	elapsed time.Duration
	killed  string // the signal, when one ended it
}

// hRun runs tensorfs args with its address space limited to asLimit
// bytes (0: no limit) and reports its peak memory and time. A run past
// hostileTimeout is killed (a mount that was not refused serves until
// then).
func hRun(t *testing.T, cwd string, asLimit int64, args ...string) hRunResult {
	t.Helper()
	bin := tensorfsBinary(t)
	name, argv := bin, args
	if asLimit > 0 {
		name, argv = "prlimit", append([]string{"--as=" + strconv.FormatInt(asLimit, 10), "--", bin}, args...)
	}
	ctx, cancel := context.WithTimeout(context.Background(), hostileTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, argv...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr, cmd.Dir = &stdout, &stderr, cwd
	start := time.Now()
	err := cmd.Run()
	r := hRunResult{elapsed: time.Since(start), result: result{stdout: stdout.String(), stderr: stderr.String()}}
	var ee *exec.ExitError
	switch {
	case ctx.Err() != nil:
		r.code, r.killed = -1, fmt.Sprintf("the test (still running after %v)", hostileTimeout)
	case err == nil:
	case errors.As(err, &ee):
		r.code = ee.ExitCode()
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			r.killed = ws.Signal().String()
		}
	default:
		t.Fatalf("%s: %v", name, err)
	}
	if ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage); ok {
		r.maxRSS = ru.Maxrss << 10
	}
	return r
}

// addressSpaceLimit returns an RLIMIT_AS for the hostile runs: the
// address space a tensorfs server reached while serving a good file (the
// Go runtime reserves most of it at start and will not start without it;
// how much varies by machine) plus 256 MiB, raised in 256 MiB steps until
// tensorfs lists the good files under it reliably. 0 when nothing up to
// 8 GiB works.
func addressSpaceLimit(t *testing.T, good []string) int64 {
	t.Helper()
	m := mount(t, good[0])
	mustRun(t, "cat", m.Path(".tensorfs/index.json"))
	peak := procStatusKB(t, m.cmd.Process.Pid, "VmPeak") << 10
	m.Unmount()
	works := func(limit int64) bool {
		for range 3 {
			for _, g := range good {
				if r := hRun(t, "", limit, "ls", g); r.code != 0 {
					return false
				}
			}
		}
		return true
	}
	for limit := peak + 256<<20; limit <= 8<<30; limit += 256 << 20 {
		if works(limit) {
			return limit
		}
	}
	return 0
}

// procStatusKB returns a "kB" field of /proc/PID/status.
func procStatusKB(t testing.TB, pid int, field string) int64 {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, field+":"); ok {
			n, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			if err != nil {
				t.Fatalf("/proc/%d/status: %s", pid, line)
			}
			return n
		}
	}
	t.Fatalf("/proc/%d/status has no %s", pid, field)
	return 0
}

// TestHostileCorpus runs `tensorfs ls` and `tensorfs mount` on every file
// of the hostile corpus under an address-space limit: exit 1, one line
// "tensorfs: FILE: ..." on stderr, nothing on stdout, no signal, no Go
// runtime crash, peak memory a small constant (the files are tiny, their
// claims are huge), nothing mounted, nothing executed.
func TestHostileCorpus(t *testing.T) {
	needFUSE(t)
	dir := t.TempDir()
	work := filepath.Join(dir, "cwd") // where a pickle or header that ran code would "touch PWNED"
	if err := os.Mkdir(work, 0o755); err != nil {
		t.Fatal(err)
	}
	corpus := hostileCorpus(t)
	paths := make([]string, len(corpus))
	for i, h := range corpus {
		p := filepath.Join(dir, h.name)
		if h.dir != nil {
			for rel, b := range h.dir {
				if err := os.MkdirAll(filepath.Dir(filepath.Join(p, rel)), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(filepath.Join(p, rel), b, 0o644); err != nil {
					t.Fatal(err)
				}
			}
		} else if err := os.WriteFile(p, h.data, 0o644); err != nil {
			t.Fatal(err)
		}
		paths[i] = hMakeSpecial(t, p, h)
	}
	// The good files the corpus is made from list fine.
	var good []string
	for i, b := range [][]byte{hStValid().b, hGGUFValid().b, hNPYValid().b, hTorchZip(t, hTorchValidPickle(), hMember{"0", pattern(16, 8)}), hLegacyValid().b} {
		p := filepath.Join(dir, fmt.Sprintf("good-%d", i))
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
		if r := runTensorfs(t, "ls", p); r.code != 0 {
			t.Fatalf("a good file of the corpus does not list: %s", r.stderr)
		}
		good = append(good, p)
	}

	var limit int64
	if raceEnabled {
		t.Log("no address-space limit: the race detector reserves terabytes of address space")
	} else if _, err := exec.LookPath("prlimit"); err != nil {
		if testenv.InCI() {
			t.Error("CI=true and prlimit (util-linux) is not installed")
		}
		t.Log("no address-space limit: prlimit (util-linux) is not installed")
	} else if limit = addressSpaceLimit(t, good); limit == 0 {
		t.Error("tensorfs does not run under any address-space limit up to 8 GiB")
	}
	var baseRSS int64
	for _, g := range good {
		baseRSS = max(baseRSS, hRun(t, "", limit, "ls", g).maxRSS)
	}
	t.Logf("address-space limit %d MiB; peak RSS listing the good files %.1f MiB", limit>>20, float64(baseRSS)/(1<<20))

	type stat struct {
		n             int
		maxMS, sumMS  float64
		maxRSS        int64
		names, sample string
	}
	classes := map[string]*stat{}
	var slowest hRunResult
	slowestName := ""
	check := func(h hostileFile, path string, r hRunResult, what string) {
		t.Helper()
		fail := func(format string, args ...any) {
			t.Errorf("%s (%s) %s: %s; exit %d, stdout %q, stderr %q", h.name, h.class, what, fmt.Sprintf(format, args...), r.code, hTrim(r.stdout), hTrim(r.stderr))
		}
		switch {
		case r.killed != "":
			fail("killed by %s", r.killed)
		case r.code != 1:
			fail("exit status %d, want 1", r.code)
		case r.stdout != "":
			fail("output on stdout")
		case strings.Count(r.stderr, "\n") != 1 || !strings.HasSuffix(r.stderr, "\n") || !strings.HasPrefix(r.stderr, "tensorfs: "):
			fail("want one line starting \"tensorfs: \"")
		case !strings.Contains(r.stderr, path):
			fail("the error does not name the file")
		case h.want != "" && !strings.Contains(r.stderr, h.want):
			fail("the error does not say %q", h.want)
		}
		// The files are at most a few hundred KiB: their memory is the
		// runtime's plus a small multiple of that.
		size := int64(0)
		filepath.WalkDir(path, func(p string, d os.DirEntry, err error) error {
			if err == nil && !d.IsDir() {
				if info, err := d.Info(); err == nil {
					size += info.Size()
				}
			}
			return nil
		})
		if bound := baseRSS + 32<<20 + 8*size; r.maxRSS > bound {
			fail("peak RSS %.1f MiB, more than %.1f MiB (the file has %d bytes)", float64(r.maxRSS)/(1<<20), float64(bound)/(1<<20), size)
		}
	}
	for i, h := range corpus {
		path := paths[i]
		r := hRun(t, work, limit, "ls", path)
		check(h, path, r, "ls")
		if r.code == 0 {
			continue // accepted: mounting it would serve it
		}
		mnt := filepath.Join(dir, "mnt-"+h.name)
		if err := os.Mkdir(mnt, 0o755); err != nil {
			t.Fatal(err)
		}
		rm := hRun(t, work, limit, "mount", path, mnt)
		check(h, path, rm, "mount")
		if mountedAt(mnt) {
			t.Errorf("%s: mounted", h.name)
			if err := fs.Unmount(mnt); err != nil {
				fs.Detach(mnt)
			}
		}
		s := classes[h.class]
		if s == nil {
			s = &stat{sample: h.name + ": " + hTrim(r.stderr)}
			classes[h.class] = s
		}
		ms := float64(r.elapsed.Microseconds()) / 1000
		s.n++
		s.sumMS += ms
		s.maxMS = max(s.maxMS, ms)
		s.maxRSS = max(s.maxRSS, r.maxRSS, rm.maxRSS)
		if r.elapsed > slowest.elapsed {
			slowest, slowestName = r, h.name
		}
	}
	if _, err := os.Stat(filepath.Join(work, "PWNED")); err == nil {
		t.Error("a hostile file ran code")
	}
	names := make([]string, 0, len(classes))
	for k := range classes {
		names = append(names, k)
	}
	sort.Strings(names)
	t.Logf("%d files; tensorfs ls per class (mean / max ms, max peak RSS of ls and mount):", len(corpus))
	for _, k := range names {
		s := classes[k]
		t.Logf("  %-22s %3d files  %6.1f / %6.1f ms  %5.1f MiB  e.g. %s", k, s.n, s.sumMS/float64(s.n), s.maxMS, float64(s.maxRSS)/(1<<20), s.sample)
	}
	t.Logf("slowest: %s, %v", slowestName, slowest.elapsed)
}

func hTrim(s string) string {
	s = strings.TrimSpace(s)
	if len(s) > 300 {
		s = s[:300] + "..."
	}
	return s
}

// TestHostileNames: names that try to leave the mount (../../etc/passwd,
// absolute paths) are tensor names like any other in every format that
// has names; they are mapped to paths inside the mount, listed with
// their exact name, and served there.
func TestHostileNames(t *testing.T) {
	dir := t.TempDir()
	evil := []string{"../../etc/passwd", "/etc/shadow", "a/../../../b"}
	var kvs, infos []byte
	var members []hMember
	var stTensors []stTensor
	for i, n := range evil {
		infos = append(infos, hGTI(n, 0, uint64(32*i), 4)...)
		members = append(members, hMember{n + ".npy", hNPY("{'descr': '<f4', 'fortran_order': False, 'shape': (4,), }", pattern(16, byte(i)))})
		stTensors = append(stTensors, stTensor{Name: n, DType: "F32", Shape: []int64{4}, Data: pattern(16, byte(i))})
	}
	var data []byte
	for i := range evil {
		data = append(data, pattern(16, byte(i))...)
		data = append(data, make([]byte, 16)...)
	}
	files := map[string][]byte{
		"evil.gguf": hGGUF(uint64(len(evil)), 0, kvs, infos, data[:len(data)-16]),
		"evil.npz":  hZip(t, members...),
	}
	for name, b := range files {
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	writeSafetensors(t, filepath.Join(dir, "evil.safetensors"), stTensors, nil)
	files["evil.safetensors"] = nil
	for name := range files {
		src := filepath.Join(dir, name)
		r := runTensorfs(t, "ls", "--json", src)
		if r.code != 0 {
			t.Errorf("ls --json %s: exit %d: %s", name, r.code, r.stderr)
			continue
		}
		var doc struct {
			Tensors []struct{ Name, Path string }
		}
		if err := json.Unmarshal([]byte(r.stdout), &doc); err != nil {
			t.Fatal(err)
		}
		got := map[string]bool{}
		for _, tn := range doc.Tensors {
			got[tn.Name] = true
			if !filepath.IsLocal(tn.Path) || strings.Contains("/"+tn.Path+"/", "/../") {
				t.Errorf("%s: tensor %q has path %q, which leaves the mount", name, tn.Name, tn.Path)
			}
		}
		for _, n := range evil {
			if !got[n] {
				t.Errorf("%s: tensor %q is not listed under its name (%+v)", name, n, doc.Tensors)
			}
		}
		m := mount(t, src)
		out := runPy(t, `
import json, os, sys
m = os.path.realpath(sys.argv[1])
names = {}
for dp, dns, fns in os.walk(m):
    if dp == m:
        dns[:] = [d for d in dns if not d.startswith('.')]  # the views and .tensorfs
    for f in fns:
        p = os.path.join(dp, f)
        if not os.path.realpath(p).startswith(m + '/'):
            print('outside:', p)
        try:
            names[os.getxattr(p, 'user.tensorfs.name').decode()] = open(p, 'rb').read()[-16:].hex()
        except OSError:
            pass
print(json.dumps(names))
`, m.Dir)
		var names map[string]string
		if err := json.Unmarshal([]byte(out), &names); err != nil {
			t.Fatalf("%s: %v: %s", name, err, out)
		}
		for i, n := range evil {
			if names[n] != hexString(pattern(16, byte(i))) {
				t.Errorf("%s: %q served as %q, want its bytes", name, n, names[n])
			}
		}
		m.Unmount()
	}
}
