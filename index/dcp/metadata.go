package dcp

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"strings"

	"github.com/lazyweights/tensorfs/dtype"
	"github.com/lazyweights/tensorfs/index"
	"github.com/lazyweights/tensorfs/index/pickle"
)

// MaxMetadata caps the bytes of a .metadata file.
const MaxMetadata = 1 << 30

// MaxChunks caps the chunks of one tensor (backing.MaxTiles).
const MaxChunks = 1 << 16

// MetadataName is the file that makes a directory a distributed
// checkpoint.
const MetadataName = ".metadata"

// Sniff reports whether head, the first bytes of a .metadata file, is a
// pickle naming torch.distributed.checkpoint's classes.
func Sniff(head []byte) bool {
	return len(head) >= 2 && head[0] == 0x80 && head[1] >= 2 && head[1] <= 5 &&
		bytes.Contains(head, []byte("torch.distributed.checkpoint"))
}

// SniffLen is how many leading bytes Sniff needs.
const SniffLen = 128

// Metadata is what a .metadata file says.
type Metadata struct {
	Tensors []TensorMeta // in the pickle's order
	Bytes   []string     // keys (fqn) of the non-tensor items, in order
	// Planner maps a key to its path in the saved state dict.
	Planner map[string][]string
	// NotRead says why a tensor (by key) is not served.
	NotRead map[string]string
	// Reformulated maps a key Megatron's torch_dist saved in a
	// reformulated shape to the shape the model holds (mcore_data's
	// nd_reformulated_orig_global_shape).
	Reformulated map[string][]int64
	// Storage maps an item (its key and chunk offsets, itemKey) to where
	// its bytes are.
	Storage map[string]Item
}

// TensorMeta is one tensor's entry of state_dict_metadata.
type TensorMeta struct {
	FQN    string
	DType  dtype.DType
	Size   []int64
	Chunks []ChunkMeta
	// X2 marks a torch.float4_e2m1fn_x2 tensor (DType F4): Size and its
	// chunks count torch's elements, bytes of two F4 elements each (the
	// even one in the low nibble); it is served as F4 of ElemShape.
	X2 bool
}

// ElemShape is s (the tensor's size or a chunk's, in torch's elements)
// in elements of DType: for an X2 tensor the last dimension doubled, [2]
// for a 0-d one (what safetensors' torch writer stores); else s.
func (t TensorMeta) ElemShape(s []int64) []int64 {
	if !t.X2 {
		return s
	}
	if len(s) == 0 {
		return []int64{2}
	}
	out := slices.Clone(s)
	out[len(out)-1] *= 2 // checked not to overflow (reader.tensor)
	return out
}

// bytes is the byte size of a box of shape s (torch's elements).
func (t TensorMeta) bytes(s []int64) (int64, bool) {
	n, ok := index.Elements(s)
	if !ok {
		return 0, false
	}
	if t.X2 {
		return n, true
	}
	return t.DType.ByteSize(n)
}

// ChunkMeta is one chunk of a tensor: its box in the whole.
type ChunkMeta struct {
	Offsets, Sizes []int64
}

// Item is where one saved item lies: bytes [Offset, Offset+Length) of
// RelativePath in the checkpoint's directory.
type Item struct {
	RelativePath   string
	Offset, Length int64
	// Transform is how the bytes are stored (_StorageInfo's
	// transform_descriptors, torch >= 2.7): "" as they are, TransformZstd
	// a zstd stream of them, anything else (a descriptor tensorfs does
	// not know, as the pickle spells it) not read.
	Transform string
}

// TransformZstd is the one transform tensorfs reads: torch's
// ZStandardTransform, the item a zstd stream of the torch.save zip.
const TransformZstd = "stream.zstd/1"

// itemKey is the Storage key of the item of key fqn at chunk offsets
// (nil for a non-tensor item).
func itemKey(fqn string, offsets []int64) string {
	if offsets == nil {
		return fqn + "\x00"
	}
	return fmt.Sprintf("%s\x00%v", fqn, offsets)
}

