package integration

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"
)

// TestFormats is the one per-format read test: each format is a row of
// fmtRows, and the body below does the checks every format shares. A row
// resolves its fixtures (the shared test data at run time, plus files it
// writes with the writer itself) and says, for each checkpoint:
//
//   - what `tensorfs ls` must print, or, for a file that must be refused,
//     the one line `ls`, `load` or `mount` exits 1 with;
//   - the exact output of `tensorfs load --sha256` under each set of
//     flags (read paths, --dtype f32), from the writer's own digests
//     (EXPECTED.json, a .f32ref, a reference script);
//   - the digests `tensorfs convert` to safetensors must give, and the
//     tensors `tensorfs cat` must give byte-exact;
//   - whether it is mounted, with which flags, the arguments of the row's
//     mount checker (a Python script reading every view of every tensor
//     from another process), and a hook run while it is mounted.
//
// Mounts are shared: up to fxBatch checkpoints of a row are served at
// once and read by one checker process. A format with a property no other
// has (a malicious pickle, ggml's per-type dequantization, the Go client
// over torch's protocol-2 arrays) adds it as the row's extra, run after
// the CLI checks and before the mounts. A new format is a new row.
func TestFormats(t *testing.T) {
	for _, row := range fmtRows {
		t.Run(row.name, func(t *testing.T) {
			// rows share nothing (their own files, mounts and
			// servers); two at a time keep both cores busy while a
			// row waits on a mount or an interpreter's start
			t.Parallel()
			spec := row.build(t, t.TempDir())
			if len(spec.srcs) == 0 {
				t.Fatalf("%s: no checkpoints", row.name)
			}
			for _, s := range spec.srcs {
				fmtCheckCLI(t, s)
			}
			if spec.extra != nil {
				spec.extra(t)
			}
			out := fmtCheckMounts(t, spec)
			if spec.report != nil {
				spec.report(t, out)
			}
		})
	}
}

// fmtRows are the formats TestFormats reads, in the order it reads them.
var fmtRows = []fmtRow{
	{"safetensors", fmtSafetensors},
	{"pytorch", fmtPyTorch},
	{"torch-numpy-protocol2", fmtTorchNumpyP2},
	{"numpy", fmtNumPy},
	{"gguf", fmtGGUF},
	{"dcp", fmtDCP},
	{"onnx", func(t *testing.T, tmp string) fmtSpec { return fmtFormats2(t, "onnx") }},
	{"keras-h5", func(t *testing.T, tmp string) fmtSpec { return fmtFormats2(t, "h5") }},
}

// fmtRow is one format: its name (the subtest's) and how to resolve its
// checkpoints and what each must give; tmp is a directory for files the
// row writes.
type fmtRow struct {
	name  string
	build func(t *testing.T, tmp string) fmtSpec
}

// fmtSpec is what a row resolved.
type fmtSpec struct {
	srcs []fmtSrc
	// script checks mounts: run with pre, then each mounted checkpoint's
	// mount.args and mount point, once per batch of mounts; it exits
	// non-zero on a mismatch. "": the mounts are checked by hooks alone.
	script string
	pre    []string
	// report checks the scripts' output, the batches' in order.
	report func(t *testing.T, out string)
	// extra is the format's own checks beyond the shared ones.
	extra func(t *testing.T)
}

// fmtSrc is one checkpoint of a row and what it must give.
type fmtSrc struct {
	path string
	// refuse: the fragments of the one line refuseBy ("ls", the default,
	// "load" or "mount") exits 1 with; nothing else is checked.
	refuse   []string
	refuseBy string
	// ls > 0: `tensorfs ls` prints a header and ls lines; lsMatch:
	// regular expressions its output must match.
	ls      int
	lsMatch []string
	loads   []fmtLoad
	// convert: tensors that `tensorfs convert` to safetensors must give
	// with these digests; cat: tensors `tensorfs cat` must give.
	convert map[string]string
	cat     map[string]string
	mount   *fmtMount
}

// fmtLoad is one run of `tensorfs load --sha256 FLAGS... SRC`: its
// output must be want's lines ("SHA256  NAME"), in name order. An empty
// want is not checked (a file without tensors).
type fmtLoad struct {
	flags []string
	want  map[string]string
}

// fmtMount says how a checkpoint is mounted and checked.
type fmtMount struct {
	flags []string // tensorfs mount flags
	args  []string // the checker's arguments before the mount point
	want  string   // a line the checker must print for this mount
	hook  func(t *testing.T, m *Mount)
}

// fmtSumLines is `load --sha256`'s output for the digests by name.
func fmtSumLines(want map[string]string) string {
	var b strings.Builder
	for _, n := range slices.Sorted(maps.Keys(want)) {
		b.WriteString(want[n] + "  " + n + "\n")
	}
	return b.String()
}

