package main

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	iofs "io/fs"
	"math"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/lazyweights/tensorfs/dtype"
	"github.com/lazyweights/tensorfs/fs"
	"github.com/lazyweights/tensorfs/view"
)

const demoAbout = `
Writes a small safetensors checkpoint (a toy two-layer model: F32, BF16 and
I64 tensors with nested names, and metadata) to a temporary directory,
mounts it by running "tensorfs mount" as a separate process, shows the
tree, a tensor's extended attributes, the first values of a BF16 tensor
through the .f32/ view and the head of .tensorfs/index.json, then unmounts
and removes everything. With --keep the mount stays up and the command
prints how to take it down.`

// readyTimeout bounds the wait for a mount to become ready.
const readyTimeout = 20 * time.Second

func runDemo(args []string) error {
	f := newFlags("demo", "[--keep]", demoAbout)
	keep := f.Bool("keep", false, "leave the demo checkpoint mounted and print how to unmount it")
	if err := f.parse(args, 0, 0); err != nil {
		return err
	}
	exe, err := os.Executable()
	if err != nil {
		return fmt.Errorf("demo: cannot find this program to run it: %v", err)
	}
	dir, err := os.MkdirTemp("", "tensorfs-demo-")
	if err != nil {
		return fmt.Errorf("demo: %v", err)
	}
	cleanupDir := true
	defer func() {
		if cleanupDir {
			os.RemoveAll(dir)
		}
	}()
	source := filepath.Join(dir, "demo.safetensors")
	mnt := filepath.Join(dir, "mnt")
	if err := writeSafetensors(source, demoTensors(), map[string]string{"format": "pt", "model": "tensorfs demo: a toy two-layer transformer"}); err != nil {
		return fmt.Errorf("demo: %v", err)
	}
	if err := os.Mkdir(mnt, 0o755); err != nil {
		return fmt.Errorf("demo: %v", err)
	}

	// The server is another process: a process must never read its own
	// mount. It gets its own process group so that Ctrl-C reaches only
	// this one, which then unmounts.
	logPath := filepath.Join(dir, "mount.log")
	logFile, err := os.Create(logPath)
	if err != nil {
		return fmt.Errorf("demo: %v", err)
	}
	defer logFile.Close()
	server := exec.Command(exe, "mount", source, mnt)
	server.Stdout, server.Stderr = logFile, logFile
	server.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM)
	defer signal.Stop(sigs)

	fmt.Printf("$ tensorfs mount %s %s &\n", source, mnt)
	start := time.Now()
	if err := server.Start(); err != nil {
		return fmt.Errorf("demo: starting %s mount: %v", exe, err)
	}
	exited := make(chan error, 1)
	go func() { exited <- server.Wait() }()
	stop := func() error {
		if fs.Mounted(mnt) {
			if err := fs.Unmount(mnt); err != nil {
				return err
			}
		}
		select {
		case err := <-exited:
			if err != nil {
				return fmt.Errorf("demo: the server exited with %v: %s", err, lastLine(logPath))
			}
		case <-time.After(10 * time.Second):
			server.Process.Kill()
			return errors.New("demo: the server did not exit after unmounting")
		}
		return nil
	}

	if err := waitReady(mnt, exited, sigs, logPath); err != nil {
		if fs.Mounted(mnt) {
			fs.Unmount(mnt)
		}
		server.Process.Kill()
		return err
	}
	fmt.Printf("ready after %v (%s exists)\n", time.Since(start).Round(time.Millisecond), filepath.Join(mnt, ".tensorfs/index.json"))

	showErr := showDemo(mnt)
	if *keep && showErr == nil {
		cleanupDir = false
		fmt.Printf("\nThe demo stays mounted at %s (server pid %d, log %s).\n", mnt, server.Process.Pid, logPath)
		fmt.Printf("Unmount it and remove the files with:\n  %s umount %s && rm -r %s\n", selfCommand(), shellQuote(mnt), shellQuote(dir))
		fmt.Printf("(or fusermount3 -u %s)\n", shellQuote(mnt))
		return nil
	}
	fmt.Printf("\n# unmounting %s (what tensorfs umount does)\n", mnt)
	if err := stop(); err != nil {
		return err
	}
	fmt.Println("unmounted; the server exited 0")
	return showErr
}

// waitReady polls for MOUNTPOINT/.tensorfs/index.json, the readiness
// signal, until the server exits, a signal comes or readyTimeout passes.
func waitReady(mnt string, exited <-chan error, sigs <-chan os.Signal, logPath string) error {
	deadline := time.Now().Add(readyTimeout)
	for {
		if _, err := os.Stat(filepath.Join(mnt, ".tensorfs", "index.json")); err == nil {
			return nil
		}
		select {
		case err := <-exited:
			return fmt.Errorf("demo: the server exited before the mount was ready (%v): %s", err, lastLine(logPath))
		case sig := <-sigs:
			return fmt.Errorf("demo: interrupted (%v)", sig)
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("demo: the mount was not ready after %v: %s", readyTimeout, lastLine(logPath))
		}
	}
}

