package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/lazyweights/tensorfs/backing"
	"github.com/lazyweights/tensorfs/backing/remote"
	"github.com/lazyweights/tensorfs/backing/s3"
	"github.com/lazyweights/tensorfs/bytesize"
	"github.com/lazyweights/tensorfs/source"
)

// remoteHelp opens `tensorfs help remote`: a paragraph per scheme, from
// source.Schemes.
var remoteHelp = "\n" + source.RemoteHelp()

// remoteFlags are the flags for a remote SOURCE, shared by every command
// that takes one. They are read by loadRemote and remoteOptions.
type remoteFlags struct {
	cmd          string // the command's name, for messages
	noSign       *bool
	partSize     *string
	parallel     *int
	memCache     *string
	readahead    *string
	cacheDir     *string
	cacheSize    *string
	timeout      *time.Duration
	unvalidated  *bool
	proxy        *string
	proxyTLS     *bool
	hfCacheWrite *bool

	// Not remote: where and how much of the data decoded on first read
	// (inflated, inflateCacheHolds) is kept (backing.InflateCache);
	// files go under --cache-dir too.
	inflateMem  *string
	inflateDisk *string
}

// remoteCtx bounds the remote requests of the command being run:
// stopRemote, called when the command is interrupted (SIGINT, SIGTERM),
// ends every read waiting on the store at once, so that the command
// ends in a moment rather than at the read's deadline.
var remoteCtx, stopRemote = context.WithCancel(context.Background())

// remoteOpts is the remote flags of the command being run (set by
// addRemoteFlags; one command runs per process).
var remoteOpts *remoteFlags

// printRemoteHelp is `tensorfs help remote`: what a remote SOURCE is,
// the commands that take one, and the remote flags, once (each command's
// help points here instead of repeating them).
func printRemoteHelp(w io.Writer) {
	saved := remoteOpts
	defer func() { remoteOpts = saved }()
	f := newFlags("remote", "", "")
	addRemoteFlags(f)
	var b bytes.Buffer
	fmt.Fprintf(&b, "%s\n\nThe commands that read a SOURCE take these flags (%s):\n", strings.TrimSpace(remoteHelp), strings.Join(remoteCommands(), ", "))
	f.writeGroup(&b, groupRemote)
	b.WriteString("\nIn full: docs/REMOTE.md (the sources, caches and their limits) and\ndocs/SCALE.md (a fleet's cache tier, --proxy).\n")
	w.Write(b.Bytes())
}

// remoteCommands are the commands that take the remote flags, found by
// asking each for its flags (as -h does, with nothing printed).
func remoteCommands() []string {
	saved := helpRequested
	defer func() { helpRequested = saved }()
	var names []string
	for _, c := range commands {
		if c.run == nil {
			continue
		}
		var seen *flags
		helpRequested = func(f *flags) { seen = f }
		c.run([]string{"-h"})
		if seen != nil && seen.hasGroup(groupRemote) {
			names = append(names, c.name)
		}
	}
	return names
}

// addRemoteFlags adds the remote SOURCE flags to f.
func addRemoteFlags(f *flags) {
	remoteOpts = &remoteFlags{
		cmd:          f.name,
		noSign:       f.Bool("no-sign-request", false, "remote: send S3 requests without credentials (public buckets)"),
		partSize:     f.String("part-size", "8MiB", "remote: fetch and cache in parts of `SIZE`"),
		parallel:     f.Int("remote-parallel", remote.DefaultParallel, "remote: at most `N` GETs in flight"),
		memCache:     f.String("cache-mem", "128MiB", "remote: keep at most `SIZE` of parts in memory"),
		readahead:    f.String("remote-readahead", "32MiB", "remote: fetch up to `SIZE` ahead of a sequential reader (0: none)"),
		cacheDir:     f.String("cache-dir", "", "remote: keep fetched parts in `DIR` on disk, keyed by the store and the object's ETag and checked when read, so that the next open starts warm; DIR must be yours (or root's) and writable by nobody else"),
		cacheSize:    f.String("cache-size", "10GiB", "remote: at most `SIZE` in --cache-dir"),
		unvalidated:  f.Bool("allow-unvalidated", false, "remote: accept an HTTP(S) server or store that gives no ETag and no Last-Modified (refused without it: a file replaced while it is read would be served as a mix of both versions)"),
		proxy:        f.String("proxy", "", "remote: send every GET through the HTTP proxy at `URL` (a cache tier: Dragonfly's dfdaemon, an nginx slice cache; default $TENSORFS_PROXY); s3:// GETs are then presigned, and a proxy that is down or answers 5xx is bypassed"),
		proxyTLS:     f.Bool("proxy-terminates-tls", false, "remote: the --proxy makes https:// requests itself: send it hf:// CDN GETs as absolute-form https:// URLs it can cache, not through CONNECT (docs/SCALE.md)"),
		hfCacheWrite: f.Bool("hf-cache-write", false, "remote: put each hf:// file read whole into the local HF cache (HF_HUB_CACHE), checked against the Hub's sha256 or git sha1, as huggingface_hub lays it out, so that other tools and HF_HUB_OFFLINE find it; without it tensorfs never writes there"),
		timeout:      f.Duration("remote-timeout", remote.DefaultTimeout, "remote: a read that cannot be served within `D`, retries included, fails (EIO); opening waits at most 10s or D if less"),

		inflateMem:  f.String("inflate-mem", "256MiB", "data decoded once on first read, local SOURCEs too ("+inflateCacheHolds+"): keep at most `SIZE` of it in memory (pieces up to a quarter of it go to memory, larger ones and the least recently read to unlinked files in --cache-dir or $TMPDIR)"),
		inflateDisk: f.String("inflate-disk", "16GiB", "data decoded once on first read: at most `SIZE` of it in files (the largest piece that can be read; least recently read dropped beyond it)"),
	}
}

