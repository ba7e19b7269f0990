package torch

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/lazyweights/tensorfs/dtype"
	"github.com/lazyweights/tensorfs/index"
	"github.com/lazyweights/tensorfs/index/numpy"
	"github.com/lazyweights/tensorfs/index/pickle"
	"github.com/lazyweights/tensorfs/internal/testenv"
)

// ptGoodZip is a small torch.save-like archive: a contiguous tensor, a
// transposed view and an offset slice sharing one storage.
func ptGoodZip(t testing.TB, root string) []byte {
	pkl := ptTensorPickle(false,
		ptTS{"w", "FloatStorage", "0", 12, 0, []int64{3, 4}, []int64{4, 1}, nil},
		ptTS{"wt", "FloatStorage", "0", 12, 0, []int64{4, 3}, []int64{1, 4}, nil},
		ptTS{"tail", "FloatStorage", "0", 12, 4, []int64{2, 4}, []int64{4, 1}, nil},
		ptTS{"b", "LongStorage", "1", 2, 0, []int64{2}, []int64{1}, nil},
	)
	return ptZip(t,
		ptMember{Name: root + "data.pkl", Data: pkl},
		ptMember{Name: root + "byteorder", Data: []byte("little")},
		ptMember{Name: root + "data/0", Data: ptF32(12)},
		ptMember{Name: root + "data/1", Data: make([]byte, 16)},
		ptMember{Name: root + "version", Data: []byte("3\n")},
	)
}

func TestTorchZipGood(t *testing.T) {
	for _, root := range []string{"archive/", "my model.v2/", ""} {
		b := ptGoodZip(t, root)
		idx, err := ptParse("m.pt", b)
		if err != nil {
			t.Fatalf("root %q: %v", root, err)
		}
		ptCheckIndex(t, idx, "m.pt", int64(len(b)))
		if got := ptNames(idx); !reflect.DeepEqual(got, []string{"b", "tail", "w", "wt"}) {
			t.Fatalf("names %v", got)
		}
		w, wt, tail := idx.Tensors[2], idx.Tensors[3], idx.Tensors[1]
		if w.Strides != nil || tail.Strides != nil || !reflect.DeepEqual(wt.Strides, []int64{1, 4}) {
			t.Fatalf("strides %v %v %v", w.Strides, tail.Strides, wt.Strides)
		}
		if tail.Offset != w.Offset+16 || wt.Offset != w.Offset || idx.Tensors[0].DType != dtype.I64 {
			t.Fatalf("offsets %d %d %d", w.Offset, wt.Offset, tail.Offset)
		}
		// The transposed view gathers to the transpose.
		all := ptGather(t, b, w)
		tr := ptGather(t, b, wt)
		for i := 0; i < 4; i++ {
			for j := 0; j < 3; j++ {
				if !bytes.Equal(tr[(i*3+j)*4:][:4], all[(j*4+i)*4:][:4]) {
					t.Fatalf("transpose element %d,%d", i, j)
				}
			}
		}
	}
}

