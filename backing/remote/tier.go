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

// TierTransport sends requests through the HTTP proxy at proxy (a cache
// tier: Dragonfly's dfdaemon, an nginx cache), set explicitly rather than
// from the environment (Go's HTTP_PROXY handling skips loopback):
// http:// URLs in absolute form, https:// ones through CONNECT. When the
// tier cannot be reached, breaks a connection before answering, or
// answers 5xx, the request is sent again to the origin directly, and
// requests keep going there for a few seconds before the tier is tried
// again: a dead tier slows reads, never stops them. It says so once per
// process, through logf. Only requests without a body (GET, HEAD) are
// sent twice. base is cloned twice (one proxied, one direct); its own
// Proxy setting is replaced.
func TierTransport(proxy *url.URL, base *http.Transport, logf func(format string, args ...any)) http.RoundTripper {
	via := base.Clone()
	via.Proxy = http.ProxyURL(proxy)
	direct := base.Clone()
	direct.Proxy = nil
	return &tierTransport{via: via, direct: direct, name: RedactURL(proxy.String()), logf: logf}
}

type tierTransport struct {
	via, direct *http.Transport
	name        string // the proxy, for messages
	logf        func(format string, args ...any)
	downUntil   atomic.Int64 // Unix nanoseconds: go direct until then
	// Counts, for tests and benchmarks.
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

func (t *tierTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	bodyless := req.Body == nil || req.Body == http.NoBody
	if !bodyless || time.Now().UnixNano() < t.downUntil.Load() {
		t.directN.Add(1)
		return t.direct.RoundTrip(req)
	}
	t.viaN.Add(1)
	resp, err := t.via.RoundTrip(req)
	if err == nil && resp.StatusCode < 500 {
		return resp, nil
	}
	if req.Context().Err() != nil {
		return resp, err // interrupted or past its deadline: not the tier's fault
	}
	var why string
	if err != nil {
		why = tierError(err)
	} else {
		why = fmt.Sprintf("HTTP %d", resp.StatusCode)
		io.CopyN(io.Discard, resp.Body, 4<<10)
		resp.Body.Close()
	}
	t.downUntil.Store(time.Now().Add(tierBypass).UnixNano())
	if !tierLogged.Swap(true) && t.logf != nil {
		t.logf("tensorfs: proxy %s: %s; reading from the origin directly while it fails (said once)", t.name, why)
	}
	t.directN.Add(1)
	return t.direct.RoundTrip(req)
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
func ProxyTransport(proxy *url.URL, base *http.Transport, logf func(format string, args ...any)) http.RoundTripper {
	if proxy == nil {
		return base
	}
	return TierTransport(proxy, base, logf)
}
