package httpsrc

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/lazyweights/tensorfs/backing/hf"
	"github.com/lazyweights/tensorfs/backing/remote"
)

// Store is one HTTP(S) server.
type Store struct {
	base   url.URL // scheme, host, user info; no path
	query  string  // raw query of the URL given, kept for every request
	client *http.Client
	token  string // the Hub's token when the server is the Hub's (hf.TokenFor), or ""
	// bearer, when set, gives the token sent as "Authorization: Bearer"
	// to the server's host only (an OCI registry's pull token).
	bearer func() string
	header bool // bearer gives the whole header, not a token
	// mainKey is the key of the URL given to New, and mainRaw its path
	// as given (escaped): requested as the user wrote it.
	mainKey, mainRaw string
}

var _ remote.Store = (*Store)(nil)

// New returns a Store for the server of u (http or https). Key is the
// path of the file u names, decoded (without the leading '/'): keys are
// names, as local paths and S3 keys are, escaped for each request, so
// that a name from a weight map ("%2e%2e/x") is requested as that name,
// never as the path it would decode to.
func New(u *url.URL) (store *Store, key string, err error) {
	return NewWith(u, Options{})
}

// Options configure NewWith.
type Options struct {
	// Proxy, when set, is an HTTP proxy (a cache tier) that every
	// request goes through: http:// URLs in absolute form, https:// ones
	// through CONNECT. When it fails in any way, requests go to
	// the server directly (remote.TierTransport).
	Proxy *url.URL
	// Logf logs the proxy's failure, once per process (default
	// log.Printf).
	Logf func(format string, args ...any)
	// Bearer, when set, gives a token sent as "Authorization: Bearer"
	// with every request to the URL's host ("" for none), never on a
	// redirect to another host nor through Proxy: a request that holds
	// it goes directly, and a redirect away from the host (which holds
	// none) through Proxy.
	Bearer func() string
	// Authorization, when set, gives the whole Authorization header
	// (an OCI registry's "Basic …" or "Bearer …"), sent as Bearer's is.
	Authorization func() string
	// ProxyTerminatesTLS sends the https:// requests that go through
	// Proxy (an OCI registry's redirects to its https:// storage) to it
	// in absolute form, for it to make and cache, rather than through
	// CONNECT (remote.TerminatingTierTransport).
	ProxyTerminatesTLS bool
}

// NewWith is New with options.
func NewWith(u *url.URL, opts Options) (store *Store, key string, err error) {
	if u.Scheme != "http" && u.Scheme != "https" {
		return nil, "", fmt.Errorf("%s: not an http(s) URL", redact(u))
	}
	if u.Host == "" {
		return nil, "", fmt.Errorf("%s: no host", redact(u))
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConns = 64
	tr.MaxIdleConnsPerHost = 64
	tr.ResponseHeaderTimeout = 30 * time.Second
	tr.DialContext = (&net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}).DialContext
	tr.DisableCompression = true // byte ranges of the file, not of a gzip of it
	logf := opts.Logf
	if logf == nil {
		logf = log.Printf
	}
	s := &Store{base: url.URL{Scheme: u.Scheme, Host: u.Host, User: u.User}, query: u.RawQuery}
	// The Hub's token, by the Hub's one rule (hf.TokenFor): to the Hub's
	// endpoint only, never on a redirect away from it, and never
	// through a cache tier: a store that holds it sends its requests
	// directly (to an https:// Hub a tier could only tunnel them).
	s.token = hf.TokenFor(u)
	s.bearer = opts.Bearer
	if opts.Authorization != nil {
		s.bearer, s.header = opts.Authorization, true
	}
	proxy := opts.Proxy
	if s.token != "" {
		proxy = nil
	}
	var rt http.RoundTripper = remote.ProxyTransport(proxy, tr, s.redirect, logf)
	if proxy != nil && opts.ProxyTerminatesTLS {
		rt = remote.TerminatingTierTransport(proxy, tr, s.redirect, logf)
	}
	if s.bearer != nil && proxy != nil {
		// A registry's credential goes to its host directly; the
		// redirects away from it (its storage: S3, a CDN), which
		// carry none, go through the tier, which caches them.
		rt = credentialDirect{direct: tr, tier: rt}
	}
	s.client = &http.Client{Transport: rt, CheckRedirect: s.redirect}
	s.mainKey, s.mainRaw = strings.TrimPrefix(u.Path, "/"), u.EscapedPath()
	return s, s.mainKey, nil
}

