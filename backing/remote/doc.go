// Package remote reads objects of an object store or HTTP server with
// ranged GETs, as backing.Sources.
//
// A Client wraps one Store (backing/s3, backing/hf, backing/httpsrc) and holds what
// its Sources share: the in-memory part cache, the optional disk cache
// and the limit on GETs in flight. Client.Open validates an object with
// one GET of its first part (kept: parsing usually needs nothing else)
// and returns a Source.
//
// # Reading
//
// An object is read in parts of Options.PartSize (8 MiB). A ReadAt
// fetches the parts it needs that are not cached, in parallel (at most
// Options.Parallel GETs in flight, all sources together), and copies
// from them. Consecutive parts missing together (a read or a prefetch
// that spans several) are fetched with one GET of up to 32 MiB that
// fills them in order and publishes each as it is full; a GET cut off
// midway is retried from its first part not yet filled. Stores read
// response bodies straight into the part buffers (ReadBufs). A reader
// whose reads follow one another (up to eight sequential streams per
// source are tracked) gets readahead: the window after its read is
// prefetched, from one part doubling to Options.Readahead; a window that
// slides waits until half of it is missing, so that it is fetched in few
// GETs. A read of a part or more that finds none of its parts cached
// or being fetched (and no disk cache) skips the parts: its GETs (of up
// to 32 MiB, in parallel, pinned and retried as any) read the body
// straight into the caller's buffer, and nothing is cached, so the bytes
// are copied once, not twice. Source.Prefetch of a range of a part or
// more (a loader about to stream a tensor) therefore fetches nothing
// ahead: the loader's reads of it go through a flow, one GET of the
// whole range (up to 1 GiB) whose body is read straight into each of
// the loader's buffers as its ReadAt comes (Store.Get takes bufs[i]
// from its slice only once filled(i-1) has returned, so the flow puts
// the next reader's buffer there): a tensor of N chunks costs one
// request, not N, and no memory beyond the loader's buffers (between
// reads the body waits in the connection). Source.PrefetchPlan (a
// backing.Planner: a loader's worker about to stream a run of tensors
// stored one after another, each in reads of its chunk size) makes one
// flow span the run's ranges: the bytes between two of them, under 64
// KiB (a GGUF's alignment), are read into a buffer of the flow's own and
// dropped; a larger gap ends the flow, the next range's first read
// starting another. An announced range replaces the streams whose
// ranges it overlaps (their reader has moved on). The loader's parallel
// tensors are what keeps GETs in flight; a Client has at most
// Parallel/2 flows open, each holding a slot while its reader is
// between reads. A flow is pinned and retried as any GET (a reply cut
// midway goes on with one ranged GET from the buffer it was filling);
// a read that does not continue it (another offset or length) ends it,
// as do Close, an interrupt and a Timeout with no read, and is served
// as any read; a read whose flow fails otherwise than by the object's
// change or an interrupt is read again as any read, so that a flow only
// ever saves GETs. A read with no Prefetch range (a mount's reader)
// never starts one. A read shorter than a part (check --data's 1 MiB)
// starts one only where its reader streams the range (at its start, or
// right after the last read) and from 64 KiB on; other short reads of a
// range go through parts. Parsers read through ForParsing, which fetches
// small reads as 256 KiB blocks instead of whole parts (a zip's local
// headers, scattered through a large .pt).
//
// # Memory
//
// Parts live in one cache of Options.MemCache bytes per Client, evicted
// least recently used first, with buffers reused. A part being read or
// fetched is pinned. When every part is pinned (more concurrent readers
// than parts), reads use buffers that are dropped after use and
// prefetches are skipped: memory grows with concurrent readers, never
// with the object's size.
//
// # Disk cache
//
// With Options.CacheDir, fetched parts are also written to disk, named by
// an HMAC, under a random key kept in the cache (mode 0600), of the
// store's origin (endpoint and bucket, or the URL but its path and
// secrets), the object's identity (key, size, ETag, version id,
// modification time) and the part size, within Options.CacheSize bytes
// (least recently used evicted). A second open of the same version reads
// them instead of the store: a warm start. A changed object has another
// identity, and another store another origin, so their parts are never
// served for it; an object with no validator at all is not cached on
// disk. Every part read from disk is checked against the HMAC of its name
// and bytes written after them: a part changed in place, torn or planted
// is removed and fetched again (one log line). The cache directory and
// every directory in it must be owned by this user or root and writable
// by nobody else, or the Client is refused; parts are opened under the
// checked directory's descriptor, without following symbolic links, and
// only regular files are read, never waited on.
//
// # Fleets
//
// Options.Proxy names a cache tier (Dragonfly's dfdaemon, an nginx slice
// cache) that the stores send every GET through: TierTransport, http://
// in absolute form, https:// through CONNECT; a tier that fails in any
// way (down, TLS, 5xx, 407, a redirect to what cannot be read, a whole
// body or a 4xx where the origin answers otherwise) is bypassed for a
// few seconds at a time, said once per process, naming the tier. backing/s3 presigns its GETs behind a proxy, so that the tier
// can key an object by its path. GETs in flight are bounded by an AIMD
// limiter: a throttled GET (503, 429) halves the bound, each window of
// successes raises it by one, up to Options.Parallel (Client.Limit); a
// GET holds its slot while it runs, not while it backs off.
//
// # Invariants
//
//   - Every GET after Open is pinned to the version Open validated
//     (If-Match on the ETag, or the version id; If-Unmodified-Since where
//     there is no ETag) and its answer's validators are checked. Once an
//     object is seen to have changed, every read of its Source fails
//     with an error wrapping backing.ErrFault (EIO through FUSE), cached
//     parts included, and one line is logged: never a mix of versions.
//   - Transient failures (5xx, 429, 503 SlowDown, refused or reset
//     connections, timeouts) are retried with exponential backoff and
//     full jitter within a deadline: Options.Timeout per read,
//     Options.OpenTimeout for opening and listing. A store that stays
//     away fails reads in bounded time; the same Source serves again once
//     it is back (failed parts are not cached).
//   - Errors are *Error: the URL, the HTTP status and store code, a
//     message; never credentials or a presigned query.
//   - io.ReaderAt semantics over the object as opened: Size is fixed;
//     reads are clamped; safe for concurrent use; reads after Close fail
//     with an error wrapping os.ErrClosed.
//
// Tree presents a Client as a tree of paths for formats.LoadTree, so that
// a prefix holding a sharded checkpoint loads as a directory does.
package remote
