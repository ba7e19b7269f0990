package remote

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync/atomic"
	"time"
)

// ParseProxy checks a --proxy URL: http:// or https://, a host, nothing
// else (no path, query or fragment). Its user info, if any, is sent to
// the proxy only (Proxy-Authorization), never said in messages.
func ParseProxy(s string) (*url.URL, error) {
	if !strings.Contains(s, "://") {
		// Not s itself: "user:password@host" would be said.
		return nil, errors.New("want an http:// or https:// URL (http://host:port)")
	}
	u, err := url.Parse(s)
	if err != nil {
		return nil, fmt.Errorf("%s: not a valid URL", RedactURL(s))
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return nil, fmt.Errorf("%s: want an http:// or https:// URL", RedactURL(s))
	}
	if u.Host == "" || u.Hostname() == "" {
		return nil, fmt.Errorf("%s: no host", RedactURL(s))
	}
	if (u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.Fragment != "" {
		return nil, fmt.Errorf("%s: want scheme://host:port, without a path or query", RedactURL(s))
	}
	u.Path = ""
	return u, nil
}

// RedactURL is s for messages: without user info and query.
func RedactURL(s string) string {
	u, err := url.Parse(s)
	if err != nil {
		scheme, _, _ := strings.Cut(s, "://")
		return scheme + "://..."
	}
	u.User, u.RawQuery, u.ForceQuery, u.Fragment = nil, "", false, ""
	return u.String()
}

// tierBypass is how long requests go to the origin directly after the
// tier failed one: a tier that is down (or hangs until the dial times
// out) costs one try per period, not one per request. The first request
// after it tries the tier again.
const tierBypass = 5 * time.Second

// tierLogged makes the tier's failure one line per process, whatever
// the number of stores and reads.
var tierLogged atomic.Bool

// ResetTierLog lets the next failure of a tier be said again, as if in
// a new process: for tests of the line.
func ResetTierLog() { tierLogged.Store(false) }

// TierTransport sends requests through the HTTP proxy at proxy (a cache
// tier: Dragonfly's dfdaemon, an nginx cache), set explicitly rather than
// from the environment (Go's HTTP_PROXY handling skips loopback):
// http:// URLs in absolute form, https:// ones through CONNECT.
//
// It follows redirects itself, under checkRedirect (the store's policy,
// as http.Client.CheckRedirect; nil is net/http's default), so that a
// request through the tier and its redirects are one attempt: when that
// attempt fails in any way (the tier cannot be reached, breaks the
// connection, fails TLS, answers 5xx or 407, redirects to a scheme or
// host that cannot be read), the request is sent again to the origin
// directly, redirects followed there too, and requests keep going there
// for a few seconds before the tier is tried again: a failing tier slows
// reads, never stops them. A whole body to a Range request, another 4xx
// or a 3xx not followed is checked the same way, but blamed on the tier
// only when the origin answers otherwise. The tier's failure is said
// once per process, through logf, naming it and what it did. Only
// requests without a body (GET, HEAD) go through the tier. base is
// cloned twice (one proxied, one direct); its own Proxy setting is
// replaced. An http.Client over it sees final answers only (a 3xx
// where checkRedirect returned http.ErrUseLastResponse).
func TierTransport(proxy *url.URL, base *http.Transport, checkRedirect func(*http.Request, []*http.Request) error, logf func(format string, args ...any)) http.RoundTripper {
	via := base.Clone()
	via.Proxy = http.ProxyURL(proxy)
	direct := base.Clone()
	direct.Proxy = nil
	return &tierTransport{via: via, direct: direct, checkRedirect: checkRedirect, name: RedactURL(proxy.String()), logf: logf}
}

type tierTransport struct {
	via, direct   *http.Transport
	checkRedirect func(*http.Request, []*http.Request) error // nil: net/http's
	name          string                                     // the proxy, for messages
	logf          func(format string, args ...any)
	downUntil     atomic.Int64 // Unix nanoseconds: go direct until then
	// Counts of requests (redirects not counted), for tests and
	// benchmarks.
	viaN, directN atomic.Int64
}

// TierStats returns how many requests rt sent through the tier and
// directly, when rt is a TierTransport.
func TierStats(rt http.RoundTripper) (via, direct int64, ok bool) {
	t, ok := rt.(*tierTransport)
	if !ok {
		return 0, 0, false
	}
	return t.viaN.Load(), t.directN.Load(), true
}

// send does req and its redirects over tr; last is the URL of the last
// redirect followed ("" when none), for messages.
func (t *tierTransport) send(tr *http.Transport, req *http.Request) (resp *http.Response, last string, err error) {
	c := &http.Client{Transport: tr, CheckRedirect: func(r *http.Request, via []*http.Request) error {
		last = RedactURL(r.URL.String())
		if t.checkRedirect != nil {
			return t.checkRedirect(r, via)
		}
		if len(via) >= 10 {
			return errors.New("stopped after 10 redirects")
		}
		return nil
	}}
	resp, err = c.Do(req)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err // as a transport's own error: no URL (its query may be a signature)
		}
	}
	return resp, last, err
}

