package main

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// TestConvertOutChecks: an empty OUT (or SOURCE) is a usage error (exit
// 2), and a dangling symbolic link as OUT is said to be one.
func TestConvertOutChecks(t *testing.T) {
	err := runConvert([]string{"model.safetensors", ""})
	var ue *usageError
	if !errors.As(err, &ue) {
		t.Fatalf("convert SRC \"\": %v, want a usage error", err)
	}
	dir := t.TempDir()
	link := filepath.Join(dir, "out.safetensors")
	if err := os.Symlink(filepath.Join(dir, "nowhere"), link); err != nil {
		t.Fatal(err)
	}
	err = runConvert([]string{filepath.Join(dir, "nosuch.safetensors"), link})
	if err == nil || !strings.Contains(err.Error(), "symbolic link") || strings.Contains(err.Error(), "appeared while converting") {
		t.Fatalf("convert to a dangling link: %v", err)
	}
}

// TestConvertNamedTempFallback: without O_TMPFILE, the temporary file
// is created with the umask applied (as O_TMPFILE's is), and one left
// behind by a convert killed outright is removed by the next convert of
// the same OUT; another live process's is not.
func TestConvertNamedTempFallback(t *testing.T) {
	noTmpfile = true
	defer func() { noTmpfile = false }()
	old := unix.Umask(0o077)
	defer unix.Umask(old)
	dir := t.TempDir()
	out := filepath.Join(dir, "out.safetensors")

	// A process that has exited: its pid names a stale file.
	dead := exec.Command("true")
	if err := dead.Run(); err != nil {
		t.Fatal(err)
	}
	stale := filepath.Join(dir, ".out.safetensors.tensorfs-"+strconv.Itoa(dead.Process.Pid)+"-x.tmp")
	live := filepath.Join(dir, ".out.safetensors.tensorfs-1-x.tmp") // init: alive
	for _, p := range []string{stale, live} {
		if err := os.WriteFile(p, []byte("partial"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	tmp, err := newTempOut(out)
	if err != nil {
		t.Fatal(err)
	}
	defer tmp.discard()
	if tmp.name == "" {
		t.Fatal("O_TMPFILE used although forced off")
	}
	st, err := os.Stat(tmp.name)
	if err != nil {
		t.Fatal(err)
	}
	if perm := st.Mode().Perm(); perm != 0o600 {
		t.Fatalf("temporary file mode %o under umask 077, want 600", perm)
	}
	if _, err := os.Stat(stale); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the stale temporary file of a killed convert is still there: %v", err)
	}
	if _, err := os.Stat(live); err != nil {
		t.Fatalf("a live process's temporary file was removed: %v", err)
	}
	if _, err := tmp.f.WriteString("data"); err != nil {
		t.Fatal(err)
	}
	if err := tmp.commit(false); err != nil {
		t.Fatal(err)
	}
	if st, err := os.Stat(out); err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("OUT: %v %v", st, err)
	}
	if _, err := os.Stat(tmp.name); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("temporary file left after commit: %v", err)
	}
}

// TestReplaceRegular: the last step of convert --force replaces only a
// regular file or takes a free name; a link, a pipe or a directory that
// took OUT's name while converting stays as it was, and the converted
// file stays at its temporary name for the caller to remove.
func TestReplaceRegular(t *testing.T) {
	for _, tc := range []struct {
		name string
		make func(p, target string) error
		ok   bool
	}{
		{"absent", func(p, _ string) error { return nil }, true},
		{"regular", func(p, _ string) error { return os.WriteFile(p, []byte("old"), 0o644) }, true},
		{"link-to-regular", func(p, target string) error { return os.Symlink(target, p) }, false},
		{"link-proc-self-fd-1", func(p, _ string) error { return os.Symlink("/proc/self/fd/1", p) }, false},
		{"fifo", func(p, _ string) error { return unix.Mkfifo(p, 0o644) }, false},
		{"dir", func(p, _ string) error { return os.Mkdir(p, 0o755) }, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			tmp, out, target := filepath.Join(dir, "tmp"), filepath.Join(dir, "out"), filepath.Join(dir, "target")
			if err := os.WriteFile(tmp, []byte("new"), 0o644); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(target, []byte("target"), 0o644); err != nil {
				t.Fatal(err)
			}
			if err := tc.make(out, target); err != nil {
				t.Fatal(err)
			}
			before, _ := os.Lstat(out)
			err := replaceRegular(tmp, out)
			if tc.ok {
				if err != nil {
					t.Fatal(err)
				}
				if got, _ := os.ReadFile(out); string(got) != "new" {
					t.Fatalf("OUT holds %q", got)
				}
				if _, err := os.Lstat(tmp); !errors.Is(err, os.ErrNotExist) {
					t.Fatalf("temporary name left: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatal("replaced")
			}
			after, lerr := os.Lstat(out)
			if lerr != nil || after.Mode() != before.Mode() {
				t.Fatalf("OUT was %v, now %v (%v)", before.Mode(), after, lerr)
			}
			if got, _ := os.ReadFile(target); string(got) != "target" {
				t.Fatalf("the link's target now holds %q", got)
			}
			if got, _ := os.ReadFile(tmp); string(got) != "new" {
				t.Fatalf("the converted file is not at its temporary name: %q", got)
			}
		})
	}
}
