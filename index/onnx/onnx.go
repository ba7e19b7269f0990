package onnx

import (
	"crypto/sha1"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"google.golang.org/protobuf/encoding/protowire"

	"github.com/lazyweights/tensorfs/dtype"
	"github.com/lazyweights/tensorfs/index"
)

// Named caps. A model over them is refused, one line.
const (
	// MaxFields caps the protobuf fields walked in one model (nodes'
	// inputs and outputs included).
	MaxFields = 1 << 27
	// MaxDepth caps how deep graphs nest (If/Loop/Scan bodies, graphs of
	// functions' nodes).
	MaxDepth = 32
	// MaxString caps a string the index keeps (names, metadata).
	MaxString = index.MaxNameLength
	// MaxMetadataProps caps metadata_props entries kept.
	MaxMetadataProps = 10_000
	// MaxTypedBytes caps the TensorProto of one tensor stored in typed
	// fields (float_data, int32_data, int64_data, double_data,
	// uint64_data): it is read whole when the tensor is decoded.
	MaxTypedBytes = 64 << 20
	// MaxTypedTotal caps the typed-field tensors of one model together:
	// each is scanned at load and decoded (into the inflate cache) on
	// first read.
	MaxTypedTotal = 1 << 30
)

// ModelProto, GraphProto, NodeProto, AttributeProto, FunctionProto,
// TensorProto field numbers (onnx/onnx.proto, ir_version 11).
const (
	modelIRVersion       = 1
	modelProducerName    = 2
	modelProducerVersion = 3
	modelDomain          = 4
	modelModelVersion    = 5
	modelGraph           = 7
	modelOpsetImport     = 8
	modelMetadataProps   = 14
	modelTrainingInfo    = 20
	modelFunctions       = 25

	graphNode              = 1
	graphName              = 2
	graphInitializer       = 5
	graphSparseInitializer = 15

	nodeAttribute = 5

	attrG      = 6
	attrGraphs = 11

	functionNode = 7

	trainingInitialization = 1
	trainingAlgorithm      = 2

	tensorDims         = 1
	tensorDataType     = 2
	tensorSegment      = 3
	tensorFloatData    = 4
	tensorInt32Data    = 5
	tensorStringData   = 6
	tensorInt64Data    = 7
	tensorName         = 8
	tensorRawData      = 9
	tensorDoubleData   = 10
	tensorUint64Data   = 11
	tensorExternalData = 13
	tensorDataLocation = 14

	sparseValues = 1
)

// dataTypes maps TensorProto.DataType to dtypes, and to the typed field
// that holds its values when raw_data does not (onnx.proto's comments on
// each field).
var dataTypes = map[int64]struct {
	dt    dtype.DType
	field protowire.Number
}{
	1:  {dtype.F32, tensorFloatData},
	2:  {dtype.U8, tensorInt32Data},
	3:  {dtype.I8, tensorInt32Data},
	4:  {dtype.U16, tensorInt32Data},
	5:  {dtype.I16, tensorInt32Data},
	6:  {dtype.I32, tensorInt32Data},
	7:  {dtype.I64, tensorInt64Data},
	9:  {dtype.Bool, tensorInt32Data},
	10: {dtype.F16, tensorInt32Data},
	11: {dtype.F64, tensorDoubleData},
	12: {dtype.U32, tensorUint64Data},
	13: {dtype.U64, tensorUint64Data},
	14: {dtype.C64, tensorFloatData},
	15: {dtype.C128, tensorDoubleData},
	16: {dtype.BF16, tensorInt32Data},
	17: {dtype.F8E4M3, tensorInt32Data},
	18: {dtype.F8E4M3FNUZ, tensorInt32Data},
	19: {dtype.F8E5M2, tensorInt32Data},
	20: {dtype.F8E5M2FNUZ, tensorInt32Data},
	23: {dtype.F4, tensorInt32Data},
	24: {dtype.F8E8M0, tensorInt32Data},
}

