package remote

import (
	"context"
	"errors"
	"fmt"
	"log"
	"math/rand/v2"
	"net/url"
	"strings"
	"sync/atomic"
	"time"
)

// Options configure a Client. Zero fields take the defaults.
type Options struct {
	// PartSize is the unit of fetching and caching (default 8 MiB).
	PartSize int64
	// Parallel is the most GETs in flight at once, all sources of the
	// Client together (default 16).
	Parallel int
	// MemCache bounds the bytes of parts held in memory, all sources
	// together (default 128 MiB; at least 2 parts). Reads beyond it (more
	// concurrent readers than parts) use buffers that are not kept.
	MemCache int64
	// Readahead is the most bytes fetched ahead of a sequential reader
	// (default 32 MiB); the window starts at one part and doubles.
	Readahead int64
	// CacheDir, when set, keeps fetched parts on disk keyed by the
	// store's origin (Store.Origin) and the object's identity
	// (Object.Identity), each part checked against an HMAC when read (a
	// part that fails it is fetched again), up to CacheSize bytes
	// (default 10 GiB), so that a second open of the same version starts
	// warm. A changed object has another identity: never served from it.
	// The directory must be this user's (or root's) and writable by
	// nobody else (backing.OpenPrivateDir), else New fails.
	CacheDir  string
	CacheSize int64
	// Timeout bounds one read, retries included (default 30 s): a store
	// that stays away fails the read with an error wrapping
	// backing.ErrFault after it. The same source serves again once the
	// store is back.
	Timeout time.Duration
	// OpenTimeout bounds opening, listing and the first read, retries
	// included (default 10 s, and never more than Timeout): an
	// unreachable store is an error in seconds.
	OpenTimeout time.Duration
	// Logf logs the one line said when an object changes under an open
	// source, or when a server's reply does not match its request
	// (default log.Printf).
	Logf func(format string, args ...any)
	// ReadErrorsReturned says the caller reports every read error
	// itself (a command that exits with it, not a mount): the lines
	// Logf would say when an object changes under an open source or a
	// reply does not match its request are left out, so the error is
	// said once.
	ReadErrorsReturned bool
	// Context, when set, bounds the Client's life: once it is done
	// (the command was interrupted), every open, fetch and read waiting
	// on the store ends at once with an error wrapping its cause
	// (context.Canceled). nil is context.Background().
	Context context.Context
	// AllowUnvalidated accepts objects whose server gives no validator
	// (no ETag, version id or Last-Modified). Without it Open refuses
	// them: nothing could show that an object replaced while it is read
	// is not served as a mix of both versions.
	AllowUnvalidated bool
	// Proxy, when set, is the HTTP proxy (a cache tier: Dragonfly's
	// dfdaemon, an nginx cache) that the stores send every GET through
	// (--proxy, TENSORFS_PROXY; see TierTransport). The Client does not
	// use it: it is for the store constructors (backing/s3's and
	// backing/httpsrc's Options.Proxy), which the opener of a source
	// gives it to. Check it with ParseProxy.
	Proxy *url.URL
	// ProxyTerminatesTLS says that the Proxy makes https:// requests to
	// origins itself (--proxy-terminates-tls): https:// GETs are sent to
	// it in absolute form (TerminatingTierTransport), so that it can
	// cache them, instead of through CONNECT. Stores that take it:
	// backing/hf.
	ProxyTerminatesTLS bool
}

// Defaults.
const (
	DefaultPartSize    = 8 << 20
	DefaultParallel    = 16
	DefaultMemCache    = 128 << 20
	DefaultReadahead   = 32 << 20
	DefaultCacheSize   = 10 << 30
	DefaultTimeout     = 30 * time.Second
	DefaultOpenTimeout = 10 * time.Second
	// MaxPartSize bounds PartSize.
	MaxPartSize = 256 << 20
)

