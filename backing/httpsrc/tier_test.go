package httpsrc

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"fmt"
	"io"
	"log"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lazyweights/tensorfs/backing/remote"
)

// forward is a loopback forward proxy: absolute-form requests are sent
// on, CONNECT is tunnelled. A proxy that does what it should.
func forward(w http.ResponseWriter, r *http.Request) {
	if r.Method == http.MethodConnect {
		up, err := net.Dial("tcp", r.Host)
		if err != nil {
			w.WriteHeader(http.StatusBadGateway)
			return
		}
		tunnel(w, up)
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

// tunnel answers a CONNECT and joins its connection to up.
func tunnel(w http.ResponseWriter, up net.Conn) {
	w.WriteHeader(http.StatusOK)
	c, buf, err := w.(http.Hijacker).Hijack()
	if err != nil {
		up.Close()
		return
	}
	go func() { io.Copy(up, buf); up.Close() }()
	io.Copy(c, up)
	c.Close()
}

// closedURL is the URL of a loopback port that nothing listens on.
func closedURL(t *testing.T, scheme string) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	l.Close()
	return scheme + "://" + l.Addr().String()
}

// TestFailingTierBypassed: with --proxy at a tier that fails in any way
// (a redirect to file://, to a port nothing listens on, or to itself
// without end; 5xx; 407; not listening; a TLS connection it cannot
// carry; a whole body to a Range request; a 404 for a file the origin
// has), every byte is read from the origin directly and right, and one
// line is logged, naming the tier and what it did. A tier that passes
// on the origin's own answer (404, no Range support) is not blamed:
// the error is the origin's, and no line names the tier.
func TestFailingTierBypassed(t *testing.T) {
	data := testData(50000)
	var originN atomic.Int64
	origin := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		originN.Add(1)
		(&hostile{data: data, etag: `"v1"`}).ServeHTTP(w, r)
	})
	plain := httptest.NewServer(origin)
	defer plain.Close()
	secure := httptest.NewTLSServer(origin)
	defer secure.Close()
	noRange := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		originN.Add(1)
		w.Header().Set("ETag", `"v1"`)
		w.Write(data)
	}))
	defer noRange.Close()
	// A TLS server of a certificate nobody trusts: what a tier that
	// intercepts CONNECT presents.
	mitm := httptest.NewUnstartedServer(origin)
	mitm.TLS = &tls.Config{Certificates: []tls.Certificate{selfSigned(t)}}
	mitm.Config.ErrorLog = log.New(io.Discard, "", 0)
	mitm.StartTLS()
	defer mitm.Close()
	// The store's transport is a clone of http.DefaultTransport: let it
	// trust the loopback TLS origin.
	dt := http.DefaultTransport.(*http.Transport)
	saved := dt.TLSClientConfig
	dt.TLSClientConfig = secure.Client().Transport.(*http.Transport).TLSClientConfig.Clone()
	defer func() { dt.TLSClientConfig = saved }()

	redirect := func(to func(r *http.Request) string) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Location", to(r))
			w.WriteHeader(http.StatusFound)
		}
	}
	status := func(code int) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(code) }
	}
	closed := closedURL(t, "http")
	tests := []struct {
		name   string
		origin string
		tier   http.Handler // nil: nothing listens
		want   string       // in the one line logged; "" none
		err    string       // in the open's error; "" none
	}{
		{"redirect to file", plain.URL, redirect(func(*http.Request) string { return "file:///etc/passwd" }), `redirected to file:///etc/passwd, which cannot be read (unsupported protocol scheme "file")`, ""},
		{"redirect to a closed port", plain.URL, redirect(func(*http.Request) string { return closed + "/f.bin" }), "redirected to " + closed + "/f.bin, which cannot be read", ""},
		{"redirect loop", plain.URL, redirect(func(r *http.Request) string { return r.URL.String() }), "stopped after 10 redirects", ""},
		{"502", plain.URL, status(502), "HTTP 502", ""},
		{"503", plain.URL, status(503), "HTTP 503", ""},
		{"407", plain.URL, status(407), "HTTP 407", ""},
		{"404 the origin has", plain.URL, status(404), "HTTP 404 where the origin answered HTTP 206", ""},
		{"not listening", plain.URL, nil, "connection refused", ""},
		{"not listening, https", secure.URL, nil, "connection refused", ""},
		{"CONNECT 503", secure.URL, status(503), "Service Unavailable", ""},
		{"TLS", secure.URL, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			up, err := net.Dial("tcp", mitm.Listener.Addr().String())
			if err != nil {
				w.WriteHeader(http.StatusBadGateway)
				return
			}
			tunnel(w, up)
		}), "x509: certificate signed by unknown authority", ""},
		{"whole body to a Range request", plain.URL, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("ETag", `"v1"`)
			w.Write(data)
		}), "answered a Range request with the whole body (HTTP 200) where the origin answered HTTP 206", ""},
		// Faithful tiers: the origin's own answers, not the tier's fault.
		{"faithful", plain.URL, http.HandlerFunc(forward), "", ""},
		{"faithful, https", secure.URL, http.HandlerFunc(forward), "", ""},
		{"faithful, origin without Range", noRange.URL, http.HandlerFunc(forward), "", "does not support Range requests"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			remote.ResetTierLog()
			var tierN atomic.Int64
			proxy := closedURL(t, "http")
			if tt.tier != nil {
				ps := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					tierN.Add(1)
					tt.tier.ServeHTTP(w, r)
				}))
				defer ps.Close()
				proxy = ps.URL
			}
			pu, _ := url.Parse(proxy)
			var mu sync.Mutex
			var logs []string
			logf := func(format string, args ...any) {
				mu.Lock()
				logs = append(logs, fmt.Sprintf(format, args...))
				mu.Unlock()
			}
			originN.Store(0)
			u, _ := url.Parse(tt.origin + "/f.bin")
			st, key, err := NewWith(u, Options{Proxy: pu, Logf: logf})
			if err != nil {
				t.Fatal(err)
			}
			c, err := remote.New(st, remote.Options{PartSize: 4096, Readahead: -1, Timeout: 5 * time.Second, Logf: logf})
			if err != nil {
				t.Fatal(err)
			}
			src, err := c.Open(context.Background(), key)
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("open: %v, want %q", err, tt.err)
				}
			} else {
				if err != nil {
					t.Fatalf("open: %v (logged %q)", err, logs)
				}
				got := make([]byte, len(data))
				n, err := src.ReadAt(got, 0)
				src.Close()
				if n != len(data) || err != nil || !bytes.Equal(got, data) {
					t.Fatalf("read %d bytes, %v; right: %v", n, err, bytes.Equal(got, data))
				}
			}
			mu.Lock()
			defer mu.Unlock()
			switch {
			case tt.want == "" && len(logs) != 0:
				t.Fatalf("logged %q, want nothing", logs)
			case tt.want != "" && (len(logs) != 1 || !strings.Contains(logs[0], "proxy "+proxy+": ") || !strings.Contains(logs[0], tt.want)):
				t.Fatalf("logged %q, want one line naming the proxy %s and saying %q", logs, proxy, tt.want)
			}
			if tt.want != "" && originN.Load() == 0 {
				t.Fatal("the origin got no request")
			}
			if tt.tier != nil && tierN.Load() == 0 {
				t.Fatal("the tier got no request")
			}
		})
	}
}

// selfSigned is a certificate for 127.0.0.1 that no client trusts.
func selfSigned(t *testing.T) tls.Certificate {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1),
		Subject:      pkix.Name{CommonName: "mitm"},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(time.Hour),
		IPAddresses:  []net.IP{net.IPv4(127, 0, 0, 1)},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
}