// TestTorchZipVariants: byteorder, compressed data.pkl, rebuild forms
// (v3 with a dtype, _rebuild_from_type_v2, parameters), bare tensors and
// storages, tensors inside opaque objects.
func TestTorchZipVariants(t *testing.T) {
	rb := func(s ptTS) []byte { return ptRebuild(s, false) }
	f32 := ptTS{"", "FloatStorage", "0", 4, 0, []int64{4}, []int64{1}, nil}
	data0 := ptMember{Name: "a/data/0", Data: ptF32(4)}
	for _, c := range []struct {
		name    string
		members []ptMember
		check   func(t *testing.T, idx *index.Index)
	}{
		{"big-endian", []ptMember{{Name: "a/data.pkl", Data: ptCat([]byte{pickle.OpPROTO, 2}, rb(f32), []byte("."))}, data0, {Name: "a/byteorder", Data: []byte("big")}},
			func(t *testing.T, idx *index.Index) {
				if !idx.Tensors[0].BigEndian || idx.Tensors[0].Name != "m" {
					t.Fatalf("%+v", idx.Tensors[0])
				}
			}},
		{"deflated data.pkl", []ptMember{{Name: "a/data.pkl", Data: ptCat([]byte{pickle.OpPROTO, 2}, rb(f32), []byte(".")), Deflate: true}, data0},
			func(t *testing.T, idx *index.Index) {
				if idx.Tensors[0].Size != 16 {
					t.Fatalf("%+v", idx.Tensors[0])
				}
			}},
		{"deflated storage", []ptMember{{Name: "a/data.pkl", Data: ptCat([]byte{pickle.OpPROTO, 2}, rb(f32), []byte("."))}, {Name: "a/data/0", Data: ptF32(4), Deflate: true}},
			func(t *testing.T, idx *index.Index) {
				tn := idx.Tensors[0]
				if len(idx.Members) != 1 || len(idx.Sources) != 2 || tn.Source != 1 || tn.Offset != 0 || tn.Size != 16 {
					t.Fatalf("%+v %+v", tn, idx.Members)
				}
				if m := idx.Members[0]; m.Source != 1 || m.File != 0 || !isDeflatedMember(m) || m.Name != "a/data/0" || m.Size != 16 || idx.SourceName(1) != "/x/m.pt:a/data/0" {
					t.Fatalf("%+v %q", m, idx.Sources)
				}
			}},
		{"v3 dtype without a type", []ptMember{{Name: "a/data.pkl", Data: ptCat([]byte{pickle.OpPROTO, 2, '}', '('}, ptPkStr("q"),
			ptPkGlobal("torch._utils", "_rebuild_tensor_v3"),
			ptPkTuple(ptCat(ptPkTuple(ptPkStr("storage"), ptPkGlobal("torch", "UntypedStorage"), ptPkStr("1"), ptPkStr("cpu"), ptPkInt(4)), []byte{'Q'}),
				ptPkInt(0), ptPkInts(2, 2), ptPkInts(2, 1), []byte{pickle.OpNEWFALSE}, []byte("}"), ptPkGlobal("torch", "float4_e2m1fn_x2")), []byte("R"),
			ptPkStr("w"), rb(f32), []byte("u."))}, data0, {Name: "a/data/1", Data: ptF32(1)}},
			func(t *testing.T, idx *index.Index) {
				// Listed, not served; the file's other tensors are.
				want := []index.Unserved{{Name: "q", Type: "torch.float4_e2m1fn_x2", Shape: []int64{2, 2}, Offset: -1, Why: "tensorfs has no dtype for torch.float4_e2m1fn_x2"}}
				if !reflect.DeepEqual(idx.Unserved, want) || len(idx.Tensors) != 1 || idx.Tensors[0].Name != "w" {
					t.Fatalf("unserved %+v, tensors %v", idx.Unserved, ptNames(idx))
				}
			}},
		{"v3 float8 from untyped storage", []ptMember{{Name: "a/data.pkl", Data: ptCat([]byte{pickle.OpPROTO, 2},
			ptPkGlobal("torch._utils", "_rebuild_tensor_v3"),
			ptPkTuple(ptCat(ptPkTuple(ptPkStr("storage"), ptPkGlobal("torch", "UntypedStorage"), ptPkStr("0"), ptPkStr("cpu"), ptPkInt(16)), []byte{'Q'}),
				ptPkInt(2), ptPkInts(2, 3), ptPkInts(3, 1), []byte{pickle.OpNEWFALSE}, []byte("}"), ptPkGlobal("torch", "float8_e4m3fn")),
			[]byte("R."))}, data0},
			func(t *testing.T, idx *index.Index) {
				tn := idx.Tensors[0]
				if tn.DType != dtype.F8E4M3 || tn.Size != 6 || tn.Offset != idx.Tensors[0].Offset || tn.Strides != nil {
					t.Fatalf("%+v", tn)
				}
			}},
		{"rebuild_from_type_v2 and parameters", []ptMember{{Name: "a/data.pkl", Data: ptCat([]byte{pickle.OpPROTO, 2, '}', '('},
			ptPkStr("sub"), ptPkGlobal("torch._tensor", "_rebuild_from_type_v2"),
			ptPkTuple(ptPkGlobal("torch._utils", "_rebuild_tensor_v2"), ptPkGlobal("torch", "Tensor"),
				ptPkTuple(ptCat(ptPkTuple(ptPkStr("storage"), ptPkGlobal("torch", "FloatStorage"), ptPkStr("0"), ptPkStr("cpu"), ptPkInt(4)), []byte{'Q'}),
					ptPkInt(0), ptPkInts(4), ptPkInts(1), []byte{pickle.OpNEWFALSE}, []byte("}")),
				[]byte("}")), []byte("R"),
			ptPkStr("param"), ptPkGlobal("torch._utils", "_rebuild_parameter"), ptPkTuple(rb(f32), []byte{pickle.OpNEWTRUE}, []byte("}")), []byte("R"),
			ptPkStr("newparam"), ptPkGlobal("torch.nn.parameter", "Parameter"), ptPkTuple(rb(f32)), []byte{pickle.OpNEWOBJ},
			[]byte("u."))}, data0},
			func(t *testing.T, idx *index.Index) {
				if got := ptNames(idx); !reflect.DeepEqual(got, []string{"newparam", "param", "sub"}) {
					t.Fatalf("%v", got)
				}
			}},
		{"bare storage", []ptMember{{Name: "a/data.pkl", Data: ptCat([]byte{pickle.OpPROTO, 2},
			ptPkTuple(ptPkStr("storage"), ptPkGlobal("torch", "IntStorage"), ptPkStr("0"), ptPkStr("cpu"), ptPkInt(3)), []byte("Q."))}, data0},
			func(t *testing.T, idx *index.Index) {
				if tn := idx.Tensors[0]; tn.Name != "m" || tn.DType != dtype.I32 || !reflect.DeepEqual(tn.Shape, []int64{3}) {
					t.Fatalf("%+v", tn)
				}
			}},
		{"tensor inside an opaque call", []ptMember{{Name: "a/data.pkl", Data: ptCat([]byte{pickle.OpPROTO, 2, '}'},
			ptPkStr("obj"), ptPkGlobal("mylib", "Thing"), ptPkTuple(ptPkStr("x"), rb(f32)), []byte("Rs."))}, data0},
			func(t *testing.T, idx *index.Index) {
				if got := ptNames(idx); !reflect.DeepEqual(got, []string{"obj/1"}) {
					t.Fatalf("%v", got)
				}
				if !strings.Contains(idx.Metadata["obj"].(string), "mylib.Thing") {
					t.Fatalf("metadata %v", idx.Metadata)
				}
			}},
		{"list subclass and dict subclass", []ptMember{{Name: "a/data.pkl", Data: ptCat([]byte{pickle.OpPROTO, 2, '}', '('},
			ptPkStr("l"), ptPkGlobal("mylib", "L"), []byte(")\x81("), rb(f32), []byte("e"),
			ptPkStr("d"), ptPkGlobal("mylib", "D"), []byte(")\x81"), ptPkStr("k"), rb(f32), []byte("s"), []byte("}"), ptPkStr("n"), ptPkInt(3), []byte("sb"),
			[]byte("u."))}, data0},
			func(t *testing.T, idx *index.Index) {
				if got := ptNames(idx); !reflect.DeepEqual(got, []string{"d/k", "l/0"}) {
					t.Fatalf("%v", got)
				}
				if d := idx.Metadata["d"].(map[string]any); d["n"] != int64(3) || d["__class__"] != "mylib.D" {
					t.Fatalf("metadata %v", idx.Metadata)
				}
			}},
		{"keys of every kind", []ptMember{{Name: "a/data.pkl", Data: ptCat([]byte{pickle.OpPROTO, 2, '}', '('},
			ptPkInt(7), rb(f32), []byte{pickle.OpNEWTRUE}, rb(f32), []byte{'N'}, rb(f32), ptPkInts(1, 2), rb(f32), []byte("u."))}, data0},
			func(t *testing.T, idx *index.Index) {
				if got := ptNames(idx); !reflect.DeepEqual(got, []string{"(1, 2)", "7", "None", "True"}) {
					t.Fatalf("%v", got)
				}
			}},
		{"no tensors", []ptMember{{Name: "a/data.pkl", Data: []byte("\x80\x02}X\x01\x00\x00\x00aK\x01s.")}},
			func(t *testing.T, idx *index.Index) {
				if len(idx.Tensors) != 0 || idx.Metadata["a"] != int64(1) || idx.Tensors == nil {
					t.Fatalf("%+v", idx)
				}
			}},
	} {
		t.Run(c.name, func(t *testing.T) {
			b := ptZip(t, c.members...)
			idx, err := ptParse("/x/m.pt", b)
			if err != nil {
				t.Fatal(err)
			}
			ptCheckIndex(t, idx, "/x/m.pt", int64(len(b)))
			c.check(t, idx)
		})
	}
}

