package torch

import (
	"encoding/binary"

	"github.com/lazyweights/tensorfs/dtype"
	"github.com/lazyweights/tensorfs/index"
	"github.com/lazyweights/tensorfs/index/pickle"
)

// Shared helpers of the torch, pickle and numpy tests (prefix pt).

// ptParse parses b as a PyTorch file named name (what format detection
// picks for the files of these tests).
func ptParse(name string, b []byte) (*index.Index, error) { return Parse(ptMem(name, b)) }

// --- building pickles by hand ---

func ptPkStr(s string) []byte {
	return append(binary.LittleEndian.AppendUint32([]byte{'X'}, uint32(len(s))), s...)
}

func ptPkInt(n int64) []byte {
	if n >= -1<<31 && n < 1<<31 {
		return binary.LittleEndian.AppendUint32([]byte{'J'}, uint32(int32(n)))
	}
	return binary.LittleEndian.AppendUint64([]byte{pickle.OpLONG1, 8}, uint64(n))
}

func ptPkGlobal(mod, name string) []byte { return []byte("c" + mod + "\n" + name + "\n") }

func ptPkTuple(items ...[]byte) []byte {
	b := []byte{'('}
	for _, it := range items {
		b = append(b, it...)
	}
	return append(b, 't')
}

func ptPkInts(ns ...int64) []byte {
	var items [][]byte
	for _, n := range ns {
		items = append(items, ptPkInt(n))
	}
	return ptPkTuple(items...)
}

func ptCat(parts ...[]byte) []byte {
	var b []byte
	for _, p := range parts {
		b = append(b, p...)
	}
	return b
}

// ptTS describes one tensor for ptTensorPickle.
type ptTS struct {
	name    string
	storage string // storage class, e.g. "FloatStorage"
	key     string
	numel   int64
	offset  int64
	shape   []int64
	strides []int64
	view    []byte // legacy view metadata (pickled), or nil
}

// ptRebuild pickles _rebuild_tensor_v2(storage pid, ...).
func ptRebuild(s ptTS, legacy bool) []byte {
	pid := [][]byte{ptPkStr("storage"), ptPkGlobal("torch", s.storage), ptPkStr(s.key), ptPkStr("cpu"), ptPkInt(s.numel)}
	if legacy {
		if s.view != nil {
			pid = append(pid, s.view)
		} else {
			pid = append(pid, []byte{'N'})
		}
	}
	return ptCat(ptPkGlobal("torch._utils", "_rebuild_tensor_v2"),
		ptPkTuple(ptCat(ptPkTuple(pid...), []byte{'Q'}), ptPkInt(s.offset), ptPkInts(s.shape...), ptPkInts(s.strides...),
			[]byte{pickle.OpNEWFALSE}, ptCat(ptPkGlobal("collections", "OrderedDict"), []byte(")R"))),
		[]byte{'R'})
}

// ptTensorPickle pickles {name: tensor, ...} (protocol 2).
func ptTensorPickle(legacy bool, ts ...ptTS) []byte {
	b := []byte{pickle.OpPROTO, 2, '}', '('}
	for _, s := range ts {
		b = append(b, ptPkStr(s.name)...)
		b = append(b, ptRebuild(s, legacy)...)
	}
	return append(b, 'u', '.')
}

// ptLegacyFile builds a legacy torch file from its main pickle and its
// storages (key, element count, bytes), in order.
func ptLegacyFile(main []byte, storages ...ptLegacyStorage) []byte {
	magic := ptCat([]byte{pickle.OpPROTO, 2, pickle.OpLONG1, 10}, []byte{0x6c, 0xfc, 0x9c, 0x46, 0xf9, 0x20, 0x6a, 0xa8, 0x50, 0x19}, []byte{'.'})
	proto := []byte{pickle.OpPROTO, 2, 'M', 0xe9, 0x03, '.'}
	sys := []byte{pickle.OpPROTO, 2, '}', '.'}
	keys := []byte{pickle.OpPROTO, 2, ']', '('}
	for _, s := range storages {
		keys = append(keys, ptPkStr(s.key)...)
	}
	keys = append(keys, 'e', '.')
	b := ptCat(magic, proto, sys, main, keys)
	for _, s := range storages {
		b = binary.LittleEndian.AppendUint64(b, uint64(s.count))
		b = append(b, s.data...)
	}
	return b
}

type ptLegacyStorage struct {
	key   string
	count int64
	data  []byte
}

// ptDTypeNames maps torch and numpy dtype names to tensorfs dtypes.
var ptDTypeNames = map[string]dtype.DType{
	"float32": dtype.F32, "float64": dtype.F64, "float16": dtype.F16, "bfloat16": dtype.BF16,
	"int64": dtype.I64, "int32": dtype.I32, "int16": dtype.I16, "int8": dtype.I8,
	"uint8": dtype.U8, "uint16": dtype.U16, "uint32": dtype.U32, "uint64": dtype.U64,
	"bool": dtype.Bool, "complex64": dtype.C64, "complex128": dtype.C128,
}
