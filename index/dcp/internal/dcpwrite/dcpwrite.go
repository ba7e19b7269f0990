// Package dcpwrite writes the pickles of a PyTorch Distributed
// Checkpoint as torch lays them out (protocol 2 opcodes): the .metadata
// of DCP's dataclasses and a torch.save zip's data.pkl. The tests of
// index/dcp make hostile checkpoints with it, and gendcp large ones.
package dcpwrite

import (
	"archive/zip"
	"bytes"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"io"
)

// MetadataModule is the module of DCP's metadata dataclasses.
const MetadataModule = "torch.distributed.checkpoint.metadata"

// Writer accumulates pickle opcodes.
type Writer struct{ bytes.Buffer }

// Op writes raw opcodes.
func (w *Writer) Op(s string) { w.WriteString(s) }

// Global writes GLOBAL module.name.
func (w *Writer) Global(module, name string) { w.Op("c" + module + "\n" + name + "\n") }

// Str writes a BINUNICODE str.
func (w *Writer) Str(s string) {
	w.Op("X")
	binary.Write(w, binary.LittleEndian, uint32(len(s)))
	w.Op(s)
}

// Int writes an int (BININT, or LONG1 of 8 bytes).
func (w *Writer) Int(n int64) {
	if n >= -1<<31 && n < 1<<31 {
		w.Op("J")
		binary.Write(w, binary.LittleEndian, int32(n))
		return
	}
	w.Op("\x8a\x08")
	binary.Write(w, binary.LittleEndian, n)
}

// Tuple writes a tuple of ints.
func (w *Writer) Tuple(s []int64) {
	w.Op("(")
	for _, n := range s {
		w.Int(n)
	}
	w.Op("t")
}

// Size writes torch.Size(s).
func (w *Writer) Size(s []int64) {
	w.Global("torch", "Size")
	w.Tuple(s)
	w.Op("\x85R")
}

// Obj writes module.cls() with BUILD of a dict of attributes: name,
// then the func that writes its value, in turn.
func (w *Writer) Obj(module, cls string, attrs ...any) {
	w.Global(module, cls)
	w.Op(")\x81}(")
	for i := 0; i < len(attrs); i += 2 {
		w.Str(attrs[i].(string))
		attrs[i+1].(func())()
	}
	w.Op("ub")
}

// Properties writes TensorProperties of torch dtype dt, strided, as
// torch >= 2.3 pickles it (its __getstate__ tuple), with the layout made
// by layoutModule.layoutName (torch.serialization._get_layout).
func (w *Writer) Properties(dt, layoutModule, layoutName string) {
	w.Global(MetadataModule, "TensorProperties")
	w.Op(")\x81(")
	w.Global("torch", dt)
	w.Global(layoutModule, layoutName)
	w.Str("torch.strided")
	w.Op("\x85R\x89")
	w.Global(MetadataModule, "_MEM_FORMAT_ENCODING")
	w.Int(0)
	w.Op("\x85R\x89tb")
}

// TorchSave writes torch.save's zip of data.pkl pkl and storages (data/0,
// data/1, ...), stored, each member's data aligned to 64 bytes as torch
// aligns it, and returns its length.
func TorchSave(w io.Writer, pkl []byte, storages ...[]byte) (int64, error) {
	cw := &countWriter{w: w}
	zw := zip.NewWriter(cw)
	type member struct {
		name string
		data []byte
	}
	members := []member{{"archive/data.pkl", pkl}, {"archive/byteorder", []byte("little")}}
	for i, s := range storages {
		members = append(members, member{fmt.Sprintf("archive/data/%d", i), s})
	}
	members = append(members, member{"archive/version", []byte("3\n")}, member{"archive/.data/serialization_id", []byte("0123456789012345678901234567890123456789")})
	for _, m := range members {
		h := &zip.FileHeader{Name: m.name, Method: zip.Store, CRC32: crc32.ChecksumIEEE(m.data),
			CompressedSize64: uint64(len(m.data)), UncompressedSize64: uint64(len(m.data))}
		if err := zw.Flush(); err != nil {
			return 0, err
		}
		at := cw.n + 30 + int64(len(m.name)) + 4
		pad := (64 - at%64) % 64
		h.Extra = binary.LittleEndian.AppendUint16(binary.LittleEndian.AppendUint16(nil, 0x4246), uint16(pad))
		h.Extra = append(h.Extra, bytes.Repeat([]byte("Z"), int(pad))...)
		fw, err := zw.CreateRaw(h)
		if err != nil {
			return 0, err
		}
		if _, err := fw.Write(m.data); err != nil {
			return 0, err
		}
	}
	if err := zw.Close(); err != nil {
		return 0, err
	}
	return cw.n, nil
}

type countWriter struct {
	w io.Writer
	n int64
}

func (c *countWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}

