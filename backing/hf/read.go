package hf

// This file: ranged reads of a file: the resolve redirect followed to the CDN, pinned, re-obtained when it expires.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/lazyweights/tensorfs/backing/remote"
)

// locate asks resolve where key's bytes are (without following its
// redirect), checking that the Hub names the file pinned: the sha, its
// identity and size.
func (s *Store) locate(ctx context.Context, obj remote.Object) (location, error) {
	key := obj.Key
	sha := s.Revision()
	req, err := s.request(ctx, http.MethodHead, s.resolveURL(sha, key), nil)
	if err != nil {
		return location{}, err
	}
	resp, err := s.do(s.api, req, key)
	if err != nil {
		return location{}, err
	}
	defer drain(resp)
	changed := func(format string, args ...any) error {
		return &remote.Error{URL: s.URL(key), Kind: remote.Changed, Msg: fmt.Sprintf(format, args...)}
	}
	if c := resp.Header.Get("X-Repo-Commit"); c != "" && c != sha {
		return location{}, changed("the Hub answered for commit %s, not %s", c, sha)
	}
	switch resp.StatusCode {
	case http.StatusMovedPermanently, http.StatusFound, http.StatusSeeOther, http.StatusTemporaryRedirect, http.StatusPermanentRedirect:
	case http.StatusOK:
		// The bytes are at resolve itself.
		return location{url: s.resolveURL(sha, key), hub: true}, nil
	default:
		return location{}, s.hubError(key, resp)
	}
	// A file in Xet (X-Xet-Hash) is read through the bridge with ranged
	// GETs alone: its size and identity are X-Linked-Size and
	// X-Linked-Etag (the LFS sha256; its ETag is the pointer's git oid),
	// which it must have.
	xet := resp.Header.Get("X-Xet-Hash") != ""
	if xet {
		for _, h := range []string{"X-Linked-Etag", "X-Linked-Size"} {
			if resp.Header.Get(h) == "" {
				return location{}, &remote.Error{URL: s.URL(key), Kind: remote.Invalid, Status: resp.StatusCode, Msg: "the Hub gave a file in Xet without " + h}
			}
		}
	}
	etag := normalizeETag(resp.Header.Get("X-Linked-Etag"))
	if etag == "" {
		etag = normalizeETag(resp.Header.Get("ETag"))
	}
	if etag != "" && obj.ETag != "" && etag != obj.ETag {
		return location{}, changed("the Hub gives ETag %s, was %s", etag, obj.ETag)
	}
	if ls := resp.Header.Get("X-Linked-Size"); ls != "" {
		n, err := strconv.ParseInt(ls, 10, 64)
		if err == nil && n != obj.Size {
			return location{}, changed("the Hub gives %d bytes, was %d", n, obj.Size)
		}
		if err != nil && xet {
			return location{}, &remote.Error{URL: s.URL(key), Kind: remote.Invalid, Status: resp.StatusCode, Msg: fmt.Sprintf("the Hub gave a file in Xet with X-Linked-Size %s", strconv.Quote(ls))}
		}
	}
	u, err := req.URL.Parse(resp.Header.Get("Location"))
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") {
		return location{}, &remote.Error{URL: s.URL(key), Kind: remote.Invalid, Status: resp.StatusCode, Msg: "the Hub redirected to a malformed URL"}
	}
	return location{url: u.String(), hub: s.isHub(u), xet: xet, expires: expiry(u)}, nil
}

// normalizeETag strips W/ and quotes (file_download.py's _normalize_etag).
func normalizeETag(e string) string {
	return strings.Trim(strings.TrimPrefix(e, "W/"), `"`)
}

// expiry is when a presigned URL stops working: CloudFront's Expires, or
// S3's X-Amz-Date plus X-Amz-Expires; zero when neither.
func expiry(u *url.URL) time.Time {
	q := u.Query()
	if e, err := strconv.ParseInt(q.Get("Expires"), 10, 64); err == nil {
		return time.Unix(e, 0)
	}
	if d, err := time.Parse("20060102T150405Z", q.Get("X-Amz-Date")); err == nil {
		if n, err := strconv.ParseInt(q.Get("X-Amz-Expires"), 10, 64); err == nil {
			return d.Add(time.Duration(n) * time.Second)
		}
	}
	return time.Time{}
}