// The classes a .metadata file may name (module.name), with what they are.
var classes = map[string]string{
	"torch.distributed.checkpoint.metadata.Metadata":                       "Metadata",
	"torch.distributed.checkpoint.metadata.TensorStorageMetadata":          "TensorStorageMetadata",
	"torch.distributed.checkpoint.metadata.BytesStorageMetadata":           "BytesStorageMetadata",
	"torch.distributed.checkpoint.metadata.ChunkStorageMetadata":           "ChunkStorageMetadata",
	"torch.distributed.checkpoint.metadata.TensorProperties":               "TensorProperties",
	"torch.distributed._shard.sharded_tensor.metadata.TensorProperties":    "TensorProperties", // torch 2.0-2.2's path
	"torch.distributed.checkpoint.metadata.MetadataIndex":                  "MetadataIndex",
	"torch.distributed.checkpoint.metadata.StorageMeta":                    "StorageMeta",
	"torch.distributed.checkpoint.metadata._MEM_FORMAT_ENCODING":           "enum",
	"torch.distributed._shard.sharded_tensor.metadata.MEM_FORMAT_ENCODING": "enum",
	"torch.distributed.checkpoint.filesystem._StorageInfo":                 "_StorageInfo",
	"torch.serialization._get_layout":                                      "layout",
	"torch.Size":                                                           "Size",
	"pathlib.PosixPath":                                                    "path",
	"pathlib._local.PosixPath":                                             "path",
	"pathlib.PurePosixPath":                                                "path",
	"pathlib.WindowsPath":                                                  "path",
	"pathlib._local.WindowsPath":                                           "path",
	"collections.OrderedDict":                                              "plain",
}

// torchDTypes are the dtypes a tensor's properties may name.
var torchDTypes = map[string]dtype.DType{
	"float32": dtype.F32, "float64": dtype.F64, "float16": dtype.F16, "bfloat16": dtype.BF16,
	"int64": dtype.I64, "int32": dtype.I32, "int16": dtype.I16, "int8": dtype.I8,
	"uint8": dtype.U8, "uint16": dtype.U16, "uint32": dtype.U32, "uint64": dtype.U64,
	"bool": dtype.Bool, "complex64": dtype.C64, "complex128": dtype.C128, "complex32": dtype.C32,
	"float8_e4m3fn": dtype.F8E4M3, "float8_e5m2": dtype.F8E5M2, "float8_e8m0fnu": dtype.F8E8M0,
	"float4_e2m1fn_x2": dtype.F4, // one torch element: a byte of two (TensorMeta.X2)
}

// env interprets a .metadata pickle: the DCP dataclasses and what they
// hold are opaque objects walked afterwards; every other global is
// refused where it appears.
type env struct{ pickle.PlainEnv }

func (e env) Global(m *pickle.Machine, module, name string, off int64) (any, error) {
	full := module + "." + name
	if _, ok := classes[full]; ok {
		return &pickle.Global{Module: module, Name: name}, nil
	}
	if module == "torch" {
		if _, ok := torchDTypes[name]; ok {
			return &pickle.Global{Module: module, Name: name}, nil
		}
	}
	if module == "builtins" {
		switch name {
		case "set", "frozenset", "tuple", "list", "dict", "complex", "bytes", "bytearray":
			return e.PlainEnv.Global(m, module, name, off)
		}
	}
	what := ""
	switch {
	case strings.HasPrefix(full, "torch.distributed.checkpoint._extension"):
		what = " (a torch >= 2.7 extension: tensorfs does not read it)"
	case strings.HasPrefix(full, "torch.distributed.checkpoint"):
		what = " (a torch.distributed.checkpoint class tensorfs does not know)"
	}
	return nil, m.Errorf(off, "the pickle names %s, which is not one of the classes of a distributed checkpoint's metadata%s", full, what)
}

// ReadMetadata reads and checks a .metadata file.
func ReadMetadata(f index.File) (*Metadata, error) {
	size := f.Size()
	if size > MaxMetadata {
		return nil, index.Errorf(f.Name(), -1, "%d bytes, over the limit of %d for a distributed checkpoint's metadata", size, MaxMetadata)
	}
	m := pickle.NewMachine(io.NewSectionReader(f, 0, size), size, env{})
	v, err := m.Run()
	if err != nil {
		var fe *index.FormatError
		if errors.As(err, &fe) {
			return nil, fe
		}
		var pe *pickle.Error
		if errors.As(err, &pe) {
			return nil, index.Errorf(f.Name(), pe.Off, "%s", pe.Msg)
		}
		return nil, index.Errorf(f.Name(), -1, "cannot read: %v", err)
	}
	r := &reader{file: f.Name(), budget: pickle.NewBudget(size)}
	md, err := r.metadata(v)
	if err != nil {
		return nil, err
	}
	return md, nil
}

// reader walks the unpickled value.
type reader struct {
	file   string
	budget *pickle.Budget
}

