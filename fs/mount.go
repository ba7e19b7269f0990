package fs

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	iofs "io/fs"
	"log"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/hanwen/go-fuse/v2/fuse"
	"golang.org/x/sys/unix"
)

// MountOptions are the kernel-facing settings of one mount.
type MountOptions struct {
	// AllowOther lets users other than the one mounting read the mount
	// (needs user_allow_other in /etc/fuse.conf when not root).
	AllowOther bool

	// MaxWrite is the largest READ request, in bytes; 0 means
	// MaxReadSize(). It is rounded down to whole pages and capped by
	// MaxRequestSize (the kernel's limit and, when the tree splices, the
	// pipe's).
	MaxWrite int

	// ReadAheadKB sets the kernel's readahead window for the mount
	// (/sys/class/bdi/<dev>/read_ahead_kb), in KiB; 0 means
	// DefaultReadAheadRequests requests of MaxWrite bytes. Only root may
	// set it: for others the default is skipped quietly, and an explicit
	// value is tried and its failure logged. The kernel's own default is
	// 128.
	ReadAheadKB int

	// MaxBackground is how many asynchronous requests (readahead) the
	// kernel may have in flight; 0 means go-fuse's default.
	MaxBackground int

	// Debug logs every FUSE request and reply.
	Debug bool

	// Logger receives diagnostics; nil means the Root's logger.
	Logger *log.Logger

	// Source names what is mounted (the checkpoint's path) in the mount
	// table: the source field of /proc/self/mountinfo, as mount(8) and
	// df show it. "" means "tensorfs". Commas, backslashes and control
	// characters are replaced by '?' (they would break the option
	// string that fusermount3 parses).
	Source string
}

// FSType is the file system type of a tensorfs mount in
// /proc/self/mountinfo: FUSE with subtype "tensorfs".
const FSType = "fuse.tensorfs"

// mountSource returns the mount table's source field for source.
func mountSource(source string) string {
	if source == "" {
		return "tensorfs"
	}
	return strings.Map(func(r rune) rune {
		if r == ',' || r == '\\' || r < 0x20 || r == 0x7f {
			return '?'
		}
		return r
	}, source)
}

// MountInfo is what the mount table says of one mount point.
type MountInfo struct {
	Dir    string // the mount point, absolute, links resolved
	FSType string // "fuse.tensorfs" (FSType), "fuse.sshfs", "ext4"...
	Source string // what is mounted: for tensorfs, the checkpoint's path
	FUSE   bool   // a FUSE file system
	Dead   bool   // a FUSE mount whose server has gone (killed)
}

// Tensorfs reports whether the mount is a tensorfs mount.
func (m MountInfo) Tensorfs() bool { return m.FSType == FSType }

// FindMount returns the topmost mount whose mount point is path, from
// /proc/self/mountinfo; ok is false when path is not a mount point. It
// works on a dead mount (for FUSE it asks statfs whether the server is
// there) and never reads inside the mount.
func FindMount(path string) (m MountInfo, ok bool) {
	e, ok := findMount(path)
	if !ok {
		return MountInfo{}, false
	}
	m = MountInfo{Dir: e.dir, FSType: e.fstype, Source: e.source, FUSE: isFUSE(e)}
	m.Dead = m.FUSE && deadMount(e.dir)
	return m, true
}

const (
	pageSize     = 4096
	defaultPages = 256 // the kernel's default max_pages_limit: 1 MiB requests
)

// DefaultReadAheadRequests is the default readahead window of a mount in
// READ requests: with the kernel's default window, 128 KiB, every
// sequential first read and every mmap fault reaches the server as
// 128 KiB requests; a window of two whole requests (2032 KiB with
// splicing, 2048 without) makes them full-size, one in flight while the
// next is asked for, and splits evenly (a 4 MiB window of 1016 KiB
// requests leaves an 8 KiB one in every window). Larger windows measured
// no faster, and make sparse access through mmap slower (each fault reads
// a whole window around it). See docs/BENCHMARKS.md.
const DefaultReadAheadRequests = 2

