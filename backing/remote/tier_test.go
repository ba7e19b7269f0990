package remote

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
)

// forwardProxy is a loopback HTTP proxy: absolute-form requests are
// forwarded, CONNECT is tunnelled; it records what it saw. status, when
// not 0, is the answer to every request instead.
type forwardProxy struct {
	status  atomic.Int32
	mu      sync.Mutex
	seen    []string // "GET http://host/path" or "CONNECT host:port"
	headers []http.Header
}

func (p *forwardProxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	p.mu.Lock()
	p.seen = append(p.seen, r.Method+" "+r.RequestURI)
	p.headers = append(p.headers, r.Header.Clone())
	p.mu.Unlock()
	if s := p.status.Load(); s != 0 {
		w.WriteHeader(int(s))
		return
	}
	if r.Method == http.MethodConnect {
		up, err := net.Dial("tcp", r.Host)
		if err != nil {
			w.WriteHeader(http.StatusBadGateway)
			return
		}
		w.WriteHeader(http.StatusOK)
		c, buf, err := w.(http.Hijacker).Hijack()
		if err != nil {
			up.Close()
			return
		}
		go func() { io.Copy(up, buf); up.Close() }()
		io.Copy(c, up)
		c.Close()
		return
	}
	if !r.URL.IsAbs() {
		http.Error(w, "not a proxy request", http.StatusBadRequest)
		return
	}
	out, _ := http.NewRequest(r.Method, r.URL.String(), nil)
	out.Header = r.Header.Clone()
	resp, err := http.DefaultTransport.RoundTrip(out)
	if err != nil {
		w.WriteHeader(http.StatusBadGateway)
		return
	}
	defer resp.Body.Close()
	for k, v := range resp.Header {
		w.Header()[k] = v
	}
	w.WriteHeader(resp.StatusCode)
	io.Copy(w, resp.Body)
}

func (p *forwardProxy) requests() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.seen...)
}

// TestTierTransport: requests go through the proxy (absolute form for
// http://, CONNECT for https://); a proxy that is down or answers 5xx is
// bypassed, with one log line per process.
func TestTierTransport(t *testing.T) {
	origin := func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Origin", "yes")
		fmt.Fprintf(w, "path %s", r.URL.Path)
	}
	plain := httptest.NewServer(http.HandlerFunc(origin))
	defer plain.Close()
	tlsSrv := httptest.NewTLSServer(http.HandlerFunc(origin))
	defer tlsSrv.Close()

	tests := []struct {
		name     string
		target   string
		status   int  // the proxy's answer, 0: it forwards
		down     bool // the proxy is not listening
		want     string
		bypassed bool
	}{
		{"http absolute form", plain.URL + "/a", 0, false, "GET " + plain.URL + "/a", false},
		{"https CONNECT", tlsSrv.URL + "/b", 0, false, "CONNECT " + strings.TrimPrefix(tlsSrv.URL, "https://"), false},
		{"proxy 502", plain.URL + "/c", 502, false, "GET " + plain.URL + "/c", true},
		{"proxy 503", plain.URL + "/d", 503, false, "GET " + plain.URL + "/d", true},
		{"proxy down", plain.URL + "/e", 0, true, "", true},
		{"proxy down, https", tlsSrv.URL + "/f", 0, true, "", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := &forwardProxy{}
			p.status.Store(int32(tt.status))
			ps := httptest.NewServer(p)
			pu, _ := url.Parse(ps.URL)
			if tt.down {
				ps.Close()
			} else {
				defer ps.Close()
			}
			tierLogged.Store(false)
			var logs []string
			base := tlsSrv.Client().Transport.(*http.Transport).Clone()
			rt := TierTransport(pu, base, nil, func(format string, args ...any) { logs = append(logs, fmt.Sprintf(format, args...)) })
			c := &http.Client{Transport: rt}
			for i := 0; i < 3; i++ {
				resp, err := c.Get(tt.target)
				if err != nil {
					t.Fatal(err)
				}
				body, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				if resp.StatusCode != 200 || !strings.HasPrefix(string(body), "path /") {
					t.Fatalf("got %d %q", resp.StatusCode, body)
				}
			}
			seen := p.requests()
			if tt.want != "" && (len(seen) == 0 || seen[0] != tt.want) {
				t.Fatalf("the proxy saw %q, want %q first", seen, tt.want)
			}
			via, direct, _ := TierStats(rt)
			if tt.bypassed {
				// The first request tried the tier, the next ones went
				// straight to the origin (within tierBypass).
				if via != 1 || direct != 3 {
					t.Fatalf("%d through the tier, %d direct; want 1 and 3", via, direct)
				}
				if len(logs) != 1 || !strings.Contains(logs[0], "reading from the origin directly") {
					t.Fatalf("logged %q, want one line", logs)
				}
				// A second transport in the same process logs nothing.
				rt2 := TierTransport(pu, base, nil, func(format string, args ...any) { logs = append(logs, fmt.Sprintf(format, args...)) })
				if resp, err := (&http.Client{Transport: rt2}).Get(tt.target); err == nil {
					resp.Body.Close()
				}
				if len(logs) != 1 {
					t.Fatalf("logged %q, want one line per process", logs)
				}
			} else {
				if direct != 0 || len(logs) != 0 {
					t.Fatalf("%d requests direct, logged %q", direct, logs)
				}
			}
		})
	}
}

func TestParseProxy(t *testing.T) {
	for in, want := range map[string]string{
		"http://127.0.0.1:65001":     "",
		"http://cache.local:3128/":   "",
		"https://u:pw@proxy:8443":    "",
		"socks5://127.0.0.1:1080":    "want an http:// or https:// URL",
		"127.0.0.1:65001":            "want an http:// or https:// URL",
		"http://":                    "no host",
		"http://h:1/path":            "without a path or query",
		"http://u:secret@h:1/?x=sig": "without a path or query",
	} {
		_, err := ParseProxy(in)
		switch {
		case want == "" && err != nil:
			t.Errorf("%s: %v", in, err)
		case want != "" && (err == nil || !strings.Contains(err.Error(), want)):
			t.Errorf("%s: %v, want %q", in, err, want)
		case err != nil && strings.Contains(err.Error(), "secret"):
			t.Errorf("%s: message %q holds the password", in, err)
		}
	}
}