// credentialDirect sends a request that carries an Authorization header
// directly, never through the tier, and the others through it.
type credentialDirect struct {
	direct, tier http.RoundTripper
}

func (c credentialDirect) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Header.Get("Authorization") != "" {
		return c.direct.RoundTrip(req)
	}
	return c.tier.RoundTrip(req)
}

// maxRedirects bounds the redirects followed for one request (as
// net/http's default does).
const maxRedirects = 10

// redirect is the client's redirect policy. net/http sets Referer on
// a redirected request to the URL it came from, query included: a
// presigned URL's signature would go to the redirect's target (any
// host). No request of a Store carries a Referer. net/http also keeps
// Authorization on a redirect to a subdomain (the Hub's CDN) or from
// https:// to http://: the Hub's token is taken off every redirect that
// leaves the Hub (hf.OnEndpoint).
func (s *Store) redirect(req *http.Request, via []*http.Request) error {
	if len(via) >= maxRedirects {
		return fmt.Errorf("stopped after %d redirects", maxRedirects)
	}
	req.Header.Del("Referer")
	if s.token != "" && !hf.OnEndpoint(req.URL) {
		req.Header.Del("Authorization")
	}
	if s.bearer != nil && (req.URL.Host != s.base.Host || req.URL.Scheme != s.base.Scheme) {
		req.Header.Del("Authorization")
	}
	return nil
}

// URL is the file's URL, without user info or query (they may hold
// secrets).
func (s *Store) URL(key string) string {
	u := url.URL{Scheme: s.base.Scheme, Host: s.base.Host}
	return u.String() + s.escapedPath(key)
}

// escapedPath is the URL path that requests key.
func (s *Store) escapedPath(key string) string {
	if key == s.mainKey {
		return s.mainRaw
	}
	return (&url.URL{Path: "/" + key}).EscapedPath()
}

// redact is u for messages: without user info and query.
func redact(u *url.URL) string {
	c := *u
	c.User, c.RawQuery, c.ForceQuery, c.Fragment = nil, "", false, ""
	return c.String()
}

func (s *Store) request(ctx context.Context, method, key string) (*http.Request, error) {
	u := s.base
	u.Path = "/" + key
	u.RawPath = s.escapedPath(key)
	u.RawQuery = s.query
	req, err := http.NewRequestWithContext(ctx, method, u.String(), nil)
	if err != nil {
		return nil, &remote.Error{URL: s.URL(key), Kind: remote.Invalid, Msg: err.Error()}
	}
	if s.token != "" {
		req.Header.Set("Authorization", "Bearer "+s.token)
	}
	if s.bearer != nil {
		if tok := s.bearer(); tok != "" && s.header {
			req.Header.Set("Authorization", tok)
		} else if tok != "" {
			req.Header.Set("Authorization", "Bearer "+tok)
		}
	}
	req.Header.Set("Accept-Encoding", "identity")
	return req, nil
}

// do sends req; a transport error is an *remote.Error.
func (s *Store) do(req *http.Request, key string) (*http.Response, error) {
	resp, err := s.client.Do(req)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err // its message repeats the URL, with the query
		}
		return nil, &remote.Error{URL: s.URL(key), Kind: remote.ConnKind(err), Msg: err.Error(), Err: err}
	}
	return resp, nil
}

// statusError is the error of an unexpected response.
func (s *Store) statusError(key string, resp *http.Response) error {
	msg := http.StatusText(resp.StatusCode)
	if resp.StatusCode == http.StatusUnauthorized || resp.StatusCode == http.StatusForbidden {
		msg += " (check the credentials)"
	}
	return &remote.Error{URL: s.URL(key), Kind: remote.StatusKind(resp.StatusCode), Status: resp.StatusCode, Msg: msg}
}