func (r *reader) errorf(where, format string, args ...any) error {
	return index.ErrorAt(r.file, where, format, args...)
}

// class returns the kind (classes) of an instance v of a known class.
func class(v any) (string, *pickle.Object) {
	o, ok := v.(*pickle.Object)
	if !ok {
		return "", nil
	}
	g, ok := o.Class.(*pickle.Global)
	if !ok {
		return "", nil
	}
	return classes[g.Module+"."+g.Name], o
}

// fields returns the attributes of a dataclass instance of kind want (one
// BUILD state, a dict of str keys, each once; NEWOBJ with no arguments).
func (r *reader) fields(v any, want, where string) (map[string]any, error) {
	kind, o := class(v)
	if kind != want {
		return nil, r.errorf(where, "want a %s, found %s", want, pickle.Repr(v, 80))
	}
	if len(o.Args) != 0 || o.Kwargs != nil || len(o.State) != 1 || o.Items != nil || o.List != nil {
		return nil, r.errorf(where, "a %s built in a way torch does not write", want)
	}
	d, ok := o.State[0].(*pickle.Dict)
	if !ok {
		return nil, r.errorf(where, "a %s whose state is %s, not a dict", want, pickle.TypeName(o.State[0]))
	}
	out := make(map[string]any, d.Len())
	for i, k := range d.Keys {
		s, ok := k.(string)
		if !ok {
			return nil, r.errorf(where, "a %s attribute named %s", want, pickle.Repr(k, 40))
		}
		if _, dup := out[s]; dup {
			return nil, r.errorf(where, "the %s attribute %q is set twice", want, s)
		}
		out[s] = d.Vals[i]
	}
	return out, nil
}

// known refuses attributes outside names.
func (r *reader) known(f map[string]any, what, where string, names ...string) error {
	for k := range f {
		ok := false
		for _, n := range names {
			ok = ok || k == n
		}
		if !ok {
			return r.errorf(where, "the %s has an attribute %q, which tensorfs does not know (a newer torch?)", what, k)
		}
	}
	return nil
}

// size reads a torch.Size (or a tuple) of non-negative ints.
func (r *reader) size(v any, where string) ([]int64, error) {
	if kind, o := class(v); kind == "Size" {
		if len(o.Args) != 1 || len(o.State) != 0 {
			return nil, r.errorf(where, "a torch.Size built in a way torch does not write")
		}
		v = o.Args[0]
	}
	items, ok := v.(pickle.Tuple)
	if !ok {
		if l, isList := v.(*pickle.List); isList {
			items, ok = l.Items, true
		}
	}
	if !ok {
		return nil, r.errorf(where, "want a torch.Size, found %s", pickle.Repr(v, 60))
	}
	if len(items) > index.MaxDims {
		return nil, r.errorf(where, "%d dimensions (at most %d)", len(items), index.MaxDims)
	}
	out := make([]int64, len(items))
	for i, it := range items {
		n, ok := it.(int64)
		if !ok || n < 0 {
			return nil, r.errorf(where, "want a size, found %s", pickle.Repr(it, 40))
		}
		out[i] = n
	}
	return out, nil
}

func (r *reader) metadata(v any) (*Metadata, error) {
	f, err := r.fields(v, "Metadata", "the pickle")
	if err != nil {
		return nil, err
	}
	if err := r.known(f, "Metadata", "Metadata", "state_dict_metadata", "planner_data", "storage_data", "storage_meta", "version", "mcore_data"); err != nil {
		return nil, err
	}
	md := &Metadata{Planner: map[string][]string{}, Storage: map[string]Item{}, NotRead: map[string]string{}, Reformulated: map[string][]int64{}}
	if mc, ok := f["mcore_data"]; ok && !pickle.Empty(mc) {
		if err := r.mcoreData(md, mc); err != nil {
			return nil, err
		}
	}
	seen, err := r.stateDictMetadata(md, f["state_dict_metadata"])
	if err != nil {
		return nil, err
	}
	if pd, ok := f["planner_data"]; ok && !pickle.Empty(pd) {
		if err := r.plannerData(md, pd, seen); err != nil {
			return nil, err
		}
	}
	if err := r.storageData(md, f["storage_data"]); err != nil {
		return nil, err
	}
	return md, nil
}