// TensorOp writes torch._utils._rebuild_tensor_v2 of storage 0 (class
// storage, e.g. FloatStorage, of numel elements), contiguous of shape.
func (w *Writer) TensorOp(storage string, numel int64, shape []int64) {
	strides := make([]int64, len(shape))
	s := int64(1)
	for k := len(shape) - 1; k >= 0; k-- {
		strides[k] = s
		s *= shape[k]
	}
	w.Global("torch._utils", "_rebuild_tensor_v2")
	w.Op("((")
	w.Str("storage")
	w.Global("torch", storage)
	w.Str("0")
	w.Str("cpu")
	w.Int(numel)
	w.Op("tQ")
	w.Int(0)
	w.Tuple(shape)
	w.Tuple(strides)
	w.Op("\x89")
	w.Global("collections", "OrderedDict")
	w.Op(")RtR")
}

// Item is where a saved item lies: bytes [Offset, Offset+Length) of File;
// Zstd when they are a zstd stream of it (transform_descriptors
// ["stream.zstd/1"]).
type Item struct {
	File           string
	Offset, Length int64
	Zstd           bool
}

// Chunk is one chunk of a tensor and its item.
type Chunk struct {
	Offsets, Sizes []int64
	Item           Item
}

// Tensor is a TensorStorageMetadata: FQN, torch dtype name, size, chunks.
type Tensor struct {
	FQN, DType string
	Size       []int64
	Chunks     []Chunk
}

// Value is a BytesStorageMetadata and its item.
type Value struct {
	FQN  string
	Item Item
}

// Checkpoint is what a .metadata says: the tensors, then the values, in
// state_dict_metadata's order; Planner the path of each key (none: the
// key itself).
type Checkpoint struct {
	Tensors []Tensor
	Values  []Value
	Planner map[string][]string
	// MCore is Megatron's mcore_data: the original shape of each key
	// saved in a reformulated shape (nd_reformulated_orig_global_shape).
	MCore map[string][]int64
}

// Metadata returns the .metadata pickle of c.
func (c *Checkpoint) Metadata() []byte {
	w := &Writer{}
	w.Op("\x80\x02")
	attrs := []any{
		"state_dict_metadata", func() {
			w.Op("}(")
			for _, t := range c.Tensors {
				w.Str(t.FQN)
				w.Obj(MetadataModule, "TensorStorageMetadata",
					"properties", func() { w.Properties(t.DType, "torch.serialization", "_get_layout") },
					"size", func() { w.Size(t.Size) },
					"chunks", func() {
						w.Op("](")
						for _, ch := range t.Chunks {
							w.Obj(MetadataModule, "ChunkStorageMetadata", "offsets", func() { w.Size(ch.Offsets) }, "sizes", func() { w.Size(ch.Sizes) })
						}
						w.Op("e")
					})
			}
			for _, v := range c.Values {
				w.Str(v.FQN)
				w.Obj(MetadataModule, "BytesStorageMetadata")
			}
			w.Op("u")
		},
		"planner_data", func() {
			w.Op("}(")
			for _, t := range c.Tensors {
				c.plan(w, t.FQN)
			}
			for _, v := range c.Values {
				c.plan(w, v.FQN)
			}
			w.Op("u")
		},
		"storage_data", func() {
			w.Op("}(")
			item := func(fqn string, offsets []int64, it Item) {
				w.Obj(MetadataModule, "MetadataIndex", "fqn", func() { w.Str(fqn) }, "offset", func() {
					if offsets == nil {
						w.Op("N")
						return
					}
					w.Size(offsets)
				}, "index", func() { w.Op("N") })
				attrs := []any{"relative_path", func() { w.Str(it.File) }, "offset", func() { w.Int(it.Offset) }, "length", func() { w.Int(it.Length) }}
				if it.Zstd {
					attrs = append(attrs, "transform_descriptors", func() { w.Op("]("); w.Str("stream.zstd/1"); w.Op("e") })
				}
				w.Obj("torch.distributed.checkpoint.filesystem", "_StorageInfo", attrs...)
			}
			for _, t := range c.Tensors {
				for _, ch := range t.Chunks {
					item(t.FQN, ch.Offsets, ch.Item)
				}
			}
			for _, v := range c.Values {
				item(v.FQN, nil, v.Item)
			}
			w.Op("u")
		},
	}
	if len(c.MCore) > 0 {
		attrs = append(attrs, "mcore_data", func() {
			w.Op("}(")
			for _, t := range c.Tensors { // in a fixed order
				if shape, ok := c.MCore[t.FQN]; ok {
					w.Str(t.FQN)
					w.Op("}(")
					w.Str("nd_reformulated_orig_global_shape")
					w.Tuple(shape)
					w.Op("u")
				}
			}
			w.Op("u")
		})
	}
	w.Obj(MetadataModule, "Metadata", attrs...)
	w.Op(".")
	return w.Bytes()
}

func (c *Checkpoint) plan(w *Writer, fqn string) {
	p, ok := c.Planner[fqn]
	if !ok {
		p = []string{fqn}
	}
	w.Str(fqn)
	w.Op("(")
	for _, s := range p {
		w.Str(s)
	}
	w.Op("t")
}
