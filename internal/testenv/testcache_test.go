package testenv

import (
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"
)

// TestDirKeysTestCache runs `go test` on a module of its own whose test
// calls Dir, as a newcomer runs the README's test command: twice (the
// second "(cached)"), then after adding ../shared/testdata beside it, and
// after removing it again. A result cached across either change would
// hide that the tests needing the data never ran (or no longer can).
func TestDirKeysTestCache(t *testing.T) {
	goBin := filepath.Join(runtime.GOROOT(), "bin", "go")
	if _, err := os.Stat(goBin); err != nil {
		SkipOrFail(t, "no go command at "+goBin)
	}
	tmp := t.TempDir()
	repo := filepath.Join(tmp, "repo")
	src, err := os.ReadFile(filepath.Join(RepoRoot(), "internal", "testenv", "testenv.go"))
	if err != nil {
		t.Fatal(err)
	}
	write := func(path, text string) {
		t.Helper()
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(filepath.Join(repo, "go.mod"), "module example.com/m\n\ngo 1.26\n")
	write(filepath.Join(repo, "internal", "testenv", "testenv.go"), string(src))
	for _, f := range []string{"race_on.go", "race_off.go"} { // testenv.Race
		b, err := os.ReadFile(filepath.Join(RepoRoot(), "internal", "testenv", f))
		if err != nil {
			t.Fatal(err)
		}
		write(filepath.Join(repo, "internal", "testenv", f), string(b))
	}
	write(filepath.Join(repo, "x", "x_test.go"), `package x

import (
	"testing"

	"example.com/m/internal/testenv"
)

func TestData(t *testing.T) { testenv.Dir(t) }
`)
	var env []string
	for _, kv := range os.Environ() {
		switch k, _, _ := strings.Cut(kv, "="); k {
		case "CI", "TENSORFS_TESTDATA", "GOFLAGS", "GOWORK", "GOTOOLCHAIN":
		default:
			env = append(env, kv)
		}
	}
	env = append(env, "GOFLAGS=-mod=mod", "GOWORK=off", "GOTOOLCHAIN=local")
	goTest := func() (cached bool) {
		t.Helper()
		cmd := exec.Command(goBin, "test", "./x")
		cmd.Dir, cmd.Env = repo, env
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("go test: %v\n%s", err, out)
		}
		return strings.Contains(string(out), "(cached)")
	}
	data := filepath.Join(tmp, "shared", "testdata")
	steps := []struct {
		what   string
		change func()
		cached bool
	}{
		{"first run, no data", func() {}, false},
		{"second run, no data", func() {}, true},
		{"after adding ../shared/testdata", func() {
			manifest := filepath.Join(data, "MANIFEST.tsv")
			write(manifest, "file\tsha256\tsize\torigin\tnotes\n")
			old := time.Now().Add(-time.Hour) // the go command caches no run that read a file written in the last 2 s
			if err := os.Chtimes(manifest, old, old); err != nil {
				t.Fatal(err)
			}
		}, false},
		{"second run with the data", func() {}, true},
		{"after removing the data", func() {
			if err := os.RemoveAll(filepath.Join(tmp, "shared")); err != nil {
				t.Fatal(err)
			}
		}, false},
	}
	for _, s := range steps {
		s.change()
		if got := goTest(); got != s.cached {
			t.Errorf("%s: cached %v, want %v", s.what, got, s.cached)
		}
	}
}
