//go:build !cgo

package cuda

import "errors"

// Without cgo there is no dlopen: Open and OpenLibrary fail, and the
// methods below are never reached (there is no Runtime to call them on).

var errNoCgo = errors.New("tensorfs was built without cgo (CGO_ENABLED=0), which loading libcudart needs")

// Runtime is a CUDA runtime library; without cgo there is none.
type Runtime struct{}

type stream struct{}
type event struct{}

// OpenLibrary fails: this build has no cgo.
func OpenLibrary(path string) (*Runtime, error) {
	return nil, &LoadError{Tried: []string{path}, Msg: errNoCgo.Error()}
}

// Open fails: this build has no cgo.
func Open() (*Runtime, error) {
	return nil, &LoadError{Tried: []string{Libraries[0]}, Msg: errNoCgo.Error()}
}

func (rt *Runtime) Path() string                         { return "" }
func (rt *Runtime) Close() error                         { return nil }
func (rt *Runtime) DeviceCount() (int, error)            { return 0, errNoCgo }
func (rt *Runtime) SetDevice(int) error                  { return errNoCgo }
func (rt *Runtime) Versions() (int, int, error)          { return 0, 0, errNoCgo }
func (rt *Runtime) Malloc(int, int64) (DevicePtr, error) { return 0, errNoCgo }
func (rt *Runtime) Free(DevicePtr) error                 { return errNoCgo }
func (rt *Runtime) HostAlloc(int, int) ([]byte, error)   { return nil, errNoCgo }
func (rt *Runtime) FreeHost([]byte) error                { return errNoCgo }
func (rt *Runtime) CopyToDevice(DevicePtr, []byte) error { return errNoCgo }
func (rt *Runtime) CopyToHost([]byte, DevicePtr) error   { return errNoCgo }
func (rt *Runtime) Synchronize(int) error                { return errNoCgo }
func (rt *Runtime) newStream(int) (stream, error)        { return stream{}, errNoCgo }
func (rt *Runtime) syncStream(stream) error              { return errNoCgo }
func (rt *Runtime) destroyStream(stream) error           { return errNoCgo }
func (rt *Runtime) newEvent(int) (event, error)          { return event{}, errNoCgo }
func (rt *Runtime) syncEvent(event) error                { return errNoCgo }
func (rt *Runtime) destroyEvent(event) error             { return errNoCgo }
func (rt *Runtime) copyMany([]DevicePtr, [][]byte, stream, event) error {
	return errNoCgo
}
func (rt *Runtime) MemInfo(int) (int64, int64, bool, error) { return 0, 0, false, errNoCgo }

// CgoEnabled is false: this build cannot load a CUDA runtime.
const CgoEnabled = false

func (rt *Runtime) hostAlloc(int, int, uint) ([]byte, error) { return nil, errNoCgo }
func (rt *Runtime) CanRegister() bool                        { return false }
func (rt *Runtime) HostRegister(int, []byte) error           { return errNoCgo }
func (rt *Runtime) HostUnregister([]byte) error              { return errNoCgo }

const hostAllocWriteCombined = 4

// IPCHandleSize is the size of a cudaIpcMemHandle_t.
const IPCHandleSize = 64

func (rt *Runtime) CanIPC() bool { return false }
func (rt *Runtime) IPCHandle(int, DevicePtr) ([IPCHandleSize]byte, error) {
	return [IPCHandleSize]byte{}, errNoCgo
}
func (rt *Runtime) OpenIPCHandle(int, [IPCHandleSize]byte) (DevicePtr, error) { return 0, errNoCgo }
func (rt *Runtime) CloseIPCHandle(DevicePtr) error                            { return errNoCgo }
func (rt *Runtime) DeviceUUID(int) (string, string, error)                    { return "", "", errNoCgo }
