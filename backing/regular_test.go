package backing

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// specialEnv names the directory of special files that
// TestOpenSpecialFilesChild opens; the parent test sets it.
const specialEnv = "TENSORFS_BACKING_SPECIAL_DIR"

// TestOpenSpecialFiles opens a named pipe, a link to one, a link to
// /dev/zero and a directory in every mode, in a subprocess with a
// deadline: open(2) of a FIFO with no writer blocks forever, so a
// regression fails here instead of hanging the test binary.
func TestOpenSpecialFiles(t *testing.T) {
	if os.Getenv(specialEnv) != "" {
		t.Skip("the child runs TestOpenSpecialFilesChild")
	}
	dir := t.TempDir()
	if err := syscall.Mkfifo(filepath.Join(dir, "fifo"), 0o644); err != nil {
		t.Fatal(err)
	}
	for link, target := range map[string]string{"fifo-link": "fifo", "zero-link": "/dev/zero"} {
		if err := os.Symlink(target, filepath.Join(dir, link)); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^TestOpenSpecialFilesChild$", "-test.v")
	cmd.Env = append(os.Environ(), specialEnv+"="+dir)
	out, err := cmd.CombinedOutput()
	if ctx.Err() != nil {
		t.Fatalf("opening special files hangs (killed after 30 s):\n%s", out)
	}
	if err != nil || !strings.Contains(string(out), "--- PASS: TestOpenSpecialFilesChild") {
		t.Fatalf("child: %v\n%s", err, out)
	}
}

// TestOpenSpecialFilesChild is TestOpenSpecialFiles' subprocess.
func TestOpenSpecialFilesChild(t *testing.T) {
	dir := os.Getenv(specialEnv)
	if dir == "" {
		t.Skip("run by TestOpenSpecialFiles")
	}
	for _, tt := range []struct{ name, want string }{
		{"fifo", "a named pipe (FIFO)"},
		{"fifo-link", "a named pipe (FIFO)"},
		{"zero-link", "a character device"},
		{".", "a directory"},
	} {
		p := filepath.Join(dir, tt.name)
		for _, mode := range modes {
			s, err := Open(p, Options{Mode: mode})
			if err == nil {
				s.Close()
				t.Errorf("%s, %s: opened", tt.name, mode)
				continue
			}
			if msg := err.Error(); !errors.Is(err, ErrNotRegular) || !strings.Contains(msg, tt.want) || !strings.Contains(msg, p) || strings.Contains(msg, "\n") {
				t.Errorf("%s, %s: %v; want one line naming the file and saying %q", tt.name, mode, err, tt.want)
			}
		}
		f, err := OpenRegular(p, 0)
		if err == nil {
			f.Close()
			t.Errorf("OpenRegular(%s): opened", tt.name)
		}
	}
	// A regular file opens blocking (O_NONBLOCK cleared).
	f, err := OpenRegular(writeFile(t, []byte("x")), 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	fl, err := fcntlFlags(f)
	if err != nil || fl&syscall.O_NONBLOCK != 0 {
		t.Errorf("OpenRegular: flags %#x, %v: O_NONBLOCK left set", fl, err)
	}
}

func fcntlFlags(f *os.File) (int, error) {
	r, _, e := syscall.Syscall(syscall.SYS_FCNTL, f.Fd(), syscall.F_GETFL, 0)
	if e != 0 {
		return 0, e
	}
	return int(r), nil
}
