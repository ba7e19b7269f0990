package integration

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/lazyweights/tensorfs/internal/testenv"
)

// cliFixture is a checkpoint for the CLI tests: nested names, several
// dtypes, a scalar.
func cliFixture(t *testing.T) (string, []stTensor) {
	t.Helper()
	ts := []stTensor{
		{Name: "model/layers.0/w", DType: "F32", Shape: []int64{3, 4}, Data: pattern(48, 1)},
		{Name: "model/layers.0/b", DType: "BF16", Shape: []int64{4}, Data: []byte{0x80, 0x3f, 0x00, 0x40, 0x40, 0x40, 0x80, 0xbf}},
		{Name: "ids", DType: "I64", Shape: []int64{1, 3}, Data: pattern(24, 2)},
		{Name: "scale", DType: "F64", Shape: []int64{}, Data: []byte{0, 0, 0, 0, 0, 0, 0xf0, 0x3f}},
		{Name: "name with space", DType: "U8", Shape: []int64{2}, Data: []byte{7, 8}},
	}
	src := filepath.Join(t.TempDir(), "cli.safetensors")
	writeSafetensors(t, src, ts, map[string]string{"format": "pt"})
	return src, ts
}

func TestLs(t *testing.T) {
	src, ts := cliFixture(t)
	r := runTensorfs(t, "ls", src)
	if r.code != 0 || r.stderr != "" {
		t.Fatalf("ls: exit %d, stderr %q", r.code, r.stderr)
	}
	lines := strings.Split(strings.TrimRight(r.stdout, "\n"), "\n")
	if len(lines) != len(ts)+1 || strings.Join(strings.Fields(lines[0]), " ") != "NAME DTYPE SHAPE BYTES" {
		t.Fatalf("ls output:\n%s", r.stdout)
	}
	want := []string{
		"ids I64 [1,3] 24",
		"model/layers.0/b BF16 [4] 8",
		"model/layers.0/w F32 [3,4] 48",
		"name with space U8 [2] 2",
		"scale F64 [] 8",
	}
	space := regexp.MustCompile(`  +`)
	for i, w := range want {
		if got := space.ReplaceAllString(strings.TrimSpace(lines[i+1]), " "); got != w {
			t.Errorf("ls line %d: %q, want %q", i+1, got, w)
		}
	}

	// ls --json is the index document; a mount serves the same one.
	r = runTensorfs(t, "ls", "--json", src)
	if r.code != 0 {
		t.Fatalf("ls --json: exit %d: %s", r.code, r.stderr)
	}
	var doc struct {
		Format   string            `json:"format"`
		Sources  []string          `json:"sources"`
		Metadata map[string]string `json:"metadata"`
		Tensors  []struct {
			Name   string  `json:"name"`
			Path   string  `json:"path"`
			DType  string  `json:"dtype"`
			Shape  []int64 `json:"shape"`
			Size   int64   `json:"size"`
			Source string  `json:"source"`
			Offset *int64  `json:"offset"`
		} `json:"tensors"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &doc); err != nil {
		t.Fatalf("ls --json: %v\n%s", err, r.stdout)
	}
	if doc.Format != "safetensors" || len(doc.Tensors) != len(ts) || doc.Metadata["format"] != "pt" {
		t.Errorf("ls --json: %+v", doc)
	}
	for _, d := range doc.Tensors {
		if d.Offset == nil || d.Source == "" || d.Shape == nil {
			t.Errorf("ls --json tensor %+v: want source, offset and shape", d)
		}
	}
	m := mount(t, src)
	served := runPy(t, `
import json, sys
d = json.load(open(sys.argv[1]))
print(json.dumps({k: d[k] for k in ('format', 'sources', 'metadata', 'tensors')}, sort_keys=True))
`, m.Path(".tensorfs/index.json"))
	listed := runPy(t, `
import json, sys
d = json.load(open(sys.argv[1]))
print(json.dumps({k: d[k] for k in ('format', 'sources', 'metadata', 'tensors')}, sort_keys=True))
`, writeTemp(t, r.stdout))
	if served != listed {
		t.Errorf("index.json of the mount and ls --json differ:\n%s\n%s", served, listed)
	}
	m.Unmount()

	checkOneLineError(t, runTensorfs(t, "ls", filepath.Join(t.TempDir(), "missing")), 1, "missing")
	checkOneLineError(t, runTensorfs(t, "ls"), 2, "usage")
}

// TestSourcesAbsolute: a SOURCE given relative to the working directory
// is named by its absolute path wherever another process reads it (the
// xattr, index.json, ls --json).
func TestSourcesAbsolute(t *testing.T) {
	src, _ := cliFixture(t)
	dir, base := filepath.Split(src)
	r := runTensorfsIn(t, dir, "ls", "--json", base)
	if r.code != 0 || !strings.Contains(r.stdout, `"sources": ["`+src+`"]`) {
		t.Errorf("ls --json %s in %s: exit %d, %s", base, dir, r.code, r.stdout)
	}
	m := mountIn(t, dir, base)
	got := runPy(t, `
import json, os, sys
d = json.load(open(os.path.join(sys.argv[1], '.tensorfs', 'index.json')))
print(d['sources'][0], os.getxattr(os.path.join(sys.argv[1], 'ids'), 'user.tensorfs.source').decode())
`, m.Dir)
	if want := src + " " + src + "\n"; got != want {
		t.Errorf("index.json source and xattr: %q, want %q", got, want)
	}
	// ls, cat and mount take checkpoints, and say so of a mount.
	checkOneLineError(t, runTensorfs(t, "ls", m.Dir), 1, "a tensorfs mount, not a checkpoint")
	m.Unmount()
}

// TestErrorsEscapeFileBytes: bytes a crafted file puts in a message (a
// pickle global, a member name) cannot reach the terminal as control
// characters: they are escaped, and the message stays one line.
func TestErrorsEscapeFileBytes(t *testing.T) {
	dir := t.TempDir()
	pkl := []byte("\x80\x02cos\x1b[31mRED\x1b[0m\rX\nsystem\nq\x00.")
	p := filepath.Join(dir, "esc.pt")
	if err := os.WriteFile(p, hZip(t, hMember{"esc/data.pkl", pkl}, hMember{"esc/version", []byte("3\n")}), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, cmd := range [][]string{{"ls", p}, {"load", p}, {"cat", p, "x"}} {
		r := runTensorfs(t, cmd...)
		checkOneLineError(t, r, 1, "esc.pt")
		if strings.ContainsAny(r.stderr, "\x1b\r") || !strings.Contains(r.stderr, `\u001b[31mRED`) {
			t.Errorf("%v: %q, want the escape bytes escaped", cmd, r.stderr)
		}
	}
}

// TestEmptyFlagValues: an empty value is a usage error, not the default.
func TestEmptyFlagValues(t *testing.T) {
	src, _ := cliFixture(t)
	for _, args := range [][]string{
		{"cat", "--dtype", "", src, "ids"},
		{"load", "--io=", src},
		{"load", "--dtype", "", src},
		{"mount", "--backing", "", src, t.TempDir()},
	} {
		checkOneLineError(t, runTensorfs(t, args...), 2, "empty value")
	}
	checkOneLineError(t, runTensorfs(t, "cat", "--dtype", "i64", src, "ids"), 2, "I64 is not a view dtype")
	checkOneLineError(t, runTensorfs(t, "cat", "--dtype", "f8", src, "ids"), 2, `unknown dtype "f8" (want f32, f16, bf16 or f64)`)
}

func writeTemp(t *testing.T, s string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "out")
	if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestCat(t *testing.T) {
	src, ts := cliFixture(t)
	for _, tt := range ts {
		r := runTensorfs(t, "cat", src, tt.Name)
		if r.code != 0 || r.stdout != string(tt.Data) {
			t.Errorf("cat %q: exit %d, %d bytes (%q), want %d", tt.Name, r.code, len(r.stdout), r.stderr, len(tt.Data))
		}
	}
	// A tensor already in the asked dtype comes out unchanged.
	if r := runTensorfs(t, "cat", "--dtype", "f32", src, "model/layers.0/w"); r.code != 0 || r.stdout != string(ts[0].Data) {
		t.Errorf("cat --dtype f32 of an F32 tensor: exit %d %q", r.code, r.stderr)
	}
	// Converted and .npy output equal the mount's views.
	m := mount(t, src)
	for _, c := range []struct {
		args []string
		file string
	}{
		{[]string{"--dtype", "f32"}, ".f32/model/layers.0/b"},
		{[]string{"--dtype", "f64"}, ".f64/scale"},
		{[]string{"--npy"}, ".npy/ids.npy"},
		{[]string{"--npy"}, ".npy/model/layers.0/b.npy"},
	} {
		r := runTensorfs(t, append(append([]string{"cat"}, c.args...), src, strings.TrimSuffix(strings.SplitN(c.file, "/", 2)[1], ".npy"))...)
		if r.code != 0 {
			t.Errorf("cat %v: exit %d: %s", c.args, r.code, r.stderr)
			continue
		}
		mustRun(t, "cmp", writeTemp(t, r.stdout), m.Path(c.file))
	}
	m.Unmount()
	checkOneLineError(t, runTensorfs(t, "cat", src, "nope"), 1, "nope")
	checkOneLineError(t, runTensorfs(t, "cat", "--dtype", "f32", src, "ids"), 1, "ids", "I64")
	checkOneLineError(t, runTensorfs(t, "cat", "--dtype", "i8", src, "ids"), 2, "I8")
	checkOneLineError(t, runTensorfs(t, "cat", "--npy", "--dtype", "f32", src, "ids"), 2)
	checkOneLineError(t, runTensorfs(t, "cat", src), 2, "usage")

	// NumPy reads cat --npy (skipped, or failed under CI, without numpy).
	py := testenv.Python(t, "numpy")
	r := runTensorfs(t, "cat", "--npy", src, "model/layers.0/w")
	out := mustRun(t, py, "-c", `
import numpy, sys
a = numpy.load(sys.argv[1])
print(a.dtype, a.shape, a.tobytes().hex())
`, writeTemp(t, r.stdout))
	if want := "float32 (3, 4) " + hexString(ts[0].Data); strings.TrimSpace(out) != want {
		t.Errorf("numpy.load of cat --npy: %s, want %s", out, want)
	}
}

func TestHelp(t *testing.T) {
	r := runTensorfs(t, "help")
	if r.code != 0 {
		t.Fatalf("help: exit %d", r.code)
	}
	// Every command help lists explains itself with -h; the flags named
	// here must be explained.
	section, _, _ := strings.Cut(r.stdout[strings.Index(r.stdout, "commands:\n")+1:], "\n\n")
	listed := regexp.MustCompile(`(?m)^  ([a-z]+) +\S`).FindAllStringSubmatch(section, -1)
	flags := map[string][]string{
		"mount":   {"--dtype", "--backing", "--allow-non-empty", "--allow-other", "--max-write", "--readahead-kb", "--max-background", "--no-splice", "--direct-io", "--debug", "--cpuprofile", "--memprofile"},
		"bench":   {"--size", "--readers", "--block", "--count", "--mount", "--phases", "--json", "--dir", "--tree", "--tree-tensors", "--tree-size"},
		"umount":  {"--force"},
		"ls":      {"--json"},
		"cat":     {"--dtype", "--npy"},
		"demo":    {"--keep"},
		"help":    {},
		"version": {},
	}
	seen := map[string]bool{}
	for _, l := range listed {
		cmd := l[1]
		seen[cmd] = true
		r := runTensorfs(t, cmd, "-h")
		if r.code != 0 || !strings.HasPrefix(r.stdout, "usage: tensorfs "+cmd) {
			t.Errorf("%s -h: exit %d, output %q", cmd, r.code, r.stdout)
		}
		for _, f := range flags[cmd] {
			if !strings.Contains(r.stdout, "\n  "+f) {
				t.Errorf("%s -h does not explain %s", cmd, f)
			}
		}
	}
	for cmd := range flags {
		if !seen[cmd] {
			t.Errorf("help does not list %s:\n%s", cmd, r.stdout)
		}
	}
	for _, args := range [][]string{{"mount", "--help"}, {"help", "mount"}} {
		if r := runTensorfs(t, args...); r.code != 0 || !strings.HasPrefix(r.stdout, "usage: tensorfs mount") {
			t.Errorf("%v: exit %d, output %q", args, r.code, r.stdout)
		}
	}
	if r := runTensorfs(t, "version"); r.code != 0 || !strings.HasPrefix(r.stdout, "tensorfs ") {
		t.Errorf("version: exit %d %q", r.code, r.stdout)
	}
	checkOneLineError(t, runTensorfs(t, "frobnicate"), 2, "frobnicate")
	if r := runTensorfs(t); r.code != 2 || !strings.Contains(r.stderr, "usage") {
		t.Errorf("no command: exit %d %q", r.code, r.stderr)
	}
}

// TestDemo runs the README's first command and checks it cleans up.
func TestDemo(t *testing.T) {
	needFUSE(t)
	r := runTensorfs(t, "demo")
	if r.code != 0 {
		t.Fatalf("demo: exit %d\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
	}
	for _, want := range []string{"ready after", "user.tensorfs.name=", "model/", "\"tensors\"", "unmounted"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("demo output lacks %q:\n%s", want, r.stdout)
		}
	}
	mnt := regexp.MustCompile(`\$ tensorfs mount \S+ (\S+) &`).FindStringSubmatch(r.stdout)
	if mnt == nil {
		t.Fatalf("demo output does not show the mount command:\n%s", r.stdout)
	}
	if mountedAt(mnt[1]) {
		t.Errorf("demo left %s mounted", mnt[1])
	}
	if _, err := os.Stat(filepath.Dir(mnt[1])); !os.IsNotExist(err) {
		t.Errorf("demo left %s behind", filepath.Dir(mnt[1]))
	}
}

// TestRemoteFlagsUsage: a bad value of a remote flag is a usage error
// naming the command and the flag for every command that takes one,
// whether SOURCE is remote or local (where it would otherwise be ignored
// by some commands and refused by others).
func TestRemoteFlagsUsage(t *testing.T) {
	src, _ := cliFixture(t)
	out := filepath.Join(t.TempDir(), "out.safetensors")
	for _, args := range [][]string{
		{"ls", src},
		{"check", src},
		{"cat", src, "ids"},
		{"load", "--quiet", src},
		{"convert", "--quiet", src, out},
		{"mount", src, filepath.Join(t.TempDir(), "none")}, // refused before the mount point is looked at
	} {
		r := runTensorfs(t, append([]string{args[0], "--part-size", "0"}, args[1:]...)...)
		checkOneLineError(t, r, 2, "tensorfs: "+args[0]+": --part-size: ")
	}
	if _, err := os.Stat(out); err == nil {
		t.Error("convert wrote OUT despite the usage error")
	}
}

// TestBenchRemoteSource: bench measures a local file's reads beside the
// mount's, so a remote SOURCE is a usage error saying so, at once (no
// request is made), not a "no such file" from the measurement.
func TestBenchRemoteSource(t *testing.T) {
	for _, src := range []string{"s3://bucket/model.safetensors", "https://127.0.0.1:1/model.safetensors"} {
		checkOneLineError(t, runTensorfs(t, "bench", "--phases", "read", src), 2, "bench: ", src, "local")
	}
}
