package s3test

import (
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"sync/atomic"
	"testing"
)

// Proxy is a fault-injecting HTTP proxy in front of a server: every
// Every-th request (when Every > 0) gets a fault instead of the
// server's answer, alternately 503 SlowDown and a reset connection.
// Requests counts every request seen.
type Proxy struct {
	URL      string
	Every    atomic.Int64
	Requests atomic.Int64
	Faults   atomic.Int64
}

// StartProxy starts a proxy to target (http://host:port) on loopback,
// closed at the end of the test.
func StartProxy(t testing.TB, target string) *Proxy {
	t.Helper()
	u, err := url.Parse(target)
	if err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &Proxy{URL: "http://" + l.Addr().String()}
	rp := httputil.NewSingleHostReverseProxy(u)
	rp.ErrorLog = nil
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := p.Requests.Add(1)
		if every := p.Every.Load(); every > 0 && n%every == 0 {
			f := p.Faults.Add(1)
			if f%2 == 1 {
				w.Header().Set("Content-Type", "application/xml")
				w.WriteHeader(http.StatusServiceUnavailable)
				w.Write([]byte(`<?xml version="1.0" encoding="UTF-8"?><Error><Code>SlowDown</Code><Message>Please reduce your request rate.</Message></Error>`))
				return
			}
			if hj, ok := w.(http.Hijacker); ok {
				if c, _, err := hj.Hijack(); err == nil {
					if tc, ok := c.(*net.TCPConn); ok {
						tc.SetLinger(0) // RST, not FIN
					}
					c.Close()
					return
				}
			}
		}
		rp.ServeHTTP(w, r)
	})}
	go srv.Serve(l)
	t.Cleanup(func() { srv.Close() })
	return p
}
