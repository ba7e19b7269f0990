package main

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/schollz/progressbar/v3"
	"golang.org/x/sys/unix"
	"golang.org/x/term"

	"github.com/lazyweights/tensorfs/backing"
	"github.com/lazyweights/tensorfs/bytesize"
	"github.com/lazyweights/tensorfs/client"
	"github.com/lazyweights/tensorfs/dtype"
)

const convertAbout = `
Writes SOURCE as one safetensors file OUT: exactly the bytes a mount of
SOURCE serves as .safetensors/model.safetensors (with --dtype, the
converted view's .DT/.safetensors/model.safetensors). Every tensor is under
its exact name, in its stored dtype where safetensors has one, as F32 for
GGUF quantized types; with --dtype, float and quantized tensors are
converted to DT and the others kept as stored.

Memory stays bounded (a few chunk buffers, whatever the checkpoint's
size). OUT is written to a temporary file in its directory, synced and
renamed into place, so OUT is either absent or complete: an existing OUT
is refused without --force, and one that is not a regular file (a
symbolic link, /dev/stdout, a named pipe, a device, a directory) always:
convert never writes through a link nor replaces anything but a regular
file, and exit 0 means the bytes are at OUT. An interrupted convert
(SIGINT, SIGTERM) leaves nothing behind. SOURCE may also be a tensorfs
mount point. On a terminal a progress bar shows bytes, rate and time left; a summary line follows (bytes, time, throughput, peak memory).`

func runConvert(args []string) error {
	f := newFlags("convert", "[--dtype DT] [--force] [--quiet] SOURCE OUT", convertAbout)
	addRemoteFlags(f)
	dtFlag := f.String("dtype", "", "convert float and quantized tensors to `DT` (f32, f16, bf16 or f64); others are written as stored")
	force := f.Bool("force", false, "overwrite OUT if it exists")
	quiet := f.Bool("quiet", false, "no progress bar and no summary line")
	if err := f.parse(args, 2, 2); err != nil {
		return err
	}
	var to dtype.DType
	if *dtFlag != "" {
		dt, err := dtype.ParseView(*dtFlag)
		if err != nil {
			return usagef("convert: --dtype: %v", err)
		}
		to = dt
	}
	source, out := f.Arg(0), f.Arg(1)
	if out == "" || source == "" {
		return usagef("convert: empty SOURCE or OUT (usage: %s)", f.synopsis())
	}
	if err := checkOut(out, *force); err != nil {
		return err
	}

	ck, err := openClient(source, backing.Pread)
	if err != nil {
		return err
	}
	defer ck.Close()
	if us := ck.Unserved(); len(us) > 0 { // logged by openClient
		return fmt.Errorf("convert: %s: cannot write %s: %s; %s not written", source, plural(unservedCount(us), "tensor"), unservedNames(us), out)
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	// An interrupt also ends reads waiting on a remote store.
	defer context.AfterFunc(ctx, stopRemote)()
	tmp, err := newTempOut(out)
	if err != nil {
		return err
	}
	defer tmp.discard() // nothing after a successful commit

	var bar *progressbar.ProgressBar
	opts := client.SafetensorsOptions{DType: to}
	if !*quiet && term.IsTerminal(int(os.Stderr.Fd())) {
		opts.Progress = func(done, total int64) {
			if bar == nil {
				bar = progressbar.NewOptions64(total,
					progressbar.OptionSetWriter(os.Stderr),
					progressbar.OptionSetDescription(filepath.Base(out)),
					progressbar.OptionShowBytes(true),
					progressbar.OptionSetPredictTime(true),
					progressbar.OptionSetElapsedTime(true),
					progressbar.OptionSetWidth(30),
					progressbar.OptionThrottle(100*time.Millisecond),
					progressbar.OptionUseANSICodes(true),
				)
			}
			bar.Set64(done)
		}
	}
	mem := startLoadMemSampler(10 * time.Millisecond)
	start := time.Now()
	n, err := ck.WriteSafetensors(ctx, tmp.f, opts)
	if err == nil {
		err = tmp.commit(*force)
	}
	elapsed := time.Since(start)
	peakAnon, hwm := mem.stop()
	if bar != nil {
		bar.Finish()
		bar.Clear()
		fmt.Fprint(os.Stderr, "\r")
	}
	if err != nil {
		if ctx.Err() != nil {
			return fmt.Errorf("%s: interrupted after %d bytes; nothing written", out, n)
		}
		return fmt.Errorf("%s: %w", out, err)
	}
	if !*quiet {
		fmt.Fprintf(os.Stderr, "wrote %s: %d bytes (%s) in %.3f s, %s, peak memory %s anonymous (RssAnon), %s resident (VmHWM)\n",
			out, n, bytesize.Format(n), elapsed.Seconds(), bytesize.Rate(n, elapsed.Seconds()), bytesize.Format(peakAnon), bytesize.Format(hwm))
	}
	return nil
}

// tempOut is the file convert writes before it becomes OUT: an unnamed
// O_TMPFILE in OUT's directory where the filesystem has them (nothing is
// left behind even if the process is killed), else a hidden temporary
// file there, removed on every failure.
type tempOut struct {
	f     *os.File
	out   string
	name  string // the named temporary file; "" for O_TMPFILE
	fd    int    // the O_TMPFILE descriptor, or -1
	final bool   // committed: leave everything
}

// noTmpfile forces the named temporary file (tests of the fallback).
var noTmpfile = false

// maxTempTries bounds the names tried for the named temporary file.
const maxTempTries = 100

func newTempOut(out string) (*tempOut, error) {
	dir := filepath.Dir(out)
	if !noTmpfile {
		if fd, err := unix.Open(dir, unix.O_TMPFILE|unix.O_WRONLY|unix.O_CLOEXEC, 0o644); err == nil {
			return &tempOut{f: os.NewFile(uintptr(fd), out), out: out, fd: fd}, nil
		}
	}
	// No O_TMPFILE here: a named file, created as O_TMPFILE's is (0644
	// less the umask), named after this process so that the convert of
	// the same OUT after a SIGKILL removes what that one left behind.
	removeStaleTemps(out)
	prefix := fmt.Sprintf(".%s.tensorfs-%d-", filepath.Base(out), os.Getpid())
	var err error
	for i := 0; i < maxTempTries; i++ {
		name := filepath.Join(dir, prefix+strconv.FormatUint(uint64(rand.Uint32()), 36)+".tmp")
		var f *os.File
		f, err = os.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL|syscall.O_NOFOLLOW, 0o644)
		if err == nil {
			return &tempOut{f: f, out: out, name: name, fd: -1}, nil
		}
		if !errors.Is(err, os.ErrExist) {
			break
		}
	}
	// Name OUT, not the temporary file the user never asked for.
	return nil, fmt.Errorf("%s: cannot create it in %s: %v", out, dir, unwrapPath(err))
}

