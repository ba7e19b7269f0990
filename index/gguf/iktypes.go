package gguf

import (
	"fmt"

	"github.com/lazyweights/tensorfs/dtype"
)

// unservedType gives the Unserved Type and Why of a tensor whose ggml type
// code this build does not serve: ik_llama.cpp's codes that tensorfs
// recognises (dtype.IKType) are named with the reason, any other code is
// unknown (newer than this build).
func unservedType(code uint32) (typ, why string) {
	if name, reason, ok := dtype.IKType(code); ok {
		return name, fmt.Sprintf("ik_llama.cpp's %s (ggml type %d) %s", name, code, reason)
	}
	return fmt.Sprintf("ggml type %d", code),
		fmt.Sprintf("unknown ggml type code %d (newer than this tensorfs: its block size, so the tensor's size, is not known)", code)
}

// unservedTypeName names an unserved code in the error of a file that has
// nothing else to serve.
func unservedTypeName(code uint32) string {
	if name, _, ok := dtype.IKType(code); ok {
		return fmt.Sprintf("ik_llama.cpp's %s (ggml type %d) is not served", name, code)
	}
	return fmt.Sprintf("unknown ggml type code %d", code)
}
