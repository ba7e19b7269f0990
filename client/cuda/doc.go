// Package cuda uploads a checkpoint into CUDA device memory for the
// tensorfs client, through pinned staging buffers, overlapping reading
// with asynchronous copies. It has one upload API: UploadCheckpoint.
//
// # No CUDA at build time
//
// The package needs cgo but no CUDA headers or libraries to build: Open
// loads the CUDA runtime (libcudart.so, .so.12, .so.11.0, or the file
// named by $TENSORFS_CUDART) with dlopen at run time and resolves the few
// functions it calls. Where there is none, Open fails with one line,
// `CUDA runtime not found (libcudart.so): <why>`, wrapping ErrNoRuntime.
// Built with CGO_ENABLED=0 the package compiles and Open always fails.
//
// # How an upload works
//
// UploadCheckpoint(ctx, rt, ck, opts) copies the selected tensors of a
// client.Checkpoint (UploadOptions: Device, DType, Filter, Split) into
// one cudaMalloc allocation, each tensor at a DeviceAlign (256-byte)
// aligned offset, so that a consumer, or another process through a CUDA
// IPC handle (Upload.IPCIndex, OpenIPC, OpenMount), needs one pointer for
// the whole checkpoint:
//
//   - first it checks the device and its free memory (ErrNoDevice,
//     ErrDeviceFull, before anything is allocated), then allocates the
//     device memory and, at once, UploadOptions.Buffers pinned buffers of
//     ChunkSize bytes (write-combined unless Cacheable), one CUDA event
//     per buffer, and UploadOptions.Streams streams;
//   - client.Checkpoint.Fill reads the tensors into the pinned buffers
//     from Workers goroutines (chunks of one tensor in parallel, small
//     tensors together by file range, cold files with O_DIRECT; see
//     client.ReadPath), and each filled buffer's copies are queued with
//     cudaMemcpyAsync on stream (buffer index mod Streams), its event
//     recorded after them;
//   - a buffer is refilled only after its event has completed (the
//     FillSink's Reclaim): it is never overwritten while a copy from it
//     may still be running;
//   - with Register, tensors stored as delivered in a mapped file (ck
//     opened with backing.Mmap) are copied straight from the mapping,
//     registered with cudaHostRegister, instead of staged.
//
// UploadCheckpoint returns once every byte is on the device; an error or
// a cancelled ctx frees everything before it returns. The host memory an
// upload holds is the staging buffers, whatever the checkpoint's size;
// they are freed (and mappings unregistered) in the background after it
// returns. The Upload lists the Tensors (device pointer, offset, dtype,
// shape, split part) and Stats; Verify compares every tensor on the
// device with the host's bytes (sha256); Free waits for the background
// teardown and frees the allocation. Defaults chooses the zero fields of
// UploadOptions from the machine.
//
// # Testing without a GPU
//
// The tests build testdata/fakecudart.c, a stand-in libcudart with the
// same symbols over host memory that defers every asynchronous copy until
// the caller synchronizes and logs every call, and prove that every byte
// lands at its device offset, that buffers are reused only after their
// copies completed, and that an upload that reuses them too early is
// caught. cudacheck (client/cuda/cudacheck) does the same on a real GPU
// and measures throughput.
package cuda
