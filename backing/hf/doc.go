// Package hf reads a Hugging Face Hub repository as a remote.Store: the
// SOURCE hf://[models/|datasets/]ORG/NAME[@REV][/PATH].
//
// # Endpoint, token, cache
//
// As huggingface_hub reads them (constants.py): the endpoint is
// HF_ENDPOINT (default https://huggingface.co); the token HF_TOKEN, else
// the file HF_TOKEN_PATH, else $HF_HOME/token (HF_HOME default
// $XDG_CACHE_HOME/huggingface, ~/.cache/huggingface); the cache
// LLAMA_CACHE (llama.cpp keeps its -hf downloads in this layout there,
// and looks there first), else HF_HUB_CACHE, else $HF_HOME/hub: the
// first of them that holds the repository's folder, else the first;
// HF_HUB_OFFLINE=1 reads the cache only.
// The token goes as "Authorization: Bearer" to the endpoint's scheme,
// host and port only (OnEndpoint, TokenFor: the one rule, which
// backing/httpsrc follows too): never to a host a redirect leads to
// (the CDN), never through a cache tier (a request that carries it goes
// to the Hub directly), never into a message or a log line.
//
// # Revision
//
// REV (a branch, tag, commit sha or refs/pr/N; default main) is a ref
// name by git's rules (no "..", no component that is empty or starts
// with '.', no control character): never a path, so that it cannot
// leave refs/ in the HF cache. It is resolved
// once, by the first request that needs it, to a commit sha
// (/api/{models,datasets}/ORG/NAME/revision/REV); the tree is then listed
// at that sha (recursive, following Link: rel="next"), and every file is
// read at it (resolve/SHA/PATH): a branch that moves while a mount reads
// changes nothing it serves. The sha is in every URL the store gives
// (hf://ORG/NAME@SHA/PATH), so index.json's sources and ls --json say it.
//
// # Reads
//
// A file's first GET asks resolve/SHA/PATH for its first bytes without
// following redirects: a file in Git LFS or Xet is a 302 to a presigned
// CDN URL (X-Linked-Etag, the LFS sha256, is the file's identity;
// X-Linked-Size its size), a file in git a relative 307 to
// /api/resolve-cache/..., which the store follows with the token (same
// host), directly; without a token, through the cache tier. Ranged GETs
// then go to that location: for the CDN without the token, its ETag
// pinned from the first reply (another is Changed, never mixed bytes).
// A tree whose pages never end (a page URL given twice, a page with a
// next one that adds no entry) is one line at once. A CDN URL is re-obtained from resolve when it is near its
// expiry (Expires, X-Amz-Date with X-Amz-Expires) or the CDN refuses it
// (403), and the redirect's identity must be the one pinned.
//
// # Files in Xet
//
// A file stored in Xet (resolve's 302 carries X-Xet-Hash and a
// `Link: <…/xet-read-token/REV>; rel="xet-auth"`) is read through the
// Xet bridge the redirect names, as a file in LFS is through its CDN:
// never with an unranged GET (the bridge's CloudFront refuses one past
// 50 GB with 400), its size and identity X-Linked-Size and
// X-Linked-Etag, which resolve must give (else one line). The CAS
// protocol and its token are not used. Every answer is checked: a 200
// to a range is the bytes only when the whole file was asked for with
// its size, else the range is asked again once, then one line; a body
// with a Content-Encoding other than identity is refused (every
// request asks for identity: a gzip body's offsets are not the file's,
// and decoding a whole file to serve a range is no read); a 206
// without Content-Range is taken only when it is one part of exactly
// the length asked for, else one line.
//
// # The local HF cache
//
// A file present in the cache at the pinned sha
// (models--ORG--NAME/snapshots/SHA/PATH, a link into blobs/) is read from
// there, with no request. With HF_HUB_OFFLINE the revision comes from
// refs/REV (or is a sha), the listing from snapshots/SHA/, and a file
// missing there is one line naming its path in the cache. A Hub that
// cannot be reached at all (no network, DNS, a refused connection) is
// the same as HF_HUB_OFFLINE when the revision's snapshot is in the
// cache, as huggingface_hub does, with one log line; otherwise its
// error says what to do. A ref's content must be a commit sha (else
// one line, which never repeats it), and a snapshot's files are read
// only where their links lead inside the repository's folder (into
// blobs/). The store never writes into the
// cache unless Options.CacheWrite (--hf-cache-write) asks it to put each
// file read whole there (cachewrite.go).
//
// # Errors
//
// One line from the Hub's X-Error-Code, as huggingface_hub's
// hf_raise_for_status reads it: GatedRepo and RepoNotFound say whether
// HF_TOKEN is needed or lacks access; RevisionNotFound and EntryNotFound
// name the revision or path; 429 and 5xx are Transient (retried with
// backoff by remote.Client).
package hf