// MaxReadSize returns the default MaxWrite: the largest request this
// system allows (MaxRequestSize), up to 2 MiB. On a default system that
// is 1 MiB (max_pages_limit of 256 pages), or with splicing the largest
// multiple of the page size whose reply (16-byte header + data) plus the
// page go-fuse keeps free fits the largest pipe
// (/proc/sys/fs/pipe-max-size): 1 MiB - 8 KiB.
//
// Up to 2 MiB, for FUSE large folios: kernels that cache FUSE files in
// large folios size them by the largest power of two pages within
// max_write, max_read (go-fuse sets both to MaxWrite) and max_pages, so
// a root who raises max_pages_limit to 512 (and pipe-max-size to 4 MiB
// for splicing) gets 2 MiB requests and 2 MiB folios, as ext4 caches the
// backing file, with no flag. See docs/BENCHMARKS.md.
func MaxReadSize(splicing bool) int {
	return min(MaxRequestSize(splicing), maxFolioPages*pageSize)
}

// maxFolioPages is the largest folio the page cache uses, in pages: a
// PMD (2 MiB).
const maxFolioPages = 512

// MaxRequestSize returns the largest MaxWrite this system allows: the
// kernel's max_pages_limit (/proc/sys/fs/fuse/max_pages_limit, 256 pages
// unless root raised it) and, with splicing, the largest reply that fits
// a pipe (see MaxReadSize).
func MaxRequestSize(splicing bool) int {
	n := kernelMaxPages() * pageSize
	if splicing {
		n = min(n, maxSpliced-maxSpliced%pageSize) // read.go
	}
	return max(pageSize, n)
}

// kernelMaxPages returns the kernel's largest FUSE request in pages.
func kernelMaxPages() int {
	data, err := os.ReadFile("/proc/sys/fs/fuse/max_pages_limit")
	if err != nil {
		return defaultPages
	}
	n, err := strconv.Atoi(strings.TrimSpace(string(data)))
	if err != nil || n < 1 {
		return defaultPages
	}
	return min(n, 1<<16-1)
}

// splices reports whether any file of the tree is served by splicing.
func (r *Root) splices() bool {
	for i := range r.idx.Tensors {
		if t := &r.idx.Tensors[i]; t.Contiguous() && r.fds[t.Source] >= 0 {
			return true // served spliced in the stored tree
		}
	}
	return false
}