// mcoreData reads Megatron's mcore_data: the original shapes of the
// tensors saved reformulated.
func (r *reader) mcoreData(md *Metadata, mc any) error {
	// Megatron's torch_dist: tensors saved in a reformulated shape
	// (nd_reformulated_orig_global_shape), served in the shape the
	// model holds where the reformulation is a reshape of whole
	// chunks (build), else listed, not served. The rest are plain
	// DCP tensors.
	d, ok := mc.(*pickle.Dict)
	if !ok {
		return r.errorf("Metadata.mcore_data", "want a dict, found %s", pickle.TypeName(mc))
	}
	for i, k := range d.Keys {
		fqn, ok := k.(string)
		v, isDict := d.Vals[i].(*pickle.Dict)
		if !ok || !isDict {
			return r.errorf("Metadata.mcore_data", "an entry %s: %s", pickle.Repr(k, 60), pickle.Repr(d.Vals[i], 60))
		}
		for j, vk := range v.Keys {
			if vk != "nd_reformulated_orig_global_shape" || v.Vals[j] == nil {
				continue
			}
			shape, err := r.size(v.Vals[j], "Metadata.mcore_data["+quote(fqn)+"]")
			if err != nil || len(shape) == 0 || len(shape) > index.MaxDims {
				md.NotRead[fqn] = "saved by Megatron in a reformulated shape whose original shape tensorfs does not read (mcore_data nd_reformulated_orig_global_shape " + pickle.Repr(v.Vals[j], 60) + "): not read"
				continue
			}
			md.Reformulated[fqn] = shape
		}
	}
	return nil
}

// stateDictMetadata reads state_dict_metadata: each key's tensor or
// bytes metadata; seen holds the keys.
func (r *reader) stateDictMetadata(md *Metadata, v any) (seen map[string]bool, err error) {
	sdm, ok := v.(*pickle.Dict)
	if !ok {
		return nil, r.errorf("Metadata.state_dict_metadata", "want a dict, found %s", pickle.Repr(v, 60))
	}
	seen = map[string]bool{}
	for i, k := range sdm.Keys {
		fqn, ok := k.(string)
		if !ok {
			return nil, r.errorf("Metadata.state_dict_metadata", "a key that is not a str: %s", pickle.Repr(k, 60))
		}
		where := "key " + quote(fqn)
		if seen[fqn] {
			return nil, r.errorf(where, "the key is in state_dict_metadata twice")
		}
		seen[fqn] = true
		if err := r.budget.Results(1); err != nil {
			return nil, r.errorf(where, "%v", err)
		}
		switch kind, _ := class(sdm.Vals[i]); kind {
		case "BytesStorageMetadata":
			o := sdm.Vals[i].(*pickle.Object)
			if len(o.Args) != 0 || len(o.State) > 1 || (len(o.State) == 1 && !pickle.Empty(o.State[0])) {
				return nil, r.errorf(where, "a BytesStorageMetadata built in a way torch does not write")
			}
			md.Bytes = append(md.Bytes, fqn)
		case "TensorStorageMetadata":
			t, err := r.tensor(fqn, sdm.Vals[i], where)
			if err != nil {
				return nil, err
			}
			md.Tensors = append(md.Tensors, t)
		default:
			return nil, r.errorf(where, "want a TensorStorageMetadata or BytesStorageMetadata, found %s", pickle.Repr(sdm.Vals[i], 80))
		}
	}
	return seen, nil
}

// plannerData reads planner_data: the path of each key of
// state_dict_metadata (seen).
func (r *reader) plannerData(md *Metadata, pd any, seen map[string]bool) error {
	d, ok := pd.(*pickle.Dict)
	if !ok {
		return r.errorf("Metadata.planner_data", "want a dict, found %s", pickle.TypeName(pd))
	}
	for i, k := range d.Keys {
		fqn, ok := k.(string)
		if !ok || !seen[fqn] {
			return r.errorf("Metadata.planner_data", "the key %s is not in state_dict_metadata", pickle.Repr(k, 60))
		}
		if _, dup := md.Planner[fqn]; dup {
			return r.errorf("Metadata.planner_data", "the key %s is there twice", quote(fqn))
		}
		path, err := r.path(d.Vals[i], "planner_data of key "+quote(fqn))
		if err != nil {
			return err
		}
		md.Planner[fqn] = path
	}
	return nil
}