// expirySlack is how long before its expiry a CDN URL is re-obtained.
const expirySlack = 30 * time.Second

// where returns key's location, re-obtained when there is none, it is
// about to expire, or stale says the last one was refused.
func (s *Store) where(ctx context.Context, obj remote.Object, stale string) (location, error) {
	s.mu.Lock()
	loc, ok := s.locs[obj.Key]
	s.mu.Unlock()
	if ok && loc.url != stale && (loc.expires.IsZero() || time.Until(loc.expires) > expirySlack) {
		return loc, nil
	}
	loc, err := s.locate(ctx, obj)
	if err != nil {
		return location{}, err
	}
	s.mu.Lock()
	s.locs[obj.Key] = loc
	s.mu.Unlock()
	return loc, nil
}

// Get fills bufs with obj's bytes from off on: from the HF cache, or
// with one ranged GET of its location (re-obtained once when the CDN
// refuses it: an expired signature; asked once more when it answers the
// range with the whole file, as the Xet bridge sometimes does).
func (s *Store) Get(ctx context.Context, obj remote.Object, off int64, bufs [][]byte, filled func(i int)) error {
	want := remote.BufsLen(bufs)
	if want == 0 {
		return nil
	}
	s.mu.Lock()
	lf := s.local[obj.Key]
	s.mu.Unlock()
	if lf != nil {
		if err := remote.ReadBufs(io.NewSectionReader(lf, off, want), bufs, filled); err != nil {
			return &remote.Error{URL: s.URL(obj.Key), Kind: remote.Invalid, Msg: "reading the HF cache: " + err.Error()}
		}
		return nil
	}
	if s.cw != nil {
		// Each buffer put into the HF cache as it is filled (and its
		// reply checked): a caller may put the next one in its place
		// once it has been told (remote.Store.Get), so none is there
		// to write once the GET ends.
		next, inner := off, filled
		filled = func(i int) {
			b := bufs[i]
			if fi, _, ierr := s.info(obj.Key); ierr == nil && fi.size == obj.Size && len(b) > 0 {
				s.cw.wrote(s, obj.Key, fi, next, [][]byte{b})
			}
			next += int64(len(b))
			if inner != nil {
				inner(i)
			}
		}
	}
	stale := ""
	whole := false
	for try := 0; ; try++ {
		loc, err := s.where(ctx, obj, stale)
		if err != nil {
			return err
		}
		err = s.getAt(ctx, loc, obj, off, bufs, filled)
		var re *remote.Error
		if try == 0 && !loc.hub && errors.As(err, &re) && re.Status == http.StatusForbidden {
			stale = loc.url // expired, or revoked: ask resolve again
			continue
		}
		if !whole && errors.As(err, &re) && re.Status == http.StatusOK {
			whole = true // the range answered with the whole file: ask again, once
			continue
		}
		return err
	}
}