// fmtCheckCLI runs the CLI checks of one checkpoint.
func fmtCheckCLI(t *testing.T, s fmtSrc) {
	t.Helper()
	if len(s.refuse) > 0 {
		switch s.refuseBy {
		case "mount":
			mnt := filepath.Join(t.TempDir(), "mnt")
			if err := os.Mkdir(mnt, 0o755); err != nil {
				t.Fatal(err)
			}
			checkOneLineError(t, runTensorfs(t, "mount", s.path, mnt), 1, s.refuse...)
			if mountedAt(mnt) {
				t.Errorf("%s is mounted", mnt)
			}
		case "", "ls":
			checkOneLineError(t, runTensorfs(t, "ls", s.path), 1, s.refuse...)
		default:
			checkOneLineError(t, runTensorfs(t, s.refuseBy, s.path), 1, s.refuse...)
		}
		return
	}
	if s.ls > 0 || len(s.lsMatch) > 0 {
		r := runTensorfs(t, "ls", s.path)
		lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
		if r.code != 0 || (s.ls > 0 && len(lines) != 1+s.ls) {
			t.Errorf("ls %s: exit %d, %d lines for %d tensors: %s", s.path, r.code, len(lines), s.ls, r.stderr)
		}
		for _, re := range s.lsMatch {
			if !regexp.MustCompile(re).MatchString(r.stdout) {
				t.Errorf("ls %s:\n%s\nwant a match of %s", s.path, r.stdout, re)
			}
		}
	}
	for _, l := range s.loads {
		if len(l.want) == 0 {
			continue
		}
		args := append(append([]string{"load", "--sha256"}, l.flags...), s.path)
		want := fmtSumLines(l.want)
		if r := runTensorfs(t, args...); r.code != 0 || r.stdout != want {
			t.Errorf("tensorfs %s: exit %d %s\n%s\nwant (the writer's):\n%s", strings.Join(args, " "), r.code, r.stderr, r.stdout, want)
		}
	}
	if len(s.convert) > 0 {
		got := convertDigests(t, s.path)
		for _, tn := range slices.Sorted(maps.Keys(s.convert)) {
			if got[tn] != s.convert[tn] {
				t.Errorf("convert %s: %s differs", s.path, tn)
			}
		}
	}
	for _, tn := range slices.Sorted(maps.Keys(s.cat)) {
		r := runTensorfs(t, "cat", s.path, tn)
		h := sha256.Sum256([]byte(r.stdout))
		if r.code != 0 || hex.EncodeToString(h[:]) != s.cat[tn] {
			t.Errorf("cat %s %s: exit %d, %s; bytes differ from the reference", s.path, tn, r.code, r.stderr)
		}
	}
}

// fmtCheckMounts mounts the row's checkpoints that have a mount, fxBatch
// at a time (started together, then waited for), runs the row's checker
// over each batch and each checkpoint's hook, and unmounts them (the
// server must exit 0). It returns the checker's output.
func fmtCheckMounts(t *testing.T, spec fmtSpec) string {
	t.Helper()
	var srcs []fmtSrc
	for _, s := range spec.srcs {
		if s.mount != nil && len(s.refuse) == 0 {
			srcs = append(srcs, s)
		}
	}
	var out strings.Builder
	for len(srcs) > 0 {
		n := min(fxBatch, len(srcs))
		batch := srcs[:n]
		srcs = srcs[n:]
		var ms []*Mount
		for _, s := range batch {
			ms = append(ms, startMount(t, s.path, s.mount.flags...))
		}
		args := append([]string(nil), spec.pre...)
		for i, m := range ms {
			if err := m.waitReady(); err != nil {
				t.Fatal(err)
			}
			args = append(append(args, batch[i].mount.args...), m.Dir)
		}
		if spec.script != "" {
			o := runPy(t, spec.script, args...)
			for _, s := range batch {
				if s.mount.want != "" && !strings.Contains("\n"+o, "\n"+s.mount.want+"\n") {
					t.Errorf("%s: the checker printed\n%s\nwant the line %q", s.path, o, s.mount.want)
				}
			}
			out.WriteString(o)
		}
		for i, s := range batch {
			if s.mount.hook != nil {
				s.mount.hook(t, ms[i])
			}
		}
		for _, m := range ms {
			m.Unmount()
		}
	}
	return out.String()
}

// fmtExpected is an EXPECTED.json of the shared test data (modern/,
// formats2/): per case, its kind, its source (relative to the file's
// directory; the case's name where empty), and each tensor as the
// writer's own reader gives it.
type fmtExpected struct {
	Cases map[string]struct {
		Kind    string `json:"kind"`
		Source  string `json:"source"`
		Tensors []struct {
			Name   string `json:"name"`
			Path   []any  `json:"path"`
			DType  string `json:"dtype"`
			SHA256 string `json:"sha256"`
		} `json:"tensors"`
	} `json:"cases"`
}

func fmtReadExpected(t *testing.T, path string) *fmtExpected {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var e fmtExpected
	if err := json.Unmarshal(data, &e); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return &e
}

// digests are a case's tensor digests by tensorfs name: the writer's
// name, or its key path joined by '/'.
func (e *fmtExpected) digests(c string) map[string]string {
	out := map[string]string{}
	for _, tn := range e.Cases[c].Tensors {
		name := tn.Name
		if name == "" {
			parts := make([]string, len(tn.Path))
			for i, p := range tn.Path {
				parts[i] = fmt.Sprint(p)
			}
			name = strings.Join(parts, "/")
		}
		out[name] = tn.SHA256
	}
	return out
}

// casesOf lists the cases of the given kinds, sorted.
func (e *fmtExpected) casesOf(kinds ...string) []string {
	var out []string
	for name, c := range e.Cases {
		if slices.Contains(kinds, c.Kind) {
			out = append(out, name)
		}
	}
	sort.Strings(out)
	return out
}

// fmtReadPaths are the `load` flag sets of every read path.
var fmtReadPaths = [][]string{nil, {"--io", "mmap"}, {"--io", "direct"}, {"--parallel", "1", "--chunk", "4KiB"}}

// fmtLoads is one fmtLoad per flag set, each with extra flags and want.
func fmtLoads(want map[string]string, extra []string, sets ...[]string) []fmtLoad {
	var out []fmtLoad
	for _, f := range sets {
		out = append(out, fmtLoad{flags: append(append([]string(nil), extra...), f...), want: want})
	}
	return out
}