// storageData reads storage_data: where each chunk or value is stored.
func (r *reader) storageData(md *Metadata, v any) error {
	sd, ok := v.(*pickle.Dict)
	if !ok {
		return r.errorf("Metadata.storage_data", "want a dict, found %s", pickle.Repr(v, 60))
	}
	for i, k := range sd.Keys {
		if err := r.budget.Results(1); err != nil {
			return r.errorf("Metadata.storage_data", "%v", err)
		}
		key, err := r.index(k)
		if err != nil {
			return err
		}
		if _, dup := md.Storage[key]; dup {
			return r.errorf("storage_data", "the item %s is there twice", quote(strings.ReplaceAll(key, "\x00", " at ")))
		}
		it, err := r.item(sd.Vals[i], "storage_data of "+quote(strings.ReplaceAll(key, "\x00", " at ")))
		if err != nil {
			return err
		}
		md.Storage[key] = it
	}
	return nil
}

// quote quotes a key for a message.
func quote(s string) string { return fmt.Sprintf("%q", s) }

// path reads a planner_data path: a tuple of str and int keys.
func (r *reader) path(v any, where string) ([]string, error) {
	items, ok := v.(pickle.Tuple)
	if !ok {
		if l, isList := v.(*pickle.List); isList {
			items, ok = l.Items, true
		}
	}
	if !ok || len(items) == 0 || len(items) > index.MaxNesting {
		return nil, r.errorf(where, "want a tuple of keys, found %s", pickle.Repr(v, 60))
	}
	if err := r.budget.NameBytes(int64(len(items))); err != nil {
		return nil, r.errorf(where, "%v", err)
	}
	out := make([]string, len(items))
	for i, it := range items {
		switch k := it.(type) {
		case string:
			out[i] = k
		case int64:
			out[i] = fmt.Sprint(k)
		default:
			return nil, r.errorf(where, "a key that is not a str or int: %s", pickle.Repr(it, 40))
		}
		if err := r.budget.NameBytes(int64(len(out[i]))); err != nil {
			return nil, r.errorf(where, "%v", err)
		}
	}
	return out, nil
}

func (r *reader) tensor(fqn string, v any, where string) (TensorMeta, error) {
	t := TensorMeta{FQN: fqn}
	f, err := r.fields(v, "TensorStorageMetadata", where)
	if err != nil {
		return t, err
	}
	if err := r.known(f, "TensorStorageMetadata", where, "properties", "size", "chunks"); err != nil {
		return t, err
	}
	if t.DType, err = r.properties(f["properties"], where); err != nil {
		return t, err
	}
	if t.Size, err = r.size(f["size"], where+", size"); err != nil {
		return t, err
	}
	t.X2 = t.DType == dtype.F4
	if _, ok := index.Elements(t.Size); !ok || t.X2 && len(t.Size) > 0 && t.Size[len(t.Size)-1] > math.MaxInt64/2 {
		return t, r.errorf(where, "the size %v overflows", t.Size)
	}
	chunks, ok := f["chunks"].(*pickle.List)
	if !ok {
		return t, r.errorf(where, "want a list of chunks, found %s", pickle.Repr(f["chunks"], 60))
	}
	if len(chunks.Items) > MaxChunks {
		return t, r.errorf(where, "%d chunks (at most %d)", len(chunks.Items), MaxChunks)
	}
	if err := r.budget.Results(int64(len(chunks.Items))); err != nil {
		return t, r.errorf(where, "%v", err)
	}
	for i, c := range chunks.Items {
		cw := fmt.Sprintf("%s, chunk %d", where, i)
		cf, err := r.fields(c, "ChunkStorageMetadata", cw)
		if err != nil {
			return t, err
		}
		if err := r.known(cf, "ChunkStorageMetadata", cw, "offsets", "sizes"); err != nil {
			return t, err
		}
		var ch ChunkMeta
		if ch.Offsets, err = r.size(cf["offsets"], cw+" offsets"); err != nil {
			return t, err
		}
		if ch.Sizes, err = r.size(cf["sizes"], cw+" sizes"); err != nil {
			return t, err
		}
		if len(ch.Offsets) != len(t.Size) || len(ch.Sizes) != len(t.Size) {
			return t, r.errorf(cw, "offsets %v and sizes %v for a tensor of size %v", ch.Offsets, ch.Sizes, t.Size)
		}
		for k := range t.Size {
			if ch.Offsets[k] > t.Size[k] || ch.Sizes[k] > t.Size[k]-ch.Offsets[k] {
				return t, r.errorf(cw, "offsets %v and sizes %v exceed the tensor's size %v", ch.Offsets, ch.Sizes, t.Size)
			}
		}
		t.Chunks = append(t.Chunks, ch)
	}
	return t, nil
}