// getAt is one ranged GET of loc.
func (s *Store) getAt(ctx context.Context, loc location, obj remote.Object, off int64, bufs [][]byte, filled func(i int)) error {
	want := remote.BufsLen(bufs)
	key := obj.Key
	req, err := s.request(ctx, http.MethodGet, loc.url, nil)
	if err != nil {
		return err
	}
	req.Header.Set("Range", fmt.Sprintf("bytes=%d-%d", off, off+want-1))
	// A request that carries the token goes to the Hub directly, never
	// through the cache tier (a file in git of a repository read with a
	// token): the tier sees no credential of the Hub.
	c := s.data
	if req.Header.Get("Authorization") != "" {
		c = s.api
	}
	resp, err := s.do(c, req, key)
	if err != nil {
		return err
	}
	defer drain(resp)
	changed := func(format string, args ...any) error {
		return &remote.Error{URL: s.URL(key), Kind: remote.Changed, Msg: fmt.Sprintf(format, args...)}
	}
	// The bytes must be the file's as they are: a body encoded (gzip, as
	// CloudFront sends one to a client that accepts it, answering a
	// Range with the whole file) has other offsets and a length known
	// only once decoded whole. Every request asks for identity; an
	// answer encoded all the same is refused, never decoded.
	if ce := resp.Header.Get("Content-Encoding"); (resp.StatusCode == http.StatusOK || resp.StatusCode == http.StatusPartialContent) && ce != "" && !strings.EqualFold(ce, "identity") {
		return &remote.Error{URL: s.URL(key), Kind: remote.Invalid, Msg: fmt.Sprintf("the server sent the bytes encoded (Content-Encoding %s)", strconv.Quote(ce))}
	}
	switch resp.StatusCode {
	case http.StatusPartialContent:
	case http.StatusOK:
		// A 200 is the whole file: it serves only a read of the whole
		// file, with its size; else the range is asked for again once
		// (Get), then this is the error.
		if off == 0 && want == obj.Size && resp.ContentLength == want {
			break // the whole file
		}
		return &remote.Error{URL: s.URL(key), Kind: remote.Invalid, Status: 200, Msg: fmt.Sprintf("asked %s for bytes %d-%d, it ignored the Range request", loc.who(), off, off+want-1)}
	case http.StatusMovedPermanently, http.StatusFound, http.StatusSeeOther, http.StatusTemporaryRedirect, http.StatusPermanentRedirect:
		return &remote.Error{URL: s.URL(key), Kind: remote.Invalid, Status: resp.StatusCode, Msg: "redirected again"}
	default:
		if loc.hub {
			return s.hubError(key, resp)
		}
		st := resp.StatusCode
		msg := loc.who() + " answered " + http.StatusText(st)
		return &remote.Error{URL: s.URL(key), Kind: remote.StatusKind(st), Status: st, Msg: msg}
	}
	if c := resp.Header.Get("X-Repo-Commit"); loc.hub && c != "" && c != s.Revision() {
		return changed("the Hub answered for commit %s, not %s", c, s.Revision())
	}
	e := resp.Header.Get("ETag")
	if loc.hub {
		if e != "" && normalizeETag(e) != obj.ETag {
			return changed("ETag %s, was %s", normalizeETag(e), obj.ETag)
		}
	} else {
		s.mu.Lock()
		pinned, ok := s.cdnETag[key]
		if !ok {
			s.cdnETag[key] = e
		}
		s.mu.Unlock()
		if ok && e != pinned {
			return changed("the CDN gives ETag %s, was %s", e, pinned)
		}
	}
	if resp.StatusCode == http.StatusPartialContent {
		// A 206 without Content-Range (the Xet bridge sends some) is
		// the range asked for only when it is one part of exactly its
		// length; else which bytes it holds cannot be told.
		cr := resp.Header.Get("Content-Range")
		if cr == "" {
			mt := strings.ToLower(resp.Header.Get("Content-Type"))
			if resp.ContentLength != want || strings.HasPrefix(mt, "multipart/") {
				return &remote.Error{URL: s.URL(key), Kind: remote.Invalid, Status: 206, Msg: fmt.Sprintf("asked %s for bytes %d-%d (%d bytes), it answered %s without Content-Range: which bytes they are cannot be told", loc.who(), off, off+want-1, want, partLength(resp.ContentLength))}
			}
		} else if err := remote.CheckContentRange(s.URL(key), cr, off, want, obj.Size); err != nil {
			return err
		}
	}
	if resp.ContentLength >= 0 && resp.ContentLength != want {
		return &remote.Error{URL: s.URL(key), Kind: remote.Invalid, Msg: fmt.Sprintf("asked for %d bytes at %d, the server sent %d", want, off, resp.ContentLength)}
	}
	if err := remote.ReadBufs(resp.Body, bufs, filled); err != nil {
		return &remote.Error{URL: s.URL(key), Kind: remote.Transient, Msg: "reading the response: " + err.Error(), Err: err}
	}
	return nil
}

// partLength says how long a reply's body says it is.
func partLength(n int64) string {
	if n < 0 {
		return "a body of unknown length"
	}
	return fmt.Sprintf("%d bytes", n)
}

func drain(resp *http.Response) {
	io.CopyN(io.Discard, resp.Body, 64<<10)
	resp.Body.Close()
}
