package gguf

import (
	"fmt"

	"github.com/lazyweights/tensorfs/dtype"
	"github.com/lazyweights/tensorfs/index"
)

// ikGroupRows gives the Unserved Type and Why of a tensor of one of
// ik_llama.cpp's row-interleaved types (dtype.RowGroup: G rows stored as
// one run of blocks) whose rows are not whole groups of G: ik_llama.cpp
// repacks only whole groups, and such a tensor's bytes cannot be its rows.
// ok is false for any other tensor (those of other types, and those whose
// shape tensor refuses for its own reasons).
func ikGroupRows(ti *ggufTensorInfo) (typ, why string, ok bool) {
	dt, known := dtype.ByGGML(ti.typ)
	if !known || dt.RowGroup() == 0 {
		return "", "", false
	}
	shape := ti.shape()
	rows, fits := index.Elements(shape[:max(len(shape)-1, 0)])
	if !fits || rows%dt.RowGroup() == 0 {
		return "", "", false
	}
	return dt.String(), fmt.Sprintf("ik_llama.cpp's %s (ggml type %d) interleaves its rows in groups of %d; the tensor's %d rows are not whole groups", dt, ti.typ, dt.RowGroup(), rows), true
}

// ikUnserved gives the Unserved Type and Why of a tensor of one of
// ik_llama.cpp's type codes that tensorfs recognises but does not serve:
// those dtype.IKType names (IQ1_BN, IQ2_BN, the row-interleaved _R4/_R8
// ones without a group dequantizer). Its row-scaled and _KT types are
// dtype's, with RowMeta, and its other row-interleaved ones too, with
// RowGroup.
// ok is false for any other code.
func ikUnserved(code uint32) (typ, why string, ok bool) {
	if name, reason, ok := dtype.IKType(code); ok {
		return name, fmt.Sprintf("ik_llama.cpp's %s (ggml type %d) %s", name, code, reason), true
	}
	return "", "", false
}