// typeNames names the data types tensorfs has no dtype for (Unserved).
var typeNames = map[int64]string{0: "UNDEFINED", 8: "STRING", 21: "UINT4", 22: "INT4", 25: "UINT2", 26: "INT2"}

// Sniff reports whether head looks like an ONNX ModelProto: its
// ir_version (field 1, 1..30) first, then another ModelProto field of
// the right wire type. Protobuf has no magic number; every ONNX writer
// (onnx, torch.onnx, onnxruntime, ir-py) writes ir_version first.
func Sniff(head []byte) bool {
	num, typ, n := protowire.ConsumeTag(head)
	if n < 0 || num != modelIRVersion || typ != protowire.VarintType {
		return false
	}
	v, m := protowire.ConsumeVarint(head[n:])
	if m < 0 || v < 1 || v > 30 {
		return false
	}
	rest := head[n+m:]
	num, typ, k := protowire.ConsumeTag(rest)
	if k < 0 {
		return false
	}
	switch num {
	case modelProducerName, modelProducerVersion, modelDomain, 6, modelGraph, modelOpsetImport, modelMetadataProps, modelFunctions:
		if typ != protowire.BytesType {
			return false
		}
		l, j := protowire.ConsumeVarint(rest[k:])
		if j < 0 {
			return len(rest[k:]) < binaryMaxVarint // cut off by the head
		}
		if num == modelProducerName || num == modelProducerVersion || num == modelDomain {
			s := rest[k+j:]
			if uint64(len(s)) > l {
				s = s[:l]
			}
			for _, c := range s {
				if c < 0x20 || c == 0x7f {
					return false
				}
			}
		}
		return true
	case modelModelVersion:
		return typ == protowire.VarintType
	}
	return false
}

// Parse reads a model alone: one whose tensors are all inside it.
func Parse(f index.File) (*index.Index, error) { return ParseSiblings(f, nil) }

// ParseEnv reads a model, opening its external data through
// env.Siblings: the format table's parser (formats.Format.Parse).
func ParseEnv(f index.File, env index.Env) (*index.Index, error) {
	return ParseSiblings(f, env.Siblings)
}

// parser holds one model's parse.
type parser struct {
	w     *walker
	file  string
	open  index.Opener
	idx   *index.Index
	files map[string]int // external data files by name: their Sources index
	names map[string]string
	// unserved is what becomes idx.Unserved, bounded in bytes: a model
	// of 300,000 nameless initializers is one entry and a count.
	unserved index.UnservedList
	typed    []typedTensor
	typedSz  int64
}

// typedTensor is a tensor whose values are in a typed field: its
// TensorProto is [off, off+n) of the model; it becomes a MethodDecode
// member once the files are all known.
type typedTensor struct {
	tensor int // index into idx.Tensors
	off, n int64
	field  protowire.Number
	dt     dtype.DType
	count  int64 // values in the field (elements, twice for complex)
}

// ParseSiblings reads a model, opening the files its external_data
// entries name through open (nil: such a tensor is an error).
func ParseSiblings(f index.File, open index.Opener) (*index.Index, error) {
	p := &parser{
		w: &walker{f: f, size: f.Size()}, file: f.Name(), open: open,
		idx:   &index.Index{Format: "onnx", Sources: []string{f.Name()}, Metadata: map[string]any{}},
		files: map[string]int{}, names: map[string]string{},
	}
	if err := p.model(); err != nil {
		var fe *index.FormatError
		if errors.As(err, &fe) {
			return nil, err
		}
		return nil, &index.FormatError{File: p.file, Offset: -1, Msg: "ONNX model: " + err.Error()}
	}
	// Typed-field tensors become members, numbered after the files.
	for _, tt := range p.typed {
		t := &p.idx.Tensors[tt.tensor]
		src := len(p.idx.Sources)
		t.Source = src
		p.idx.Sources = append(p.idx.Sources, "")
		p.idx.Members = append(p.idx.Members, index.Member{
			Source: src, File: 0, Name: t.Name, Size: t.Size,
			Kind: &index.Decoded{Decode: tt.decoder(), Read: []index.Part{{Source: 0, Offset: tt.off, Size: tt.n}}},
		})
	}
	p.idx.Unserved = p.unserved.List()
	if len(p.idx.Tensors) == 0 && len(p.idx.Unserved) == 0 {
		p.idx.Notes = append(p.idx.Notes, "the model has no initializers")
	}
	return p.idx, nil
}