// properties reads a TensorProperties: its dtype, after checking that the
// tensor is a plain strided one.
func (r *reader) properties(v any, where string) (dtype.DType, error) {
	kind, o := class(v)
	if kind != "TensorProperties" || len(o.Args) != 0 || len(o.State) != 1 {
		return dtype.Invalid, r.errorf(where, "want TensorProperties, found %s", pickle.Repr(v, 80))
	}
	var dt, layout any
	switch s := o.State[0].(type) {
	case pickle.Tuple: // __getstate__: (dtype, layout, requires_grad, memory_format, pin_memory)
		if len(s) != 5 {
			return dtype.Invalid, r.errorf(where, "TensorProperties of %d values, want 5", len(s))
		}
		dt, layout = s[0], s[1]
	case *pickle.Dict: // the dataclass's own state
		for i, k := range s.Keys {
			switch k {
			case "dtype":
				dt = s.Vals[i]
			case "layout":
				layout = s.Vals[i]
			}
		}
	default:
		return dtype.Invalid, r.errorf(where, "TensorProperties with a state of %s", pickle.TypeName(o.State[0]))
	}
	g, ok := dt.(*pickle.Global)
	if !ok || g.Module != "torch" {
		return dtype.Invalid, r.errorf(where, "the dtype is %s, not a torch dtype", pickle.Repr(dt, 60))
	}
	d := torchDTypes[g.Name]
	if !d.Valid() {
		return dtype.Invalid, r.errorf(where, "dtype torch.%s, which tensorfs cannot serve", g.Name)
	}
	if layout != nil {
		kind, lo := class(layout)
		if kind != "layout" || len(lo.Args) != 1 || lo.Args[0] != "torch.strided" {
			return dtype.Invalid, r.errorf(where, "the layout is %s: tensorfs reads strided (dense) tensors only", pickle.Repr(layout, 60))
		}
	}
	return d, nil
}

// index reads a storage_data key (MetadataIndex) as an itemKey.
func (r *reader) index(v any) (string, error) {
	f, err := r.fields(v, "MetadataIndex", "storage_data")
	if err != nil {
		return "", err
	}
	if err := r.known(f, "MetadataIndex", "storage_data", "fqn", "offset", "index"); err != nil {
		return "", err
	}
	fqn, ok := f["fqn"].(string)
	if !ok {
		return "", r.errorf("storage_data", "a MetadataIndex whose fqn is %s", pickle.Repr(f["fqn"], 60))
	}
	if off, ok := f["offset"]; !ok || off == nil {
		return itemKey(fqn, nil), nil
	}
	offs, err := r.size(f["offset"], "storage_data of "+quote(fqn))
	if err != nil {
		return "", err
	}
	if offs == nil {
		offs = []int64{}
	}
	return itemKey(fqn, offs), nil
}

// item reads a storage_data value (_StorageInfo).
func (r *reader) item(v any, where string) (Item, error) {
	var it Item
	f, err := r.fields(v, "_StorageInfo", where)
	if err != nil {
		return it, err
	}
	if err := r.known(f, "_StorageInfo", where, "relative_path", "offset", "length", "transform_descriptors"); err != nil {
		return it, err
	}
	if td, ok := f["transform_descriptors"]; ok && !pickle.Empty(td) {
		it.Transform = transform(td)
	}
	p, ok := f["relative_path"].(string)
	if !ok {
		return it, r.errorf(where, "relative_path is %s, not a str", pickle.Repr(f["relative_path"], 60))
	}
	off, ok1 := f["offset"].(int64)
	n, ok2 := f["length"].(int64)
	if !ok1 || !ok2 || off < 0 || n < 0 {
		return it, r.errorf(where, "offset %s and length %s: want non-negative ints", pickle.Repr(f["offset"], 30), pickle.Repr(f["length"], 30))
	}
	it.RelativePath, it.Offset, it.Length = p, off, n
	return it, nil
}

// transform reads transform_descriptors: TransformZstd when it is that
// one descriptor, else its repr (an item tensorfs does not read; the
// caller says so for that tensor or value only).
func transform(td any) string {
	var ds []any
	switch x := td.(type) {
	case *pickle.List:
		ds = x.Items
	case pickle.Tuple:
		ds = x
	}
	if len(ds) == 1 && ds[0] == TransformZstd {
		return TransformZstd
	}
	return pickle.Repr(td, 60)
}
