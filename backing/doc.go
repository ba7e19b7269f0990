// Package backing reads the files a checkpoint is stored in.
//
// A Source is one read-only file of fixed size (its size when opened) read
// with ReadAt. Open picks how, by Mode:
//
//   - Mmap (default): a read-only MAP_SHARED mapping of the whole file;
//     ReadAt copies out of it, except reads of 64 KiB and more, which
//     are preads (no page faults on pages not yet mapped). Empty files
//     have no mapping.
//   - Pread: pread(2) on the descriptor, for network filesystems where
//     faults on a mapping stall.
//   - Direct: O_DIRECT preads rounded out to 4 KiB through pooled aligned
//     bounce buffers, bypassing the page cache. Filesystems that refuse
//     O_DIRECT (tmpfs) make Open fail with ErrDirectUnsupported.
//
// # Invariants
//
//   - Only regular files are opened (OpenRegular, which Open uses): a
//     path that is, or links to, a named pipe, a device, a socket or a
//     directory is refused with ErrNotRegular before it is opened, and
//     the open itself is O_NONBLOCK (cleared after an fstat confirms a
//     regular file), so no open ever blocks or has a device's side
//     effect.
//   - Reads are clamped first: off < 0 is an error, off >= Size() gives
//     0, io.EOF, a read running past Size() gives the bytes up to Size()
//     and io.EOF. A read never touches memory outside the file's range.
//   - A fault is an error, not a crash. If the file shrinks while open, a
//     mapped read of a vanished page raises SIGBUS; the copy runs under
//     debug.SetPanicOnFault and the fault comes back as a *FaultError
//     wrapping ErrFault (callers map it to EIO). The last partial page of
//     a truncated file reads as zeros without a fault, so a mapped read
//     whose last byte is zero also checks the file's size with fstat.
//     pread and O_DIRECT reads that end early, or fail with EIO, give the
//     same error. Bytes that still exist keep being served.
//   - No allocation per read (the Direct bounce buffers are pooled).
//   - Sources are safe for concurrent use. Close waits for reads in
//     flight; later reads fail with an error wrapping os.ErrClosed.
//
// # Optional interfaces
//
// Callers test for these and fall back to ReadAt without them:
//
//   - FdSource: a descriptor to splice or pread from directly (Mmap and
//     Pread sources; the Direct source says ok == false).
//   - Adviser: access-pattern hints, madvise on the mapping or
//     posix_fadvise on the descriptor.
//   - CacheDropper: drop the page cache of a range already copied out
//     (and cached elsewhere: by the FUSE mount that served it), unmapping
//     it from this process first where it is mapped (Mmap and Pread
//     sources; Direct has no cache to drop). Only clean pages nobody else
//     maps go; reads are never affected, only whether they hit the cache.
//
// Nothing outside this package may assume a mapping exists.
//
// # Parsing
//
// Callers validate a checkpoint through ForParsing(src) and serve it
// through Unwrap of that: a mapped source is then parsed with pread on its
// descriptor, so scattered header reads do not map the file's cached pages
// into the process; other sources parse as they serve.
//
// # Compressed members
//
// InflateCache.OpenMember makes a Source of a deflated member of a zip
// file (an .npz written by numpy.savez_compressed) that any other Source
// (local or remote) holds: inflated once on first read, into memory or an
// unlinked temporary file, within the cache's memory and disk limits,
// with its size and CRC-32 checked (inflate.go). Member.Codec says how
// the member is stored, one type per codec (codec.go): Deflated, Zstd (a
// distributed checkpoint's item, decoded as zstdpool says), Decoded (a
// format's own decoder), and Latin1, decoded instead of inflated: the
// UTF-8 of a Python str of code points below 256 (a numpy array's bytes
// in a protocol-2 pickle), one byte per code point, every byte and the
// decoded length checked; its holder may itself be a member (the str
// inside a deflated data.pkl); and Stream, a whole gzip or zstd stream
// of a size known only once decoded (an OCI .tar+gzip or .tar+zstd
// layer), which InflateCache.DecodeStream decodes once for its caller
// (who reads the tar's headers) and the cache together, reserving disk
// as the bytes come (inflate_stream.go). It
// implements none of the optional interfaces: it has no descriptor to
// splice and no page cache of the checkpoint to drop. A member that fits
// the disk limit never fails for room taken by others: its reservation
// waits (bounded by InflateOptions.Wait) while members are being inflated
// or read, and a file being read is never dropped (inflate_room.go).
//
// Reopen opens a local file's source again in another mode from its
// descriptor, never by name: the very file validated (mount --gpu uploads
// from it by pread while the mount serves its mapping).
//
// # New kinds of source
//
// Everything above backing (index, view, fs, client) needs only the Source
// interface, so a new kind of backing store (an object store read with
// ranged GETs, a cache) is a new type implementing Source, and the
// optional interfaces only where they mean something for it. It must keep
// the invariants: clamped io.ReaderAt semantics, a fixed Size, concurrent
// reads, errors wrapping ErrFault for bytes that cannot be had.
package backing