// TestTorchZipBad: every way a zip checkpoint can be wrong gives one line
// naming the file and what is wrong where.
func TestTorchZipBad(t *testing.T) {
	one := func(s ptTS, storage []byte, extra ...ptMember) []ptMember {
		return append([]ptMember{{Name: "r/data.pkl", Data: ptTensorPickle(false, s)}, {Name: "r/data/0", Data: storage}}, extra...)
	}
	ts := func(name string, numel, off int64, shape, strides []int64) ptTS {
		return ptTS{name, "FloatStorage", "0", numel, off, shape, strides, nil}
	}
	for _, c := range []struct {
		name    string
		members []ptMember
		want    string
	}{
		{"deflated storage too short", []ptMember{{Name: "r/data.pkl", Data: ptTensorPickle(false, ts("w", 4, 0, []int64{4}, []int64{1}))}, {Name: "r/data/0", Data: ptF32(2), Deflate: true}},
			`storage member r/data/0 holds 8 bytes (inflated), 4 FloatStorage elements need 16 (tensor "w")`},
		{"missing storage", one(ptTS{"w", "FloatStorage", "7", 4, 0, []int64{4}, []int64{1}, nil}, ptF32(4)),
			`its storage r/data/7 is missing from the archive (tensor "w")`},
		{"view past storage", one(ts("w", 4, 1, []int64{4}, []int64{1}), ptF32(4)),
			`view reaches past its storage (element 4 of a 16-byte FloatStorage storage "0") (tensor "w")`},
		{"strided view past storage", one(ts("w", 4, 0, []int64{2, 2}, []int64{3, 1}), ptF32(4)), "view reaches past its storage"},
		{"stride overflow", one(ts("w", 4, 0, []int64{3, 2}, []int64{1 << 62, 1}), ptF32(4)), "view reaches past its storage"},
		{"negative stride", one(ts("w", 4, 3, []int64{4}, []int64{-1}), ptF32(4)), `negative stride -1 in dimension 0 (tensor "w")`},
		{"negative storage offset", one(ts("w", 4, -1, []int64{2}, []int64{1}), ptF32(4)), "_rebuild_tensor_v2: storage offset -1 (at byte "},
		{"negative storage size", one(ts("w", -4, 0, []int64{2}, []int64{1}), ptF32(4)), `storage "0" has size -4 (at byte `},
		{"member shorter than storage", one(ts("w", 8, 0, []int64{4}, []int64{1}), ptF32(4)), "holds 16 bytes, 8 FloatStorage elements need 32"},
		{"shape overflow", one(ts("w", 4, 0, []int64{1 << 40, 1 << 40}, []int64{0, 0}), ptF32(4)), "overflows"},
		{"negative dimension", one(ts("w", 4, 0, []int64{-1}, []int64{1}), ptF32(4)), "negative dimension"},
		{"strides mismatch", one(ts("w", 4, 0, []int64{4}, []int64{1, 1}), ptF32(4)), "2 strides for 1 dimensions"},
		{"quantized storage", one(ptTS{"q", "QInt8Storage", "0", 4, 0, []int64{4}, []int64{1}, nil}, ptF32(4)),
			`a tensor of storage class torch.QInt8Storage is not supported (tensor "q", at byte `},
		{"byteorder", one(ts("w", 4, 0, []int64{4}, []int64{1}), ptF32(4), ptMember{Name: "r/byteorder", Data: []byte("middle")}), `byteorder record says "middle"`},
		{"no data.pkl", []ptMember{{Name: "r/version", Data: []byte("3")}}, "zip archive has no data.pkl"},
		{"storage declared twice", []ptMember{{Name: "r/data.pkl", Data: ptTensorPickle(false, ts("a", 4, 0, []int64{4}, []int64{1}), ptTS{"b", "LongStorage", "0", 2, 0, []int64{2}, []int64{1}, nil})},
			{Name: "r/data/0", Data: ptF32(4)}}, `storage "0" is declared twice`},
		{"storage not a storage", []ptMember{{Name: "r/data.pkl", Data: ptCat([]byte{pickle.OpPROTO, 2}, ptPkGlobal("torch._utils", "_rebuild_tensor_v2"),
			ptPkTuple(ptPkInt(1), ptPkInt(0), ptPkInts(1), ptPkInts(1)), []byte("R."))}}, "first argument is a int, not a storage (at byte 101)"},
		{"unknown persistent id", []ptMember{{Name: "r/data.pkl", Data: []byte("\x80\x02X\x01\x00\x00\x00xQ.")}}, `unsupported persistent id "x"`},
		{"malicious", []ptMember{{Name: "r/data.pkl", Data: []byte("\x80\x02cposix\nsystem\nX\x02\x00\x00\x00id\x85R.")}}, "refused global posix.system"},
		{"truncated pickle", []ptMember{{Name: "r/data.pkl", Data: []byte("\x80\x02}(X\x01")}}, "pickle argument of 4 bytes runs past the end of the data (1 bytes left) (at byte"},
		{"pickle without STOP", []ptMember{{Name: "r/data.pkl", Data: []byte("\x80\x02}")}}, "pickle is truncated (at byte"},
		{"deflated truncated pickle", []ptMember{{Name: "r/data.pkl", Data: []byte("\x80\x02}("), Deflate: true}}, "(member r/data.pkl, at byte 4)"},
		{"meta tensor", []ptMember{{Name: "r/data.pkl", Data: ptCat([]byte{pickle.OpPROTO, 2, '}'}, ptPkStr("m"),
			ptPkGlobal("torch._utils", "_rebuild_meta_tensor_no_storage"), ptPkTuple(ptPkGlobal("torch", "float32"), ptPkInts(2), ptPkInts(1)), []byte("Rs."))}},
			`a meta tensor (it has no data) (torch._utils._rebuild_meta_tensor_no_storage) is not supported (tensor "m", at byte `},
	} {
		t.Run(c.name, func(t *testing.T) {
			b := ptZip(t, c.members...)
			_, err := ptParse("m.pt", b)
			ptErrContains(t, err, "m.pt: ", c.want)
		})
	}
	// Not a zip at all past the magic.
	_, err := Parse(ptMem("z.pt", []byte("PK\x03\x04garbage")))
	ptErrContains(t, err, "z.pt: not a readable zip archive")
}