// Open GETs the first len(head) bytes of key (HEAD with an empty head).
func (s *Store) Open(ctx context.Context, key string, head []byte) (remote.Object, int, error) {
	method := http.MethodGet
	if len(head) == 0 {
		method = http.MethodHead
	}
	req, err := s.request(ctx, method, key)
	if err != nil {
		return remote.Object{}, 0, err
	}
	if len(head) > 0 {
		req.Header.Set("Range", fmt.Sprintf("bytes=0-%d", len(head)-1))
	}
	resp, err := s.do(req, key)
	if err != nil {
		return remote.Object{}, 0, err
	}
	defer drain(resp)
	obj := remote.Object{Key: key, ETag: resp.Header.Get("ETag")}
	if lm, err := http.ParseTime(resp.Header.Get("Last-Modified")); err == nil {
		obj.LastModified = lm
	}
	switch resp.StatusCode {
	case http.StatusRequestedRangeNotSatisfiable:
		if total, ok := totalOf(resp.Header.Get("Content-Range")); ok && total == 0 {
			return obj, 0, nil // an empty file
		}
		return remote.Object{}, 0, s.statusError(key, resp)
	case http.StatusOK:
		if method == http.MethodHead {
			if resp.ContentLength < 0 {
				return remote.Object{}, 0, &remote.Error{URL: s.URL(key), Kind: remote.Invalid, Msg: "the server gives no size (Content-Length)"}
			}
			obj.Size = resp.ContentLength
			return obj, 0, nil
		}
		if resp.ContentLength == 0 {
			// An empty file: Go's file servers (caddy's, rclone
			// serve http's) answer a Range on it with a 200 and no
			// bytes rather than a 416, as RFC 9110 allows. There is
			// nothing to read after it.
			return obj, 0, nil
		}
		// Every later read is a ranged GET, which such a server would
		// answer with the whole file again: refused now, whatever
		// the file's size.
		return remote.Object{}, 0, &remote.Error{URL: s.URL(key), Kind: remote.Invalid, Msg: "the server does not support Range requests (it answered a ranged GET with the whole file, HTTP 200): " + rangeAdvice}
	case http.StatusPartialContent:
		// The reply must hold bytes 0 to len(head)-1, or the whole
		// object when it is shorter.
		cr := resp.Header.Get("Content-Range")
		first, last, total, ok := remote.ContentRange(cr)
		if !ok || first != 0 || last != min(total, int64(len(head)))-1 {
			return remote.Object{}, 0, &remote.Error{URL: s.URL(key), Kind: remote.Invalid, Msg: fmt.Sprintf("asked for bytes 0-%d, the server answered with Content-Range %s", len(head)-1, strconv.Quote(cr))}
		}
		obj.Size = total
	default:
		return remote.Object{}, 0, s.statusError(key, resp)
	}
	if err := s.checkEncoding(key, resp); err != nil {
		return remote.Object{}, 0, err
	}
	n := min(int64(len(head)), obj.Size)
	if _, err := io.ReadFull(resp.Body, head[:n]); err != nil {
		return remote.Object{}, 0, &remote.Error{URL: s.URL(key), Kind: remote.Transient, Msg: "reading the response: " + err.Error(), Err: err}
	}
	return obj, int(n), nil
}

// rangeAdvice is what to do about a server that ignores Range requests
// (python3 -m http.server, the first one anyone tries).
const rangeAdvice = "serve the file with a server that answers Range requests (nginx, caddy, rclone serve http; not python3 -m http.server), or download it and give its local path"

// totalOf parses the total of "bytes A-B/TOTAL" or "bytes */TOTAL".
func totalOf(cr string) (int64, bool) {
	i := strings.LastIndexByte(cr, '/')
	if i < 0 || !strings.HasPrefix(cr, "bytes ") {
		return 0, false
	}
	n, err := strconv.ParseInt(cr[i+1:], 10, 64)
	return n, err == nil && n >= 0
}

// checkEncoding refuses a reply whose body is encoded (gzip, br): its
// bytes are not the file's, and its length is not the range's.
func (s *Store) checkEncoding(key string, resp *http.Response) error {
	if ce := resp.Header.Get("Content-Encoding"); ce != "" && !strings.EqualFold(ce, "identity") {
		return &remote.Error{URL: s.URL(key), Kind: remote.Invalid, Status: resp.StatusCode, Msg: fmt.Sprintf("the server sent the bytes encoded (Content-Encoding %s) although asked for them as they are (Accept-Encoding: identity)", strconv.Quote(ce))}
	}
	return nil
}