// inflateCacheHolds is what goes through the inflate cache
// (backing.InflateCache), as docs/FORMATS.md says of each format.
const inflateCacheHolds = "deflated .npz and .keras members, protocol-2 pickled NumPy arrays, zstd DCP items, gzip HDF5 chunks, ONNX typed-field initializers"

// remoteOptions turns the remote flags into source.RemoteOptions (with
// the S3 opener: the CLI reads s3://); a bad value is a usage error.
func remoteOptions() (source.RemoteOptions, error) {
	o := source.RemoteOptions{S3: s3.Open}
	rf := remoteOpts
	if rf == nil {
		return o, nil
	}
	size := func(name, v string) (int64, error) {
		if strings.TrimSpace(v) == "0" {
			return 0, nil
		}
		n, err := bytesize.Parse(v)
		if err != nil {
			return 0, usagef("%s: --%s: %v", rf.cmd, name, err)
		}
		return n, nil
	}
	var err error
	if o.Remote.PartSize, err = size("part-size", *rf.partSize); err != nil {
		return o, err
	}
	if o.Remote.PartSize < 4<<10 || o.Remote.PartSize > remote.MaxPartSize {
		return o, usagef("%s: --part-size: %s is not between 4KiB and %dMiB", rf.cmd, *rf.partSize, remote.MaxPartSize>>20)
	}
	if *rf.parallel < 1 || *rf.parallel > 1024 {
		return o, usagef("%s: --remote-parallel: %d is not between 1 and 1024", rf.cmd, *rf.parallel)
	}
	o.Remote.Parallel = *rf.parallel
	if o.Remote.MemCache, err = size("cache-mem", *rf.memCache); err != nil {
		return o, err
	}
	if o.Remote.Readahead, err = size("remote-readahead", *rf.readahead); err != nil {
		return o, err
	}
	if o.Remote.Readahead == 0 {
		o.Remote.Readahead = -1
	}
	o.Remote.CacheDir = *rf.cacheDir
	// The remote layer's log lines (an object changed under a mount, a
	// cache part refetched) in the command's own form, not log's.
	o.Remote.Logf = func(format string, args ...any) {
		if !strings.HasPrefix(format, "tensorfs: ") {
			format = "tensorfs: " + format
		}
		fmt.Fprintf(os.Stderr, format+"\n", args...)
	}
	// A mount logs a read that fails on the store's reply (its reader
	// sees only EIO); the other commands say it once, as the error they
	// exit with.
	o.Remote.ReadErrorsReturned = rf.cmd != "mount"
	if o.Remote.CacheSize, err = size("cache-size", *rf.cacheSize); err != nil {
		return o, err
	}
	if *rf.timeout <= 0 {
		return o, usagef("%s: --remote-timeout: %v is not positive", rf.cmd, *rf.timeout)
	}
	o.Remote.Timeout = *rf.timeout
	o.Remote.AllowUnvalidated = *rf.unvalidated
	proxy, from := strings.TrimSpace(*rf.proxy), "--proxy"
	if proxy == "" {
		proxy, from = strings.TrimSpace(os.Getenv("TENSORFS_PROXY")), "TENSORFS_PROXY"
	}
	if proxy != "" {
		if o.Remote.Proxy, err = remote.ParseProxy(proxy); err != nil {
			return o, usagef("%s: %s: %v", rf.cmd, from, err)
		}
	}
	o.Remote.ProxyTerminatesTLS = *rf.proxyTLS
	o.HF.CacheWrite = *rf.hfCacheWrite
	o.Remote.Context = remoteCtx
	o.NoSign = *rf.noSign
	var io backing.InflateOptions
	if io.MemLimit, err = size("inflate-mem", *rf.inflateMem); err != nil {
		return o, err
	}
	if io.MemLimit == 0 {
		io.MemLimit = -1 // nothing in memory
	}
	if io.DiskLimit, err = size("inflate-disk", *rf.inflateDisk); err != nil {
		return o, err
	}
	if io.DiskLimit == 0 {
		return o, usagef("%s: --inflate-disk: must be positive", rf.cmd)
	}
	io.Dir = *rf.cacheDir
	if io.Dir != "" {
		// Inflated members go to unlinked files there (O_TMPFILE, or
		// O_EXCL and 0600 then unlinked): nothing can be planted, but the
		// directory is held to the disk cache's rule all the same.
		d, err := backing.OpenPrivateDir(io.Dir)
		if err != nil {
			return o, fmt.Errorf("--cache-dir %v", err)
		}
		d.Close()
	}
	// The mount logs a member that cannot be inflated; the other
	// commands say it once, as the error they exit with.
	io.Logf = func(string, ...any) {}
	if rf.cmd == "mount" {
		io.Logf = func(format string, args ...any) { fmt.Fprintf(os.Stderr, format+"\n", args...) }
	}
	backing.SetInflateOptions(io)
	return o, nil
}
