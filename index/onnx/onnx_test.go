package onnx

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"google.golang.org/protobuf/encoding/protowire"

	"github.com/lazyweights/tensorfs/dtype"
	"github.com/lazyweights/tensorfs/index"
)

// memFile is an index.File over bytes.
type memFile struct {
	*bytes.Reader
	name string
}

func (m memFile) Name() string { return m.name }

func mem(name string, b []byte) memFile { return memFile{bytes.NewReader(b), name} }

// msg builds a protobuf message from its fields.
type msg []byte

func (m msg) varint(n protowire.Number, v uint64) msg {
	m = protowire.AppendTag(m, n, protowire.VarintType)
	return protowire.AppendVarint(m, v)
}

func (m msg) bytes(n protowire.Number, b []byte) msg {
	m = protowire.AppendTag(m, n, protowire.BytesType)
	return protowire.AppendBytes(m, b)
}

func (m msg) str(n protowire.Number, s string) msg { return m.bytes(n, []byte(s)) }

func (m msg) fixed32(n protowire.Number, v uint32) msg {
	m = protowire.AppendTag(m, n, protowire.Fixed32Type)
	return protowire.AppendFixed32(m, v)
}

func packedVarints(vs ...int64) []byte {
	var b []byte
	for _, v := range vs {
		b = protowire.AppendVarint(b, uint64(v))
	}
	return b
}

// tensor is a TensorProto: name, data type, dims, then more fields.
func tensor(name string, dt int64, dims []int64, more msg) msg {
	m := msg(nil)
	if len(dims) > 0 {
		m = m.bytes(tensorDims, packedVarints(dims...))
	}
	m = m.varint(tensorDataType, uint64(dt)).str(tensorName, name)
	return append(m, more...)
}

func model(graph msg, more msg) []byte {
	m := msg(nil).varint(modelIRVersion, 8).str(modelProducerName, "tensorfs test")
	m = append(m, more...)
	m = m.bytes(modelGraph, graph)
	return m.bytes(modelOpsetImport, msg(nil).str(1, "").varint(2, 17))
}

func f32s(vs ...float32) []byte {
	b := make([]byte, 4*len(vs))
	for i, v := range vs {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(v))
	}
	return b
}

// decoded reads tensor t of idx from f (or its member, decoded).
func decoded(t *testing.T, idx *index.Index, f index.File, name string) []byte {
	t.Helper()
	for _, tn := range idx.Tensors {
		if tn.Name != name {
			continue
		}
		if m := idx.Member(tn.Source); m != nil {
			var b bytes.Buffer
			if err := m.Kind.(*index.Decoded).Decode(&b, f); err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			if int64(b.Len()) != tn.Size {
				t.Fatalf("%s: decoded %d bytes, want %d", name, b.Len(), tn.Size)
			}
			return b.Bytes()
		}
		if tn.Source != 0 {
			t.Fatalf("%s: in source %d", name, tn.Source)
		}
		buf := make([]byte, tn.Size)
		f.ReadAt(buf, tn.Offset)
		return buf
	}
	t.Fatalf("no tensor %q", name)
	return nil
}

