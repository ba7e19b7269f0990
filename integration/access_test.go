package integration

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// TestReadOnlyEverywhere tries every kind of change (pyWrites) on the
// files and directories that TestReadOnly does not: the converted views,
// .npy/, .tensorfs/ and its metadata, and a mount whose top level is a
// converted view (--dtype) with the stored tree under .native/. Each must
// fail with EROFS, EACCES or EPERM.
func TestReadOnlyEverywhere(t *testing.T) {
	src := filepath.Join(t.TempDir(), "ro.safetensors")
	writeSafetensors(t, src, []stTensor{
		{Name: "layer/w", DType: "F32", Shape: []int64{4, 4}, Data: pattern(64, 9)},
		{Name: "b", DType: "U8", Shape: []int64{3}, Data: []byte{1, 2, 3}},
	}, map[string]string{"format": "pt"})
	for _, tc := range []struct {
		flags []string
		pairs [][2]string // file, directory
	}{
		{nil, [][2]string{
			{".f32/layer/w", ".f32/layer"},
			{".bf16/layer/w", ".bf16"},
			{".npy/layer/w.npy", ".npy/layer"},
			{".npy/b.npy", ".npy"},
			{".tensorfs/index.json", ".tensorfs"},
			{".tensorfs/stats.json", ".tensorfs/metadata"},
			{".tensorfs/metadata/format", ".tensorfs/metadata"},
		}},
		{[]string{"--dtype", "f16"}, [][2]string{
			{"layer/w", "layer"},
			{".native/layer/w", ".native/layer"},
			{".native/b", ".native"},
		}},
	} {
		t.Run(strings.Join(append([]string{"mount"}, tc.flags...), " "), func(t *testing.T) {
			m := mount(t, src, tc.flags...)
			for _, p := range tc.pairs {
				if out := strings.TrimSpace(runPy(t, pyWrites, m.Dir, m.Path(p[0]), m.Path(p[1]))); out != "" {
					t.Errorf("%s, %s: write paths that did not fail with EROFS/EACCES/EPERM:\n%s", p[0], p[1], out)
				}
			}
			m.Unmount()
		})
	}
}

// runAs runs name args as user uid (the test runs as root) and returns
// its stdout, stderr and exit status.
func runAs(t *testing.T, uid uint32, name string, args ...string) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), cmdTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uid, Gid: uid}}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	r := result{stdout: stdout.String(), stderr: stderr.String()}
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		r.code = ee.ExitCode()
	case err != nil:
		t.Fatalf("%s as uid %d: %v", name, uid, err)
	}
	return r
}

// mountOptions returns the options of the mount at dir from
// /proc/self/mountinfo: the per-mount ones and the superblock's.
func mountOptions(t *testing.T, dir string) string {
	t.Helper()
	data, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(data), "\n") {
		f := strings.Fields(line)
		if len(f) > 5 && f[4] == dir {
			return f[5] + " " + f[len(f)-1]
		}
	}
	t.Fatalf("%s is not in /proc/self/mountinfo", dir)
	return ""
}

// TestAllowOther: by default only the user who mounted can use the mount
// (the kernel refuses everyone else, root's other processes included
// when they switch user); with --allow-other everyone can read it, and
// still not write it.
func TestAllowOther(t *testing.T) {
	src := filepath.Join(t.TempDir(), "a.safetensors")
	data := pattern(64, 3)
	writeSafetensors(t, src, []stTensor{{Name: "w", DType: "F32", Shape: []int64{16}, Data: data}}, nil)
	os.Chmod(filepath.Dir(src), 0o755)
	os.Chmod(src, 0o644)
	const nobody = 65534
	for _, allow := range []bool{false, true} {
		name := "default"
		var flags []string
		if allow {
			name, flags = "--allow-other", []string{"--allow-other"}
		}
		t.Run(name, func(t *testing.T) {
			m := mount(t, src, flags...)
			opts := mountOptions(t, m.Dir)
			if strings.Contains(opts, "allow_other") != allow {
				t.Errorf("mount options %q: allow_other should be %v", opts, allow)
			}
			if !strings.HasPrefix(opts, "ro") {
				t.Errorf("mount options %q: not read-only", opts)
			}
			if os.Geteuid() != 0 {
				t.Log("not root: cannot try the mount as another user")
				m.Unmount()
				return
			}
			// Let another user reach the mount point.
			for d := filepath.Dir(m.Dir); d != os.TempDir() && d != "/"; d = filepath.Dir(d) {
				os.Chmod(d, 0o755)
			}
			r := runAs(t, nobody, "cat", m.Path("w"))
			ls := runAs(t, nobody, "ls", m.Dir)
			if allow {
				if r.code != 0 || r.stdout != string(data) {
					t.Errorf("another user reading with --allow-other: exit %d, %d bytes, %s", r.code, len(r.stdout), r.stderr)
				}
				if ls.code != 0 || strings.TrimSpace(ls.stdout) != "w" {
					t.Errorf("another user listing with --allow-other: exit %d %q %s", ls.code, ls.stdout, ls.stderr)
				}
				if w := runAs(t, nobody, "sh", "-c", "echo x >> "+m.Path("w")); w.code == 0 {
					t.Error("another user wrote to the mount")
				}
			} else {
				if r.code == 0 || !strings.Contains(r.stderr, "Permission denied") {
					t.Errorf("another user reading without --allow-other: exit %d, %q; want Permission denied", r.code, r.stderr)
				}
				if ls.code == 0 || !strings.Contains(ls.stderr, "Permission denied") {
					t.Errorf("another user listing without --allow-other: exit %d, %q; want Permission denied", ls.code, ls.stderr)
				}
			}
			m.Unmount()
		})
	}
}
