//go:build cgo

package cuda

/*
#cgo LDFLAGS: -ldl
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

// The few CUDA runtime types an upload needs, declared here so that
// building needs no CUDA headers: the library is found at run time.
typedef int tfs_err;          // cudaError_t
typedef void* tfs_stream;     // cudaStream_t
typedef void* tfs_event;      // cudaEvent_t
typedef struct { char reserved[64]; } tfs_ipc_handle; // cudaIpcMemHandle_t

enum {
	tfs_memcpy_h2d = 1,         // cudaMemcpyHostToDevice
	tfs_memcpy_d2h = 2,         // cudaMemcpyDeviceToHost
	tfs_stream_non_blocking = 1, // cudaStreamNonBlocking
	tfs_event_disable_timing = 2 // cudaEventDisableTiming
};

typedef struct {
	void* lib;
	tfs_err (*GetDeviceCount)(int*);
	tfs_err (*SetDevice)(int);
	tfs_err (*Malloc)(void**, size_t);
	tfs_err (*Free)(void*);
	tfs_err (*HostAlloc)(void**, size_t, unsigned int);
	tfs_err (*FreeHost)(void*);
	tfs_err (*Memcpy)(void*, const void*, size_t, int);
	tfs_err (*MemcpyAsync)(void*, const void*, size_t, int, tfs_stream);
	tfs_err (*StreamCreate)(tfs_stream*);
	tfs_err (*StreamSynchronize)(tfs_stream);
	tfs_err (*EventCreate)(tfs_event*);
	tfs_err (*EventRecord)(tfs_event, tfs_stream);
	tfs_err (*EventSynchronize)(tfs_event);
	const char* (*GetErrorString)(tfs_err);
	// Optional: used when present.
	tfs_err (*StreamCreateWithFlags)(tfs_stream*, unsigned int);
	tfs_err (*StreamDestroy)(tfs_stream);
	tfs_err (*EventCreateWithFlags)(tfs_event*, unsigned int);
	tfs_err (*EventDestroy)(tfs_event);
	tfs_err (*DeviceSynchronize)(void);
	tfs_err (*RuntimeGetVersion)(int*);
	tfs_err (*DriverGetVersion)(int*);
	tfs_err (*MemGetInfo)(size_t*, size_t*);
	tfs_err (*HostRegister)(void*, size_t, unsigned int);
	tfs_err (*HostUnregister)(void*);
	tfs_err (*IpcGetMemHandle)(tfs_ipc_handle*, void*);
	tfs_err (*IpcOpenMemHandle)(void**, tfs_ipc_handle, unsigned int);
	tfs_err (*IpcCloseMemHandle)(void*);
	tfs_err (*GetDeviceProperties)(void*, int);
} tfs_cudart;

// tfs_open loads the library at path and resolves its symbols. On failure
// it returns NULL and writes why into err (errlen bytes).
static tfs_cudart* tfs_open(const char* path, char* err, size_t errlen) {
	void* lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
	if (!lib) {
		const char* e = dlerror();
		snprintf(err, errlen, "%s", e ? e : "dlopen failed");
		return NULL;
	}
	tfs_cudart* r = calloc(1, sizeof *r);
	if (!r) {
		dlclose(lib);
		snprintf(err, errlen, "out of memory");
		return NULL;
	}
	r->lib = lib;
#define REQ(field, sym) \
	if (!(*(void**)&r->field = dlsym(lib, sym))) { \
		snprintf(err, errlen, "%s has no symbol %s", path, sym); \
		dlclose(lib); free(r); return NULL; }
#define OPT(field, sym) *(void**)&r->field = dlsym(lib, sym);
	REQ(GetDeviceCount, "cudaGetDeviceCount")
	REQ(SetDevice, "cudaSetDevice")
	REQ(Malloc, "cudaMalloc")
	REQ(Free, "cudaFree")
	REQ(HostAlloc, "cudaHostAlloc")
	REQ(FreeHost, "cudaFreeHost")
	REQ(Memcpy, "cudaMemcpy")
	REQ(MemcpyAsync, "cudaMemcpyAsync")
	REQ(StreamCreate, "cudaStreamCreate")
	REQ(StreamSynchronize, "cudaStreamSynchronize")
	REQ(EventCreate, "cudaEventCreate")
	REQ(EventRecord, "cudaEventRecord")
	REQ(EventSynchronize, "cudaEventSynchronize")
	REQ(GetErrorString, "cudaGetErrorString")
	OPT(StreamCreateWithFlags, "cudaStreamCreateWithFlags")
	OPT(StreamDestroy, "cudaStreamDestroy")
	OPT(EventCreateWithFlags, "cudaEventCreateWithFlags")
	OPT(EventDestroy, "cudaEventDestroy")
	OPT(DeviceSynchronize, "cudaDeviceSynchronize")
	OPT(RuntimeGetVersion, "cudaRuntimeGetVersion")
	OPT(DriverGetVersion, "cudaDriverGetVersion")
	OPT(MemGetInfo, "cudaMemGetInfo")
	OPT(HostRegister, "cudaHostRegister")
	OPT(HostUnregister, "cudaHostUnregister")
	OPT(IpcGetMemHandle, "cudaIpcGetMemHandle")
	OPT(IpcOpenMemHandle, "cudaIpcOpenMemHandle")
	OPT(IpcCloseMemHandle, "cudaIpcCloseMemHandle")
	// CUDA 12 and later name it _v2 (the header's macro); older runtimes
	// have only the plain name. Both begin with name[256] and the UUID.
	OPT(GetDeviceProperties, "cudaGetDeviceProperties_v2")
	if (!r->GetDeviceProperties) OPT(GetDeviceProperties, "cudaGetDeviceProperties")
#undef REQ
#undef OPT
	return r;
}

static void tfs_close(tfs_cudart* r) {
	dlclose(r->lib);
	free(r);
}

static const char* tfs_errstr(tfs_cudart* r, tfs_err e) {
	const char* s = r->GetErrorString(e);
	return s ? s : "unknown CUDA error";
}

static tfs_err tfs_device_count(tfs_cudart* r, int* n) { return r->GetDeviceCount(n); }
static tfs_err tfs_set_device(tfs_cudart* r, int dev) { return r->SetDevice(dev); }

static tfs_err tfs_versions(tfs_cudart* r, int* rt, int* drv) {
	*rt = 0; *drv = 0;
	if (r->RuntimeGetVersion) { tfs_err e = r->RuntimeGetVersion(rt); if (e) return e; }
	if (r->DriverGetVersion) { tfs_err e = r->DriverGetVersion(drv); if (e) return e; }
	return 0;
}

static tfs_err tfs_malloc(tfs_cudart* r, int dev, uintptr_t* out, size_t n) {
	tfs_err e = r->SetDevice(dev);
	if (e) return e;
	void* p = NULL;
	e = r->Malloc(&p, n);
	*out = (uintptr_t)p;
	return e;
}

static tfs_err tfs_free(tfs_cudart* r, uintptr_t p) { return r->Free((void*)p); }

static void* tfs_host_alloc(tfs_cudart* r, int dev, size_t n, unsigned int flags, tfs_err* err) {
	void* p = NULL;
	*err = r->SetDevice(dev);
	if (*err) return NULL;
	*err = r->HostAlloc(&p, n, flags);
	return *err ? NULL : p;
}

static int tfs_can_register(tfs_cudart* r) { return r->HostRegister && r->HostUnregister; }

static tfs_err tfs_host_register(tfs_cudart* r, int dev, void* p, size_t n, unsigned int flags) {
	tfs_err e = r->SetDevice(dev);
	if (e) return e;
	return r->HostRegister(p, n, flags);
}

static tfs_err tfs_host_unregister(tfs_cudart* r, void* p) { return r->HostUnregister(p); }

static int tfs_can_ipc(tfs_cudart* r) { return r->IpcGetMemHandle && r->IpcOpenMemHandle && r->IpcCloseMemHandle; }

static tfs_err tfs_ipc_get(tfs_cudart* r, int dev, uintptr_t p, void* out) {
	tfs_err e = r->SetDevice(dev);
	if (e) return e;
	tfs_ipc_handle h;
	e = r->IpcGetMemHandle(&h, (void*)p);
	if (!e) memcpy(out, h.reserved, sizeof h.reserved);
	return e;
}

// cudaIpcMemLazyEnablePeerAccess
#define tfs_ipc_lazy_peer 1

static tfs_err tfs_ipc_open(tfs_cudart* r, int dev, const void* in, uintptr_t* out) {
	tfs_err e = r->SetDevice(dev);
	if (e) return e;
	tfs_ipc_handle h;
	memcpy(h.reserved, in, sizeof h.reserved);
	void* p = NULL;
	e = r->IpcOpenMemHandle(&p, h, tfs_ipc_lazy_peer);
	*out = (uintptr_t)p;
	return e;
}

static tfs_err tfs_ipc_close(tfs_cudart* r, uintptr_t p) { return r->IpcCloseMemHandle((void*)p); }

// tfs_device_uuid writes device dev's name (up to 255 bytes, NUL ended)
// and 16-byte UUID; -1 when the runtime cannot say.
static tfs_err tfs_device_uuid(tfs_cudart* r, int dev, char* name, unsigned char* uuid) {
	if (!r->GetDeviceProperties) return -1;
	// cudaDeviceProp is about 1 KiB; leave room for later additions.
	char* prop = calloc(1, 16384);
	if (!prop) return 2;
	tfs_err e = r->GetDeviceProperties(prop, dev);
	if (!e) {
		memcpy(name, prop, 255);
		name[255] = 0;
		memcpy(uuid, prop + 256, 16);
	}
	free(prop);
	return e;
}

static tfs_err tfs_free_host(tfs_cudart* r, void* p) { return r->FreeHost(p); }

static tfs_err tfs_memcpy_htod(tfs_cudart* r, uintptr_t dst, const void* src, size_t n) {
	return r->Memcpy((void*)dst, src, n, tfs_memcpy_h2d);
}

static tfs_err tfs_memcpy_dtoh(tfs_cudart* r, void* dst, uintptr_t src, size_t n) {
	return r->Memcpy(dst, (const void*)src, n, tfs_memcpy_d2h);
}

// tfs_copy_many queues n host-to-device copies on stream s, then records
// event e after them: one cgo call per staging buffer.
static tfs_err tfs_copy_many(tfs_cudart* r, const uintptr_t* dst, const uintptr_t* src, const size_t* len, int n, tfs_stream s, tfs_event e) {
	for (int i = 0; i < n; i++) {
		tfs_err err = r->MemcpyAsync((void*)dst[i], (const void*)src[i], len[i], tfs_memcpy_h2d, s);
		if (err) return err;
	}
	return r->EventRecord(e, s);
}

// tfs_mem_info reports free and total memory of device dev; -1 in
// *total when the runtime lacks cudaMemGetInfo.
static tfs_err tfs_mem_info(tfs_cudart* r, int dev, size_t* freeb, size_t* total) {
	*freeb = 0; *total = 0;
	tfs_err e = r->SetDevice(dev);
	if (e) return e;
	if (!r->MemGetInfo) { *total = (size_t)-1; return 0; }
	return r->MemGetInfo(freeb, total);
}

static tfs_err tfs_stream_create(tfs_cudart* r, int dev, tfs_stream* s) {
	tfs_err e = r->SetDevice(dev);
	if (e) return e;
	if (r->StreamCreateWithFlags) return r->StreamCreateWithFlags(s, tfs_stream_non_blocking);
	return r->StreamCreate(s);
}

static tfs_err tfs_stream_sync(tfs_cudart* r, tfs_stream s) { return r->StreamSynchronize(s); }

static tfs_err tfs_stream_destroy(tfs_cudart* r, tfs_stream s) {
	return r->StreamDestroy ? r->StreamDestroy(s) : 0;
}

static tfs_err tfs_event_create(tfs_cudart* r, int dev, tfs_event* e) {
	tfs_err err = r->SetDevice(dev);
	if (err) return err;
	if (r->EventCreateWithFlags) return r->EventCreateWithFlags(e, tfs_event_disable_timing);
	return r->EventCreate(e);
}

static tfs_err tfs_event_sync(tfs_cudart* r, tfs_event e) { return r->EventSynchronize(e); }

static tfs_err tfs_event_destroy(tfs_cudart* r, tfs_event e) {
	return r->EventDestroy ? r->EventDestroy(e) : 0;
}

static tfs_err tfs_device_sync(tfs_cudart* r, int dev) {
	tfs_err e = r->SetDevice(dev);
	if (e) return e;
	return r->DeviceSynchronize ? r->DeviceSynchronize() : 0;
}
*/
import "C"

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"unsafe"
)

