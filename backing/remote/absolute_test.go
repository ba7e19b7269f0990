package remote

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"sync/atomic"
	"testing"
)

// TestAbsoluteTransport: an https:// request goes to the proxy in
// absolute form over plain HTTP ("GET https://host/path?q HTTP/1.1"),
// never as CONNECT, with the proxy's user info as Proxy-Authorization;
// the connection is kept for the next request.
func TestAbsoluteTransport(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	var conns atomic.Int64
	lines := make(chan string, 4)
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			conns.Add(1)
			go func(c net.Conn) {
				defer c.Close()
				br := bufio.NewReader(c)
				for {
					req, err := http.ReadRequest(br)
					if err != nil {
						return
					}
					lines <- req.Method + " " + req.RequestURI + " " + req.Header.Get("Proxy-Authorization")
					fmt.Fprintf(c, "HTTP/1.1 206 Partial Content\r\nContent-Length: 5\r\nContent-Range: bytes 0-4/10\r\n\r\nhello")
				}
			}(c)
		}
	}()
	pu, _ := url.Parse("http://u:p@" + l.Addr().String())
	c := &http.Client{Transport: AbsoluteTransport(pu, 4)}
	for i := range 2 {
		req, _ := http.NewRequestWithContext(context.Background(), "GET", "https://cdn.example/blobs/x?Signature=s", nil)
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 206 || string(b) != "hello" {
			t.Fatalf("request %d: %d %q", i, resp.StatusCode, b)
		}
		if got, want := <-lines, "GET https://cdn.example/blobs/x?Signature=s Basic dTpw"; got != want {
			t.Fatalf("the proxy got %q, want %q", got, want)
		}
	}
	if conns.Load() != 1 {
		t.Errorf("%d connections for 2 requests, want 1 kept alive", conns.Load())
	}
}
