package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/lazyweights/tensorfs/backing"
	"github.com/lazyweights/tensorfs/backing/remote"
	"github.com/lazyweights/tensorfs/backing/s3"
	"github.com/lazyweights/tensorfs/bytesize"
	"github.com/lazyweights/tensorfs/source"
)

// schemes is the table of remote schemes that the commands' remote flags
// and every help text naming the schemes are generated from
// (source.Schemes; useSchemes changes it).
var schemes = source.Schemes()

// remoteHelp opens `tensorfs help remote`: a paragraph per scheme, from
// schemes.
var remoteHelp = "\n" + schemes.Help()

// useSchemes makes the remote flags and the help follow table t (a
// test's toy row) and returns the table they followed before.
func useSchemes(t source.Table) source.Table {
	old := schemes
	schemes = t
	remoteHelp = "\n" + t.Help()
	for i, g := range flagGroups {
		if g == groupRemote {
			flagGroups[i] = remoteGroup(t)
		}
	}
	groupRemote = remoteGroup(t)
	remotePointer = remotePointerText(t)
	for i := range topics {
		if topics[i].name == "remote" {
			topics[i].summary = remoteTopicSummary(t)
		}
	}
	return old
}

// schemeTopics are the names under which `tensorfs help NAME` is the
// remote topic, one per scheme the help names: "s3, hf, http, ...".
func schemeTopics(t source.Table) string {
	var names []string
	for _, s := range t {
		if s.Name != "" {
			names = append(names, strings.TrimSuffix(s.Prefix, "://"))
		}
	}
	return strings.Join(names, ", ")
}

// remoteFlagNames are the remote flags every scheme shares (a scheme's
// own are its source.Option rows), in the remote group of the help.
var remoteFlagNames = []string{"part-size", "remote-parallel", "cache-mem", "remote-readahead", "cache-dir", "cache-size", "allow-unvalidated", "remote-timeout", "proxy", "inflate-mem", "inflate-disk"}

// isRemoteFlag reports whether the flag called name is in the remote
// group: one every scheme shares, or a scheme's option.
func isRemoteFlag(name string) bool {
	if slices.Contains(remoteFlagNames, name) {
		return true
	}
	_, ok := schemeOption(schemes, name)
	return ok
}

// schemeOption returns the option of t's schemes whose flag is name.
func schemeOption(t source.Table, name string) (source.Option, bool) {
	for _, s := range t {
		for _, o := range s.Options {
			if o.Name == name {
				return o, true
			}
		}
	}
	return source.Option{}, false
}

// remoteFlags are the flags for a remote SOURCE, shared by every command
// that takes one. They are read by loadRemote and remoteOptions.
type remoteFlags struct {
	cmd         string // the command's name, for messages
	set         *flags // the command's flags, for what was given
	partSize    *string
	parallel    *int
	memCache    *string
	readahead   *string
	cacheDir    *string
	cacheSize   *string
	timeout     *time.Duration
	unvalidated *bool
	proxy       *string
	// options are the schemes' own flags (source.Option), in table order.
	options []schemeFlag

	// Not remote: where and how much of the data decoded on first read
	// (inflated, inflateCacheHolds) is kept (backing.InflateCache);
	// files go under --cache-dir too.
	inflateMem  *string
	inflateDisk *string
}

// schemeFlag is a scheme's option and the value of its flag: str, or
// on for a switch.
type schemeFlag struct {
	opt source.Option
	str *string
	on  *bool
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
		cmd:         f.name,
		set:         f,
		partSize:    f.String("part-size", "8MiB", "remote: fetch and cache in parts of `SIZE`"),
		parallel:    f.Int("remote-parallel", remote.DefaultParallel, "remote: at most `N` GETs in flight"),
		memCache:    f.String("cache-mem", "128MiB", "remote: keep at most `SIZE` of parts in memory"),
		readahead:   f.String("remote-readahead", "32MiB", "remote: fetch up to `SIZE` ahead of a sequential reader (0: none)"),
		cacheDir:    f.String("cache-dir", "", "remote: keep fetched parts in `DIR` on disk, keyed by the store and the object's ETag and checked when read, so that the next open starts warm; DIR must be yours (or root's) and writable by nobody else"),
		cacheSize:   f.String("cache-size", "10GiB", "remote: at most `SIZE` in --cache-dir"),
		unvalidated: f.Bool("allow-unvalidated", false, "remote: accept an HTTP(S) server or store that gives no ETag and no Last-Modified (refused without it: a file replaced while it is read would be served as a mix of both versions)"),
		proxy:       f.String("proxy", "", "remote: send every GET through the HTTP proxy at `URL` (a cache tier: Dragonfly's dfdaemon, an nginx slice cache; default $TENSORFS_PROXY); s3:// GETs are then presigned, and a proxy that is down or answers 5xx is bypassed"),
		timeout:     f.Duration("remote-timeout", remote.DefaultTimeout, "remote: a read that cannot be served within `D`, retries included, fails (EIO); opening waits at most 10s or D if less"),

		inflateMem:  f.String("inflate-mem", "256MiB", "data decoded once on first read, local SOURCEs too ("+inflateCacheHolds+"): keep at most `SIZE` of it in memory (pieces up to a quarter of it go to memory, larger ones and the least recently read to unlinked files in --cache-dir or $TMPDIR)"),
		inflateDisk: f.String("inflate-disk", "16GiB", "data decoded once on first read: at most `SIZE` of it in files (the largest piece that can be read; least recently read dropped beyond it)"),
	}
	for _, s := range schemes {
		for _, o := range s.Options {
			usage := "remote: " + o.Help
			if o.Env != "" {
				usage += " (default $" + o.Env + ")"
			}
			sf := schemeFlag{opt: o}
			if o.Bool {
				sf.on = f.Bool(o.Name, false, usage)
			} else {
				sf.str = f.String(o.Name, "", usage)
			}
			remoteOpts.options = append(remoteOpts.options, sf)
		}
	}
}

