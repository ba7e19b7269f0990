package integration

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/lazyweights/tensorfs/fs"
	"github.com/lazyweights/tensorfs/internal/testenv"
)

// The newcomer's list of issue 13: what a new user tripped over, each
// checked against the built binary.

// TestFlagsAfterArguments: flags may follow the operands (tensorfs ls
// FILE --json), as with rclone and restic; "--" ends the flags.
func TestFlagsAfterArguments(t *testing.T) {
	src, _ := cliFixture(t)
	first := runTensorfs(t, "ls", "--json", src)
	if first.code != 0 {
		t.Fatalf("ls --json: exit %d: %s", first.code, first.stderr)
	}
	if r := runTensorfs(t, "ls", src, "--json"); r.code != 0 || r.stdout != first.stdout {
		t.Errorf("ls FILE --json: exit %d, stderr %q; want the output of ls --json FILE", r.code, r.stderr)
	}
	// A flag with a value after the operands, and between them.
	want := runTensorfs(t, "cat", "--dtype", "f64", src, "model/layers.0/w")
	for _, args := range [][]string{
		{"cat", src, "model/layers.0/w", "--dtype", "f64"},
		{"cat", src, "--dtype=f64", "model/layers.0/w"},
	} {
		if r := runTensorfs(t, args...); r.code != 0 || r.stdout != want.stdout {
			t.Errorf("%q: exit %d, stderr %q; want the bytes of cat --dtype f64", args, r.code, r.stderr)
		}
	}
	// "--" ends the flags: an operand may then start with "-".
	dash := filepath.Join(t.TempDir(), "-m.safetensors")
	data, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(dash, data, 0o644); err != nil {
		t.Fatal(err)
	}
	rel := filepath.Base(dash)
	if r := runTensorfsIn(t, filepath.Dir(dash), "ls", "--json", "--", rel); r.code != 0 {
		t.Errorf("ls --json -- -m.safetensors: exit %d: %s", r.code, r.stderr)
	}
	checkOneLineError(t, runTensorfsIn(t, filepath.Dir(dash), "ls", rel), 2, "-m.safetensors")
	checkOneLineError(t, runTensorfs(t, "ls", src, "--nope"), 2, "nope", "usage")
	checkOneLineError(t, runTensorfs(t, "ls", src, src), 2, "wrong number of arguments")
}

// TestDeadMountMessages: after kill -9 of the server, ls, cat and load
// of the mount (or of a path in it) say it is a dead mount and name the
// real mount point in the command that clears it; before that, a second
// mount on it names the checkpoint mounted there.
func TestDeadMountMessages(t *testing.T) {
	src := smallCheckpoint(t)
	m := mount(t, src)
	if fm, ok := fs.FindMount(m.Dir); !ok || !fm.Tensorfs() || fm.Source != src {
		t.Errorf("mount table: %+v, %v; want type %s and source %s", fm, ok, fs.FSType, src)
	}
	other := filepath.Join(t.TempDir(), "other.safetensors")
	writeSafetensors(t, other, []stTensor{{Name: "x", DType: "U8", Shape: []int64{1}, Data: []byte{1}}}, nil)
	r := runTensorfs(t, "mount", other, m.Dir)
	checkOneLineError(t, r, 1, "already a live tensorfs mount of "+src)

	if err := m.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	m.wait(exitTimeout)
	for _, args := range [][]string{
		{"ls", m.Dir},
		{"load", m.Dir},
		{"ls", m.Path("w")},
		{"cat", m.Dir, "w"},
		{"load", m.Path(".tensorfs/index.json")},
		{"convert", m.Dir, filepath.Join(t.TempDir(), "out.safetensors")},
	} {
		r := runTensorfs(t, args...)
		checkOneLineError(t, r, 1, "dead tensorfs mount", "tensorfs umount "+m.Dir+"`")
		if strings.Contains(r.stderr, "MOUNTPOINT") || strings.Contains(r.stderr, "tensorfs load reads a mount") {
			t.Errorf("%q: %q", args, r.stderr)
		}
	}
	if r := runTensorfs(t, "umount", m.Dir); r.code != 0 {
		t.Fatalf("umount of the dead mount: exit %d: %s", r.code, r.stderr)
	}
}