func (o Options) withDefaults() (Options, error) {
	if o.PartSize == 0 {
		o.PartSize = DefaultPartSize
	}
	if o.PartSize < 4<<10 || o.PartSize > MaxPartSize {
		return o, fmt.Errorf("remote: part size %d is not between 4 KiB and %d MiB", o.PartSize, MaxPartSize>>20)
	}
	if o.Parallel <= 0 {
		o.Parallel = DefaultParallel
	}
	if o.Parallel > 1024 {
		return o, fmt.Errorf("remote: %d parallel requests is over 1024", o.Parallel)
	}
	if o.MemCache == 0 {
		o.MemCache = DefaultMemCache
	}
	if o.MemCache < 2*o.PartSize {
		o.MemCache = 2 * o.PartSize
	}
	if o.Readahead == 0 {
		o.Readahead = DefaultReadahead
	}
	if o.Readahead < 0 {
		o.Readahead = 0
	}
	if o.CacheSize == 0 {
		o.CacheSize = DefaultCacheSize
	}
	if o.Timeout <= 0 {
		o.Timeout = DefaultTimeout
	}
	if o.OpenTimeout <= 0 {
		o.OpenTimeout = DefaultOpenTimeout
	}
	if o.OpenTimeout > o.Timeout {
		o.OpenTimeout = o.Timeout
	}
	if o.Logf == nil {
		o.Logf = log.Printf
	}
	if o.Context == nil {
		o.Context = context.Background()
	}
	return o, nil
}

// probeTimeout bounds the one try a read makes while the store is taken
// to be away (see Client.awayAt).
const probeTimeout = 2 * time.Second

// bind returns ctx, also cancelled when the Client's Context is done.
func (c *Client) bind(ctx context.Context) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancelCause(ctx)
	stop := context.AfterFunc(c.opts.Context, func() { cancel(context.Cause(c.opts.Context)) })
	return ctx, func() {
		stop()
		cancel(nil)
	}
}

// interrupted is the error of a request cut short because the Client's
// Context is done, or nil.
func (c *Client) interrupted(url string) error {
	if err := context.Cause(c.opts.Context); err != nil {
		return &Error{URL: url, Kind: Invalid, Msg: "interrupted", Err: err}
	}
	return nil
}

// Client reads objects of one Store: it opens Sources, and holds what
// they share (the in-memory part cache, the disk cache, the limit on
// GETs in flight). Safe for concurrent use.
type Client struct {
	store Store
	opts  Options
	lim   *limiter // the GETs in flight (AIMD)
	mem   *memCache
	disk  *diskCache // nil without CacheDir

	// awayAt is when a read last gave up on the store (transient errors
	// for its whole Timeout), in Unix nanoseconds; 0 once a GET has
	// succeeded since. Within Timeout of it, a read makes one try of at
	// most probeTimeout instead of retrying for a whole Timeout: a read
	// that the kernel splits or retries (a failed readahead, then the
	// page read again) costs one Timeout, not one per request.
	awayAt atomic.Int64
	flows  atomic.Int32 // the flows open (see flowSlots)
}

// New returns a Client of store.
func New(store Store, opts Options) (*Client, error) {
	opts, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	c := &Client{store: store, opts: opts, lim: newLimiter(opts.Parallel)}
	c.mem = newMemCache(opts.MemCache, opts.PartSize)
	if opts.CacheDir != "" {
		d, err := openDiskCache(opts.CacheDir, opts.CacheSize, opts.Logf)
		if err != nil {
			return nil, err
		}
		c.disk = d
	}
	return c, nil
}

// Options returns the options in force (defaults filled in).
func (c *Client) Options() Options { return c.opts }

// Close closes the store, when it holds anything to close (hf://: the
// files it opened in the HF cache, and with --hf-cache-write the files
// read whole, put there). The sources opened from the client are closed
// first, by their owner.
func (c *Client) Close() error {
	if cl, ok := c.store.(interface{ Close() error }); ok {
		return cl.Close()
	}
	return nil
}