// TestTorchZipCutEverywhere truncates and corrupts a good archive at every
// byte: errors only, never a panic, never a tensor outside the file.
func TestTorchZipCutEverywhere(t *testing.T) {
	b := ptGoodZip(t, "archive/")
	for n := 0; n < len(b); n++ {
		if idx, err := Parse(ptMem("m.pt", b[:n])); err == nil {
			ptCheckIndex(t, idx, "m.pt", int64(n))
		}
		c := append([]byte{}, b...)
		c[n] ^= 0xff
		if idx, err := Parse(ptMem("m.pt", c)); err == nil {
			ptCheckIndex(t, idx, "m.pt", int64(len(c)))
		}
	}
}

func ptLegacyGood() []byte {
	main := ptTensorPickle(true,
		ptTS{"w", "FloatStorage", "140", 6, 0, []int64{2, 3}, []int64{3, 1}, nil},
		ptTS{"wt", "FloatStorage", "140", 6, 0, []int64{3, 2}, []int64{1, 3}, nil},
		// An old-style storage view: elements 2..5 of storage 140.
		ptTS{"view", "FloatStorage", "140", 6, 1, []int64{2}, []int64{2}, ptPkTuple(ptPkStr("141"), ptPkInt(2), ptPkInt(4))},
		ptTS{"i", "ShortStorage", "7", 3, 0, []int64{3}, []int64{1}, nil},
	)
	return ptLegacyFile(main, ptLegacyStorage{"140", 6, ptF32(6)}, ptLegacyStorage{"7", 3, []byte{1, 0, 2, 0, 3, 0}})
}

