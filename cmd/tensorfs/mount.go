package main

import (
	"fmt"
	"io"
	"log"
	"os"
	"os/signal"
	"path/filepath"
	"runtime/debug"
	"strconv"
	"syscall"
	"time"

	"github.com/lazyweights/tensorfs/backing"
	"github.com/lazyweights/tensorfs/dtype"
	"github.com/lazyweights/tensorfs/formats"
	"github.com/lazyweights/tensorfs/fs"
	"github.com/lazyweights/tensorfs/index"
	"github.com/lazyweights/tensorfs/view"
)

var mountAbout = `
Parses and validates SOURCE completely, then mounts it read-only at
MOUNTPOINT and serves it in the foreground until the mount is unmounted
(tensorfs umount, fusermount3 -u, umount) or the process gets SIGINT,
SIGTERM or SIGHUP, which unmount cleanly and exit 0. A SOURCE that fails
validation mounts nothing and exits 1. MOUNTPOINT must be an empty
directory (its files would be hidden) unless --allow-non-empty. The mount
is ready when MOUNTPOINT/.tensorfs/index.json exists.

` + para("SOURCE is a checkpoint file or a directory holding one: "+formats.DetailList()+"; the format is detected from the content, not the name.") + `

The tree (docs/TREE.md): one file per tensor at its name ('/' makes
directories), xattrs user.tensorfs.{name,dtype,shape,source,offset},
.tensorfs/index.json, .tensorfs/metadata/, .tensorfs/stats.json, the
converted views .f32/ .f16/ .bf16/ .f64/, NumPy files in .npy/,
tensor-parallel parts in .split/D/N/K/, the whole checkpoint as one
safetensors file, .safetensors/model.safetensors (in every view too), and
each file of the checkpoint as it is in .files/. When SOURCE is a model
directory, its other files (config.json, tokenizer files...) and
model.safetensors sit beside the tensors at the top level and in each
view, so that from_pretrained(MOUNTPOINT) finds a model; a view's
config.json says its dtype.

--gpu N uploads every tensor (converted with --dtype) to CUDA device N
before the mount is ready, through the same path as load --gpu, and keeps
it there while mounted: one allocation, each tensor at a 256-byte aligned
offset. .cuda/index.json gives the device (ordinal and UUID), the
allocation's cudaIpcMemHandle_t (hex) and every tensor's offset, so
another process maps the weights with cudaIpcOpenMemHandle without a
copy (docs/examples/cuda_ipc.py). Whoever opens the handle can write that
memory: .cuda/ is the mount owner's only (0500) unless --allow-other. The
device memory is freed when the mount ends; a process still holding the
mapping then reads memory CUDA no longer guarantees. Without a CUDA
runtime, without device N, or when the checkpoint does not fit in the
device's free memory, nothing is mounted and it exits 1.`

func runMount(args []string) error {
	m, err := parseMountFlags(args)
	if err != nil {
		return err
	}
	stopProfile, err := startCPUProfile("mount", m.cpuProfile)
	if err != nil {
		return err
	}
	defer stopProfile()
	stopHeap, err := startHeapProfile("mount", m.memProfile)
	if err != nil {
		return err
	}
	defer stopHeap()

	// Everything is validated before anything is mounted.
	ckpt, err := openSource(m.source, sourceOptions{Mode: m.mode})
	if err != nil {
		return err
	}
	defer ckpt.close()
	logger := log.New(os.Stderr, "tensorfs: ", 0)
	root, release, err := m.root(ckpt, logger)
	// The device memory (--gpu) lives as long as the mount serves.
	defer release()
	if err != nil {
		return err
	}
	// Parsing left garbage (headers, JSON); give it back before serving
	// for hours.
	debug.FreeOSMemory()
	return m.serve(root, logger, servedCount(ckpt, m.view))
}

// mountFlags are mount's operands and flags, parsed and checked
// (parseMountFlags).
type mountFlags struct {
	f                  *flags
	source, mountpoint string
	view               dtype.DType
	mode               backing.Mode
	allowNonEmpty      bool
	gpu                int
	fsOpts             fs.Options      // what the tree is built with, but its Logger, ExportFiles and Extra
	mountOpts          fs.MountOptions // how it is mounted, but its Logger and Source
	cpuProfile         string
	memProfile         string
}