// removeStaleTemps removes the named temporary files of OUT that a
// convert killed outright (SIGKILL) left behind: those whose process is
// gone, owned by this user.
func removeStaleTemps(out string) {
	prefix := "." + filepath.Base(out) + ".tensorfs-"
	ents, err := os.ReadDir(filepath.Dir(out))
	if err != nil {
		return
	}
	for _, e := range ents {
		rest, ok := strings.CutPrefix(e.Name(), prefix)
		if !ok || !strings.HasSuffix(rest, ".tmp") || !e.Type().IsRegular() {
			continue
		}
		pidStr, _, _ := strings.Cut(strings.TrimSuffix(rest, ".tmp"), "-")
		pid, err := strconv.Atoi(pidStr)
		if err != nil || pid <= 0 || pid == os.Getpid() {
			continue
		}
		if err := unix.Kill(pid, 0); !errors.Is(err, unix.ESRCH) {
			continue // alive, or not ours to ask about
		}
		p := filepath.Join(filepath.Dir(out), e.Name())
		if st, err := os.Lstat(p); err == nil {
			if sys, ok := st.Sys().(*syscall.Stat_t); ok && int(sys.Uid) == os.Getuid() {
				os.Remove(p)
			}
		}
	}
}

// checkOut refuses an OUT that convert must not replace: anything but a
// regular file (a symbolic link whatever it points to, as /dev/stdout and
// a link to /proc/self/fd/1 are; a named pipe, a device, a directory),
// and without force an existing regular file.
func checkOut(out string, force bool) error {
	st, err := os.Lstat(out)
	if err != nil {
		return nil // absent (or unreachable: creating it will say why)
	}
	if why := notReplaceable(out, st.Mode()); why != "" {
		return fmt.Errorf("%s: %s", out, why)
	}
	if !force {
		return fmt.Errorf("%s: already exists (use --force to overwrite it)", out)
	}
	return nil
}