// TestTypedFields: values in every typed field, packed and unpacked,
// decode to the little-endian bytes of the dtype (int32_data's float16
// and bfloat16 bit patterns, sign-extended int8), raw_data is a range,
// and a subgraph's and a function's initializers are read.
func TestTypedFields(t *testing.T) {
	i8 := msg(nil).bytes(tensorInt32Data, packedVarints(-1, 127, -128))
	unpacked := msg(nil).fixed32(tensorFloatData, math.Float32bits(1.5)).fixed32(tensorFloatData, math.Float32bits(-2))
	f16 := msg(nil).varint(tensorInt32Data, 0x3c00).varint(tensorInt32Data, 0xc000)
	i64 := msg(nil).bytes(tensorInt64Data, packedVarints(-2, 1<<40))
	dbl := msg(nil).bytes(tensorDoubleData, binary.LittleEndian.AppendUint64(nil, math.Float64bits(0.25)))
	u32 := msg(nil).bytes(tensorUint64Data, packedVarints(7, 1<<31))
	raw := msg(nil).bytes(tensorRawData, f32s(1, 2, 3))
	sub := msg(nil).str(graphName, "body").bytes(graphInitializer, tensor("in_body", 1, []int64{3}, raw))
	node := msg(nil).str(4, "If").bytes(nodeAttribute, msg(nil).str(1, "then_branch").varint(20, 5).bytes(attrG, sub))
	fnGraph := msg(nil).bytes(graphInitializer, tensor("in_function", 7, []int64{2}, i64))
	fnNode := msg(nil).bytes(nodeAttribute, msg(nil).str(1, "body").bytes(attrGraphs, fnGraph))
	g := msg(nil).bytes(graphNode, node).
		bytes(graphInitializer, tensor("i8", 3, []int64{3}, i8)).
		bytes(graphInitializer, tensor("f32", 1, []int64{2}, unpacked)).
		bytes(graphInitializer, tensor("f16", 10, []int64{2}, f16)).
		bytes(graphInitializer, tensor("bf16", 16, []int64{1}, msg(nil).varint(tensorInt32Data, 0x3f80))).
		bytes(graphInitializer, tensor("i64", 7, []int64{2}, i64)).
		bytes(graphInitializer, tensor("f64", 11, nil, dbl)).
		bytes(graphInitializer, tensor("u32", 12, []int64{2}, u32)).
		bytes(graphInitializer, tensor("strs", 8, []int64{1}, msg(nil).str(tensorStringData, "x")))
	b := model(g, msg(nil).bytes(modelMetadataProps, msg(nil).str(1, "k").str(2, "v")).bytes(modelFunctions, msg(nil).str(1, "fn").bytes(functionNode, fnNode)))
	f := mem("m.onnx", b)
	idx, err := Parse(f)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string][]byte{
		"i8":          {0xff, 0x7f, 0x80},
		"f32":         f32s(1.5, -2),
		"f16":         {0x00, 0x3c, 0x00, 0xc0},
		"bf16":        {0x80, 0x3f},
		"i64":         binary.LittleEndian.AppendUint64(binary.LittleEndian.AppendUint64(nil, uint64(0xfffffffffffffffe)), 1<<40),
		"in_function": binary.LittleEndian.AppendUint64(binary.LittleEndian.AppendUint64(nil, uint64(0xfffffffffffffffe)), 1<<40),
		"f64":         binary.LittleEndian.AppendUint64(nil, math.Float64bits(0.25)),
		"u32":         {7, 0, 0, 0, 0, 0, 0, 0x80},
		"in_body":     f32s(1, 2, 3),
	}
	for name, w := range want {
		if got := decoded(t, idx, f, name); !bytes.Equal(got, w) {
			t.Errorf("%s: % x, want % x", name, got, w)
		}
	}
	if len(idx.Tensors) != len(want) {
		t.Errorf("%d tensors, want %d", len(idx.Tensors), len(want))
	}
	if len(idx.Unserved) != 1 || idx.Unserved[0].Name != "strs" {
		t.Errorf("unserved %+v, want strs", idx.Unserved)
	}
	if idx.Metadata["ir_version"] != int64(8) || idx.Metadata["producer_name"] != "tensorfs test" ||
		idx.Metadata["metadata_props"].(map[string]any)["k"] != "v" || idx.Metadata["opset_import"].(map[string]any)[""] != int64(17) {
		t.Errorf("metadata %v", idx.Metadata)
	}
	for _, tn := range idx.Tensors {
		if tn.Name == "f64" && (tn.Shape == nil || len(tn.Shape) != 0 || tn.DType != dtype.F64) {
			t.Errorf("scalar f64: %v %v", tn.DType, tn.Shape)
		}
	}
}

