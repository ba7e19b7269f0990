// Package cuda is a GPU upload sink for the tensorfs client: it streams a
// checkpoint's tensors into CUDA device memory through pinned staging
// buffers, overlapping reading with asynchronous copies.
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
// A Sink owns Options.Streams CUDA streams and Options.PinnedBuffers
// pinned host buffers of Options.ChunkSize bytes (cudaHostAlloc), one
// CUDA event per buffer. Given to client.Checkpoint.Stream, which reads
// into those buffers because the sink is a client.BufferProvider:
//
//   - Begin allocates the tensor's device memory (cudaMalloc, one per
//     tensor);
//   - Write queues cudaMemcpyAsync(ptr+off, buffer, n, host to device) on
//     stream (buffer index mod Streams) and records the buffer's event;
//   - Reclaim, which the client calls before refilling a buffer, waits for
//     that buffer's event: a buffer is never overwritten while a copy from
//     it may still be running;
//   - End waits for the streams the tensor used; a tensor that failed is
//     freed.
//
// The host memory the upload holds is the pinned buffers, whatever the
// checkpoint's size. Tensors returns the device pointers; Free releases
// everything (Detach first to keep the device memory).
//
// # Testing without a GPU
//
// The tests build testdata/fakecudart.c, a stand-in libcudart with the
// same symbols over host memory that defers every asynchronous copy until
// the caller synchronizes and logs every call, and prove that every byte
// lands at its device offset, that buffers are reused only after their
// copies completed, and that a sink that reuses them too early is caught.
// cudacheck (client/cuda/cudacheck) does the same on a real GPU and
// measures throughput.
package cuda
