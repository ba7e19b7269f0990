package remote

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"sync"
	"time"
)

// AbsoluteTransport sends every request to the HTTP proxy at proxy in
// absolute form over plain HTTP/1.1, https:// URLs included: "GET
// https://host/path HTTP/1.1", where net/http would open a CONNECT
// tunnel that the proxy cannot see into. It is for a cache tier that
// terminates TLS itself (it makes the https:// request to the origin and
// caches the reply by its path), so that a fleet reading an https://
// origin (the Hugging Face Hub's CDN) is served one copy. The requests,
// their headers included, cross the network to the tier in the clear:
// a tier on the node or inside the cluster. Connections to the proxy are
// kept alive and reused; the proxy's user info goes as
// Proxy-Authorization.
func AbsoluteTransport(proxy *url.URL, conns int) http.RoundTripper {
	t := &absoluteTransport{addr: proxy.Host, idle: make(chan *proxyConn, max(conns, 1))}
	if proxy.Port() == "" {
		t.addr = net.JoinHostPort(proxy.Hostname(), "80")
	}
	if proxy.User != nil {
		t.auth = "Basic " + basicAuth(proxy.User)
	}
	return t
}

type absoluteTransport struct {
	addr string // the proxy's host:port
	auth string // Proxy-Authorization, or ""
	idle chan *proxyConn
}

type proxyConn struct {
	net.Conn
	br *bufio.Reader
}

func basicAuth(u *url.Userinfo) string {
	req := &http.Request{Header: http.Header{}}
	p, _ := u.Password()
	req.SetBasicAuth(u.Username(), p)
	return req.Header.Get("Authorization")[len("Basic "):]
}

func (t *absoluteTransport) conn(ctx context.Context) (*proxyConn, error) {
	for {
		select {
		case c := <-t.idle:
			// A kept connection the proxy has closed reads EOF at once.
			c.SetReadDeadline(time.Now().Add(time.Millisecond))
			if _, err := c.br.Peek(1); errors.Is(err, os.ErrDeadlineExceeded) {
				c.SetReadDeadline(time.Time{})
				return c, nil
			}
			c.Close()
			continue
		default:
		}
		d := net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}
		nc, err := d.DialContext(ctx, "tcp", t.addr)
		if err != nil {
			return nil, err
		}
		return &proxyConn{Conn: nc, br: bufio.NewReaderSize(nc, 64<<10)}, nil
	}
}

func (t *absoluteTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Body != nil && req.Body != http.NoBody {
		return nil, fmt.Errorf("absolute-form proxy: %s with a body is not sent", req.Method)
	}
	c, err := t.conn(req.Context())
	if err != nil {
		return nil, err
	}
	r := req.Clone(req.Context())
	if t.auth != "" {
		r.Header.Set("Proxy-Authorization", t.auth)
	}
	// Cut the connection when the request is cancelled or times out.
	stop := context.AfterFunc(req.Context(), func() { c.SetDeadline(time.Unix(1, 0)) })
	bw := bufio.NewWriter(c)
	if err := r.WriteProxy(bw); err != nil {
		stop()
		c.Close()
		return nil, err
	}
	if err := bw.Flush(); err != nil {
		stop()
		c.Close()
		return nil, err
	}
	resp, err := http.ReadResponse(c.br, req)
	if err != nil {
		stop()
		c.Close()
		if ctxErr := req.Context().Err(); ctxErr != nil {
			return nil, ctxErr
		}
		return nil, err
	}
	resp.Body = &absoluteBody{ReadCloser: resp.Body, c: c, t: t, stop: stop, reuse: !resp.Close && resp.ContentLength >= 0}
	return resp, nil
}

// absoluteBody returns its connection to the pool once read to its end.
type absoluteBody struct {
	io.ReadCloser
	c     *proxyConn
	t     *absoluteTransport
	stop  func() bool
	reuse bool
	eof   bool
	once  sync.Once
}

func (b *absoluteBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if err == io.EOF {
		b.eof = true
	}
	return n, err
}

func (b *absoluteBody) Close() error {
	err := b.ReadCloser.Close()
	b.once.Do(func() {
		if b.stop() && b.reuse && b.eof {
			select {
			case b.t.idle <- b.c:
				return
			default:
			}
		}
		b.c.Close()
	})
	return err
}

// TerminatingTierTransport is TierTransport for a tier that terminates
// TLS: https:// requests go to it in absolute form (AbsoluteTransport)
// instead of through CONNECT, so that it can cache them; http:// ones go
// through TierTransport. A tier that cannot be reached or answers 5xx is
// bypassed for that request (sent to the origin directly, over TLS),
// said once per process through logf. checkRedirect is TierTransport's;
// absolute-form requests are not redirected by the transport (their
// client's policy applies).
func TerminatingTierTransport(proxy *url.URL, base *http.Transport, checkRedirect func(*http.Request, []*http.Request) error, logf func(format string, args ...any)) http.RoundTripper {
	direct := base.Clone()
	direct.Proxy = nil
	return &terminatingTier{abs: AbsoluteTransport(proxy, base.MaxIdleConnsPerHost), other: TierTransport(proxy, base, checkRedirect, logf), direct: direct, name: RedactURL(proxy.String()), logf: logf}
}

type terminatingTier struct {
	abs, other, direct http.RoundTripper
	name               string
	logf               func(format string, args ...any)
}

func (t *terminatingTier) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.URL.Scheme != "https" {
		return t.other.RoundTrip(req)
	}
	resp, err := t.abs.RoundTrip(req)
	if err == nil && resp.StatusCode < 500 {
		return resp, nil
	}
	if req.Context().Err() != nil {
		return resp, err
	}
	why := ""
	if err != nil {
		why = tierError(err)
	} else {
		why = fmt.Sprintf("HTTP %d", resp.StatusCode)
		io.CopyN(io.Discard, resp.Body, 4<<10)
		resp.Body.Close()
	}
	if !tierLogged.Swap(true) && t.logf != nil {
		t.logf("tensorfs: proxy %s: %s; reading from the origin directly while it fails (said once)", t.name, why)
	}
	return t.direct.RoundTrip(req)
}