// URL names key in messages.
func (c *Client) URL(key string) string { return c.store.URL(key) }

// retry runs op until it succeeds, fails with an error that is not
// Transient, or the deadline of ctx passes; between tries it waits with
// exponential backoff and full jitter (from 50 ms, at most 2 s). The
// error after the deadline is the last try's.
func retry(ctx context.Context, op func(ctx context.Context) error) error {
	wait := 50 * time.Millisecond
	// last is the last error of an attempt that ended before the
	// deadline: when the deadline cuts the next attempt short, its error
	// ("context deadline exceeded") says less than last (e.g. "connection
	// refused"), so last is returned. A cancelled context is returned as
	// it is: the caller was interrupted.
	var last error
	giveUp := func(err error) error {
		if last != nil && errors.Is(ctx.Err(), context.DeadlineExceeded) {
			return last
		}
		return err
	}
	for {
		err := op(ctx)
		if err == nil || KindOf(err) != Transient {
			if err != nil && ctx.Err() != nil {
				return giveUp(err)
			}
			return err
		}
		if ctx.Err() != nil {
			return giveUp(err)
		}
		last = err
		d := time.Duration(rand.Int64N(int64(wait))) + wait/4
		t := time.NewTimer(d)
		select {
		case <-ctx.Done():
			t.Stop()
			return giveUp(err)
		case <-t.C:
		}
		if wait < 2*time.Second {
			wait *= 2
		}
	}
}

// Stat says what key is: an object (isDir false), or a prefix with
// objects under it (isDir true). A key ending in '/' (or "") is a prefix.
func (c *Client) Stat(ctx context.Context, key string) (isDir bool, err error) {
	ctx, unbind := c.bind(ctx)
	defer unbind()
	ctx, cancel := context.WithTimeout(ctx, c.opts.OpenTimeout)
	defer cancel()
	if key == "" || strings.HasSuffix(key, "/") {
		return true, c.checkPrefix(ctx, key)
	}
	var head [1]byte // a GET, not a HEAD: its error says what is missing
	err = retry(ctx, func(ctx context.Context) error {
		_, _, err := c.store.Open(ctx, key, head[:])
		return err
	})
	if err == nil {
		return false, nil
	}
	if KindOf(err) == Transient {
		return false, gaveUp(err, c.opts.OpenTimeout)
	}
	if KindOf(err) != NotFound {
		return false, err
	}
	if perr := c.checkPrefix(ctx, key+"/"); perr == nil {
		return true, nil
	}
	return false, err
}

// checkPrefix fails with a NotFound *Error when nothing is under prefix.
func (c *Client) checkPrefix(ctx context.Context, prefix string) error {
	var any bool
	err := retry(ctx, func(ctx context.Context) error {
		var err error
		_, any, err = c.store.List(ctx, prefix)
		return err
	})
	if err != nil {
		return err
	}
	if !any {
		return &Error{URL: c.store.URL(prefix), Kind: NotFound, Msg: "no objects under this prefix"}
	}
	return nil
}

// List returns the objects directly under prefix (see Store.List).
func (c *Client) List(ctx context.Context, prefix string) ([]Entry, error) {
	ctx, unbind := c.bind(ctx)
	defer unbind()
	ctx, cancel := context.WithTimeout(ctx, c.opts.OpenTimeout)
	defer cancel()
	var ents []Entry
	err := retry(ctx, func(ctx context.Context) error {
		var err error
		ents, _, err = c.store.List(ctx, prefix)
		return err
	})
	return ents, err
}

// errorsAsStore returns err's *Error, if any.
func errorsAsStore(err error) (*Error, bool) {
	var e *Error
	ok := errors.As(err, &e)
	return e, ok
}

// gaveUp says that a transient error lasted the whole deadline.
func gaveUp(err error, d time.Duration) error {
	return fmt.Errorf("%w (still failing after %v of retries)", err, d)
}