// Runtime is a CUDA runtime library loaded with dlopen. Its methods are
// safe for concurrent use.
type Runtime struct {
	c    *C.tfs_cudart
	path string

	mu     sync.Mutex
	closed bool // GUARDED_BY(mu)
}

// stream and event are CUDA handles (cudaStream_t, cudaEvent_t).
type stream struct{ p C.tfs_stream }
type event struct{ p C.tfs_event }

// OpenLibrary loads the CUDA runtime from path (a file name that dlopen
// searches for, or a path). It fails with an error wrapping ErrNoRuntime
// when the library cannot be loaded or lacks a symbol an upload needs.
func OpenLibrary(path string) (*Runtime, error) {
	cpath := C.CString(path)
	defer C.free(unsafe.Pointer(cpath))
	var buf [512]C.char
	r := C.tfs_open(cpath, &buf[0], C.size_t(len(buf)))
	if r == nil {
		msg := strings.ReplaceAll(C.GoString(&buf[0]), "\n", " ")
		return nil, &LoadError{Tried: []string{path}, Msg: msg}
	}
	return &Runtime{c: r, path: path}, nil
}

// Open loads the CUDA runtime: from $TENSORFS_CUDART when set, else the
// first of Libraries that dlopen finds (the loader's search path:
// LD_LIBRARY_PATH, ld.so.cache), else from the usual install directories.
func Open() (*Runtime, error) {
	if p := os.Getenv(EnvLibrary); p != "" {
		return OpenLibrary(p)
	}
	var first *LoadError
	tried := []string{}
	for _, name := range candidates() {
		rt, err := OpenLibrary(name)
		if err == nil {
			return rt, nil
		}
		var le *LoadError
		if errors.As(err, &le) && first == nil {
			first = le
		}
		tried = append(tried, name)
	}
	return nil, &LoadError{Tried: tried, Msg: first.Msg}
}