func (p *parser) model() error {
	var opsets map[string]any
	var props map[string]any
	for pos, end := int64(0), p.w.size; pos < end; {
		fd, next, err := p.w.next(pos, end)
		if err != nil {
			return err
		}
		pos = next
		switch fd.num {
		case modelIRVersion:
			p.idx.Metadata["ir_version"] = int64(fd.val)
		case modelModelVersion:
			p.idx.Metadata["model_version"] = int64(fd.val)
		case modelProducerName, modelProducerVersion, modelDomain:
			key := map[protowire.Number]string{modelProducerName: "producer_name", modelProducerVersion: "producer_version", modelDomain: "domain"}[fd.num]
			s, err := p.w.str(fd, key)
			if err != nil {
				return err
			}
			p.idx.Metadata[key] = s
		case modelGraph:
			if err := p.graph(fd, "graph", 0); err != nil {
				return err
			}
		case modelOpsetImport:
			kv, err := p.pair(fd, "opset_import", 1, 2, true)
			if err != nil {
				return err
			}
			if opsets == nil {
				opsets = map[string]any{}
				p.idx.Metadata["opset_import"] = opsets
			}
			if len(opsets) < MaxMetadataProps {
				opsets[kv.key] = kv.num
			}
		case modelMetadataProps:
			kv, err := p.pair(fd, "metadata_props", 1, 2, false)
			if err != nil {
				return err
			}
			if props == nil {
				props = map[string]any{}
				p.idx.Metadata["metadata_props"] = props
			}
			if len(props) < MaxMetadataProps {
				props[kv.key] = kv.val
			}
		case modelTrainingInfo:
			if err := p.sub(fd, "training_info", 0, map[protowire.Number]string{trainingInitialization: "initialization", trainingAlgorithm: "algorithm"}); err != nil {
				return err
			}
		case modelFunctions:
			if err := p.function(fd, 0); err != nil {
				return err
			}
		}
	}
	return nil
}

type keyValue struct {
	key, val string
	num      int64
}

// pair reads a two-field message (StringStringEntryProto, an
// OperatorSetIdProto): a string key, then a string or int64 value.
func (p *parser) pair(fd field, what string, kf, vf protowire.Number, numeric bool) (keyValue, error) {
	var kv keyValue
	if err := message(fd, what); err != nil {
		return kv, err
	}
	for pos, end := fd.off, fd.off+fd.n; pos < end; {
		g, next, err := p.w.next(pos, end)
		if err != nil {
			return kv, err
		}
		pos = next
		switch {
		case g.num == kf:
			if kv.key, err = p.w.str(g, what+" key"); err != nil {
				return kv, err
			}
		case g.num == vf && numeric:
			kv.num = int64(g.val)
		case g.num == vf:
			if kv.val, err = p.w.str(g, what+" value"); err != nil {
				return kv, err
			}
		}
	}
	return kv, nil
}

// sub walks a message whose fields graphs holds are graphs (a
// TrainingInfoProto).
func (p *parser) sub(fd field, what string, depth int, graphs map[protowire.Number]string) error {
	if err := message(fd, what); err != nil {
		return err
	}
	for pos, end := fd.off, fd.off+fd.n; pos < end; {
		g, next, err := p.w.next(pos, end)
		if err != nil {
			return err
		}
		pos = next
		if name, ok := graphs[g.num]; ok {
			if err := p.graph(g, what+"."+name, depth+1); err != nil {
				return err
			}
		}
	}
	return nil
}

