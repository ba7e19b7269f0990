package remote

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Store is one object store bucket or HTTP server: what a Client reads
// from. backing/s3 and backing/httpsrc implement it. Keys are the
// store's own ('/'-separated object keys, URL paths). Implementations
// return errors as *Error so that the Client knows which to retry.
type Store interface {
	// URL names key in messages (s3://bucket/key, https://host/path). It
	// never holds a secret.
	URL(key string) string
	// Origin names where the store's bytes come from, for the disk
	// cache's key: two stores with the same Origin serve the same bytes
	// for the same key and validators. It names the endpoint (scheme,
	// host and port, the region where the endpoint is implied) and the
	// bucket, or for HTTP the whole URL but its path (which is the key)
	// and its secrets. It may hold what URL leaves out (a query): it is
	// only ever hashed, under the cache's secret key.
	Origin() string
	// Open reads the start of the object at key, unpinned, into head
	// (as much of it as the object has) and returns the object's
	// identity and the number of bytes read. A missing object is an
	// *Error of kind NotFound.
	Open(ctx context.Context, key string, head []byte) (Object, int, error)
	// Get fills bufs, in order, with the bytes of obj from off on (one
	// ranged GET of their total length), pinned to obj's version
	// (If-Match on the ETag, or the version id): a changed object is an
	// *Error of kind Changed, never other bytes. It calls filled(i), when
	// filled is not nil, as soon as bufs[i] is full, before reading on, so
	// that a caller can use the first buffers of a long GET while the rest
	// arrive; ReadBufs does this from a response body. It takes bufs[i]
	// from the slice only once filled(i-1) has returned, and never
	// touches a buffer after its filled: a caller may put a buffer of
	// the same length, or an empty one (read no more of the body), at
	// bufs[i] until then (a flow: one GET read into a loader's
	// successive buffers). off plus the total length is at most
	// obj.Size; bufs are not empty.
	Get(ctx context.Context, obj Object, off int64, bufs [][]byte, filled func(i int)) error
	// List returns the objects directly under prefix (a key ending in '/',
	// or "" for the whole bucket): their keys relative to prefix, without
	// '/', and sizes, and whether anything (objects or deeper prefixes) is
	// under prefix at all. Stores that cannot list return an *Error of
	// kind Invalid.
	List(ctx context.Context, prefix string) (entries []Entry, any bool, err error)
}

// Digester is a Store that knows the sha256 of some objects' whole
// bytes (the Hub's LFS oid of an hf:// file), for a check of the data
// read (tensorfs check --data). Stores that do not implement it know
// none.
type Digester interface {
	// SHA256 is the hex sha256 of key's bytes; ok is false when the
	// store does not know it.
	SHA256(key string) (hex string, ok bool)
}

// Object is the identity of one version of an object, as validated at
// open.
type Object struct {
	Key          string
	Size         int64
	ETag         string    // "" when the server gave none
	Version      string    // S3 version id, "" when unversioned
	LastModified time.Time // zero when unknown
}

// Identity is what distinguishes this version of the object from any
// other: the disk cache is keyed by it. ok is false when the server gave
// no validator (no ETag, version or modification time), so that nothing
// about the object may be cached across opens.
func (o Object) Identity() (id string, ok bool) {
	if o.ETag == "" && o.Version == "" && o.LastModified.IsZero() {
		return "", false
	}
	return fmt.Sprintf("%s\x00%d\x00%s\x00%s\x00%d", o.Key, o.Size, o.ETag, o.Version, o.LastModified.UnixNano()), true
}

// Entry is one object found by List.
type Entry struct {
	Name string // relative to the listed prefix
	Size int64
}

// Kind says what a failed request means for the caller.
type Kind uint8

const (
	// Transient: 5xx, 429, 503 SlowDown, a reset or refused connection,
	// a timeout. Retried with backoff until the deadline.
	Transient Kind = iota
	// NotFound: no such bucket, object or prefix.
	NotFound
	// Denied: bad or missing credentials, no permission.
	Denied
	// Changed: the object is no longer the version validated at open.
	Changed
	// Invalid: anything else that retrying will not fix.
	Invalid
)

func (k Kind) String() string {
	switch k {
	case Transient:
		return "transient"
	case NotFound:
		return "not found"
	case Denied:
		return "access denied"
	case Changed:
		return "changed"
	case Invalid:
		return "invalid"
	}
	return fmt.Sprintf("Kind(%d)", uint8(k))
}

// Error is a failed request to a store.
type Error struct {
	URL    string // the object, bucket or prefix
	Kind   Kind
	Status int    // HTTP status, 0 when there was no response
	Code   string // the store's error code (NoSuchKey, SlowDown), if any
	Msg    string // what went wrong, one line, no secrets
	Err    error  // underlying error, or nil
}

func (e *Error) Error() string {
	msg := e.Msg
	if msg == "" && e.Err != nil {
		msg = e.Err.Error()
	}
	s := e.URL + ": "
	if e.Status != 0 {
		s += fmt.Sprintf("HTTP %d", e.Status)
		if e.Code != "" {
			s += " " + e.Code
		}
		if msg != "" {
			s += ": "
		}
	} else if e.Code != "" {
		s += e.Code + ": "
	}
	return s + msg
}