// Mount checks mountpoint (CheckMountpoint), mounts root there read-only
// and starts serving it. The caller waits with Server.Wait (it returns
// when the mount is unmounted) and closes the sources after that.
func Mount(mountpoint string, root *Root, mopts MountOptions) (*fuse.Server, error) {
	if err := CheckMountpoint(mountpoint); err != nil {
		return nil, err
	}
	abs := resolveMountpoint(mountpoint) // before mounting: never stat our own mount
	if err := root.checkOutside(abs); err != nil {
		return nil, fmt.Errorf("cannot mount at %s: %v", mountpoint, err)
	}
	logger := mopts.Logger
	if logger == nil {
		logger = root.logger
	}
	splicing := root.splices()
	maxWrite := mopts.MaxWrite
	if maxWrite <= 0 {
		maxWrite = MaxReadSize(splicing)
	}
	maxWrite = max(pageSize, min(maxWrite, MaxRequestSize(splicing)))
	maxWrite -= maxWrite % pageSize
	if mopts.MaxWrite > 0 && maxWrite != mopts.MaxWrite {
		logger.Printf("%s: requests of %d bytes asked for, %d used (a multiple of the page size, at most what this system allows: /proc/sys/fs/fuse/max_pages_limit and, when splicing, /proc/sys/fs/pipe-max-size)", mountpoint, mopts.MaxWrite, maxWrite)
	}

	mo := &fuse.MountOptions{
		AllowOther:    mopts.AllowOther,
		Options:       []string{"ro"},
		MaxBackground: mopts.MaxBackground,
		MaxWrite:      maxWrite,
		MaxReadAhead:  maxWrite,
		FsName:        mountSource(mopts.Source),
		Name:          "tensorfs",
		Debug:         mopts.Debug,
		Logger:        logger,
		// As root, mount(2) directly (falling back to fusermount3).
		DirectMount:      os.Geteuid() == 0,
		DirectMountFlags: syscall.MS_RDONLY | syscall.MS_NOSUID | syscall.MS_NODEV,
		DisableSplice:    !splicing,
		// With direct I/O, mmap of a tensor file needs the kernel's
		// consent (Linux 6.6+); go-fuse passes it on where offered.
		ExtraCapabilities: directIOCaps(root.opts.DirectIO),
		PanicHandler: func(v any) fuse.Status {
			root.stats.panics.Add(1)
			logger.Printf("panic while serving a request (answered EIO): %v", v)
			return fuse.EIO
		},
	}
	// Entry, attribute and negative-entry timeouts (Options.Timeout) are
	// set by rawFS in every reply.
	server, err := fuse.NewServer(newRawFS(root), mountpoint, mo)
	if err != nil {
		return nil, fmt.Errorf("cannot mount at %s: %v", mountpoint, strings.TrimSpace(err.Error()))
	}
	go server.Serve()
	if err := server.WaitMount(); err != nil {
		server.Unmount()
		return nil, fmt.Errorf("cannot mount at %s: %v", mountpoint, err)
	}
	if root.opts.DirectIO {
		// Shared mappings of a direct-I/O file need the kernel's consent
		// (FUSE_DIRECT_IO_ALLOW_MMAP, Linux 6.6+); without it mmap would
		// fail, so the files keep the page cache.
		if server.KernelSettings().Flags64()&fuse.CAP_DIRECT_IO_ALLOW_MMAP != 0 {
			root.directIO.Store(true)
		} else {
			logger.Printf("direct I/O not used: this kernel cannot mmap direct-I/O files (needs Linux 6.6 or later)")
		}
	}
	switch ra := mopts.ReadAheadKB; {
	case ra == 0 && os.Geteuid() != 0:
		// Only root may set it: keep the kernel's default quietly.
	case ra == 0:
		if err := setReadAhead(abs, DefaultReadAheadRequests*maxWrite/1024); err != nil {
			logger.Printf("readahead left at the kernel's default: %v", err)
		}
	case ra > 0:
		if err := setReadAhead(abs, ra); err != nil {
			logger.Printf("readahead left at the kernel's default: %v", err)
		}
	}
	return server, nil
}

// checkOutside refuses a tree read from a file under the mount point
// abs (a checkpoint file, or a model directory's file beside it, under
// --allow-non-empty): the server opened it before mounting and would
// read it fine, but the mount hides it, index.json and user.tensorfs.source
// would name a file of the mount (model.safetensors at the top level is
// the export, not the checkpoint), and whatever resolves that path after
// mounting (a client reading the source directly, a file opened lazily)
// reads the mount, from the server itself a deadlock.
func (r *Root) checkOutside(abs string) error {
	names := slices.Clone(r.idx.Sources)
	for _, f := range r.opts.ExportFiles {
		names = append(names, f.Src.Name())
	}
	for _, s := range names {
		if !filepath.IsAbs(s) { // a member (""), a URL
			continue
		}
		p := resolveMountpoint(s)
		if p == abs || strings.HasPrefix(p, strings.TrimSuffix(abs, "/")+"/") {
			return fmt.Errorf("the checkpoint's file %s is inside it: mount it elsewhere (the mount would hide the file, and paths to it would name a file of the mount)", s)
		}
	}
	return nil
}

// directIOCaps returns the capabilities to ask for when files are opened
// with FOPEN_DIRECT_IO: FUSE_DIRECT_IO_ALLOW_MMAP, so that shared mmap of
// them keeps working.
func directIOCaps(directIO bool) uint64 {
	if directIO {
		return fuse.CAP_DIRECT_IO_ALLOW_MMAP
	}
	return 0
}

// mountEntry is one line of /proc/self/mountinfo.
type mountEntry struct {
	dev    string // "major:minor"
	dir    string // mount point
	fstype string // "fuse.tensorfs", "ext4"...
	source string
}

// findMount returns the last (topmost) mount whose mount point is path
// (symbolic links resolved).
func findMount(path string) (mountEntry, bool) {
	return findMountAbs(resolveMountpoint(path))
}