// parseMountFlags parses mount's command line; a bad value is a usage
// error.
func parseMountFlags(args []string) (*mountFlags, error) {
	f := newFlags("mount", "[flags] SOURCE MOUNTPOINT", mountAbout)
	addRemoteFlags(f)
	dtFlag := f.String("dtype", "", "make the top level the converted view in `DT` (f32, f16, bf16 or f64); tensors that cannot be converted are left out of it and the stored tree moves to .native/")
	modeFlag := f.String("backing", "mmap", "how to read the checkpoint, `MODE`: mmap (fastest for local files), pread (network filesystems, where page faults stall) or direct (O_DIRECT, bypasses the page cache)")
	allowNonEmpty := f.Bool("allow-non-empty", false, "mount on a directory that is not empty (its files are hidden while mounted)")
	allowOther := f.Bool("allow-other", false, "let other users read the mount (non-root needs user_allow_other in /etc/fuse.conf)")
	maxWrite := f.Int("max-write", 0, "largest read request the kernel sends, in `BYTES` (0: the most this system allows up to 2 MiB: 1 MiB, or 1 MiB - 8 KiB when splicing from the checkpoint file, unless root raised /proc/sys/fs/fuse/max_pages_limit and, for splicing, /proc/sys/fs/pipe-max-size; kernels with FUSE large folios cache in folios of the largest power of two pages within it)")
	readahead := f.Int("readahead-kb", 0, "kernel readahead window of the mount in `KB` (0: two requests of --max-write, 2032 with splicing; the kernel's own default is 128); setting it needs root, others keep the kernel's")
	maxBackground := f.Int("max-background", 0, "asynchronous (readahead) requests the kernel may have in flight, `N` (0: go-fuse's default, 12)")
	noSplice := f.Bool("no-splice", false, "copy every read through the server instead of splicing from the checkpoint file")
	directIO := f.Bool("direct-io", false, "open tensor files with FUSE direct I/O: each read(2) goes to the server as it is, with no readahead and no second copy of the checkpoint in the page cache; faster for large reads, much slower for small ones (mmap keeps working on Linux 6.6+; older kernels ignore the flag)")
	keepCache := f.Bool("keep-backing-cache", false, "keep the checkpoint file's pages in the page cache after serving them; by default each 2 MiB of it is dropped once served, as the mount's own page cache then holds those bytes (keep it when the checkpoint is also read directly, not through the mount)")
	noPassthrough := f.Bool("no-passthrough", false, "serve every file through the server; by default a file that is a whole checkpoint file byte for byte (a .npy source's .npy/ file) is read by the kernel from that file directly (FUSE passthrough: Linux 6.9+, root)")
	gpuFlag := f.Int("gpu", -1, "upload the checkpoint (converted with --dtype) to CUDA device `N` before the mount is ready, keep it there while mounted, and describe it for other processes in .cuda/index.json (CUDA IPC handles; owner-only unless --allow-other)")
	debugFlag := f.Bool("debug", false, "log every FUSE request and reply to stderr")
	cpuProfile := f.String("cpuprofile", "", "write a CPU profile of the server (go tool pprof format) to `FILE` when it exits")
	memProfile := f.String("memprofile", "", "write a heap profile of the server (go tool pprof format) to `FILE` when it exits")
	if err := f.parse(args, 2, 2); err != nil {
		return nil, err
	}
	m := &mountFlags{f: f, source: f.Arg(0), mountpoint: f.Arg(1), allowNonEmpty: *allowNonEmpty, gpu: *gpuFlag, cpuProfile: *cpuProfile, memProfile: *memProfile}
	if *dtFlag != "" {
		dt, err := dtype.ParseView(*dtFlag)
		if err != nil {
			return nil, usagef("mount: --dtype: %v", err)
		}
		m.view = dt
	}
	var err error
	if m.mode, err = parseMode("mount", "backing", *modeFlag); err != nil {
		return nil, err
	}
	if *maxWrite < 0 || *readahead < 0 || *maxBackground < 0 {
		return nil, usagef("mount: --max-write, --readahead-kb and --max-background cannot be negative")
	}
	switch {
	case *maxWrite > 1<<30:
		return nil, usagef("mount: --max-write: %d is more than 1 GiB", *maxWrite)
	case *readahead > 1<<20:
		return nil, usagef("mount: --readahead-kb: %d is more than 1 GiB", *readahead)
	case *maxBackground > 1<<16-1:
		return nil, usagef("mount: --max-background: %d is more than the kernel's limit of 65535", *maxBackground)
	}
	m.fsOpts = fs.Options{View: m.view, NoSplice: *noSplice, DirectIO: *directIO, KeepBackingCache: *keepCache, NoPassthrough: *noPassthrough}
	m.mountOpts = fs.MountOptions{
		AllowOther:    *allowOther,
		MaxWrite:      *maxWrite,
		ReadAheadKB:   *readahead,
		MaxBackground: *maxBackground,
		Debug:         *debugFlag,
	}
	return m, nil
}