// foreignFUSEMount mounts a FUSE file system that is not tensorfs (type
// fuse.otherfs) at a fresh directory: mount(2) with a /dev/fuse
// descriptor that is closed straight away, so it is dead (no server), as
// a killed sshfs leaves it. Needs root.
func foreignFUSEMount(t *testing.T) string {
	t.Helper()
	needFUSE(t)
	if os.Geteuid() != 0 {
		testenv.SkipOrFail(t, "mounting a FUSE file system with mount(2) needs root")
	}
	dir := filepath.Join(t.TempDir(), "foreign")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	fd, err := syscall.Open("/dev/fuse", syscall.O_RDWR|syscall.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	opts := fmt.Sprintf("fd=%d,rootmode=40000,user_id=0,group_id=0", fd)
	err = syscall.Mount("other-source", dir, "fuse.otherfs", syscall.MS_NOSUID|syscall.MS_NODEV|syscall.MS_RDONLY, opts)
	syscall.Close(fd)
	if err != nil {
		t.Fatalf("mount fuse.otherfs: %v", err)
	}
	t.Cleanup(func() {
		if mountedAt(dir) {
			syscall.Unmount(dir, syscall.MNT_DETACH)
		}
	})
	return dir
}

// TestUmountForeign: tensorfs umount refuses a FUSE mount that is not
// tensorfs unless --force, and says what is there.
func TestUmountForeign(t *testing.T) {
	dir := foreignFUSEMount(t)
	checkOneLineError(t, runTensorfs(t, "umount", dir), 1, "fuse.otherfs", "other-source", "not a tensorfs mount", "--force")
	if !mountedAt(dir) {
		t.Fatal("tensorfs umount unmounted a foreign FUSE mount")
	}
	if r := runTensorfs(t, "umount", "--force", dir); r.code != 0 {
		t.Fatalf("umount --force: exit %d: %s", r.code, r.stderr)
	}
	if mountedAt(dir) {
		t.Error("still mounted after umount --force")
	}
}

// TestUmountMessages: umount of a path that does not exist, or of a
// directory where nothing is mounted, says which.
func TestUmountMessages(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "nonexistent")
	checkOneLineError(t, runTensorfs(t, "umount", missing), 1, missing+": no such file or directory")
	dir := t.TempDir()
	checkOneLineError(t, runTensorfs(t, "umount", dir), 1, dir+" is not a mount point")
}

// TestMountNonEmpty: mount refuses a directory that holds files unless
// --allow-non-empty (SPEC).
func TestMountNonEmpty(t *testing.T) {
	needFUSE(t)
	src := smallCheckpoint(t)
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "keep.txt"), []byte("mine"), 0o644); err != nil {
		t.Fatal(err)
	}
	checkOneLineError(t, runTensorfs(t, "mount", src, dir), 1, dir, "not empty", "keep.txt", "--allow-non-empty")
	if mountedAt(dir) {
		t.Fatal("mounted on a non-empty directory")
	}
	cmd := exec.Command(tensorfsBinary(t), "mount", src, dir, "--allow-non-empty")
	var stderr syncBuffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	// Closed after the exit status is sent: the test takes the status,
	// the cleanup then sees the channel closed instead of waiting out
	// exitTimeout for a second value.
	go func() { done <- cmd.Wait(); close(done) }()
	t.Cleanup(func() {
		if mountedAt(dir) {
			fs.Unmount(dir)
		}
		select {
		case <-done:
		case <-time.After(exitTimeout):
			cmd.Process.Kill()
		}
	})
	ready := filepath.Join(dir, ".tensorfs", "index.json")
	for deadline := time.Now().Add(readyTimeout); ; {
		if _, err := os.Stat(ready); err == nil {
			break
		}
		select {
		case err := <-done:
			t.Fatalf("mount --allow-non-empty exited (%v): %s", err, stderr.String())
		case <-time.After(10 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("mount --allow-non-empty: not ready: %s", stderr.String())
		}
	}
	if r := runTensorfs(t, "umount", dir); r.code != 0 {
		t.Fatalf("umount: exit %d: %s", r.code, r.stderr)
	}
	if err := <-done; err != nil {
		t.Errorf("server: %v: %s", err, stderr.String())
	}
	if b, err := os.ReadFile(filepath.Join(dir, "keep.txt")); err != nil || string(b) != "mine" {
		t.Errorf("the directory's file after unmounting: %q, %v", b, err)
	}
}