// Path returns the library path Open or OpenLibrary loaded.
func (rt *Runtime) Path() string { return rt.path }

// Close unloads the library. Everything allocated through it must have
// been freed first.
func (rt *Runtime) Close() error {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	if !rt.closed {
		rt.closed = true
		C.tfs_close(rt.c)
	}
	return nil
}

func (rt *Runtime) check(op string, e C.tfs_err) error {
	if e == 0 {
		return nil
	}
	return &Error{Op: op, Code: int(e), Msg: C.GoString(C.tfs_errstr(rt.c, e))}
}

// DeviceCount returns the number of CUDA devices (cudaGetDeviceCount).
func (rt *Runtime) DeviceCount() (int, error) {
	var n C.int
	if err := rt.check("cudaGetDeviceCount", C.tfs_device_count(rt.c, &n)); err != nil {
		return 0, err
	}
	return int(n), nil
}

// SetDevice makes dev the calling thread's current device. An upload calls
// it itself before every allocation; a caller rarely needs it.
func (rt *Runtime) SetDevice(dev int) error {
	return rt.check("cudaSetDevice", C.tfs_set_device(rt.c, C.int(dev)))
}

// Versions returns the runtime and driver versions (1000*major +
// 10*minor), 0 where the library cannot say.
func (rt *Runtime) Versions() (runtime, driver int, err error) {
	var r, d C.int
	err = rt.check("cudaRuntimeGetVersion", C.tfs_versions(rt.c, &r, &d))
	return int(r), int(d), err
}