// TestBadModels: malformed models are one line each, naming the file
// and where.
func TestBadModels(t *testing.T) {
	raw := msg(nil).bytes(tensorRawData, f32s(1, 2, 3))
	ext := func(kv ...string) msg {
		m := msg(nil).varint(tensorDataLocation, 1)
		for i := 0; i < len(kv); i += 2 {
			m = m.bytes(tensorExternalData, msg(nil).str(1, kv[i]).str(2, kv[i+1]))
		}
		return m
	}
	deep := tensor("deep", 1, []int64{1}, msg(nil).bytes(tensorRawData, f32s(1)))
	g := msg(nil).bytes(graphInitializer, deep)
	for i := 0; i < MaxDepth+2; i++ {
		g = msg(nil).bytes(graphNode, msg(nil).bytes(nodeAttribute, msg(nil).bytes(attrG, g)))
	}
	cases := []struct {
		name string
		b    []byte
		want string
	}{
		{"short raw", model(msg(nil).bytes(graphInitializer, tensor("w", 1, []int64{4}, raw)), nil), `initializer "w"`},
		{"too few values", model(msg(nil).bytes(graphInitializer, tensor("w", 7, []int64{3}, msg(nil).bytes(tensorInt64Data, packedVarints(1, 2)))), nil), "2 values; its dims give 3"},
		{"too many values", model(msg(nil).bytes(graphInitializer, tensor("w", 7, []int64{1}, msg(nil).bytes(tensorInt64Data, packedVarints(1, 2)))), nil), "more than the 1 values"},
		{"wrong field", model(msg(nil).bytes(graphInitializer, tensor("w", 1, []int64{1}, msg(nil).bytes(tensorInt64Data, packedVarints(1)))), nil), "typed field other than"},
		{"external alone", model(msg(nil).bytes(graphInitializer, tensor("w", 1, []int64{3}, ext("location", "w.bin"))), nil), "load the model by its path"},
		{"external length", model(msg(nil).bytes(graphInitializer, tensor("w", 1, []int64{3}, ext("location", "w.bin", "length", "8"))), nil), "length 8"},
		{"external offset", model(msg(nil).bytes(graphInitializer, tensor("w", 1, []int64{3}, ext("location", "w.bin", "offset", "-1"))), nil), "not a byte count"},
		{"overflow", model(msg(nil).bytes(graphInitializer, tensor("w", 1, []int64{1 << 40, 1 << 40}, raw)), nil), "overflow"},
		{"nested", model(g, nil), "nest more than"},
		{"cut", model(msg(nil).bytes(graphInitializer, tensor("w", 1, []int64{3}, raw)), nil)[:40], "past the end"},
	}
	for _, c := range cases {
		_, err := Parse(mem("m.onnx", c.b))
		if err == nil || !strings.Contains(err.Error(), c.want) || !strings.HasPrefix(err.Error(), "m.onnx: ") || strings.Contains(err.Error(), "\n") {
			t.Errorf("%s: %v, want one line with %q", c.name, err, c.want)
		}
	}
}

// TestSniff: every fixture model is sniffed; other formats' heads are
// not.
func TestSniff(t *testing.T) {
	if !Sniff(model(nil, nil)[:SniffHead]) {
		t.Error("a built model is not sniffed")
	}
	for _, h := range []string{"PK\x03\x04", "GGUF", "\x93NUMPY", "\x80\x02}q", "\x08\x07\x12\x03a\nb", "\x08\x00\x12\x01a", "{\"a\": 1}"} {
		if Sniff([]byte(h)) {
			t.Errorf("%q sniffed as ONNX", h)
		}
	}
}

// SniffHead is how many bytes TestSniff gives Sniff.
const SniffHead = 20