func TestTorchLegacy(t *testing.T) {
	b := ptLegacyGood()
	idx, err := ptParse("old.pt", b)
	if err != nil {
		t.Fatal(err)
	}
	ptCheckIndex(t, idx, "old.pt", int64(len(b)))
	if got := ptNames(idx); !reflect.DeepEqual(got, []string{"i", "view", "w", "wt"}) {
		t.Fatalf("%v", got)
	}
	all := ptGather(t, b, idx.Tensors[2])
	view := ptGather(t, b, idx.Tensors[1])
	// view = storage[2+1], storage[2+1+2]
	if !bytes.Equal(view, append(append([]byte{}, all[12:16]...), all[20:24]...)) {
		t.Fatalf("view bytes %x from %x", view, all)
	}
	if ptSHA(ptGather(t, b, idx.Tensors[0])) != ptSHA([]byte{1, 0, 2, 0, 3, 0}) {
		t.Fatal("int16 storage")
	}

	// Python 2 style: SHORT_BINSTRING keys, __builtin__ names, protocol 0/1
	// opcodes around the tensor.
	py2 := ptCat([]byte("(dp0\nU\x06weightq\x01"), ptRebuild(ptTS{"", "DoubleStorage", "5", 2, 0, []int64{2}, []int64{1}, nil}, true),
		[]byte("sU\x04tags"), ptPkGlobal("__builtin__", "set"), []byte("(lp2\nS'a'\naS'\\xe9'\na\x85RsU\x02lrF0.5\ns."))
	b = ptLegacyFile(py2, ptLegacyStorage{"5", 2, make([]byte, 16)})
	idx, err = ptParse("py2.pt", b)
	if err != nil {
		t.Fatal(err)
	}
	if got := ptNames(idx); !reflect.DeepEqual(got, []string{"weight"}) || idx.Tensors[0].DType != dtype.F64 {
		t.Fatalf("%v", got)
	}
	if idx.Metadata["lr"] != 0.5 || !reflect.DeepEqual(idx.Metadata["tags"], []any{"a", "é"}) {
		t.Fatalf("metadata %#v", idx.Metadata)
	}
}

