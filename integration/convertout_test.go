package integration

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// TestConvertNeverWritesOutsideOut: convert writes a new regular file at
// OUT, or replaces (with --force) a regular file there, and nothing else.
// A symbolic link (to /proc/self/fd/1, to /dev/stdout, to a regular file,
// to nothing), /dev/stdout itself, a named pipe, a directory and a device
// are refused with or without --force: one line, exit 1, the thing at OUT
// as it was and nothing written to the process's stdout (a regular file
// here, which a link through /proc/self/fd/1 would otherwise reach). Exit
// 0 means the bytes are at OUT.
func TestConvertNeverWritesOutsideOut(t *testing.T) {
	dir := t.TempDir()
	src := filepath.Join(dir, "src.safetensors")
	writeSafetensors(t, src, []stTensor{{Name: "w", DType: "F32", Shape: []int64{4}, Data: pattern(16, 3)}}, nil)
	want := filepath.Join(dir, "want.safetensors")
	mustRun(t, tensorfsBinary(t), "convert", "--quiet", src, want)
	wantBytes, err := os.ReadFile(want)
	if err != nil {
		t.Fatal(err)
	}
	regular := filepath.Join(dir, "regular")
	if err := os.WriteFile(regular, []byte("keep me"), 0o644); err != nil {
		t.Fatal(err)
	}

	type outKind struct {
		name  string
		make  func(t *testing.T, p string) string // makes OUT (under p) and returns its path
		force bool
		ok    bool // exit 0 with the bytes at OUT
	}
	link := func(target string) func(*testing.T, string) string {
		return func(t *testing.T, p string) string {
			if err := os.Symlink(target, p); err != nil {
				t.Fatal(err)
			}
			return p
		}
	}
	fixed := func(path string) func(*testing.T, string) string {
		return func(*testing.T, string) string { return path }
	}
	var kinds []outKind
	for _, force := range []bool{false, true} {
		kinds = append(kinds,
			outKind{name: "link-proc-self-fd-1", make: link("/proc/self/fd/1"), force: force},
			outKind{name: "link-dev-stdout", make: link("/dev/stdout"), force: force},
			outKind{name: "link-regular", make: link(regular), force: force},
			outKind{name: "link-dangling", make: link(filepath.Join(dir, "nowhere")), force: force},
			outKind{name: "link-dir", make: link(dir), force: force},
			outKind{name: "fifo", make: func(t *testing.T, p string) string {
				if err := unix.Mkfifo(p, 0o644); err != nil {
					t.Fatal(err)
				}
				return p
			}, force: force},
			outKind{name: "dir", make: func(t *testing.T, p string) string {
				if err := os.Mkdir(p, 0o755); err != nil {
					t.Fatal(err)
				}
				return p
			}, force: force},
			outKind{name: "device", make: func(t *testing.T, p string) string {
				// A device node of its own (as /dev/null is: char 1:3);
				// where mknod is not allowed, /dev/null itself.
				if err := unix.Mknod(p, unix.S_IFCHR|0o666, int(unix.Mkdev(1, 3))); err != nil {
					return "/dev/null"
				}
				return p
			}, force: force},
		)
	}
	// /dev/stdout itself only without --force: the old code renamed over
	// it with --force, and this test must be safe to run on that code.
	kinds = append(kinds,
		outKind{name: "dev-stdout", make: fixed("/dev/stdout")},
		outKind{name: "new-name", make: func(t *testing.T, p string) string { return p }, ok: true},
		outKind{name: "new-name", make: func(t *testing.T, p string) string { return p }, force: true, ok: true},
		outKind{name: "regular-force", make: func(t *testing.T, p string) string {
			if err := os.WriteFile(p, []byte("old"), 0o644); err != nil {
				t.Fatal(err)
			}
			return p
		}, force: true, ok: true},
	)

	for _, k := range kinds {
		name := k.name
		if k.force {
			name += "-force"
		}
		t.Run(name, func(t *testing.T) {
			sub := filepath.Join(dir, name)
			if err := os.Mkdir(sub, 0o755); err != nil {
				t.Fatal(err)
			}
			out := k.make(t, filepath.Join(sub, "out.safetensors"))
			before := describeOut(t, out)
			stdout, err := os.Create(filepath.Join(dir, name+".stdout"))
			if err != nil {
				t.Fatal(err)
			}
			defer stdout.Close()
			args := []string{"convert", "--quiet"}
			if k.force {
				args = append(args, "--force")
			}
			args = append(args, src, out)
			ctx, cancel := context.WithTimeout(context.Background(), cmdTimeout)
			defer cancel()
			cmd := exec.CommandContext(ctx, tensorfsBinary(t), args...)
			var stderr bytes.Buffer
			cmd.Stdout, cmd.Stderr = stdout, &stderr
			err = cmd.Run()
			code := 0
			var ee *exec.ExitError
			if errors.As(err, &ee) {
				code = ee.ExitCode()
			} else if err != nil {
				t.Fatal(err)
			}
			if st, err := stdout.Stat(); err != nil || st.Size() != 0 {
				t.Errorf("convert wrote %d bytes to its stdout (%v)", st.Size(), err)
			}
			if k.ok {
				if code != 0 {
					t.Fatalf("exit %d: %s", code, stderr.String())
				}
				st, err := os.Lstat(out)
				if err != nil || !st.Mode().IsRegular() {
					t.Fatalf("OUT after exit 0: %v %v, want a regular file", st, err)
				}
				if got, _ := os.ReadFile(out); !bytes.Equal(got, wantBytes) {
					t.Fatalf("OUT holds %d bytes, not the %d converted", len(got), len(wantBytes))
				}
				return
			}
			msg := stderr.String()
			if code != 1 || strings.Count(msg, "\n") != 1 || !strings.HasPrefix(msg, "tensorfs: ") || !strings.Contains(msg, out) {
				t.Fatalf("exit %d, stderr %q; want exit 1 and one line naming %s", code, msg, out)
			}
			if strings.Contains(msg, "--force") {
				t.Errorf("%q suggests --force, which must not help here", msg)
			}
			if after := describeOut(t, out); after != before {
				t.Errorf("OUT changed: was %s, now %s", before, after)
			}
			if got, _ := os.ReadFile(regular); string(got) != "keep me" {
				t.Errorf("the link's target was written: %q", got)
			}
			if ents, _ := os.ReadDir(sub); len(ents) > 1 {
				t.Errorf("left behind in OUT's directory: %v", ents)
			}
		})
	}
}

// describeOut says what is at p, without following a link: its type and,
// for a link, its target.
func describeOut(t *testing.T, p string) string {
	st, err := os.Lstat(p)
	if err != nil {
		return err.Error()
	}
	d := st.Mode().Type().String()
	if st.Mode()&os.ModeSymlink != 0 {
		target, _ := os.Readlink(p)
		d += " -> " + target
	}
	return d
}