// lastLine returns the last line of the server's log.
func lastLine(path string) string {
	data, _ := os.ReadFile(path)
	lines := strings.Split(strings.TrimSpace(string(data)), "\n")
	if last := lines[len(lines)-1]; last != "" {
		return last
	}
	return "(no output)"
}

// showDemo prints a tour of the mounted demo checkpoint.
func showDemo(mnt string) error {
	// The demo reads the mount itself (the server is a subprocess): the
	// lines starting "#" say what each part shows and which shell command
	// shows the same.
	fmt.Printf("\n# the tree under %s, like ls -laR (the hidden views are listed, not walked):\n", mnt)
	if err := listTree(mnt, mnt); err != nil {
		return err
	}

	const tensor = "model/layers.0/self_attn.q_proj.weight"
	file := filepath.Join(mnt, tensor)
	fmt.Printf("\n# the extended attributes of %s (getfattr -d shows them):\n", file)
	names, err := listXattrs(file)
	if err != nil {
		return fmt.Errorf("demo: %v", err)
	}
	for _, n := range names {
		v, err := getXattr(file, n)
		if err != nil {
			return fmt.Errorf("demo: %v", err)
		}
		fmt.Printf("%s=%q\n", n, v)
	}

	raw, err := os.ReadFile(file)
	if err != nil {
		return fmt.Errorf("demo: %v", err)
	}
	fmt.Printf("\n# its first 16 bytes, stored BF16 (od -A d -t x1 FILE | head -1):\n%s\n", hexLine(raw, 16))
	conv := filepath.Join(mnt, ".f32", tensor)
	if data, err := os.ReadFile(conv); err == nil {
		var vals []string
		for i := 0; i+4 <= len(data) && i < 8*4; i += 4 {
			vals = append(vals, fmt.Sprint(math.Float32frombits(binary.LittleEndian.Uint32(data[i:]))))
		}
		fmt.Printf("\n# the same tensor through .f32/, read as little-endian float32 (in NumPy: numpy.fromfile(%q, \"<f4\")[:8])\n[%s]\n", conv, strings.Join(vals, " "))
	} else {
		fmt.Printf("\n(%s: %v)\n", conv, unwrap(err))
	}

	idx, err := os.ReadFile(filepath.Join(mnt, ".tensorfs", "index.json"))
	if err != nil {
		return fmt.Errorf("demo: %v", err)
	}
	fmt.Printf("\n# the first 8 lines of %s:\n", filepath.Join(mnt, ".tensorfs", "index.json"))
	lines := strings.SplitAfter(string(idx), "\n")
	fmt.Print(strings.Join(lines[:min(8, len(lines))], ""))

	stats, err := os.ReadFile(filepath.Join(mnt, ".tensorfs", "stats.json"))
	if err != nil {
		return fmt.Errorf("demo: %v", err)
	}
	fmt.Printf("\n# %s, the server's counters:\n%s", filepath.Join(mnt, ".tensorfs", "stats.json"), stats)
	return nil
}

// listTree prints dir like ls -lR, without descending into hidden
// directories (the views mirror the tree).
func listTree(top, dir string) error {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return fmt.Errorf("demo: %v", err)
	}
	rel, _ := filepath.Rel(filepath.Dir(top), dir)
	fmt.Printf("%s:\n", rel)
	var subdirs []string
	for _, e := range entries {
		info, err := e.Info()
		if err != nil {
			return fmt.Errorf("demo: %v", err)
		}
		name := e.Name()
		if e.IsDir() {
			name += "/"
			if !strings.HasPrefix(e.Name(), ".") {
				subdirs = append(subdirs, filepath.Join(dir, e.Name()))
			}
		}
		fmt.Printf("  %s %8d  %s\n", info.Mode(), info.Size(), name)
	}
	for _, d := range subdirs {
		fmt.Println()
		if err := listTree(top, d); err != nil {
			return err
		}
	}
	return nil
}

func listXattrs(path string) ([]string, error) {
	sz, err := unix.Listxattr(path, nil)
	if err != nil {
		return nil, fmt.Errorf("listxattr %s: %v", path, err)
	}
	buf := make([]byte, sz)
	n, err := unix.Listxattr(path, buf)
	if err != nil {
		return nil, fmt.Errorf("listxattr %s: %v", path, err)
	}
	var names []string
	for _, s := range strings.Split(string(buf[:n]), "\x00") {
		if s != "" {
			names = append(names, s)
		}
	}
	return names, nil
}