// strongETag reports whether an ETag can be used with If-Match.
func strongETag(e string) bool { return e != "" && !strings.HasPrefix(e, "W/") }

// Get reads obj's bytes at off into p, pinned to obj's version.
func (s *Store) Get(ctx context.Context, obj remote.Object, off int64, bufs [][]byte, filled func(i int)) error {
	want := remote.BufsLen(bufs)
	if want == 0 {
		return nil
	}
	req, err := s.request(ctx, http.MethodGet, obj.Key)
	if err != nil {
		return err
	}
	req.Header.Set("Range", fmt.Sprintf("bytes=%d-%d", off, off+want-1))
	switch {
	case strongETag(obj.ETag):
		req.Header.Set("If-Match", obj.ETag)
	case !obj.LastModified.IsZero():
		req.Header.Set("If-Unmodified-Since", obj.LastModified.UTC().Format(http.TimeFormat))
	}
	resp, err := s.do(req, obj.Key)
	if err != nil {
		return err
	}
	defer drain(resp)
	changed := func(format string, args ...any) error {
		return &remote.Error{URL: s.URL(obj.Key), Kind: remote.Changed, Msg: fmt.Sprintf(format, args...)}
	}
	switch resp.StatusCode {
	case http.StatusPartialContent:
	case http.StatusPreconditionFailed:
		return changed("the file changed (HTTP 412 Precondition Failed)")
	case http.StatusOK:
		return &remote.Error{URL: s.URL(obj.Key), Kind: remote.Invalid, Status: 200, Msg: "the server ignored the Range request (HTTP 200): " + rangeAdvice}
	default:
		return s.statusError(obj.Key, resp)
	}
	if err := s.checkEncoding(obj.Key, resp); err != nil {
		return err
	}
	// Every reply carries the validators the file had at open, and the
	// same: a server that drops them (and may ignore If-Match too) can
	// no longer show that the bytes are of the version opened.
	e := resp.Header.Get("ETag")
	switch {
	case obj.ETag != "" && e == "":
		return changed("the reply has no ETag (the file had ETag %s when opened), so its bytes cannot be shown to be of that version", obj.ETag)
	case obj.ETag != "" && e != obj.ETag:
		return changed("ETag %s, was %s", e, obj.ETag)
	}
	if !obj.LastModified.IsZero() {
		lm, err := http.ParseTime(resp.Header.Get("Last-Modified"))
		switch {
		case err != nil && obj.ETag == "":
			return changed("the reply has no Last-Modified (the file had %s when opened), so its bytes cannot be shown to be of that version", obj.LastModified.UTC().Format(time.RFC3339))
		case err == nil && !lm.Equal(obj.LastModified):
			return changed("Last-Modified %s, was %s", lm.UTC().Format(time.RFC3339), obj.LastModified.UTC().Format(time.RFC3339))
		}
	}
	if err := remote.CheckContentRange(s.URL(obj.Key), resp.Header.Get("Content-Range"), off, want, obj.Size); err != nil {
		return err
	}
	if resp.ContentLength >= 0 && resp.ContentLength != want {
		return &remote.Error{URL: s.URL(obj.Key), Kind: remote.Invalid, Msg: fmt.Sprintf("asked for %d bytes at %d, the server sent %d", want, off, resp.ContentLength)}
	}
	if err := remote.ReadBufs(resp.Body, bufs, filled); err != nil {
		return &remote.Error{URL: s.URL(obj.Key), Kind: remote.Transient, Msg: "reading the response: " + err.Error(), Err: err}
	}
	return nil
}

// List is not possible over HTTP.
func (s *Store) List(ctx context.Context, prefix string) ([]remote.Entry, bool, error) {
	return nil, false, &remote.Error{URL: s.URL(prefix), Kind: remote.Invalid, Msg: "an HTTP server cannot be listed: give the checkpoint file, or its *.index.json weight map"}
}

// drain reads a little of what is left of the body, so that the
// connection can be reused, and closes it.
func drain(resp *http.Response) {
	io.CopyN(io.Discard, resp.Body, 64<<10)
	resp.Body.Close()
}
