// Package dcpwrite writes the pickles of a PyTorch Distributed
// Checkpoint as torch lays them out (protocol 2 opcodes): the .metadata
// of DCP's dataclasses and a torch.save zip's data.pkl. The tests of
// index/dcp make hostile checkpoints with it, and gendcp large ones.
package dcpwrite

import (
	"bytes"
	"encoding/binary"
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
