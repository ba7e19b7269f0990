package integration

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/lazyweights/tensorfs/internal/testenv"
)

// smallCheckpoint writes a two-tensor safetensors file in a fresh
// directory.
func smallCheckpoint(t *testing.T) string {
	t.Helper()
	src := filepath.Join(t.TempDir(), "small.safetensors")
	writeSafetensors(t, src, []stTensor{
		{Name: "w", DType: "F32", Shape: []int64{2, 2}, Data: pattern(16, 1)},
		{Name: "ids", DType: "I64", Shape: []int64{2}, Data: pattern(16, 2)},
	}, map[string]string{"format": "pt"})
	return src
}

// TestSignals: SIGTERM and SIGINT unmount cleanly and exit 0, also while
// a file is held open in the mount.
func TestSignals(t *testing.T) {
	src := smallCheckpoint(t)
	for _, tc := range []struct {
		name string
		sig  syscall.Signal
		busy bool
	}{
		{"SIGTERM", syscall.SIGTERM, false},
		{"SIGINT", syscall.SIGINT, false},
		{"SIGTERM busy", syscall.SIGTERM, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := mount(t, src)
			var holder *exec.Cmd
			if tc.busy {
				// A subprocess holds a tensor file open until its stdin
				// closes.
				holder = exec.Command(testenv.Python(t), "-c", "import sys; f = open(sys.argv[1], 'rb'); print('open', flush=True); sys.stdin.read()", m.Path("w"))
				stdin, _ := holder.StdinPipe()
				stdout, _ := holder.StdoutPipe()
				if err := holder.Start(); err != nil {
					t.Fatal(err)
				}
				defer func() { stdin.Close(); holder.Wait() }()
				buf := make([]byte, 5)
				if _, err := stdout.Read(buf); err != nil || string(buf[:4]) != "open" {
					t.Fatalf("holder did not open the file: %q %v", buf, err)
				}
			}
			m.Signal(tc.sig)
			code, err := m.wait(exitTimeout)
			if err != nil {
				t.Fatal(err)
			}
			if code != 0 {
				t.Errorf("exit status %d after %v; stderr:\n%s", code, tc.name, m.Stderr())
			}
			if mountedAt(m.Dir) {
				t.Errorf("still mounted after %v", tc.name)
			}
		})
	}
}

// TestExternalUnmount: unmounting with fusermount3 -u or umount ends the
// server with status 0.
func TestExternalUnmount(t *testing.T) {
	src := smallCheckpoint(t)
	cmds := [][]string{{"fusermount3", "-u"}}
	if os.Geteuid() == 0 {
		cmds = append(cmds, []string{"umount"})
	}
	for _, c := range cmds {
		t.Run(c[0], func(t *testing.T) {
			if _, err := exec.LookPath(c[0]); err != nil {
				t.Skipf("%s not installed", c[0])
			}
			m := mount(t, src)
			// A transient EBUSY (another process of the machine holding the
			// new mount for a moment, as seen once in CI and once in 25
			// runs here) is retried for up to readyTimeout (a loaded
			// machine can keep that process off the CPU for seconds); a
			// mount that stays busy fails.
			args := append(c[1:], m.Dir)
			deadline := time.Now().Add(readyTimeout)
			for try := 0; ; try++ {
				r := runCmd(t, nil, c[0], args...)
				if r.code == 0 {
					break
				}
				busy := strings.Contains(r.stderr, "busy")
				if !busy || time.Now().After(deadline) {
					t.Fatalf("%s %s: exit %d (try %d)\nstdout: %s\nstderr: %s", c[0], shortArgs(args), r.code, try+1, r.stdout, r.stderr)
				}
				t.Logf("%s: busy, retrying: %s", c[0], strings.TrimSpace(r.stderr))
				time.Sleep(250 * time.Millisecond)
			}
			if code, err := m.wait(exitTimeout); err != nil || code != 0 {
				t.Errorf("server: exit %d, %v; stderr:\n%s", code, err, m.Stderr())
			}
		})
	}
}

// checkOneLineError checks a failed run: exit status want, stderr one
// line starting "tensorfs: " that contains every fragment.
func checkOneLineError(t *testing.T, r result, want int, fragments ...string) {
	t.Helper()
	if r.code != want {
		t.Errorf("exit status %d, want %d; stderr %q", r.code, want, r.stderr)
	}
	if r.stdout != "" {
		t.Errorf("stdout %q, want nothing", r.stdout)
	}
	lines := strings.Split(strings.TrimRight(r.stderr, "\n"), "\n")
	if len(lines) != 1 || !strings.HasPrefix(lines[0], "tensorfs: ") || !strings.HasSuffix(r.stderr, "\n") {
		t.Errorf("stderr %q, want one line starting \"tensorfs: \"", r.stderr)
	}
	for _, f := range fragments {
		if !strings.Contains(r.stderr, f) {
			t.Errorf("stderr %q does not mention %q", r.stderr, f)
		}
	}
}