// setOptions puts the schemes' own flags into o: each flag given, else
// its environment variable where it has one and that is set, else its
// zero value.
func (rf *remoteFlags) setOptions(o *source.RemoteOptions) error {
	for _, sf := range rf.options {
		v := ""
		if sf.on != nil {
			v = strconv.FormatBool(*sf.on)
		} else {
			v = *sf.str
		}
		if env := sf.opt.Env; env != "" && !rf.set.isSet(sf.opt.Name) && os.Getenv(env) != "" {
			v = os.Getenv(env)
		}
		if err := sf.opt.Set(o, v); err != nil {
			return usagef("%s: --%s: %v", rf.cmd, sf.opt.Name, err)
		}
	}
	return nil
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
	size := rf.size
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
	o.Remote.Context = remoteCtx
	if err := rf.setOptions(&o); err != nil {
		return o, err
	}
	return o, rf.setInflateOptions()
}

// size parses the value v of the size flag --name; "0" is 0.
func (rf *remoteFlags) size(name, v string) (int64, error) {
	if strings.TrimSpace(v) == "0" {
		return 0, nil
	}
	n, err := bytesize.Parse(v)
	if err != nil {
		return 0, usagef("%s: --%s: %v", rf.cmd, name, err)
	}
	return n, nil
}

// setInflateOptions configures the cache of data decoded on first read
// (backing.SetInflateOptions) from --inflate-mem, --inflate-disk and
// --cache-dir; a bad value is a usage error.
func (rf *remoteFlags) setInflateOptions() error {
	size := rf.size
	var err error
	var io backing.InflateOptions
	if io.MemLimit, err = size("inflate-mem", *rf.inflateMem); err != nil {
		return err
	}
	if io.MemLimit == 0 {
		io.MemLimit = -1 // nothing in memory
	}
	if io.DiskLimit, err = size("inflate-disk", *rf.inflateDisk); err != nil {
		return err
	}
	if io.DiskLimit == 0 {
		return usagef("%s: --inflate-disk: must be positive", rf.cmd)
	}
	io.Dir = *rf.cacheDir
	if io.Dir != "" {
		// Inflated members go to unlinked files there (O_TMPFILE, or
		// O_EXCL and 0600 then unlinked): nothing can be planted, but the
		// directory is held to the disk cache's rule all the same.
		d, err := backing.OpenPrivateDir(io.Dir)
		if err != nil {
			return fmt.Errorf("--cache-dir %v", err)
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
	return nil
}

// schemeRowsStart and schemeRowsEnd enclose docs/CLI.md's rows of the
// schemes, which schemeRows generates (TestCLIPageSchemeRows).
const (
	schemeRowsStart = "<!-- scheme rows: generated from source.Schemes (schemeRows); TestCLIPageSchemeRows holds them -->\n"
	schemeRowsEnd   = "<!-- end of scheme rows -->\n"
)

// schemeRows is docs/CLI.md's table of t's schemes: one row per scheme
// the help names, with its SOURCEs, its own flags and where the docs say
// it in full.
func schemeRows(t source.Table) string {
	var b strings.Builder
	b.WriteString("| Scheme | SOURCE | Its own flags | In full |\n|---|---|---|---|\n")
	for _, s := range t {
		if s.Name == "" {
			continue
		}
		var forms []string
		for _, w := range strings.Fields(s.Forms) {
			if word := strings.TrimSuffix(w, ","); strings.Contains(word, "://") {
				w = "`" + word + "`" + w[len(word):]
			}
			forms = append(forms, w)
		}
		flags := "none"
		if len(s.Options) > 0 {
			var names []string
			for _, o := range s.Options {
				names = append(names, "`--"+o.Name+"`")
			}
			flags = strings.Join(names, ", ")
		}
		page, _, _ := strings.Cut(s.Doc, "#")
		// A | in a cell (oci://'s [:TAG|@sha256:DIGEST]) would end it.
		cell := strings.ReplaceAll(strings.Join(forms, " "), "|", `\|`)
		fmt.Fprintf(&b, "| `%s` | %s | %s | [%s](%s) |\n", s.Name, cell, flags, page, s.Doc)
	}
	return b.String()
}