// TestLFSPointer: a Git LFS pointer (a Hugging Face repository cloned
// without git-lfs) is said to be one, with the command that fetches the
// file, as SOURCE, in a directory and as a weight map's shard.
func TestLFSPointer(t *testing.T) {
	dir := t.TempDir()
	ptr := "version https://git-lfs.github.com/spec/v1\noid sha256:4d7a214614ab2935c943f9e0ff69d22eadbb8f32b1258daaa5e2ca24d17e2393\nsize 12345\n"
	p := filepath.Join(dir, "model.safetensors")
	if err := os.WriteFile(p, []byte(ptr), 0o644); err != nil {
		t.Fatal(err)
	}
	checkOneLineError(t, runTensorfs(t, "ls", p), 1, p, "Git LFS pointer", "12345-byte", "git lfs pull")
	checkOneLineError(t, runTensorfs(t, "ls", dir), 1, dir, "model.safetensors is a Git LFS pointer", "git lfs pull")
	checkOneLineError(t, runTensorfs(t, "load", p), 1, p, "Git LFS pointer", "git lfs pull")
	if err := os.WriteFile(filepath.Join(dir, "model.safetensors.index.json"), []byte(`{"weight_map":{"w":"model.safetensors"}}`), 0o644); err != nil {
		t.Fatal(err)
	}
	checkOneLineError(t, runTensorfs(t, "ls", dir), 1, p, "Git LFS pointer", "git lfs pull")
}

// TestMountMessages: the serving line counts the tensors of the top level
// (with --dtype, those in the view) with the right plural; --backing with
// an unknown mode says so once.
func TestMountMessages(t *testing.T) {
	src, _ := cliFixture(t) // I64, BF16, F32, U8 and F64 tensors
	// The line comes after the mount is ready: read it once the server
	// has exited.
	m := mount(t, src, "--dtype", "f32")
	m.Unmount()
	if want := "(3 tensors as F32; 2 others of 5 only as stored, under .native/)"; !strings.Contains(m.Stderr(), want) {
		t.Errorf("--dtype f32 mount says %q, want %q", m.Stderr(), want)
	}
	one := filepath.Join(t.TempDir(), "one.safetensors")
	writeSafetensors(t, one, []stTensor{{Name: "x", DType: "U8", Shape: []int64{1}, Data: []byte{1}}}, nil)
	m = mount(t, one)
	m.Unmount()
	if !strings.Contains(m.Stderr(), "(1 tensor)") {
		t.Errorf("one-tensor mount says %q, want \"(1 tensor)\"", m.Stderr())
	}
	r := runTensorfs(t, "mount", "--backing", "foo", src, t.TempDir())
	checkOneLineError(t, r, 2, `mount: --backing: unknown mode "foo" (want mmap, pread or direct)`)
	if strings.Contains(r.stderr, "backing: backing") {
		t.Errorf("%q", r.stderr)
	}
	r = runTensorfs(t, "load", "--io", "foo", src)
	checkOneLineError(t, r, 2, `load: --io: unknown mode "foo"`)
}

// TestHelpInvocation: help suggests commands as the binary was run: by
// its path for a built binary, "go run ./cmd/tensorfs" where go run built
// it (in the go tool's go-build temporary directory).
func TestHelpInvocation(t *testing.T) {
	bin := tensorfsBinary(t)
	r := runTensorfs(t, "help")
	if !strings.Contains(r.stdout, "\n  "+bin+" demo ") || strings.Contains(r.stdout, "go run") {
		t.Errorf("help of %s suggests:\n%s", bin, r.stdout)
	}
	data, err := os.ReadFile(bin)
	if err != nil {
		t.Fatal(err)
	}
	gorun := filepath.Join(t.TempDir(), "go-build1234", "b001", "exe", "tensorfs")
	if err := os.MkdirAll(filepath.Dir(gorun), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(gorun, data, 0o755); err != nil {
		t.Fatal(err)
	}
	r = runCmd(t, nil, gorun, "help")
	if !strings.Contains(r.stdout, "\n  go run ./cmd/tensorfs demo ") {
		t.Errorf("help of a go run binary suggests:\n%s", r.stdout)
	}
}