func TestTorchLegacyBad(t *testing.T) {
	good := ptTensorPickle(true, ptTS{"w", "FloatStorage", "1", 4, 0, []int64{4}, []int64{1}, nil})
	st := ptLegacyStorage{"1", 4, ptF32(4)}
	magic := ptCat([]byte{pickle.OpPROTO, 2, pickle.OpLONG1, 10}, []byte{0x6c, 0xfc, 0x9c, 0x46, 0xf9, 0x20, 0x6a, 0xa8, 0x50, 0x19}, []byte{'.'})
	for _, c := range []struct {
		name string
		file []byte
		want string
	}{
		{"count mismatch", ptLegacyFile(good, ptLegacyStorage{"1", 3, ptF32(3)}), `legacy storage "1" holds 3 elements, the pickle says 4`},
		{"truncated storage", ptLegacyFile(good, st)[:len(ptLegacyFile(good, st))-1], `legacy storage "1" of 4 FloatStorage elements runs past the end of the file`},
		{"no count", ptLegacyFile(good)[:], `its storage "1" is not in the file's storage list (tensor "w")`},
		{"unused key", ptLegacyFile(good, st, ptLegacyStorage{"9", 1, ptF32(1)}), `legacy storage "9" is listed but no tensor uses it`},
		{"listed twice", ptLegacyFile(good, st, st), `legacy storage "1" is listed twice`},
		{"huge count", ptLegacyFile(good, ptLegacyStorage{"1", 1 << 62, nil}), "runs past the end of the file"},
		{"bad protocol", ptCat(magic, []byte("\x80\x02M\xea\x03.")), "legacy PyTorch protocol version 1002 (want 1001) (at byte 15)"},
		{"sys_info not a dict", ptCat(magic, []byte("\x80\x02M\xe9\x03."), []byte("K\x01.")), "legacy sys_info is a int, not a dict"},
		{"keys not a list", ptCat(magic, []byte("\x80\x02M\xe9\x03.\x80\x02}."), good, []byte("K\x01.")), "legacy storage key list is a int"},
		{"wrong magic", []byte("\x80\x02K\x01."), "not a PyTorch checkpoint"},
		{"view past root", ptLegacyFile(ptTensorPickle(true, ptTS{"v", "FloatStorage", "1", 4, 0, []int64{1}, []int64{1}, ptPkTuple(ptPkStr("2"), ptPkInt(3), ptPkInt(2))}), st),
			`storage view "2" (elements 3..+2) reaches past its storage "1" (tensor "v")`},
		{"negative view offset", ptLegacyFile(ptTensorPickle(true, ptTS{"v", "FloatStorage", "1", 4, 0, []int64{1}, []int64{1}, ptPkTuple(ptPkStr("2"), ptPkInt(-1), ptPkInt(2))}), st),
			`storage "1" has view metadata ("2", -1, 2) (at byte `},
		{"malicious", ptLegacyFile([]byte("\x80\x02cposix\nsystem\nX\x02\x00\x00\x00id\x85R.")), "refused global posix.system (at byte 27)"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := parseTorchLegacy(ptMem("old.pt", c.file))
			ptErrContains(t, err, "old.pt: ", c.want)
		})
	}
	b := ptLegacyGood()
	for n := 0; n < len(b); n++ {
		if idx, err := parseTorchLegacy(ptMem("old.pt", b[:n])); err == nil {
			ptCheckIndex(t, idx, "old.pt", int64(n))
		}
	}
}