// notReplaceable says why the thing of mode m at path is no file convert
// may replace; "" for a regular file.
func notReplaceable(path string, m os.FileMode) string {
	switch {
	case m.IsRegular():
		return ""
	case m&os.ModeSymlink != 0:
		target, _ := os.Readlink(path)
		return fmt.Sprintf("is a symbolic link (to %s); convert neither writes through a link nor replaces one: name a regular file or a new one", strconv.Quote(target))
	case m.IsDir():
		return "is a directory (OUT is the file to write)"
	default:
		return fmt.Sprintf("not a regular file (%s); convert writes a new regular file and replaces only one", backing.DescribeType(m))
	}
}

// commit syncs the file and gives it OUT's name: without force only if
// OUT does not exist (link fails then), with force replacing only a
// regular file (replaceRegular).
func (t *tempOut) commit(force bool) error {
	if err := t.f.Sync(); err != nil {
		return err
	}
	if t.fd >= 0 {
		proc := "/proc/self/fd/" + strconv.Itoa(t.fd)
		target := t.out
		if force {
			target = filepath.Join(filepath.Dir(t.out), fmt.Sprintf(".%s.tensorfs-%d.tmp", filepath.Base(t.out), os.Getpid()))
			os.Remove(target)
		}
		if err := unix.Linkat(unix.AT_FDCWD, proc, unix.AT_FDCWD, target, unix.AT_SYMLINK_FOLLOW); err != nil {
			return linkError(t.out, err)
		}
		if force {
			if err := replaceRegular(target, t.out); err != nil {
				os.Remove(target)
				return err
			}
		}
	} else if force {
		if err := replaceRegular(t.name, t.out); err != nil {
			return err
		}
	} else {
		if err := os.Link(t.name, t.out); err != nil {
			return linkError(t.out, err)
		}
		os.Remove(t.name)
	}
	t.final = true
	t.f.Close()
	syncDir(filepath.Dir(t.out))
	return nil
}

// replaceRegular renames tmp to out, replacing out only if it is absent
// or a regular file: whatever took out's name while converting (a link,
// a pipe) stays. Where the filesystem can exchange two names atomically
// (renameat2 RENAME_EXCHANGE), it exchanges them, looks at what it got
// back, and exchanges again if that is not a regular file, so no window
// is left between the look and the rename; elsewhere it looks (lstat)
// just before renaming.
func replaceRegular(tmp, out string) error {
	err := unix.Renameat2(unix.AT_FDCWD, tmp, unix.AT_FDCWD, out, unix.RENAME_EXCHANGE)
	switch {
	case err == nil:
		st, lerr := os.Lstat(tmp) // what was at out
		if lerr != nil {
			return lerr
		}
		if why := notReplaceable(tmp, st.Mode()); why != "" {
			if err := unix.Renameat2(unix.AT_FDCWD, tmp, unix.AT_FDCWD, out, unix.RENAME_EXCHANGE); err != nil {
				return fmt.Errorf("%s; cannot put it back (it is at %s now): %v", why, tmp, err)
			}
			return fmt.Errorf("took this name while converting and %s", why)
		}
		return os.Remove(tmp)
	case errors.Is(err, unix.ENOENT):
		// out is gone: take the name only if it is still free.
		if err := unix.Renameat2(unix.AT_FDCWD, tmp, unix.AT_FDCWD, out, unix.RENAME_NOREPLACE); err != nil {
			return linkError(out, err)
		}
		return nil
	}
	// No exchange here (EINVAL: the filesystem has none).
	if st, err := os.Lstat(out); err == nil {
		if why := notReplaceable(out, st.Mode()); why != "" {
			return fmt.Errorf("took this name while converting and %s", why)
		}
	}
	return os.Rename(tmp, out)
}

func linkError(out string, err error) error {
	if errors.Is(err, os.ErrExist) {
		if st, lerr := os.Lstat(out); lerr == nil && !st.Mode().IsRegular() {
			return fmt.Errorf("%v appeared while converting; not overwritten", backing.DescribeType(st.Mode()))
		}
		return fmt.Errorf("appeared while converting; not overwritten (use --force)")
	}
	return fmt.Errorf("cannot create it: %w", err)
}

// discard removes the temporary file unless it was committed.
func (t *tempOut) discard() {
	if t.final {
		return
	}
	t.f.Close()
	if t.name != "" {
		os.Remove(t.name)
	}
}

// syncDir makes a rename or link in dir durable.
func syncDir(dir string) {
	if d, err := os.Open(dir); err == nil {
		d.Sync()
		d.Close()
	}
}