// TestBadSource: a checkpoint that fails validation mounts nothing, exits
// 1 and says why in one line; so do bad mount points. Usage errors exit 2.
func TestBadSource(t *testing.T) {
	needFUSE(t)
	dir := t.TempDir()
	good := smallCheckpoint(t)
	garbage := filepath.Join(dir, "garbage.bin")
	os.WriteFile(garbage, []byte("this is not a checkpoint at all, just text\n"), 0o644)
	truncated := filepath.Join(dir, "truncated.safetensors")
	data, _ := os.ReadFile(good)
	os.WriteFile(truncated, data[:len(data)-5], 0o644)
	empty := filepath.Join(dir, "empty.safetensors")
	os.WriteFile(empty, nil, 0o644)
	aFile := filepath.Join(dir, "afile")
	os.WriteFile(aFile, []byte("x"), 0o644)

	for _, tc := range []struct {
		name      string
		args      []string // after "mount"; "MNT" is a fresh directory
		code      int
		fragments []string
	}{
		{"garbage", []string{garbage, "MNT"}, 1, []string{garbage}},
		{"truncated", []string{truncated, "MNT"}, 1, []string{truncated}},
		{"empty", []string{empty, "MNT"}, 1, []string{empty}},
		{"missing source", []string{filepath.Join(dir, "nope.safetensors"), "MNT"}, 1, []string{"nope.safetensors"}},
		{"missing mount point", []string{good, filepath.Join(dir, "no-such-dir")}, 1, []string{"does not exist"}},
		{"mount point is a file", []string{good, aFile}, 1, []string{"not a directory"}},
		{"no arguments", nil, 2, []string{"usage"}},
		{"one argument", []string{good}, 2, []string{"usage"}},
		{"unknown flag", []string{"--bogus", good, "MNT"}, 2, []string{"bogus"}},
		{"bad dtype", []string{"--dtype", "i32", good, "MNT"}, 2, []string{"I32", "not a view dtype"}},
		{"bad backing", []string{"--backing", "nfs", good, "MNT"}, 2, []string{"nfs"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			mnt := filepath.Join(t.TempDir(), "mnt")
			os.Mkdir(mnt, 0o755)
			args := []string{"mount"}
			for _, a := range tc.args {
				if a == "MNT" {
					a = mnt
				}
				args = append(args, a)
			}
			r := runTensorfs(t, args...)
			checkOneLineError(t, r, tc.code, tc.fragments...)
			if mountedAt(mnt) {
				t.Errorf("%s is mounted", mnt)
			}
		})
	}
}

// TestStaleMount: a killed server leaves a dead mount; mount refuses it
// and says to run `tensorfs umount`, which clears it; then mounting works.
func TestStaleMount(t *testing.T) {
	src := smallCheckpoint(t)
	m := mount(t, src)

	// A live mount is refused as a mount point.
	r := runTensorfs(t, "mount", src, m.Dir)
	checkOneLineError(t, r, 1, "already", "tensorfs umount "+m.Dir)

	if err := m.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	m.wait(exitTimeout)
	st := runCmd(t, nil, "stat", m.Dir)
	if st.code == 0 || !strings.Contains(st.stderr, "not connected") {
		t.Fatalf("stat of a dead mount: exit %d %q, want ENOTCONN", st.code, st.stderr)
	}
	r = runTensorfs(t, "mount", src, m.Dir)
	checkOneLineError(t, r, 1, "dead", "tensorfs umount "+m.Dir)

	r = runTensorfs(t, "umount", m.Dir)
	if r.code != 0 {
		t.Fatalf("tensorfs umount of a dead mount: exit %d: %s", r.code, r.stderr)
	}
	if mountedAt(m.Dir) {
		t.Fatal("still mounted after tensorfs umount")
	}
	r = runTensorfs(t, "umount", m.Dir)
	checkOneLineError(t, r, 1, "nothing is mounted there")

	// The directory is usable again.
	m2 := startMount(t, src)
	if err := m2.waitReady(); err != nil {
		t.Fatal(err)
	}
	m2.Unmount()
}
