package gguf

import (
	"fmt"

	"github.com/lazyweights/tensorfs/dtype"
)

// ikUnserved gives the Unserved Type and Why of a tensor of one of
// ik_llama.cpp's type codes that tensorfs recognises but does not serve:
// those dtype.IKType names (IQ1_BN, IQ2_BN, the row-interleaved _R4/_R8
// ones). Its row-scaled and _KT types are dtype's, with RowMeta.
// ok is false for any other code.
func ikUnserved(code uint32) (typ, why string, ok bool) {
	if name, reason, ok := dtype.IKType(code); ok {
		return name, fmt.Sprintf("ik_llama.cpp's %s (ggml type %d) %s", name, code, reason), true
	}
	return "", "", false
}
