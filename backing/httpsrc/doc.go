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
// The Hub's token goes by the Hub's one rule (hf.TokenFor): the token
// huggingface_hub would use (HF_TOKEN, the file HF_TOKEN_PATH,
// $HF_HOME/token), as a bearer token to the Hub's endpoint only (the
// scheme, host and port of HF_ENDPOINT, default https://huggingface.co):
// never to another host, a subdomain (the CDN) or port, never on a
// redirect away from it, and never through a cache tier (a store that
// holds it sends its requests directly).
// Listing is not possible over HTTP: a sharded checkpoint is loaded from
// its *.index.json weight map, whose shards sit beside it.
package httpsrc
