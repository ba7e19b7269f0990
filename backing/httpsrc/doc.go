// Package httpsrc reads one file served over HTTP(S) with Range requests:
// a remote.Store for backing/remote.
//
// Keys are URL paths on one server (scheme and host fixed by New); the
// URL's query, if any, is kept for every request (a presigned URL). The
// version validated at open is pinned with If-Match on a strong ETag,
// else If-Unmodified-Since on Last-Modified, and every response's ETag,
// Last-Modified and total size are checked against it: a changed file
// is an error of kind Changed even from a server that ignores the
// preconditions. A server that ignores Range is refused unless the whole
// file fits the first read.
//
// HF_TOKEN, when set, is sent as a bearer token to huggingface.co and
// its subdomains only (never to another host, nor on a redirect to one).
// Listing is not possible over HTTP: a sharded checkpoint is loaded from
// its *.index.json weight map, whose shards sit beside it.
package httpsrc