// Malloc allocates n bytes of device memory on dev. n == 0 allocates
// nothing and returns 0.
func (rt *Runtime) Malloc(dev int, n int64) (DevicePtr, error) {
	if n == 0 {
		return 0, nil
	}
	if n < 0 {
		return 0, fmt.Errorf("cuda: cudaMalloc of %d bytes", n)
	}
	var p C.uintptr_t
	if err := rt.check(fmt.Sprintf("cudaMalloc(%d)", n), C.tfs_malloc(rt.c, C.int(dev), &p, C.size_t(n))); err != nil {
		return 0, err
	}
	return DevicePtr(p), nil
}

// Free frees device memory from Malloc. Free(0) does nothing.
func (rt *Runtime) Free(p DevicePtr) error {
	if p == 0 {
		return nil
	}
	return rt.check("cudaFree", C.tfs_free(rt.c, C.uintptr_t(p)))
}

// HostAlloc allocates n bytes of pinned (page-locked) host memory for
// device dev (cudaHostAlloc). The slice is C memory: free it with
// FreeHost, never let it be used after that.
func (rt *Runtime) HostAlloc(dev int, n int) ([]byte, error) {
	return rt.hostAlloc(dev, n, 0)
}

// Flags of cudaHostAlloc and cudaHostRegister.
const (
	hostAllocWriteCombined = 4 // cudaHostAllocWriteCombined
	hostRegisterPortable   = 1 // cudaHostRegisterPortable
	hostRegisterReadOnly   = 8 // cudaHostRegisterReadOnly
)