func TestTorchSniff(t *testing.T) {
	head := func(b []byte) []byte {
		if len(b) > index.SniffLen {
			return b[:index.SniffLen]
		}
		return b
	}
	for _, c := range []struct {
		name       string
		b          []byte
		torch, npz bool
		npy        bool
	}{
		{"torch zip", ptGoodZip(t, "archive/"), true, false, false},
		{"torchscript first member data/0", ptZip(t, ptMember{Name: "foo/data/0"}), true, false, false},
		{"npz", ptZip(t, ptMember{Name: "weight.npy"}), false, true, false},
		{"npz long name", ptZip(t, ptMember{Name: strings.Repeat("w", 60) + ".npy"}), false, true, false},
		{"other zip", ptZip(t, ptMember{Name: "readme.txt"}), false, false, false},
		{"legacy protocol 2", ptLegacyGood(), true, false, false},
		{"legacy protocol 1", []byte("L119547037146038801333356L\n.M\xe9\x03."), true, false, false},
		{"legacy protocol 5", []byte("\x80\x05\x95\r\x00\x00\x00\x00\x00\x00\x00\x8a\nl\xfc\x9cF\xf9 j\xa8P\x19."), true, false, false},
		{"other pickle", []byte("\x80\x02\x8a\x0a\x00\x00\x00\x00\x00\x00\x00\x00\x00\x01."), false, false, false},
		{"npy", []byte("\x93NUMPY\x01\x00"), false, false, true},
		{"empty", nil, false, false, false},
	} {
		h := head(c.b)
		if Sniff(h) != c.torch || numpy.SniffNPZ(h) != c.npz || numpy.SniffNPY(h) != c.npy {
			t.Errorf("%s: torch %v npz %v npy %v", c.name, Sniff(h), numpy.SniffNPZ(h), numpy.SniffNPY(h))
		}
	}
}

// TestTorchGeneratedExpected checks the generated fixtures against
// EXPECTED.json (written by gen_fixtures.py with torch): no Python needed.
func TestTorchGeneratedExpected(t *testing.T) {
	dir := testenv.Path(t, "generated")
	raw, err := os.ReadFile(filepath.Join(dir, "EXPECTED.json"))
	if err != nil {
		testenv.SkipOrFail(t, "no EXPECTED.json: "+err.Error())
	}
	var exp struct {
		Torch map[string]struct {
			DType         string  `json:"dtype"`
			Shape         []int64 `json:"shape"`
			Stride        []int64 `json:"stride"`
			StorageOffset int64   `json:"storage_offset"`
			Contiguous    bool    `json:"contiguous"`
			SHA           string  `json:"sha256_c_order"`
		} `json:"torch_state_dict"`
	}
	if err := json.Unmarshal(raw, &exp); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ file, prefix string }{
		{"torch_mixed_zip.pt", ""}, {"torch_mixed_legacy.pt", ""}, {"torch_mixed_proto4.pt", ""}, {"torch_nested_ckpt.pt", "model/"},
	} {
		data, err := os.ReadFile(filepath.Join(dir, c.file))
		if err != nil {
			t.Fatal(err)
		}
		idx, err := ptParse(c.file, data)
		if err != nil {
			t.Fatal(err)
		}
		ptCheckIndex(t, idx, c.file, int64(len(data)))
		got := map[string]index.Tensor{}
		for _, tn := range idx.Tensors {
			got[tn.Name] = tn
		}
		if len(got) != len(exp.Torch) {
			t.Errorf("%s: %d tensors, want %d", c.file, len(got), len(exp.Torch))
		}
		for name, e := range exp.Torch {
			tn, ok := got[c.prefix+name]
			if !ok {
				t.Errorf("%s: no %s", c.file, name)
				continue
			}
			if ptDTypeNames[e.DType] != tn.DType || !reflect.DeepEqual(e.Shape, append([]int64{}, tn.Shape...)) {
				t.Errorf("%s: %s: %s %v, want %s %v", c.file, name, tn.DType, tn.Shape, e.DType, e.Shape)
			}
			if (tn.Strides == nil) != (e.Contiguous || tn.NumElements() == 0) && !index.RowMajor(e.Shape, e.Stride) {
				t.Errorf("%s: %s: strides %v, torch has %v", c.file, name, tn.Strides, e.Stride)
			}
			if h := ptSHA(ptGather(t, data, tn)); h != e.SHA {
				t.Errorf("%s: %s: bytes differ", c.file, name)
			}
		}
		if c.file == "torch_nested_ckpt.pt" {
			m, _ := idx.Metadata["meta"].(map[string]any)
			if idx.Metadata["epoch"] != int64(3) || m["lr"] != 0.01 || !reflect.DeepEqual(m["tags"], []any{"a", "b"}) {
				t.Errorf("metadata %v", idx.Metadata)
			}
		}
	}
}

