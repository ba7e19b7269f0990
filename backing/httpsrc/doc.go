// Package httpsrc reads one file served over HTTP(S) with Range requests:
// a remote.Store for backing/remote.
//
// Keys are decoded URL paths on one server (scheme and host fixed by
// New), escaped for each request: names, as local paths and S3 keys
// are. The URL's query, if any, is kept for every request (a presigned
// URL); no request carries a Referer, so it never reaches a redirect's
// target. The version validated at open is pinned with If-Match on a
// strong ETag, else If-Unmodified-Since on Last-Modified, and every
// response must carry the same validators, a Content-Range of exactly
// the bytes asked for and the total size: a changed file is an error of
// kind Changed even from a server that ignores the preconditions. A
// server that ignores Range (a 200 to a ranged GET) is refused at open,
// whatever the file's size. An encoded reply (Content-Encoding) is
// refused.
//
// HF_TOKEN, when set, is sent as a bearer token to huggingface.co and
// its subdomains only (never to another host, nor on a redirect to one).
// Listing is not possible over HTTP: a sharded checkpoint is loaded from
// its *.index.json weight map, whose shards sit beside it.
package httpsrc
