package integration

import (
	"path/filepath"
	"strings"
	"testing"
)

// pyWrites tries every kind of change on a mount and prints one line per
// attempt that did not fail with EROFS, EACCES or EPERM.
const pyWrites = `
import errno, os, sys
mnt, f, d = sys.argv[1], sys.argv[2], sys.argv[3]
ok = {errno.EROFS, errno.EACCES, errno.EPERM}
bad = []
def attempt(what, fn):
    try:
        fn()
    except OSError as e:
        if e.errno not in ok:
            bad.append('%s: %s' % (what, e))
    else:
        bad.append('%s: succeeded' % what)
new = os.path.join(mnt, 'new')
attempt('open O_WRONLY', lambda: os.open(f, os.O_WRONLY))
attempt('open O_RDWR', lambda: os.open(f, os.O_RDWR))
attempt('open O_TRUNC', lambda: os.open(f, os.O_RDONLY | os.O_TRUNC))
attempt('open O_APPEND', lambda: os.open(f, os.O_WRONLY | os.O_APPEND))
attempt('create', lambda: os.open(new, os.O_WRONLY | os.O_CREAT, 0o644))
attempt('mknod', lambda: os.mknod(new))
attempt('mkdir', lambda: os.mkdir(new))
attempt('mkdir in subdir', lambda: os.mkdir(os.path.join(d, 'x')))
attempt('unlink', lambda: os.unlink(f))
attempt('rmdir', lambda: os.rmdir(d))
attempt('rename', lambda: os.rename(f, new))
attempt('rename dir', lambda: os.rename(d, new))
attempt('link', lambda: os.link(f, new))
attempt('symlink', lambda: os.symlink(f, new))
attempt('truncate', lambda: os.truncate(f, 0))
attempt('chmod', lambda: os.chmod(f, 0o666))
attempt('chown', lambda: os.chown(f, 1, 1))
attempt('utime', lambda: os.utime(f, (0, 0)))
attempt('setxattr', lambda: os.setxattr(f, 'user.x', b'1'))
attempt('setxattr existing', lambda: os.setxattr(f, 'user.tensorfs.name', b'x'))
attempt('removexattr', lambda: os.removexattr(f, 'user.tensorfs.name'))
attempt('setxattr dir', lambda: os.setxattr(d, 'user.x', b'1'))
attempt('index.json O_WRONLY', lambda: os.open(os.path.join(mnt, '.tensorfs', 'index.json'), os.O_WRONLY))
print('\n'.join(bad))
`

// TestReadOnly checks that every write path fails, through Python's
// syscalls and through the usual shell commands, and that nothing
// changed.
func TestReadOnly(t *testing.T) {
	dir := t.TempDir()
	src := filepath.Join(dir, "ro.safetensors")
	data := pattern(64, 9)
	writeSafetensors(t, src, []stTensor{
		{Name: "layer/w", DType: "F32", Shape: []int64{4, 4}, Data: data},
		{Name: "b", DType: "U8", Shape: []int64{3}, Data: []byte{1, 2, 3}},
	}, nil)
	m := mount(t, src)
	f, d := m.Path("layer/w"), m.Path("layer")

	if out := strings.TrimSpace(runPy(t, pyWrites, m.Dir, f, d)); out != "" {
		t.Errorf("write paths that did not fail with EROFS/EACCES/EPERM:\n%s", out)
	}
	for _, sh := range []string{
		"touch " + m.Path("new"),
		"touch " + f,
		"echo x > " + f,
		"echo x >> " + f,
		"mkdir " + m.Path("d"),
		"rm -f " + f,
		"rm -rf " + d,
		"mv " + f + " " + m.Path("moved"),
		"cp " + src + " " + m.Path("copy"),
		"ln -s " + f + " " + m.Path("link"),
		"chmod 666 " + f,
		"truncate -s 0 " + f,
		"setfattr -n user.x -v 1 " + f,
		"setfattr -x user.tensorfs.name " + f,
		"dd if=/dev/zero of=" + f + " bs=1 count=1 conv=notrunc",
	} {
		r := runCmd(t, nil, "sh", "-c", sh)
		if r.code == 0 {
			t.Errorf("%s: succeeded", sh)
			continue
		}
		if !strings.Contains(r.stderr, "Read-only file system") && !strings.Contains(r.stderr, "Permission denied") &&
			!strings.Contains(r.stderr, "Operation not permitted") {
			t.Errorf("%s: failed with %q, want EROFS, EACCES or EPERM", sh, strings.TrimSpace(r.stderr))
		}
	}
	// Nothing changed.
	got := strings.Fields(runPy(t, `
import os, sys
print(' '.join(n for n in sorted(os.listdir(sys.argv[1])) if not n.startswith('.')), open(sys.argv[2], 'rb').read().hex())
`, m.Dir, f))
	if want := []string{"b", "layer", hexString(data)}; strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("after the write attempts: top level and data %q, want %q", got, want)
	}
	m.Unmount()
}

func hexString(b []byte) string {
	const digits = "0123456789abcdef"
	out := make([]byte, 0, 2*len(b))
	for _, c := range b {
		out = append(out, digits[c>>4], digits[c&15])
	}
	return string(out)
}