func getXattr(path, name string) (string, error) {
	sz, err := unix.Getxattr(path, name, nil)
	if err != nil {
		return "", fmt.Errorf("getxattr %s %s: %v", path, name, err)
	}
	buf := make([]byte, sz)
	n, err := unix.Getxattr(path, name, buf)
	if err != nil {
		return "", fmt.Errorf("getxattr %s %s: %v", path, name, err)
	}
	return string(buf[:n]), nil
}

func hexLine(b []byte, n int) string {
	var sb strings.Builder
	sb.WriteString("0000000")
	for _, c := range b[:min(n, len(b))] {
		fmt.Fprintf(&sb, " %02x", c)
	}
	return sb.String()
}

func unwrap(err error) error {
	var pe *iofs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

// demoTensor is one tensor of the demo checkpoint.
type demoTensor struct {
	name  string
	dtype string // F32, BF16 or I64
	shape []int64
	data  []byte
}

// demoTensors returns the toy model: values chosen so that BF16 holds
// them exactly.
func demoTensors() []demoTensor {
	seq := func(n int, scale float32, shift float32) []float32 {
		v := make([]float32, n)
		for i := range v {
			v[i] = float32(i%17)*scale + shift
		}
		return v
	}
	ones := func(n int) []float32 {
		v := make([]float32, n)
		for i := range v {
			v[i] = 1
		}
		return v
	}
	ts := []demoTensor{
		{"model/embed_tokens.weight", "F32", []int64{16, 8}, f32Bytes(seq(128, 0.125, -1))},
		{"model/norm.weight", "F32", []int64{8}, f32Bytes(ones(8))},
		{"lm_head.weight", "BF16", []int64{16, 8}, bf16Bytes(seq(128, -0.0625, 0.5))},
		{"position_ids", "I64", []int64{1, 16}, i64Range(16)},
	}
	for l := 0; l < 2; l++ {
		p := fmt.Sprintf("model/layers.%d/", l)
		ts = append(ts,
			demoTensor{p + "self_attn.q_proj.weight", "BF16", []int64{8, 8}, bf16Bytes(seq(64, 0.25, float32(-2+l)))},
			demoTensor{p + "self_attn.k_proj.weight", "BF16", []int64{8, 8}, bf16Bytes(seq(64, -0.25, float32(1+l)))},
			demoTensor{p + "self_attn.v_proj.weight", "BF16", []int64{8, 8}, bf16Bytes(seq(64, 0.5, -4))},
			demoTensor{p + "mlp.up_proj.weight", "BF16", []int64{32, 8}, bf16Bytes(seq(256, 0.125, -1))},
			demoTensor{p + "mlp.down_proj.weight", "BF16", []int64{8, 32}, bf16Bytes(seq(256, -0.125, 1))},
			demoTensor{p + "input_layernorm.weight", "F32", []int64{8}, f32Bytes(ones(8))},
		)
	}
	return ts
}

func f32Bytes(v []float32) []byte {
	b := make([]byte, 4*len(v))
	for i, x := range v {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(x))
	}
	return b
}

// bf16Bytes truncates float32 values that BF16 holds exactly.
func bf16Bytes(v []float32) []byte {
	b := make([]byte, 2*len(v))
	for i, x := range v {
		binary.LittleEndian.PutUint16(b[2*i:], uint16(math.Float32bits(x)>>16))
	}
	return b
}

func i64Range(n int) []byte {
	b := make([]byte, 8*n)
	for i := 0; i < n; i++ {
		binary.LittleEndian.PutUint64(b[8*i:], uint64(i))
	}
	return b
}

// writeSafetensors writes a safetensors file: an 8-byte little-endian
// header length, the JSON header (padded with spaces to a multiple of 8)
// and the tensors' bytes in name order.
func writeSafetensors(path string, tensors []demoTensor, metadata map[string]string) error {
	sort.Slice(tensors, func(i, j int) bool { return tensors[i].name < tensors[j].name })
	hts := make([]view.HeaderTensor, len(tensors))
	for i, t := range tensors {
		dt, ok := dtype.ByName(t.dtype)
		if !ok {
			return fmt.Errorf("%s: unknown dtype %s", t.name, t.dtype)
		}
		hts[i] = view.HeaderTensor{Name: t.name, DType: dt, Shape: t.shape, Size: int64(len(t.data))}
	}
	h, err := view.SafetensorsHeader(metadata, hts)
	if err != nil {
		return err
	}
	var out bytes.Buffer
	out.Write(h)
	for _, t := range tensors {
		out.Write(t.data)
	}
	return os.WriteFile(path, out.Bytes(), 0o644)
}