// FuzzONNX: any bytes parse or fail with one line; a parsed model's
// tensors lie inside the file, and its members decode to their size or
// fail with one line.
func FuzzONNX(f *testing.F) {
	raw := msg(nil).bytes(tensorRawData, f32s(1, 2, 3))
	f.Add(model(msg(nil).bytes(graphInitializer, tensor("w", 1, []int64{3}, raw)), nil))
	f.Add(model(msg(nil).bytes(graphInitializer, tensor("i", 7, []int64{2}, msg(nil).bytes(tensorInt64Data, packedVarints(-1, 5)))), nil))
	f.Add(model(msg(nil).bytes(graphInitializer, tensor("h", 10, []int64{1}, msg(nil).varint(tensorInt32Data, 0x3c00))), nil))
	if d := os.Getenv("TENSORFS_TESTDATA"); d != "" {
		for _, c := range []string{"onnx_inline", "onnx_mixed", "onnx_ext_one"} {
			if b, err := os.ReadFile(filepath.Join(d, "formats2", c, "model.onnx")); err == nil {
				f.Add(b)
			}
		}
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		file := mem("m.onnx", b)
		idx, err := Parse(file)
		if err != nil {
			if strings.Contains(err.Error(), "\n") {
				t.Fatalf("two lines: %v", err)
			}
			return
		}
		for _, tn := range idx.Tensors {
			if m := idx.Member(tn.Source); m != nil {
				var out bytes.Buffer
				if err := m.Kind.(*index.Decoded).Decode(&out, file); err != nil || int64(out.Len()) != m.Size {
					t.Fatalf("%s: decoded %d of %d: %v", tn.Name, out.Len(), m.Size, err)
				}
				continue
			}
			if err := index.CheckTensor(&tn, "m.onnx", int64(len(b))); err != nil {
				t.Fatal(err)
			}
		}
	})
}

// TestManyUnserved: 300,000 nameless initializers (600 KB), or 300,000
// that repeat served names, are each one entry and a count in
// idx.Unserved, bounded in bytes (issue 41: 300,000 entries, 165-191 MiB
// and as many lines), and every one of them is counted.
func TestManyUnserved(t *testing.T) {
	const n = 300_000
	one := msg(nil).bytes(tensorRawData, f32s(1))
	for _, c := range []struct {
		name  string
		graph func() msg
		kinds int
	}{
		{"nameless", func() msg {
			g := msg(nil).str(graphName, "g")
			for i := 0; i < n; i++ {
				g = g.bytes(graphInitializer, tensor("", 1, []int64{1}, nil))
			}
			return g
		}, 1},
		{"duplicate names", func() msg {
			g := msg(nil).str(graphName, "g").bytes(graphInitializer, tensor("w", 1, []int64{1}, one))
			for i := 0; i < n; i++ {
				g = g.bytes(graphInitializer, tensor("w", 1, []int64{1}, one))
			}
			return g
		}, 1},
		{"distinct duplicates", func() msg {
			g := msg(nil).str(graphName, "g")
			for i := 0; i < n/2; i++ {
				name := fmt.Sprintf("w%d", i)
				g = g.bytes(graphInitializer, tensor(name, 1, []int64{1}, one)).bytes(graphInitializer, tensor(name, 1, []int64{1}, one))
			}
			return g
		}, 1},
	} {
		t.Run(c.name, func(t *testing.T) {
			b := model(c.graph(), nil)
			idx, err := Parse(mem("m.onnx", b))
			if err != nil {
				t.Fatal(err)
			}
			total, bytes := int64(0), 0
			kinds := map[string]bool{}
			for _, u := range idx.Unserved {
				total += 1 + u.More
				bytes += len(u.Name) + len(u.Why) + len(u.Type) + 8*len(u.Shape) + 96
				kinds[u.Why] = true
			}
			want := int64(n)
			if c.name == "distinct duplicates" {
				want = n / 2
			}
			if total != want || bytes > index.MaxUnservedBytes || len(kinds) != c.kinds {
				t.Fatalf("%d entries standing for %d (want %d), %d bytes (at most %d), %d kinds (want %d)", len(idx.Unserved), total, want, bytes, index.MaxUnservedBytes, len(kinds), c.kinds)
			}
		})
	}
}