// resolveMountpoint returns path absolute with symbolic links resolved;
// where that fails (the mount point itself may be a dead mount that
// cannot be stat'ed), in the parent only.
func resolveMountpoint(path string) string {
	abs, err := filepath.Abs(path)
	if err != nil {
		return path
	}
	if p, err := filepath.EvalSymlinks(abs); err == nil {
		return p
	}
	return resolveParent(abs)
}

// resolveParent returns path absolute with symbolic links resolved in
// its parent directory only: path itself is not touched.
func resolveParent(path string) string {
	abs, err := filepath.Abs(path)
	if err != nil {
		return path
	}
	if dir, err := filepath.EvalSymlinks(filepath.Dir(abs)); err == nil {
		return filepath.Join(dir, filepath.Base(abs))
	}
	return abs
}

// findMountAbs returns the last (topmost) mount at abs, an absolute path
// with links resolved. It reads /proc/self/mountinfo and never touches
// abs itself, so it works on a dead mount and from a mount's own server.
func findMountAbs(abs string) (mountEntry, bool) {
	data, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return mountEntry{}, false
	}
	var found mountEntry
	ok := false
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		sep := -1
		for i, f := range fields {
			if f == "-" {
				sep = i
				break
			}
		}
		if sep < 5 || sep+2 >= len(fields) {
			continue
		}
		if unescapeMountinfo(fields[4]) != abs {
			continue
		}
		found = mountEntry{dev: fields[2], dir: abs, fstype: fields[sep+1], source: unescapeMountinfo(fields[sep+2])}
		ok = true
	}
	return found, ok
}

