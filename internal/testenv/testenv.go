// Package testenv finds the shared third-party test files
// (../shared/testdata, or $TENSORFS_TESTDATA) and the Debian Python used to
// cross-check them. Under CI=true a missing dependency fails the test
// instead of skipping it.
package testenv

import (
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
)

// InCI reports whether CI=true: missing FUSE, test data or Python must fail
// tests rather than skip them.
func InCI() bool { return os.Getenv("CI") == "true" }

// SkipOrFail skips t with reason, or fails it under CI.
func SkipOrFail(t testing.TB, reason string) {
	t.Helper()
	if InCI() {
		t.Fatalf("CI=true and %s", reason)
	}
	t.Skip(reason)
}

// RepoRoot returns the module's root directory.
func RepoRoot() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Clean(filepath.Join(filepath.Dir(file), "..", ".."))
}

// Dir returns the shared test data directory: $TENSORFS_TESTDATA, or
// ../shared/testdata beside the repository. Skips (fails under CI) when
// absent.
func Dir(t testing.TB) string {
	t.Helper()
	d, ok := Optional()
	if !ok {
		SkipOrFail(t, "shared test data not found at "+d+" (set TENSORFS_TESTDATA)")
	}
	return d
}

// Optional returns the shared test data directory ($TENSORFS_TESTDATA,
// or ../shared/testdata beside the repository) for a test that uses it
// when it is there and does without it otherwise (a fuzz target's
// seeds), never skipping; ok is false when it is absent. Like Dir, it
// keys the test cache on it (keyTestCache).
func Optional() (dir string, ok bool) {
	d := os.Getenv("TENSORFS_TESTDATA")
	if d == "" {
		d = filepath.Join(RepoRoot(), "..", "shared", "testdata")
	}
	keyTestCache(d)
	st, err := os.Stat(d)
	return d, err == nil && st.IsDir()
}

// keyTestCache makes the go command's test cache key the results of a
// test that calls Dir on the data directory d: whether it is there, and
// its MANIFEST.tsv (size and time). The go command records the files a
// test stats and opens, but rechecks only those inside the module (test
// data beside the clone is outside), so they are stat'ed and opened here
// under a name that starts with the module's root and climbs out of it
// (ROOT/../../work/shared/testdata). Without it, adding ../shared after a
// run left every package "(cached)": its real-checkpoint tests skipped,
// and nothing said so.
func keyTestCache(d string) {
	p := fromRoot(d)
	if p == "" {
		return
	}
	os.Stat(p)
	if f, err := os.Open(filepath.Join(p, "MANIFEST.tsv")); err == nil {
		f.Close()
	}
}

// fromRoot spells the absolute path of d as RepoRoot() followed by as
// many ".." as the root's real path has elements, then d: the same file
// for the system, a name inside the module for the go command. "" when
// it cannot be spelled so.
func fromRoot(d string) string {
	root := RepoRoot()
	abs, err := filepath.Abs(d)
	if err != nil || !filepath.IsAbs(root) {
		return ""
	}
	real, err := filepath.EvalSymlinks(root)
	if err != nil {
		return ""
	}
	up := strings.Count(filepath.Clean(real), string(filepath.Separator))
	if real == string(filepath.Separator) {
		up = 0
	}
	return root + strings.Repeat(string(filepath.Separator)+"..", up) + abs
}

// Path returns Dir(t)/rel.
func Path(t testing.TB, rel string) string {
	t.Helper()
	return filepath.Join(Dir(t), rel)
}

// Python returns the Debian Python (/usr/bin/python3, which sees
// python3-numpy and python3-torch), or $TENSORFS_PYTHON. modules are
// imported as a check; skips (fails under CI) when any is missing.
//
// Under the race detector it skips: the cross-checks against Python's
// readers test bytes, not concurrency, and .ci/run runs them in its plain
// run (the README's test command) before the race run, where they cost
// minutes of CI for nothing the race detector can find.
func Python(t testing.TB, modules ...string) string {
	t.Helper()
	if Race {
		t.Skip("race run: the Python cross-checks run in the plain run")
	}
	py := os.Getenv("TENSORFS_PYTHON")
	if py == "" {
		py = "/usr/bin/python3"
	}
	if _, err := os.Stat(py); err != nil {
		SkipOrFail(t, py+" not found (install python3-numpy python3-torch)")
	}
	for _, m := range modules {
		if !imports(py, m) {
			SkipOrFail(t, py+" cannot import "+m+" (apt-get install python3-numpy python3-torch)")
		}
	}
	return py
}

// imported holds the modules py imported, "py\x00module": Python checks
// each once per test binary (starting torch takes seconds).
var imported sync.Map

// imports reports whether py imports module m.
func imports(py, m string) bool {
	if _, ok := imported.Load(py + "\x00" + m); ok {
		return true
	}
	if err := exec.Command(py, "-c", "import "+m).Run(); err != nil {
		return false
	}
	imported.Store(py+"\x00"+m, true)
	return true
}

// TorchFlattenPy is Python that the PyTorch cross-checks splice into their
// scripts: flat(v, path, res, base, seen) walks a torch.load()ed object and
// stores leaf(tensor) in res under the name tensorfs gives that tensor
// (SPEC: keys joined by "/", list and tuple items by index, integer keys in
// decimal; a bare tensor under base; attributes of plain objects and the
// state of TorchScript modules too; each object walked once per path). The
// including script imports torch first and defines leaf(t).
const TorchFlattenPy = `
def key(k):
    if isinstance(k, str):
        return k
    if isinstance(k, bool) or k is None:
        return repr(k)
    if isinstance(k, int):
        return str(k)
    raise ValueError("key %r" % (k,))

TS = torch.storage.TypedStorage if hasattr(torch.storage, "TypedStorage") else torch.storage._TypedStorage

def flat(v, path, res, base, seen):
    name = "/".join(path) if path else base
    if isinstance(v, torch.Tensor):
        res[name] = leaf(v)
        return
    if isinstance(v, TS):
        res[name] = leaf(torch.tensor([], dtype=v.dtype).set_(v))
        return
    if isinstance(v, torch.jit.ScriptModule):
        for k, x in v.state_dict().items():
            flat(x, path + [k], res, base, seen)
        return
    if id(v) in seen:
        return
    seen = seen | {id(v)}
    if isinstance(v, dict):
        for k, x in v.items():
            flat(x, path + [key(k)], res, base, seen)
    elif isinstance(v, (list, tuple)):
        for i, x in enumerate(v):
            flat(x, path + [str(i)], res, base, seen)
    elif hasattr(v, "__dict__") and not isinstance(v, type) and type(v).__module__ not in ("builtins", "numpy"):
        for k, x in vars(v).items():
            flat(x, path + [k], res, base, seen)
`