// root checks the mount point and builds the tree to serve: the
// checkpoint, the files beside it (a model directory's config and
// tokenizer files, for .safetensors/; they stay open, the checkpoint's,
// until the server has stopped) and, with --gpu, the checkpoint uploaded
// to the device, which release frees.
func (m *mountFlags) root(ckpt *checkpoint, logger *log.Logger) (root *fs.Root, release func(), err error) {
	release = func() {}
	beside, err := ckpt.beside()
	if err != nil {
		return nil, release, err
	}
	opts := m.fsOpts
	opts.Logger = logger
	for _, b := range beside {
		opts.ExportFiles = append(opts.ExportFiles, fs.ExportFile{Name: b.Name, Src: b.Src})
	}
	if m.f.isSet("gpu") && m.gpu < 0 {
		return nil, release, usagef("mount: --gpu: %d is not a device ordinal (0, 1, ...)", m.gpu)
	}
	if err := fs.CheckMountpoint(m.mountpoint); err != nil {
		return nil, release, err
	}
	if !m.allowNonEmpty {
		if err := checkEmpty(m.mountpoint); err != nil {
			return nil, release, err
		}
	}
	if m.gpu >= 0 {
		g, err := uploadForMount(m.source, ckpt, m.view, m.gpu, m.mountOpts.AllowOther, logger)
		if err != nil {
			return nil, release, err
		}
		release = g.close
		opts.Extra = append(opts.Extra, g.dir)
	}
	root, err = fs.NewRoot(ckpt.idx, ckpt.sources, opts)
	if err != nil {
		return nil, release, fmt.Errorf("%s: %v", m.source, err)
	}
	return root, release, nil
}

// serve mounts root and serves it until it is unmounted from outside or
// a signal unmounts it; served says what it serves, in the line that
// says the mount is ready.
func (m *mountFlags) serve(root *fs.Root, logger *log.Logger, served string) error {
	// Signals are caught before the mount exists, so none can leave it
	// behind.
	// SIGHUP (the terminal went away) is handled the same way, unless it
	// is ignored (nohup).
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM)
	if !signal.Ignored(syscall.SIGHUP) {
		signal.Notify(sigs, syscall.SIGHUP)
	}
	defer signal.Stop(sigs)

	mopts := m.mountOpts
	mopts.Logger, mopts.Source = logger, absPath(m.source)
	server, err := fs.Mount(m.mountpoint, root, mopts)
	if err != nil {
		return err
	}
	mountpoint := m.mountpoint
	logger.Printf("serving %s at %s (%s); stop with Ctrl-C or `tensorfs umount %s`", m.source, mountpoint, served, mountpoint)

	done := make(chan struct{})
	go func() {
		server.Wait()
		close(done)
	}()
	select {
	case <-done:
		return nil // unmounted from outside
	case sig := <-sigs:
		logger.Printf("%v: unmounting %s", sig, mountpoint)
	}
	// Reads waiting on a remote store end now (EINTR), so that the
	// unmount and closing the sources do not wait for their deadline.
	stopRemote()
	if err := server.Unmount(); err != nil {
		// Busy: something has a file open. Detach it so that the
		// mount point is free, and stop serving.
		logger.Printf("%s is busy; detaching it (files still open there will fail)", mountpoint)
		if err := fs.Detach(mountpoint); err != nil {
			return err
		}
		return nil
	}
	select {
	case <-done:
	case <-time.After(5 * time.Second):
	}
	return nil
}

// checkEmpty refuses a mount point that holds files: mounting on it would
// hide them (SPEC: unless --allow-non-empty).
func checkEmpty(mountpoint string) error {
	d, err := os.OpenFile(mountpoint, os.O_RDONLY|syscall.O_DIRECTORY, 0) // never a pipe swapped in
	if err != nil {
		return fmt.Errorf("mount point %s: %v", mountpoint, unwrapPath(err))
	}
	defer d.Close()
	names, err := d.Readdirnames(1)
	if len(names) == 0 {
		if err == nil || err == io.EOF {
			return nil
		}
		return fmt.Errorf("mount point %s: %v", mountpoint, unwrapPath(err))
	}
	return fmt.Errorf("mount point %s is not empty (it holds %s): mounting would hide its files; use an empty directory, or --allow-non-empty", mountpoint, index.Printable(strconv.Quote(names[0])))
}

// servedCount says how many tensors the top level of the mount serves:
// all of them, or with --dtype those that have a view in it.
func servedCount(ckpt *checkpoint, to dtype.DType) string {
	n, conv, both := 0, 0, 0
	for i := range ckpt.idx.Tensors {
		t := &ckpt.idx.Tensors[i]
		if t.Listed(false) {
			n++
		}
		if t.Listed(true) && (t.DType == to || view.Convertible(t, to)) {
			conv++
			if t.Listed(false) {
				both++
			}
		}
	}
	if to == dtype.Invalid {
		return plural(n, "tensor")
	}
	// A quantized weight's values are in the view, its parts (stored)
	// only under .native/.
	s := plural(conv, "tensor") + " as " + to.Name()
	if both < n {
		s += fmt.Sprintf("; %s of %d only as stored, under .native/", plural(n-both, "other"), n)
	}
	return s
}

// plural is "1 tensor", "2 tensors".
func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return strconv.Itoa(n) + " " + noun + "s"
}

// absPath is path made absolute (as it is when that fails).
func absPath(path string) string {
	if abs, err := filepath.Abs(path); err == nil {
		return abs
	}
	return path
}
