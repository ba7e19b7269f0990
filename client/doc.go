// Package client is the tensorfs uploader client: a Go program (a model
// server, a GPU loader through cgo) uses it to pull the tensors of a
// checkpoint piecemeal, with the memory it holds bounded by the chunk size
// and the number of tensors in flight, never by the checkpoint's size.
//
// # Opening
//
// Open takes a checkpoint file, a directory holding a sharded checkpoint,
// or a tensorfs mount point, behind one API:
//
//   - a file or a sharded directory is parsed in-process (formats.Load over
//     backing.Open; no FUSE needed) and validated completely before Open
//     returns; its files are read with pread unless OpenWith says
//     otherwise (with mmap, Stream drops the pages it has read from the
//     mapping, so the resident set stays bounded too);
//   - a directory holding .tensorfs/index.json is a mount: the index comes
//     from that file (each tensor's role from its "role", the logical
//     weights of a quantized checkpoint from "quantization") and each
//     tensor's bytes from MOUNT/<path>, or MOUNT/.f32/<path> (.f16,
//     .bf16, .f64) for a converted view, read with os.File.ReadAt.
//
// A remote path (s3://BUCKET/KEY, hf://ORG/NAME, http(s)://..., a scheme
// of the table source.Schemes) is opened by package source, read with
// ranged GETs through a part cache (Options.Remote). Every scheme but
// s3:// needs nothing more; s3:// needs the S3
// opener passed in, so that only a program that asks for s3:// links the
// AWS SDK:
//
//	import "github.com/lazyweights/tensorfs/backing/s3"
//	import "github.com/lazyweights/tensorfs/source"
//
//	ck, err := client.OpenWith("s3://bucket/model.safetensors",
//		client.Options{Remote: &source.RemoteOptions{S3: s3.Open}})
//
// Without it, an s3:// path fails with one line that says so.
//
// Tensors lists every tensor (name, dtype, shape, bytes) in index order,
// which is sorted by name; Metadata returns the checkpoint's own metadata.
//
// # Reading one tensor
//
// Every method about one tensor takes its name, as Tensors lists it:
// Tensor, Convertible, OpenTensor and ReadFloat32. Where a dtype is asked
// for, AsStored means the bytes as stored, unconverted.
//
// ReadFloat32 is the common case in one call: the tensor's values as a
// []float32, converted where it is not F32, refused (ErrTooLarge) past
// MaxReadValues bytes so that one call cannot take unbounded memory.
//
// OpenTensor returns a TensorReader, an io.ReaderAt, io.Reader and
// io.Seeker over the tensor's bytes in row-major order, little-endian,
// either as stored (AsStored) or converted to F64, F32, F16 or BF16
// (round to nearest even; NaN and Inf kept); Convertible says beforehand
// whether a tensor has a view in a dtype. Reads at any offset return
// exactly the bytes a read of the whole tensor would have there.
//
// # Streaming a checkpoint
//
// Stream delivers every selected tensor into a Sink. Its invariants:
//
//   - Memory: Stream reads into a fixed pool of StreamOptions.Parallel
//     buffers of ChunkSize bytes, allocated once per call, or into the
//     buffers the sink supplies (BufferProvider), and allocates no other
//     chunk-sized memory. What it holds is that pool plus a small constant
//     per tensor in flight, whatever the checkpoint's size.
//   - Order: tensors are taken in index order, at most Parallel at a
//     time (with Parallel 1, Begin calls come in exactly that order), and
//     may end out of order. The chunks of one tensor arrive in
//     order, at consecutive offsets from 0, each a full buffer but the
//     last, never concurrently; chunks of different tensors may arrive
//     concurrently.
//   - Ownership: a chunk belongs to the sink only until Write returns,
//     unless the sink supplied the buffers; then it keeps it until Stream
//     calls Reclaim for that buffer, which Stream does before every refill.
//     This is how a GPU sink overlaps reading with asynchronous copies.
//   - Ending: End is called exactly once for every tensor whose Begin
//     succeeded, with nil or with the error that stopped it.
//   - Errors: the first read or sink error stops the stream (the other
//     tensors in flight end with it) and is returned as a *TensorError
//     whose one-line message names the checkpoint, the tensor, the
//     operation and the byte offset. Cancelling the context stops the
//     stream between chunks and Stream returns the context's cause.
//   - Remote sources: when every tensor is read whole and as stored
//     from a source that fetches ahead (backing.Planner), each worker
//     takes a run of tensors stored one after another (each file's
//     tensors in byte order, about Parallel runs of equal bytes) and
//     tells the source the run's ranges as it starts it (PrefetchPlan):
//     one GET per run (runs.go). Otherwise, when a tensor starts, Stream
//     tells its source which bytes are about to be read (Prefetch), and
//     the source of the next tensor too, so that GETs for the next
//     tensor overlap the reading of this one; the memory that costs is
//     the source's part cache, bounded by its own budget
//     (backing/remote).
//
// # Filling a destination without order
//
// Fill (with PlanFill) is Stream without order, for a destination
// addressed by (tensor, offset) such as one GPU allocation (client/cuda):
// chunks of one tensor are read concurrently by FillOptions.Workers
// goroutines and arrive in any order; tensors stored as delivered are
// read by file range, several small ones per chunk (Segments say which
// bytes go where); a local file mostly absent from the page cache
// (backing.Residency, mincore) is read with O_DIRECT straight into the
// sink's page-aligned buffers, so that it does not fill the page cache;
// converted, strided and quantized tensors, and every tensor of a mount,
// are read through their readers. Memory: the sink's buffers, whatever
// the checkpoint's size. FillOptions.Split and StreamOptions.Split
// deliver only a part of each tensor (tensor parallelism, OpenSlice).
//
// # Conversion
//
// StreamOptions.DType converts every tensor that has a view in that dtype;
// tensors without one (integers, bool, complex) are delivered as stored,
// and Sink.Begin is told the dtype of the bytes it will receive.
//
// # Safetensors
//
// Safetensors(dt) is the checkpoint as one safetensors file, the bytes a
// mount serves as .safetensors/model.safetensors (computed from the index
// for a checkpoint opened directly, the mount's file otherwise), and
// WriteSafetensors writes it to an io.Writer in bounded memory (2 x
// Parallel chunks), which `tensorfs convert` uses.
//
// Package client never imports the FUSE layer; it builds on index,
// backing, dtype and view. The cgo GPU sink lives in client/cuda.
package client
