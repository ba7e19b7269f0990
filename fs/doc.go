// Package fs serves a parsed checkpoint (an index.Index and its backing
// sources) as a read-only FUSE filesystem. It is the only package that
// imports go-fuse; the semantics live in plain data built once by NewRoot
// (the tree and every file's exact size), so they are tested without
// mounting, and the FUSE glue (raw.go) only looks things up in it.
//
// # Tree
//
// NewRoot builds the whole tree once, before mounting, and it never
// changes. Tensor files sit at index.Tensor.Path ('/' makes directories;
// the index package maps awkward names to usable paths and refuses
// nothing here: NewRoot only checks that every path is usable and that no
// two clash). Directories are 0555, files 0444 with their exact size, and
// every time stamp is the newest backing file's mtime. Each directory's
// children are sorted by name and found by binary search; inode numbers
// (below) depend only on the index.
//
// One tree, every view. The tensors' directories and files are built
// once, in one path tree (paths.go), that every place showing tensors
// shares: the top level, .native/, .bf16/ .f16/ .f32/ .f64/ and .npy/. A
// view is not a copy of the tree but a flag on its nodes: a membership
// byte per file (which places hold it; worked out at NewRoot with the
// checks view.Open runs) and per directory (which places have a
// file below it), so that a directory with nothing a view holds below it
// is absent from that view, as is a tensor the view cannot show. The
// tree is flat slices of integers: directories numbered in preorder,
// files numbered as their tensors, and a slot per node holding every
// directory's children together, sorted by name (found by binary
// search); a directory's name is kept once in a string of names (a name
// equal to the one before is not repeated), a file's is the last
// component of its tensor's path. A directory costs 13 bytes and a file
// 5, whatever the number of views: memory linear in the paths, once
// (400 names 2,000 components deep, a 1.6 MB header: 10.5 MB, where six
// trees of 64-byte entries took 539 MB). It is built in three walks of
// the sorted paths with a stack of the open directories (count, name,
// fill the slots), in time linear in the paths' bytes and with nothing
// kept per prefix.
//
// Node IDs (the kernel's, and inode numbers): the static entries (the
// top level, the view directories, .tensorfs/ and what it holds, the
// .safetensors/ directories and their files: entry, a few dozen, built
// with a builder) are numbered 1 (the top) and up, depth-first in name
// order. A node of the path tree seen in a place has the node ID
//
//	place<<32 | slot+1
//
// where place says which view (placeTop, placeNative, placeBF16...
// placeNPY, in its low 4 bits) and slot is the node's slot: the same
// directory in two views is two inodes, and every number depends only on
// the index. A request turns its node ID into a node value (node.go: the
// place, the directory's number or the file's fileData for that place)
// and keeps nothing per node the kernel looks up: the mount is served
// through go-fuse's raw API (raw.go), with no go-fuse Inode, identity
// map or lookup count, and FORGET is a no-op. A static directory shows a
// place's root after its own children (dirData.view), so a view
// directory holding only .safetensors/ is a static directory with an
// empty place. In .npy/ a file is listed and looked up as <name>.npy
// (<name>.npy% where a sibling directory is called <name>.npy), and its
// listing is in the stored tree's order. .tensorfs/index.json is rendered
// on demand (indexFile), not kept: a tensor index per line.
//
// Variants of a view without a tree each: the 28 bits of place above the
// base place carry parameters of a view computed on demand. Tensor-
// parallel slices (split.go: .split/<dim>/<parts>/<part>/ under each
// view) use them: dim+1, parts and part+1 in 7, 10 and 10 bits, so that
// <part>/<path> is the shared tree's node at slot with a place of (base,
// dim, parts, part), its file's size and reader computed from those
// parameters as a converted file's are from its dtype; .split/ is a
// static directory per place, and <dim>/, <parts>/ and <part>/ are nodes
// whose low 32 bits are 0 (no slot) with the parameters given so far.
// Readers built on first open are kept by node ID (contentsMap), so they
// too need nothing per combination until read.
//
// # Adding a directory or a kind of file
//
// The tree is data, the FUSE glue generic: a new directory is a builder
// (newBuilder, add/addStatic/addVirtual, finish) attached to the top or
// to another builder in NewRoot (see buildControl); a new kind of file is
// a virtualFile (Size and ReadAt, optionally Xattrs) put in with
// builder.addVirtual, and it is served, listed, stat'ed and read with no
// change to raw.go. Per-open state goes in a handle (Root.open returns
// it; raw.go keeps it by file handle number until RELEASE): stats.json's
// snapshot, or the descriptor of a file served by FUSE passthrough, for
// which raw.go registers one backing ID per inode (passthrough.go).
//
// A file served through a view.Reader (a converted or .npy view, a
// strided or big-endian stored tensor) gets its reader on its first open
// or read, not at mount, kept by node ID: NewRoot checks it with
// view.Sizeof (which sizes it until the reader exists),
// which runs the very checks view.Open runs, so the tree (which
// tensors each view holds, every size) is what eager readers would give.
// Concurrent first reads may each build a reader; one is kept. Should a
// build fail after all, the file is EIO, with one log line.
//
// The top level holds:
//
//   - the tensors in their stored dtype (or, with Options.View, converted
//     to that dtype, the stored tree then being under .native/);
//   - .tensorfs/index.json (the index.Document of the top level, sized
//     at mount, its bytes made on each read by index's writer, those of
//     `tensorfs ls --json`; "view" is added when the top level is
//     converted),
//     .tensorfs/metadata/<key> (one file per top-level metadata key:
//     strings as they are, other values as JSON; names by
//     MetadataFileName) and .tensorfs/stats.json (live counters, rendered
//     at each open);
//   - .f32/ .f16/ .bf16/ .f64/: the tree of tensors that view.Convertible
//     accepts (a tensor already in that dtype is served as stored), and
//     .npy/ with <path>.npy for each tensor view.Open accepts as .npy. Each
//     exists even with no tensor in it (a checkpoint of integers, or of
//     no tensors; .native/ too, with Options.View), so that its
//     .safetensors/ export does: its place is then empty. Inside a view,
//     a directory with nothing of that view below it is absent; a tensor
//     whose view path would be too long is left out of that view with a
//     log line;
//   - .safetensors/ (export.go): model.safetensors, the tree as one
//     safetensors file (view.Export in the tree's dtype), and beside it
//     Options.ExportFiles (a Hugging Face directory's config and
//     tokenizer files); likewise in .native/ and in each float view's
//     directory. The export is sized at NewRoot and built on first read,
//     once per dtype;
//   - with Options.ExportFiles, the same files and model.safetensors at
//     the top of each of those trees, beside its tensors (modeldir.go:
//     the mount as a model directory; a tensor of one of those names
//     moves to NAME#N; a converted tree's config.json says its dtype);
//   - .files/ (modeldir.go): each file of the checkpoint as it is,
//     served as a stored tensor that is the whole file (dtype.Invalid:
//     fileData.whole), so spliced and counted alike (but never passed
//     through: an O_DIRECT read off the backing file's alignment would
//     fail there).
//
// Every tensor file has the extended attributes user.tensorfs.name (the
// exact name), user.tensorfs.dtype (of the bytes this file serves: the
// stored dtype in the stored tree, the view's in a view, the .npy data's
// in .npy/), user.tensorfs.shape (JSON) and, where the file is one
// contiguous range of a backing file, user.tensorfs.source and
// user.tensorfs.offset.
//
// # Reads
//
// Every read is clamped first: at or past the end it returns no data.
// A stored tensor that is one contiguous little-endian range of a source
// offering a descriptor (backing.FdSource) is answered with the
// descriptor and an offset, and go-fuse splices the bytes from the page
// cache into the FUSE device; MaxWrite is then kept small enough for the
// reply to fit go-fuse's pipe (MaxReadSize, MaxRequestSize). Only tensor
// files count: a tree whose tensors have no descriptor (or NoSplice) does
// not splice and gets whole 1 MiB requests. Other contiguous tensors are
// read with Source.ReadAt, and strided, byte-swapped, converted and .npy
// files with view.Reader.ReadAt, straight into the buffer go-fuse hands
// the request: no allocation per read. A read that comes back short inside
// the file (the backing file shrank) is EIO rather than a short reply,
// which would make the kernel shrink the file; a spliced read checks the
// backing file's size with fstat first, since go-fuse would send a short
// splice as a short reply. For the same reason a range is spliced only
// where go-fuse's pipe surely takes it whole (Root.spliced,
// splicedWhole: the header's buffer and one per page of the file the
// range touches, within the pipe go-fuse grows for the reply); a file's
// last, partial request may not fit and is copied instead.
//
// # Caching
//
// The tree never changes, so the kernel is told so: entry, attribute and
// negative-lookup timeouts of Options.Timeout (DefaultTimeout, an hour; a
// missing name is answered as a negative entry, node ID 0, which the
// kernel keeps for that long),
// FOPEN_KEEP_CACHE on every file (pages stay cached across opens) and
// FOPEN_CACHE_DIR on directories. stats.json is the exception: it is
// opened with FOPEN_DIRECT_IO and reads a snapshot taken at open.
//
// Mount widens the mount's readahead window (its bdi read_ahead_kb) to
// DefaultReadAheadRequests requests of MaxWrite when it runs as root, so
// that sequential first reads and mmap faults reach the server as whole
// requests rather than the kernel's 128 KiB. With Options.DirectIO, tensor
// files are opened with FOPEN_DIRECT_IO instead of FOPEN_KEEP_CACHE: each
// read goes to the server at its own size and nothing of the checkpoint is
// cached twice; Mount enables it only where the kernel lets such files be
// mapped shared (FUSE_DIRECT_IO_ALLOW_MMAP), so mmap keeps working. The
// measurements behind these choices are in docs/BENCHMARKS.md.
//
// One copy in memory (cache.go): a byte read through the mount sits in
// the FUSE file's page cache; the server read it from the backing file,
// whose page cache holds it too. Unless Options.KeepBackingCache, the
// server counts the bytes it has served from each 2 MiB-aligned chunk of
// a backing file and drops the chunk from the page cache
// (backing.CacheDropper: madvise and posix_fadvise DONTNEED) once every
// tensor byte in it has been served, after the reply was written (a
// spliced page still in the pipe cannot be dropped). Direct-I/O mounts,
// whose only copy is the backing file's, drop nothing. The safetensors
// exports' reads count too (export.go).
// Stats.BackingDropped counts the bytes dropped.
//
// Passthrough (passthrough.go): a file that is a whole backing file byte
// for byte (a .npy source's .npy/ file) is opened with FUSE passthrough
// where the kernel allows it (Linux 6.9+, root), so the kernel reads the
// backing file itself; Options.NoPassthrough turns it off.
//
// MountNull serves a tree of zero-filled files from one buffer with the
// same request size, readahead and caching as Mount: the yardstick of
// tensorfs bench.
//
// # Errors
//
// An error becomes an errno in exactly one function, toErrno: an errno
// keeps its value, a canceled request is EINTR, and everything else, a
// backing.ErrFault (truncated file, SIGBUS on a mapping, EIO) included,
// is EIO. A panic in a request is logged, counted in stats.json and
// answered EIO (go-fuse's PanicHandler); the server keeps serving.
// Writes of every kind fail: the mount is "ro" (MS_RDONLY), so the kernel
// answers EROFS itself, and the server answers EROFS should a request get
// through.
//
// # Mounting and stale mounts
//
// Mount checks the mount point first (CheckMountpoint: missing, not a
// directory, already a FUSE mount, or a dead mount left by a killed
// server), mounts with mount(2) when root (fusermount3 otherwise), and
// returns the running *fuse.Server. Unmount works on live and dead mounts
// and refuses non-FUSE ones. Both read /proc/self/mountinfo rather than
// the mount.
//
// No close of a file of the mount waits on the server: files are opened
// with FOPEN_NOFLUSH, and FLUSH is answered ENOSYS (raw.go), so a process
// exiting with one open while the server is stopped, hung or itself
// exiting does not hang in fuse_flush. Mount refuses a tree read from a
// file under its own mount point (checkOutside).
//
// # Deadlocks
//
// Never read a mount from the process that serves it. A FUSE request from
// the serving process ties up a thread on each side, and some requests
// come from places the Go runtime does not expect to block (fork/exec in
// a child about to exec, a dup3 that closes a FUSE fd), which can hang the
// process. Tests and the demo read mounts from subprocesses only, and
// nothing in this package touches its own mount point once it is mounted
// (readahead tuning finds the mount in /proc/self/mountinfo; the only
// request the server sends itself is go-fuse's own poll probe in
// WaitMount, which go-fuse answers internally).
package fs