// unescapeMountinfo undoes the kernel's octal escapes (\040 for a space).
func unescapeMountinfo(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+4 <= len(s) {
			if v, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(v))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

func isFUSE(m mountEntry) bool {
	return m.fstype == "fuse" || strings.HasPrefix(m.fstype, "fuse.") || m.fstype == "fuseblk"
}

// CheckMountpoint says precisely why path cannot be mounted on: it does
// not exist, is not a directory, is already a live FUSE mount, or is a
// dead one (its server was killed) that `tensorfs umount` clears.
func CheckMountpoint(path string) error {
	st, err := os.Stat(path)
	switch {
	case errors.Is(err, syscall.ENOTCONN), errors.Is(err, syscall.ECONNABORTED):
		return fmt.Errorf("%s is a dead FUSE mount (transport endpoint is not connected: its server was killed); clear it with `tensorfs umount %s`", path, path)
	case errors.Is(err, iofs.ErrNotExist):
		return fmt.Errorf("mount point %s does not exist (create it with mkdir)", path)
	case err != nil:
		return fmt.Errorf("mount point %s: %v", path, unwrapPathError(err))
	case !st.IsDir():
		return fmt.Errorf("mount point %s is not a directory", path)
	}
	if m, ok := findMount(path); ok && isFUSE(m) {
		if deadMount(path) {
			return fmt.Errorf("%s is a dead FUSE mount (transport endpoint is not connected: its server was killed); clear it with `tensorfs umount %s`", path, path)
		}
		what := m.fstype + " mount"
		if m.fstype == FSType {
			what = "tensorfs mount"
		}
		return fmt.Errorf("%s is already a live %s of %s; unmount it first with `tensorfs umount %s`", path, what, m.source, path)
	}
	return nil
}

// deadMount reports whether the FUSE mount at path has lost its server.
// It asks statfs, which the kernel always forwards to the server (stat
// may be answered from the attribute cache).
func deadMount(path string) bool {
	var st unix.Statfs_t
	err := unix.Statfs(path, &st)
	return errors.Is(err, syscall.ENOTCONN) || errors.Is(err, syscall.ECONNABORTED)
}

func unwrapPathError(err error) error {
	var pe *iofs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

// Unmount unmounts the FUSE mount at mountpoint, live or dead. A dead
// mount (killed server) is detached even while something still holds it
// open; a live mount that is busy is left alone with an error. It refuses
// to touch a mount that is not FUSE.
func Unmount(mountpoint string) error {
	m, ok := findMount(mountpoint)
	if !ok {
		return fmt.Errorf("%s is not mounted", mountpoint)
	}
	if !isFUSE(m) {
		return fmt.Errorf("%s is a %s mount, not a FUSE mount; not unmounting it", mountpoint, m.fstype)
	}
	dead := deadMount(mountpoint)

	if os.Geteuid() == 0 {
		err := unix.Unmount(m.dir, 0)
		if errors.Is(err, syscall.EBUSY) && dead {
			err = unix.Unmount(m.dir, unix.MNT_DETACH)
		}
		// A reader that has just closed its last file can hold the mount
		// a moment longer (the kernel finishing the release, a stat from
		// another process): busy is said only once it lasts.
		for try := 0; errors.Is(err, syscall.EBUSY) && try < 20; try++ {
			time.Sleep(100 * time.Millisecond)
			err = unix.Unmount(m.dir, 0)
		}
		switch {
		case err == nil:
			return nil
		case errors.Is(err, syscall.EBUSY):
			return fmt.Errorf("%s is busy: a process has a file or directory open in it (close it, or detach with `umount -l %s`)", mountpoint, mountpoint)
		}
		// Not permitted (user namespace...): try fusermount3.
	}
	err := fusermount("-u", m.dir)
	if err != nil && dead {
		err = fusermount("-u", "-z", m.dir)
	}
	if err != nil {
		return fmt.Errorf("cannot unmount %s: %v", mountpoint, err)
	}
	return nil
}

// fusermount runs fusermount3 (or fusermount) with args.
func fusermount(args ...string) error {
	bin, err := exec.LookPath("fusermount3")
	if err != nil {
		if bin, err = exec.LookPath("fusermount"); err != nil {
			return errors.New("neither fusermount3 nor fusermount is installed (apt-get install fuse3)")
		}
	}
	out, err := exec.Command(bin, args...).CombinedOutput()
	if err != nil {
		msg := strings.TrimSpace(string(out))
		if msg == "" {
			msg = err.Error()
		}
		return errors.New(strings.ReplaceAll(msg, "\n", "; "))
	}
	return nil
}

// setReadAhead sets the readahead of the mount at abs (resolved by
// resolveMountpoint) through its backing device info. It reads
// /proc/self/mountinfo, not the mount, so the serving process never sends
// itself a request.
func setReadAhead(abs string, kb int) error {
	m, ok := findMountAbs(abs)
	if !ok {
		return fmt.Errorf("%s not found in /proc/self/mountinfo", abs)
	}
	p := "/sys/class/bdi/" + m.dev + "/read_ahead_kb"
	if err := os.WriteFile(p, []byte(strconv.Itoa(kb)), 0); err != nil {
		return unwrapPathError(err)
	}
	return nil
}

// Detach unmounts mountpoint lazily (MNT_DETACH, fusermount3 -u -z): it
// disappears from the namespace now, and files still open in it fail
// once its server is gone. For a busy mount whose server is stopping.
//
// A server may detach its own mount: the mount point is looked up with
// only its parent resolved, so that the server does not send itself a
// request (unless the mount point is a symbolic link).
func Detach(mountpoint string) error {
	m, ok := findMountAbs(resolveParent(mountpoint))
	if !ok {
		m, ok = findMount(mountpoint)
	}
	if !ok {
		return fmt.Errorf("%s is not mounted", mountpoint)
	}
	if !isFUSE(m) {
		return fmt.Errorf("%s is a %s mount, not a FUSE mount; not unmounting it", mountpoint, m.fstype)
	}
	if os.Geteuid() == 0 {
		if err := unix.Unmount(m.dir, unix.MNT_DETACH); err == nil {
			return nil
		}
	}
	if err := fusermount("-u", "-z", m.dir); err != nil {
		return fmt.Errorf("cannot detach %s: %v", mountpoint, err)
	}
	return nil
}

// Mounted reports whether a FUSE file system is mounted at mountpoint
// (live or dead), from /proc/self/mountinfo.
func Mounted(mountpoint string) bool {
	m, ok := findMount(mountpoint)
	return ok && isFUSE(m)
}