// graph walks a GraphProto: its initializers, and its nodes' subgraphs.
func (p *parser) graph(fd field, where string, depth int) error {
	if depth > MaxDepth {
		return fmt.Errorf("graphs nest more than %d deep (at byte %d)", MaxDepth, fd.at)
	}
	if err := message(fd, where); err != nil {
		return err
	}
	for pos, end := fd.off, fd.off+fd.n; pos < end; {
		g, next, err := p.w.next(pos, end)
		if err != nil {
			return err
		}
		pos = next
		switch g.num {
		case graphName:
			if depth > 0 {
				if name, err := p.w.str(g, "graph name"); err == nil && name != "" {
					where = name
				}
			}
		case graphInitializer:
			if err := p.tensor(g, where); err != nil {
				return err
			}
		case graphSparseInitializer:
			if err := p.sparse(g, where); err != nil {
				return err
			}
		case graphNode:
			if err := p.node(g, where, depth); err != nil {
				return err
			}
		}
	}
	return nil
}

// node walks a NodeProto's attributes for subgraphs (GRAPH, GRAPHS).
func (p *parser) node(fd field, where string, depth int) error {
	if err := message(fd, "node"); err != nil {
		return err
	}
	for pos, end := fd.off, fd.off+fd.n; pos < end; {
		g, next, err := p.w.next(pos, end)
		if err != nil {
			return err
		}
		pos = next
		if g.num != nodeAttribute {
			continue
		}
		if err := message(g, "node attribute"); err != nil {
			return err
		}
		for apos, aend := g.off, g.off+g.n; apos < aend; {
			a, anext, err := p.w.next(apos, aend)
			if err != nil {
				return err
			}
			apos = anext
			if a.num == attrG || a.num == attrGraphs {
				if err := p.graph(a, where+" subgraph", depth+1); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// function walks a FunctionProto's nodes.
func (p *parser) function(fd field, depth int) error {
	if err := message(fd, "function"); err != nil {
		return err
	}
	for pos, end := fd.off, fd.off+fd.n; pos < end; {
		g, next, err := p.w.next(pos, end)
		if err != nil {
			return err
		}
		pos = next
		if g.num == functionNode {
			if err := p.node(g, "function", depth+1); err != nil {
				return err
			}
		}
	}
	return nil
}

// sparse lists a sparse initializer as unserved.
func (p *parser) sparse(fd field, where string) error {
	if err := message(fd, "sparse_initializer"); err != nil {
		return err
	}
	name := ""
	for pos, end := fd.off, fd.off+fd.n; pos < end; {
		g, next, err := p.w.next(pos, end)
		if err != nil {
			return err
		}
		pos = next
		if g.num == sparseValues && g.typ == protowire.BytesType {
			t, err := p.tensorProto(g)
			if err != nil {
				return err
			}
			name = t.name
		}
	}
	p.unserved.Add(index.Unserved{Name: name, Type: "sparse_initializer", Offset: -1,
		Why: "a sparse tensor (SparseTensorProto: values and indices), which tensorfs does not serve"})
	return nil
}

// tensorProto is what a TensorProto says.
type tensorProto struct {
	name       string
	dims       []int64
	dataType   int64
	raw        *field
	external   map[string]string
	extOrder   []string
	location   int64
	typed      map[protowire.Number]int64 // typed field -> bytes of it
	strings    bool
	segment    bool
	at, off, n int64
}

func (p *parser) tensorProto(fd field) (*tensorProto, error) {
	if err := message(fd, "initializer"); err != nil {
		return nil, err
	}
	t := &tensorProto{at: fd.at, off: fd.off, n: fd.n, typed: map[protowire.Number]int64{}}
	for pos, end := fd.off, fd.off+fd.n; pos < end; {
		g, next, err := p.w.next(pos, end)
		if err != nil {
			return nil, err
		}
		pos = next
		switch g.num {
		case tensorDims:
			if t.dims, err = p.w.int64s(t.dims, g, index.MaxDims, "dims"); err != nil {
				return nil, err
			}
		case tensorDataType:
			t.dataType = int64(int32(g.val))
		case tensorSegment:
			t.segment = true
		case tensorName:
			if t.name, err = p.w.str(g, "tensor name"); err != nil {
				return nil, err
			}
		case tensorRawData:
			if g.typ != protowire.BytesType {
				return nil, fmt.Errorf("raw_data at byte %d is not bytes", g.at)
			}
			g := g
			t.raw = &g
		case tensorExternalData:
			kv, err := p.pair(g, "external_data", 1, 2, false)
			if err != nil {
				return nil, err
			}
			if t.external == nil {
				t.external = map[string]string{}
			}
			if _, dup := t.external[kv.key]; !dup {
				t.extOrder = append(t.extOrder, kv.key)
			}
			t.external[kv.key] = kv.val
		case tensorDataLocation:
			t.location = int64(g.val)
		case tensorFloatData, tensorInt32Data, tensorInt64Data, tensorDoubleData, tensorUint64Data:
			t.typed[g.num] += next - g.at
		case tensorStringData:
			t.strings = true
		}
	}
	return t, nil
}

// tensor reads one initializer of graph where into the index.
func (p *parser) tensor(fd field, where string) error {
	t, err := p.tensorProto(fd)
	if err != nil {
		return err
	}
	at := fmt.Sprintf("initializer %q", t.name)
	fail := func(format string, args ...any) error {
		return &index.FormatError{File: p.file, Offset: t.at, Where: at, Msg: "ONNX model: " + fmt.Sprintf(format, args...)}
	}
	if len(p.idx.Tensors)+p.unserved.Len() >= index.MaxTensors {
		return fail("more than %d tensors", index.MaxTensors)
	}
	unserved := func(typ, why string) error {
		p.unserved.Add(index.Unserved{Name: t.name, Type: typ, Shape: t.dims, Offset: -1, Why: why})
		return nil
	}
	if t.name == "" {
		return unserved("", "an initializer without a name (in "+where+")")
	}
	if other, dup := p.names[t.name]; dup {
		return unserved(typeName(t.dataType), fmt.Sprintf("another initializer has this name (in %s; this one is in %s)", other, where))
	}
	p.names[t.name] = where
	dt, known := dataTypes[t.dataType]
	switch {
	case !known:
		return unserved(typeName(t.dataType), "data type "+typeName(t.dataType)+", which tensorfs has no dtype for")
	case t.segment:
		return unserved(typeName(t.dataType), "a segment of a tensor (TensorProto.segment), which tensorfs does not join")
	}
	n, ok := index.Elements(t.dims)
	if !ok {
		return fail("dims %s overflow", index.ShapeString(t.dims))
	}
	size, ok := dt.dt.ByteSize(n)
	if !ok {
		return fail("dims %s overflow for %s", index.ShapeString(t.dims), dt.dt)
	}
	tensor := index.Tensor{Name: t.name, DType: dt.dt, Shape: t.dims, Size: size}
	if tensor.Shape == nil {
		tensor.Shape = []int64{}
	}
	switch {
	case t.location == 1 || t.external != nil:
		if t.raw != nil || len(t.typed) > 0 {
			return fail("data both external and in the model")
		}
		if err := p.external(t, &tensor, at); err != nil {
			return err
		}
	case t.raw != nil:
		if len(t.typed) > 0 {
			return fail("data both in raw_data and in a typed field")
		}
		if t.raw.n != size {
			return fail("raw_data is %d bytes; %s %s needs %d", t.raw.n, dt.dt, index.ShapeString(t.dims), size)
		}
		tensor.Offset = t.raw.off
	case len(t.typed) > 0:
		if len(t.typed) > 1 || t.typed[dt.field] == 0 {
			return fail("values in a typed field other than the one onnx.proto gives %s", typeName(t.dataType))
		}
		if dt.dt == dtype.F4 {
			return unserved(typeName(t.dataType), "FLOAT4E2M1 values in int32_data (two per value), which tensorfs does not unpack")
		}
		if t.n > MaxTypedBytes {
			return fail("its values are in a typed field (%s) of %d bytes, over the limit of %d; tensorfs reads large tensors from raw_data or external data", fieldName(dt.field), t.n, MaxTypedBytes)
		}
		if p.typedSz += t.n; p.typedSz > MaxTypedTotal {
			return fail("the model's tensors in typed fields are over %d bytes together", int64(MaxTypedTotal))
		}
		tt := typedTensor{tensor: len(p.idx.Tensors), off: t.off, n: t.n, field: dt.field, dt: dt.dt, count: n}
		if dt.dt.Kind() == dtype.KindComplex {
			tt.count = 2 * n
		}
		// Check the values now: a bad tensor fails the load, not a read.
		buf := make([]byte, t.n)
		if _, err := p.w.f.ReadAt(buf, t.off); err != nil {
			return fail("cannot read it: %v", err)
		}
		if err := tt.decode(discard{}, buf); err != nil {
			return fail("%v", err)
		}
		p.typed = append(p.typed, tt)
	case t.strings:
		return unserved("STRING", "string_data, which tensorfs does not serve")
	case n == 0:
	default:
		return fail("no data: no raw_data, typed field or external_data for %s %s", dt.dt, index.ShapeString(t.dims))
	}
	p.idx.Tensors = append(p.idx.Tensors, tensor)
	return nil
}

// external places a tensor whose data_location is EXTERNAL: a range of
// the file its location names, confined to the model's directory.
func (p *parser) external(t *tensorProto, tensor *index.Tensor, at string) error {
	fail := func(format string, args ...any) error {
		return &index.FormatError{File: p.file, Offset: t.at, Where: at, Msg: "ONNX model: " + fmt.Sprintf(format, args...)}
	}
	loc, ok := t.external["location"]
	if !ok {
		return fail("external data without a location")
	}
	num := func(key string) (int64, bool, error) {
		s, ok := t.external[key]
		if !ok {
			return 0, false, nil
		}
		v, err := strconv.ParseInt(strings.TrimSpace(s), 10, 64)
		if err != nil || v < 0 {
			return 0, true, fail("external data %s %q is not a byte count", key, s)
		}
		return v, true, nil
	}
	off, _, err := num("offset")
	if err != nil {
		return err
	}
	length, hasLength, err := num("length")
	if err != nil {
		return err
	}
	if hasLength && length != tensor.Size {
		return fail("external data length %d; %s %s needs %d", length, tensor.DType, index.ShapeString(tensor.Shape), tensor.Size)
	}
	if p.open == nil {
		return fail("its data is in %q beside the model; load the model by its path so that tensorfs opens it", loc)
	}
	f, err := p.open(loc)
	if err != nil {
		return fail("external data: %v", err)
	}
	if off > f.Size() || tensor.Size > f.Size()-off {
		return fail("external data [%d, +%d) is past the end of %s (%d bytes)", off, tensor.Size, loc, f.Size())
	}
	src, seen := p.files[f.Name()]
	if !seen {
		src = len(p.idx.Sources)
		p.files[f.Name()] = src
		p.idx.Sources = append(p.idx.Sources, f.Name())
	}
	tensor.Source, tensor.Offset = src, off
	if sum, ok := t.external["checksum"]; ok {
		b, err := hex.DecodeString(strings.TrimSpace(sum))
		if err != nil || len(b) != sha1.Size {
			p.idx.Notes = append(p.idx.Notes, fmt.Sprintf("tensor %q: external data checksum %q is not a SHA-1 in hex: the tensor's bytes are not checked", t.name, index.Printable(sum)))
		} else {
			tensor.Check = &index.Check{Member: loc, Offset: off, Size: tensor.Size, SHA1: b}
		}
	}
	return nil
}

func typeName(t int64) string {
	if s, ok := typeNames[t]; ok {
		return s
	}
	if d, ok := dataTypes[t]; ok {
		return d.dt.String()
	}
	return fmt.Sprintf("data type %d", t)
}

func fieldName(n protowire.Number) string {
	return map[protowire.Number]string{tensorFloatData: "float_data", tensorInt32Data: "int32_data", tensorInt64Data: "int64_data",
		tensorDoubleData: "double_data", tensorUint64Data: "uint64_data"}[n]
}