func (rt *Runtime) hostAlloc(dev int, n int, flags uint) ([]byte, error) {
	if n <= 0 {
		return nil, fmt.Errorf("cuda: cudaHostAlloc of %d bytes", n)
	}
	var e C.tfs_err
	p := C.tfs_host_alloc(rt.c, C.int(dev), C.size_t(n), C.uint(flags), &e)
	if err := rt.check(fmt.Sprintf("cudaHostAlloc(%d)", n), e); err != nil {
		return nil, err
	}
	return unsafe.Slice((*byte)(p), n), nil
}

// CanRegister reports whether the runtime has cudaHostRegister and
// cudaHostUnregister.
func (rt *Runtime) CanRegister() bool { return C.tfs_can_register(rt.c) != 0 }

// HostRegister page-locks b (host memory the caller owns, e.g. a
// read-only file mapping) for device dev, read-only and portable, so
// that asynchronous copies from it run at the link's speed. Undo it with
// HostUnregister before b goes away.
func (rt *Runtime) HostRegister(dev int, b []byte) error {
	if len(b) == 0 {
		return nil
	}
	if !rt.CanRegister() {
		return fmt.Errorf("cuda: %s has no cudaHostRegister", rt.path)
	}
	return rt.check(fmt.Sprintf("cudaHostRegister(%d)", len(b)), C.tfs_host_register(rt.c, C.int(dev), unsafe.Pointer(unsafe.SliceData(b)), C.size_t(len(b)), C.uint(hostRegisterPortable|hostRegisterReadOnly)))
}

// HostUnregister undoes HostRegister of b.
func (rt *Runtime) HostUnregister(b []byte) error {
	if len(b) == 0 {
		return nil
	}
	return rt.check("cudaHostUnregister", C.tfs_host_unregister(rt.c, unsafe.Pointer(unsafe.SliceData(b))))
}

// IPCHandleSize is the size of a cudaIpcMemHandle_t.
const IPCHandleSize = 64

// CanIPC reports whether the runtime has the CUDA IPC calls.
func (rt *Runtime) CanIPC() bool { return C.tfs_can_ipc(rt.c) != 0 }

// IPCHandle returns the cudaIpcMemHandle_t of device memory p (the base
// of a cudaMalloc allocation) on dev, which another process opens with
// OpenIPCHandle.
func (rt *Runtime) IPCHandle(dev int, p DevicePtr) ([IPCHandleSize]byte, error) {
	var h [IPCHandleSize]byte
	if !rt.CanIPC() {
		return h, fmt.Errorf("cuda: %s has no CUDA IPC (cudaIpcGetMemHandle)", rt.path)
	}
	err := rt.check("cudaIpcGetMemHandle", C.tfs_ipc_get(rt.c, C.int(dev), C.uintptr_t(p), unsafe.Pointer(&h[0])))
	return h, err
}

// OpenIPCHandle maps another process's allocation into this one on dev
// (cudaIpcOpenMemHandle); CloseIPCHandle undoes it.
func (rt *Runtime) OpenIPCHandle(dev int, h [IPCHandleSize]byte) (DevicePtr, error) {
	if !rt.CanIPC() {
		return 0, fmt.Errorf("cuda: %s has no CUDA IPC (cudaIpcOpenMemHandle)", rt.path)
	}
	var p C.uintptr_t
	if err := rt.check("cudaIpcOpenMemHandle", C.tfs_ipc_open(rt.c, C.int(dev), unsafe.Pointer(&h[0]), &p)); err != nil {
		return 0, err
	}
	return DevicePtr(p), nil
}

// CloseIPCHandle unmaps memory from OpenIPCHandle.
func (rt *Runtime) CloseIPCHandle(p DevicePtr) error {
	return rt.check("cudaIpcCloseMemHandle", C.tfs_ipc_close(rt.c, C.uintptr_t(p)))
}

// DeviceUUID returns device dev's name and its UUID as nvidia-smi -L
// prints it ("GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx").
func (rt *Runtime) DeviceUUID(dev int) (name, uuid string, err error) {
	var cname [256]C.char
	var u [16]byte
	e := C.tfs_device_uuid(rt.c, C.int(dev), &cname[0], (*C.uchar)(unsafe.Pointer(&u[0])))
	if e == -1 {
		return "", "", fmt.Errorf("cuda: %s has no cudaGetDeviceProperties", rt.path)
	}
	if err := rt.check("cudaGetDeviceProperties", e); err != nil {
		return "", "", err
	}
	return C.GoString(&cname[0]), formatUUID(u), nil
}

