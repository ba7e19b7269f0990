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
	etag := normalizeETag(resp.Header.Get("X-Linked-Etag"))
	if etag == "" {
		etag = normalizeETag(resp.Header.Get("ETag"))
	}
	if etag != "" && obj.ETag != "" && etag != obj.ETag {
		return location{}, changed("the Hub gives ETag %s, was %s", etag, obj.ETag)
	}
	if ls := resp.Header.Get("X-Linked-Size"); ls != "" {
		if n, err := strconv.ParseInt(ls, 10, 64); err == nil && n != obj.Size {
			return location{}, changed("the Hub gives %d bytes, was %d", n, obj.Size)
		}
	}
	u, err := req.URL.Parse(resp.Header.Get("Location"))
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") {
		return location{}, &remote.Error{URL: s.URL(key), Kind: remote.Invalid, Status: resp.StatusCode, Msg: "the Hub redirected to a malformed URL"}
	}
	return location{url: u.String(), hub: s.isHub(u), expires: expiry(u)}, nil
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
// refuses it: an expired signature).
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
	stale := ""
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
		if err == nil && s.cw != nil {
			if fi, _, ierr := s.info(obj.Key); ierr == nil && fi.size == obj.Size {
				s.cw.wrote(s, obj.Key, fi, off, bufs)
			}
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
	switch resp.StatusCode {
	case http.StatusPartialContent:
	case http.StatusOK:
		if off == 0 && want == obj.Size && resp.ContentLength == want {
			break // the whole file
		}
		return &remote.Error{URL: s.URL(key), Kind: remote.Invalid, Status: 200, Msg: "the server ignored the Range request"}
	case http.StatusMovedPermanently, http.StatusFound, http.StatusSeeOther, http.StatusTemporaryRedirect, http.StatusPermanentRedirect:
		return &remote.Error{URL: s.URL(key), Kind: remote.Invalid, Status: resp.StatusCode, Msg: "redirected again"}
	default:
		if loc.hub {
			return s.hubError(key, resp)
		}
		st := resp.StatusCode
		msg := "the CDN answered " + http.StatusText(st)
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
		if err := remote.CheckContentRange(s.URL(key), resp.Header.Get("Content-Range"), off, want, obj.Size); err != nil {
			return err
		}
	}
	if ce := resp.Header.Get("Content-Encoding"); ce != "" && !strings.EqualFold(ce, "identity") {
		return &remote.Error{URL: s.URL(key), Kind: remote.Invalid, Msg: fmt.Sprintf("the server sent the bytes encoded (Content-Encoding %s)", strconv.Quote(ce))}
	}
	if resp.ContentLength >= 0 && resp.ContentLength != want {
		return &remote.Error{URL: s.URL(key), Kind: remote.Invalid, Msg: fmt.Sprintf("asked for %d bytes at %d, the server sent %d", want, off, resp.ContentLength)}
	}
	if err := remote.ReadBufs(resp.Body, bufs, filled); err != nil {
		return &remote.Error{URL: s.URL(key), Kind: remote.Transient, Msg: "reading the response: " + err.Error(), Err: err}
	}
	return nil
}

func drain(resp *http.Response) {
	io.CopyN(io.Discard, resp.Body, 64<<10)
	resp.Body.Close()
}