func (t *tierTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	bodyless := req.Body == nil || req.Body == http.NoBody
	if !bodyless || time.Now().UnixNano() < t.downUntil.Load() {
		t.directN.Add(1)
		resp, _, err := t.send(t.direct, req)
		return resp, err
	}
	t.viaN.Add(1)
	resp, last, err := t.send(t.via, req)
	if req.Context().Err() != nil {
		return resp, err // interrupted or past its deadline: not the tier's fault
	}
	why, sure := tierFault(req, resp, last, err)
	if why == "" {
		return resp, nil
	}
	status := 0
	if resp != nil {
		status = resp.StatusCode
		io.CopyN(io.Discard, resp.Body, 4<<10)
		resp.Body.Close()
	}
	t.directN.Add(1)
	dresp, _, derr := t.send(t.direct, req)
	if !sure {
		switch {
		case derr != nil:
			return nil, derr // neither answered: nothing shows the tier did wrong
		case dresp.StatusCode == status:
			return dresp, nil // the origin says the same: the tier passed it on
		}
		why += fmt.Sprintf(" where the origin answered HTTP %d", dresp.StatusCode)
	}
	t.downUntil.Store(time.Now().Add(tierBypass).UnixNano())
	if !tierLogged.Swap(true) && t.logf != nil {
		t.logf("tensorfs: proxy %s: %s; reading from the origin directly while it fails (said once)", t.name, why)
	}
	return dresp, derr
}

// tierFault says what an answer through the tier (resp, or err, after
// the redirects to last) did wrong, or "" when it is one to pass on.
// sure says the tier is at fault whatever the origin answers: it could
// not be reached or read, failed TLS, answered 5xx or 407, or redirected
// where nothing can be read. Otherwise (a whole body to a Range request,
// another 4xx, a 3xx not followed) it is the tier's fault only when the
// origin answers otherwise.
func tierFault(req *http.Request, resp *http.Response, last string, err error) (why string, sure bool) {
	switch {
	case err != nil && last != "":
		return fmt.Sprintf("redirected to %s, which cannot be read (%v)", last, err), true
	case err != nil:
		return err.Error(), true
	case resp.StatusCode >= 500:
		return fmt.Sprintf("HTTP %d", resp.StatusCode), true
	case resp.StatusCode == http.StatusProxyAuthRequired:
		return "HTTP 407 (the proxy wants credentials: give them in its URL, http://user:password@host:port)", true
	case resp.StatusCode == http.StatusOK && req.Header.Get("Range") != "":
		return "answered a Range request with the whole body (HTTP 200)", false
	case resp.StatusCode >= 400, resp.StatusCode >= 300 && resp.StatusCode != http.StatusNotModified:
		return fmt.Sprintf("HTTP %d", resp.StatusCode), false
	}
	return "", false
}

// tierError is err without the request's URL (its query may be a
// presigned signature).
func tierError(err error) string {
	var ue *url.Error
	if errors.As(err, &ue) {
		err = ue.Err
	}
	return err.Error()
}

// ProxyTransport is the transport a store uses: base itself without a
// proxy, else a TierTransport through proxy.
func ProxyTransport(proxy *url.URL, base *http.Transport, checkRedirect func(*http.Request, []*http.Request) error, logf func(format string, args ...any)) http.RoundTripper {
	if proxy == nil {
		return base
	}
	return TierTransport(proxy, base, checkRedirect, logf)
}