// FreeHost frees memory from HostAlloc.
func (rt *Runtime) FreeHost(b []byte) error {
	if len(b) == 0 {
		return nil
	}
	return rt.check("cudaFreeHost", C.tfs_free_host(rt.c, unsafe.Pointer(unsafe.SliceData(b))))
}

// CopyToDevice copies src to device memory at dst (cudaMemcpy, host to
// device), synchronously.
func (rt *Runtime) CopyToDevice(dst DevicePtr, src []byte) error {
	if len(src) == 0 {
		return nil
	}
	return rt.check("cudaMemcpy(host to device)", C.tfs_memcpy_htod(rt.c, C.uintptr_t(dst), unsafe.Pointer(unsafe.SliceData(src)), C.size_t(len(src))))
}

// CopyToHost copies len(dst) bytes of device memory at src into dst
// (cudaMemcpy, device to host), synchronously.
func (rt *Runtime) CopyToHost(dst []byte, src DevicePtr) error {
	if len(dst) == 0 {
		return nil
	}
	return rt.check("cudaMemcpy(device to host)", C.tfs_memcpy_dtoh(rt.c, unsafe.Pointer(unsafe.SliceData(dst)), C.uintptr_t(src), C.size_t(len(dst))))
}

// Synchronize waits for all work on device dev (cudaDeviceSynchronize).
func (rt *Runtime) Synchronize(dev int) error {
	return rt.check("cudaDeviceSynchronize", C.tfs_device_sync(rt.c, C.int(dev)))
}

// copyMany queues copies of src[i] (pinned memory) to dst[i] on s and
// records e after the last.
func (rt *Runtime) copyMany(dst []DevicePtr, src [][]byte, s stream, e event) error {
	n := len(dst)
	cd := make([]C.uintptr_t, n)
	cs := make([]C.uintptr_t, n)
	cl := make([]C.size_t, n)
	for i := range n {
		cd[i] = C.uintptr_t(dst[i])
		cs[i] = C.uintptr_t(uintptr(unsafe.Pointer(unsafe.SliceData(src[i]))))
		cl[i] = C.size_t(len(src[i]))
	}
	var pd *C.uintptr_t
	var ps *C.uintptr_t
	var pl *C.size_t
	if n > 0 {
		pd, ps, pl = &cd[0], &cs[0], &cl[0]
	}
	return rt.check("cudaMemcpyAsync", C.tfs_copy_many(rt.c, pd, ps, pl, C.int(n), s.p, e.p))
}

// MemInfo returns the free and total memory of device dev
// (cudaMemGetInfo); ok is false when the runtime lacks the call.
func (rt *Runtime) MemInfo(dev int) (free, total int64, ok bool, err error) {
	var f, t C.size_t
	if err := rt.check("cudaMemGetInfo", C.tfs_mem_info(rt.c, C.int(dev), &f, &t)); err != nil {
		return 0, 0, false, err
	}
	if t == ^C.size_t(0) {
		return 0, 0, false, nil
	}
	return int64(f), int64(t), true, nil
}

func (rt *Runtime) newStream(dev int) (stream, error) {
	var s C.tfs_stream
	err := rt.check("cudaStreamCreate", C.tfs_stream_create(rt.c, C.int(dev), &s))
	return stream{s}, err
}

func (rt *Runtime) syncStream(s stream) error {
	return rt.check("cudaStreamSynchronize", C.tfs_stream_sync(rt.c, s.p))
}

func (rt *Runtime) destroyStream(s stream) error {
	return rt.check("cudaStreamDestroy", C.tfs_stream_destroy(rt.c, s.p))
}

func (rt *Runtime) newEvent(dev int) (event, error) {
	var e C.tfs_event
	err := rt.check("cudaEventCreate", C.tfs_event_create(rt.c, C.int(dev), &e))
	return event{e}, err
}

func (rt *Runtime) syncEvent(e event) error {
	return rt.check("cudaEventSynchronize", C.tfs_event_sync(rt.c, e.p))
}

func (rt *Runtime) destroyEvent(e event) error {
	return rt.check("cudaEventDestroy", C.tfs_event_destroy(rt.c, e.p))
}

// CgoEnabled reports that this build can load a CUDA runtime (it has cgo).
const CgoEnabled = true
