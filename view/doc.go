// Package view serves one tensor as a byte file: the Reader that the FUSE
// layer, the Go client and `tensorfs cat` read.
//
// New(t, src, to) picks the representation from the tensor's layout:
//
//   - native contiguous (t.Contiguous()): a window of the backing file.
//     Its Reader implements Ranger, so a caller can serve it straight from
//     the file (splice the descriptor).
//   - native strided (t.Strides != nil): the elements gathered in row-major
//     order on each read. Dims of size 1 are dropped and dims that step
//     over each other merged first, so runs are as long as they can be:
//     the innermost dim with stride 1 is one backing read per run, straight
//     into the caller's buffer; whole rows of a transposed layout (the
//     next dim out has stride 1) are read as tiles, one backing read per
//     column of up to 256 rows, transposed through pooled scratch; other
//     strides take one read per element (stride 0 reads the element once
//     and copies it). Strides that turn out to describe one contiguous
//     range give the contiguous Reader.
//   - byteswapped (t.BigEndian): units (dtype.Info.Unit bytes: the element,
//     or a complex component) reversed in place after reading; combined
//     with strided as needed.
//   - converted (to a float view dtype other than t.DType): whole source
//     blocks (of the representation above) read into pooled scratch a
//     bounded step at a time (64 KiB of source), converted with
//     dtype.ConverterFor straight into the caller's buffer; only blocks cut
//     by the read's ends go through scratch.
//   - converted, of a type with row meta (dtype.RowMeta: a scale before
//     each row's blocks, ik_llama.cpp's row-scaled and _KT types):
//     rowConverted (convertrows.go) converts the blocks a read covers
//     with their row's meta, dtype.RowConverterFor; whole rows a step at
//     a time, a row the read starts or ends inside with one more read of
//     its meta.
//   - converted, of a row-interleaved type (dtype.RowGroup: G rows stored
//     as one run of blocks, ik_llama.cpp's _R4/_R8 types): groupConverted
//     (convertgroups.go) converts the groups a read covers with
//     dtype.GroupConverterFor, a group's output being its G rows: whole
//     groups straight into the caller's buffer (a step of source at a
//     time, or a step of a large group's blocks into each of its rows);
//     of a group the read starts or ends inside only the interleaved
//     blocks whose output meets the read, through 16 KiB of pooled
//     scratch, whatever the rows' length.
//
// NewNPY(t, src) is a NumPy .npy file: a format 1.0 header (2.0 where the
// header exceeds 65535 bytes) padded so the data starts at a multiple of
// 64 bytes, then the tensor in its own dtype where NumPy has one, else in
// float32 (NPYDType).
//
// NewExport(idx, srcs, to) is the whole checkpoint as one safetensors
// file (export.go): the header computed once (exact names, the dtype and
// shape ExportForm gives each tensor, data_offsets with no holes,
// __metadata__ with the source's string metadata and where it came
// from), the data ordered widest element first, then by name, so each
// tensor is naturally aligned, and served by range through the Readers
// New builds (stored bytes, gathered strided tensors, conversions,
// dequantization). ExportSize sizes it without building readers; Segment
// says which ranges are plain ranges of a backing file (to splice or
// copy_file_range). Same index and sources, same bytes.
//
// Size(t, src, to) and NPYSize(t, src) return the size of the reader New
// or NewNPY would return, or the error they would fail with, without
// building it or allocating: New is Size's checks followed by construction
// that cannot fail, so the two cannot disagree. A caller laying out many
// files (the FUSE tree) sizes them all up front and builds readers on
// first use.
//
// Open(t, src, Form{To, NPY, Split}) and Sizeof are the one entry point
// callers use (the mount's files, cat, the client): they pick among New,
// NewNPY, NewSlice, NewNPYSlice and their sizes, so the choice of stored
// or converted, raw or .npy, whole or part is written once (open.go).
//
// # Invariants
//
//   - Reads are clamped first: off < 0 is ErrNegativeOffset, off >= Size()
//     gives 0, io.EOF; a read past the end gives the bytes up to Size()
//     and io.EOF.
//   - Exact bytes at any range: a read of [off, off+n) returns exactly the
//     bytes a read of the whole file would have there, including reads
//     that start or end mid-element, mid-unit or mid-block, or span the
//     .npy header and data.
//   - No allocation per read in any representation (converted reads take
//     their scratch from a sync.Pool); memory per read in flight is bounded
//     (at most two pooled 66 KiB scratch buffers: a converted read of a
//     transposed tensor; one of 80 KiB for a row-interleaved type),
//     whatever the tensor's size.
//   - New validates the tensor against the backing file (shape, size,
//     dtype, every byte in range), so reads fail only for the file's sake:
//     a backing fault comes back wrapping backing.ErrFault, which callers
//     map to EIO. Nothing panics.
//   - Readers hold no mutable state: safe for concurrent use.
package view