// TestTorchRealFilesDetails pins down facts about real third-party files.
func TestTorchRealFilesDetails(t *testing.T) {
	for _, c := range []struct {
		rel   string
		names []string
	}{
		{"pytorch/tch-rs/foo.pt", []string{"value"}},
		{"pytorch/tch-rs/foo1.pt", nil},
		{"pytorch/mlverse-torch/linear.pt", []string{"bias", "weight"}},
		{"pytorch/candle/test_with_key.pt", []string{"model_state_dict/test"}},
		{"pytorch/candle/boolean.pt", []string{"bool"}},
		{"pytorch/candle/config.pt", nil},
		{"pytorch/gopickle/tensor_bfloat16_proto1.pt", []string{"tensor_bfloat16_proto1"}},
	} {
		data, err := os.ReadFile(testenv.Path(t, c.rel))
		if err != nil {
			testenv.SkipOrFail(t, err.Error())
		}
		idx, err := ptParse(c.rel, data)
		if err != nil {
			t.Fatalf("%s: %v", c.rel, err)
		}
		if got := ptNames(idx); !reflect.DeepEqual(got, c.names) {
			t.Errorf("%s: %v, want %v", c.rel, got, c.names)
		}
	}
}

func FuzzTorchZip(f *testing.F) {
	f.Add(ptGoodZip(f, "archive/"))
	f.Add(ptZip(f, ptMember{Name: "a/data.pkl", Data: ptTensorPickle(false, ptTS{"w", "HalfStorage", "0", 8, 1, []int64{2, 3}, []int64{1, 2}, nil})},
		ptMember{Name: "a/data/0", Data: make([]byte, 16)}, ptMember{Name: "a/byteorder", Data: []byte("big")}))
	for _, b := range ptSeedFiles("pytorch/candle/*.pt", "pytorch/tch-rs/foo.pt", "pytorch/mlverse-torch/*.pt", "pytorch/gopickle/tensor_int8_proto2_zip.pt", "generated/torch_*zip*.pt", "generated/torch_bare_tensor.pt") {
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		idx, err := ParseZip(ptMem("f.pt", b))
		if err != nil {
			if _, ok := err.(*index.FormatError); !ok {
				t.Fatalf("%T %v", err, err)
			}
			return
		}
		ptCheckIndex(t, idx, "f.pt", int64(len(b)))
	})
}

func FuzzTorchLegacy(f *testing.F) {
	f.Add(ptLegacyGood())
	for _, b := range ptSeedFiles("pytorch/gopickle/tensor_float32_proto[1-5].pt", "generated/torch_mixed_legacy.pt") {
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		idx, err := parseTorchLegacy(ptMem("f.pt", b))
		if err != nil {
			if _, ok := err.(*index.FormatError); !ok {
				t.Fatalf("%T %v", err, err)
			}
			return
		}
		ptCheckIndex(t, idx, "f.pt", int64(len(b)))
	})
}

func isDeflatedMember(m index.Member) bool { _, ok := m.Kind.(*index.Deflated); return ok }