func (e *Error) Unwrap() error { return e.Err }

// KindOf returns the kind of a store's error: the Kind of an *Error in
// its chain, Transient for network failures and timeouts, Invalid for
// anything else.
func KindOf(err error) Kind {
	var e *Error
	if errors.As(err, &e) {
		return e.Kind
	}
	return ConnKind(err)
}

// ConnKind is the Kind of a request that got no answer (err from the
// HTTP client, or a store's SDK): Transient, worth retrying, for a
// connection refused, reset, cut short or timed out; Invalid for a host
// name that does not exist (NoSuchHost) and for anything else.
func ConnKind(err error) Kind {
	if NetworkError(err) && !NoSuchHost(err) {
		return Transient
	}
	return Invalid
}

// NoSuchHost reports whether err says that a host name does not exist:
// DNS answered that it has no such name (not a timeout, not a resolver
// that failed for now). The connection was never tried, and trying
// again within seconds does not change the answer: retrying it only made
// hf:// with no network wait out --remote-timeout (10 s) before saying
// so. It is still a NetworkError (the host cannot be reached).
func NoSuchHost(err error) bool {
	var de *net.DNSError
	return errors.As(err, &de) && de.IsNotFound && !de.IsTemporary && !de.IsTimeout
}

// NetworkError reports whether err is a failure of the connection (refused,
// reset, cut short, timed out) rather than an answer from the server:
// worth retrying.
func NetworkError(err error) bool {
	if err == nil {
		return false
	}
	var ne net.Error
	switch {
	case errors.Is(err, context.DeadlineExceeded),
		errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, io.EOF),
		errors.Is(err, syscall.ECONNREFUSED), errors.Is(err, syscall.ECONNRESET),
		errors.Is(err, syscall.EPIPE), errors.Is(err, syscall.ECONNABORTED),
		errors.Is(err, net.ErrClosed), errors.As(err, &ne):
		return true
	}
	var op *net.OpError
	return errors.As(err, &op)
}

// StatusKind classifies an HTTP error status.
func StatusKind(status int) Kind {
	switch {
	case status == 404:
		return NotFound
	case status == 401 || status == 403:
		return Denied
	case status == 412:
		return Changed
	case status == 408 || status == 429 || status >= 500:
		return Transient
	}
	return Invalid
}

// BufsLen is the total length of bufs.
func BufsLen(bufs [][]byte) int64 {
	n := int64(0)
	for _, b := range bufs {
		n += int64(len(b))
	}
	return n
}

// ReadBufs fills bufs in order from body, straight into each buffer (no
// intermediate copy), and calls filled(i) (when not nil) as each is full.
// It takes bufs[i] from the slice only once filled(i-1) has returned
// (see Store.Get). A short body is io.ErrUnexpectedEOF.
func ReadBufs(body io.Reader, bufs [][]byte, filled func(i int)) error {
	for i := range bufs {
		b := bufs[i] // now: filled(i-1) may have put it there
		if _, err := io.ReadFull(body, b); err != nil {
			if err == io.EOF {
				err = io.ErrUnexpectedEOF
			}
			return err
		}
		if filled != nil {
			filled(i)
		}
	}
	return nil
}

// ContentRange parses a Content-Range header "bytes FIRST-LAST/TOTAL"
// (RFC 9110 14.4). ok is false for anything else, "bytes */TOTAL"
// included.
func ContentRange(cr string) (first, last, total int64, ok bool) {
	rest, found := strings.CutPrefix(cr, "bytes ")
	if !found {
		return 0, 0, 0, false
	}
	rng, tot, found := strings.Cut(rest, "/")
	if !found {
		return 0, 0, 0, false
	}
	a, b, found := strings.Cut(rng, "-")
	if !found {
		return 0, 0, 0, false
	}
	var err1, err2, err3 error
	first, err1 = strconv.ParseInt(a, 10, 64)
	last, err2 = strconv.ParseInt(b, 10, 64)
	total, err3 = strconv.ParseInt(tot, 10, 64)
	if err1 != nil || err2 != nil || err3 != nil || first < 0 || last < first || total <= last {
		return 0, 0, 0, false
	}
	return first, last, total, true
}

// CheckContentRange holds a ranged reply's Content-Range to the request
// of want bytes at off of an object of size bytes: the reply must say it
// holds exactly those bytes, else it is an error (Changed when only the
// total differs: the object is not the one opened; Invalid otherwise).
func CheckContentRange(url, cr string, off, want, size int64) error {
	first, last, total, ok := ContentRange(cr)
	if !ok {
		return &Error{URL: url, Kind: Invalid, Msg: fmt.Sprintf("the server answered a request for bytes %d-%d with Content-Range %s", off, off+want-1, strconv.Quote(cr))}
	}
	if total != size {
		return &Error{URL: url, Kind: Changed, Msg: fmt.Sprintf("%d bytes, was %d (Content-Range %s)", total, size, strconv.Quote(cr))}
	}
	if first != off || last != off+want-1 {
		return &Error{URL: url, Kind: Invalid, Msg: fmt.Sprintf("asked for bytes %d-%d, the server sent bytes %d-%d (Content-Range %s)", off, off+want-1, first, last, strconv.Quote(cr))}
	}
	return nil
}
