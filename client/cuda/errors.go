package cuda

import (
	"errors"
	"fmt"
	"path/filepath"
	"strings"
)

// EnvLibrary names the environment variable that, when set, is the one
// library Open loads (a path, or a name dlopen searches for).
const EnvLibrary = "TENSORFS_CUDART"

// Libraries are the names Open tries, in order, through dlopen's search
// path, before the usual install directories.
var Libraries = []string{"libcudart.so", "libcudart.so.13", "libcudart.so.12", "libcudart.so.11.0"}

// installGlobs are where CUDA runtimes usually live outside the loader's
// search path: the toolkit, and the pip wheels PyTorch installs.
var installGlobs = []string{
	"/usr/local/cuda/lib64/libcudart.so*",
	"/usr/local/cuda-*/lib64/libcudart.so*",
	"/usr/local/cuda/targets/*/lib/libcudart.so*",
	"/usr/local/lib/python3*/dist-packages/nvidia/cuda_runtime/lib/libcudart.so*",
	"/usr/local/lib/python3*/site-packages/nvidia/cuda_runtime/lib/libcudart.so*",
	"/usr/lib/python3/dist-packages/nvidia/cuda_runtime/lib/libcudart.so*",
}

// candidates returns what Open tries: Libraries, then files matching
// installGlobs.
func candidates() []string {
	out := append([]string(nil), Libraries...)
	for _, g := range installGlobs {
		m, _ := filepath.Glob(g)
		out = append(out, m...)
	}
	return out
}

// ErrNoRuntime is wrapped by the error of Open and OpenLibrary when no
// usable CUDA runtime library could be loaded.
var ErrNoRuntime = errors.New("CUDA runtime not found")

// LoadError says why no CUDA runtime library could be loaded. Its message
// is one line: `CUDA runtime not found (libcudart.so): <dlopen's reason>`.
type LoadError struct {
	Tried []string // libraries tried, in order
	Msg   string   // the reason the first one failed
}

func (e *LoadError) Error() string {
	name := "libcudart.so"
	if len(e.Tried) > 0 {
		name = e.Tried[0]
	}
	msg := e.Msg
	if len(e.Tried) > 1 {
		msg += fmt.Sprintf(" (tried %d names and install paths; set %s to the library's path)", len(e.Tried), EnvLibrary)
	}
	return fmt.Sprintf("%v (%s): %s", ErrNoRuntime, name, strings.ReplaceAll(msg, "\n", " "))
}

func (e *LoadError) Unwrap() error { return ErrNoRuntime }

// Error is a failed CUDA runtime call.
type Error struct {
	Op   string // the call, e.g. "cudaMalloc(1048576)"
	Code int    // the cudaError_t
	Msg  string // cudaGetErrorString
}

func (e *Error) Error() string {
	return fmt.Sprintf("cuda: %s: %s (error %d)", e.Op, e.Msg, e.Code)
}

// DevicePtr is an address in device memory.
type DevicePtr uintptr
