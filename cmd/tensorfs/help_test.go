package main

import (
	"bytes"
	"flag"
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/lazyweights/tensorfs/source"
)

// TestHelpSummaries: every command has a one-line summary for
// `tensorfs help`, written for users: no file names of this source tree.
func TestHelpSummaries(t *testing.T) {
	for _, c := range commands {
		if c.summary == "" || strings.Contains(c.summary, "\n") || strings.Contains(c.summary, ".go") {
			t.Errorf("%s: summary %q", c.name, c.summary)
		}
	}
}

// commandFlags runs every command with -h, its help captured instead of
// printed, and returns each command's flag set as the command defines it.
func commandFlags(t *testing.T) map[string]*flags {
	t.Helper()
	got := map[string]*flags{}
	saved := helpRequested
	defer func() { helpRequested = saved }()
	for _, c := range commands {
		var seen *flags
		helpRequested = func(f *flags) { seen = f }
		run := c.run
		if run == nil {
			run = runHelp
		}
		if err := run([]string{"-h"}); err != errHelp || seen == nil {
			t.Fatalf("%s -h: %v, help not asked for", c.name, err)
		}
		got[c.name] = seen
	}
	return got
}

// helpHeadings parses help output: the flags printed under each
// heading of flagGroups, flag name -> headings it is printed under.
func helpHeadings(out string) map[string][]string {
	heading := map[string]bool{}
	for _, g := range flagGroups {
		heading[g] = true
	}
	under := map[string][]string{}
	group := ""
	for _, line := range strings.Split(out, "\n") {
		switch {
		case heading[line]:
			group = line
		case strings.HasPrefix(line, "  --"):
			fl := strings.Fields(line)[0][2:]
			under[fl] = append(under[fl], group)
		}
	}
	return under
}

// TestHelpGroups: -h prints every flag of every command exactly once,
// under the heading of its group, except the remote group's, which are
// printed once by `tensorfs help remote` and replaced in each command by
// one line pointing there; at most 14 everyday flags come before the
// other groups; every flag the group table names exists.
func TestHelpGroups(t *testing.T) {
	heading := map[string]bool{}
	for _, g := range flagGroups {
		heading[g] = true
	}
	named := map[string]bool{}
	remoteFlags := map[string]bool{}
	for name, f := range commandFlags(t) {
		var b bytes.Buffer
		f.help(&b)
		under := helpHeadings(b.String())
		everyday, remote := 0, 0
		f.VisitAll(func(fl *flag.Flag) {
			named[fl.Name] = true
			want := flagGroup(fl)
			if want == groupRemote {
				remote++
				remoteFlags[fl.Name] = true
				if got := under[fl.Name]; len(got) != 0 {
					t.Errorf("%s -h prints --%s (under %q): the remote flags belong to `tensorfs help remote`", name, fl.Name, got)
				}
				delete(under, fl.Name)
				return
			}
			if got := under[fl.Name]; len(got) != 1 || got[0] != want {
				t.Errorf("%s -h prints --%s under %q, want once under %q", name, fl.Name, got, want)
			}
			delete(under, fl.Name)
			if want == flagGroups[0] {
				everyday++
			}
		})
		for fl := range under {
			t.Errorf("%s -h prints --%s, which it does not define", name, fl)
		}
		if everyday > 14 {
			t.Errorf("%s -h: %d everyday flags, want at most 14", name, everyday)
		}
		if n := strings.Count(b.String(), "tensorfs help remote"); (remote > 0) != (n == 1) || n > 1 {
			t.Errorf("%s -h: %d remote flags, %d pointers to `tensorfs help remote`", name, remote, n)
		}
	}
	var b bytes.Buffer
	printRemoteHelp(&b)
	under := helpHeadings(b.String())
	for fl := range remoteFlags {
		if got := under[fl]; len(got) != 1 || got[0] != groupRemote {
			t.Errorf("help remote prints --%s under %q, want once under %q", fl, got, groupRemote)
		}
		delete(under, fl)
	}
	for fl := range under {
		t.Errorf("help remote prints --%s, which no command defines as a remote flag", fl)
	}
	if !strings.Contains(b.String(), "docs/REMOTE.md") {
		t.Errorf("help remote does not name docs/REMOTE.md:\n%s", b.String())
	}
	for fl, g := range groupOf {
		if !named[fl] {
			t.Errorf("groupOf puts --%s in %q, but no command defines it", fl, g)
		}
		if !heading[g] {
			t.Errorf("groupOf puts --%s in %q, which is not in flagGroups", fl, g)
		}
	}
}

// TestHelpNoUnsetDefault: no flag's help shows a default that means
// "not set" (--gpu showed "(default -1)").
func TestHelpNoUnsetDefault(t *testing.T) {
	for name, f := range commandFlags(t) {
		var b bytes.Buffer
		f.help(&b)
		for _, bad := range []string{"(default -1)", "(default 0)", "(default false)", "(default )"} {
			if strings.Contains(b.String(), bad) {
				t.Errorf("%s -h shows %s", name, bad)
			}
		}
	}
}

// TestHelpTables: the help's lists of schemes and flags come from their
// tables: `tensorfs help`'s remote topic, the remote heading and every
// command's pointer name each scheme of source.Schemes (hf:// too); the
// pointer's flags are remote flags; `help remote` says the inflate flags
// hold more than .npz members; check -h names every digest --data checks.
func TestHelpTables(t *testing.T) {
	var top bytes.Buffer
	printHelp(&top)
	var remote bytes.Buffer
	printRemoteHelp(&remote)
	names := func(text string, s source.Scheme) bool {
		return strings.Contains(text, s.Prefix) || strings.HasPrefix(s.Prefix, "http") && strings.Contains(text, "http(s)://")
	}
	for _, s := range source.Schemes() {
		if !names(top.String(), s) {
			t.Errorf("tensorfs help does not name %s", s.Prefix)
		}
		if !names(groupRemote, s) {
			t.Errorf("heading %q does not name %s", groupRemote, s.Prefix)
		}
		if !names(remotePointer, s) {
			t.Errorf("remote pointer %q does not name %s", remotePointer, s.Prefix)
		}
	}
	fs := commandFlags(t)
	for _, m := range regexp.MustCompile(`--[a-z-]+`).FindAllString(remotePointer, -1) {
		fl := fs["mount"].Lookup(m[2:])
		if fl == nil || flagGroup(fl) != groupRemote {
			t.Errorf("remote pointer names %s, which is no remote flag", m)
		}
	}
	for _, kind := range []string{".npz", ".keras", "DCP", "HDF5", "ONNX"} {
		if !strings.Contains(fs["mount"].Lookup("inflate-mem").Usage, kind) {
			t.Errorf("--inflate-mem does not say it holds %s data", kind)
		}
	}
	var check bytes.Buffer
	fs["check"].help(&check)
	for _, digest := range []string{"CRC-32", "SHA-1", "sha256"} {
		if !strings.Contains(check.String(), digest) {
			t.Errorf("check -h does not name the %s check --data makes", digest)
		}
	}
}

// TestHelpHFOffline: `tensorfs help hf` says what HF_HUB_OFFLINE=1 does
// and that a Hub that cannot be reached falls back to the HF cache.
func TestHelpHFOffline(t *testing.T) {
	out, status := captureRun(t, "help", "hf")
	flat := strings.Join(strings.Fields(out), " ")
	for _, want := range []string{"HF_HUB_OFFLINE=1 (the cache only)", "when the Hub cannot be reached", "snapshot is in the HF cache is read from there"} {
		if status != 0 || !strings.Contains(flat, want) {
			t.Errorf("tensorfs help hf: exit %d, does not say %q:\n%s", status, want, out)
		}
	}
}

// TestHelpSchemeTopics: `tensorfs help hf` (and each scheme's name) is
// the remote topic; a mistyped command or topic gets a suggestion.
func TestHelpSchemeTopics(t *testing.T) {
	for _, s := range source.Schemes() {
		name := strings.TrimSuffix(s.Prefix, "://")
		out, status := captureRun(t, "help", name)
		if status != 0 || !strings.Contains(out, "--part-size") {
			t.Errorf("tensorfs help %s: exit %d, not the remote topic:\n%s", name, status, out)
		}
	}
	for in, want := range map[string]string{"mout": "mount", "chek": "check", "lod": "load", "mo": "mount", "xyzzy": ""} {
		out, status := captureRun(t, in)
		if status != 2 || want == "" && strings.Contains(out, "did you mean") || want != "" && !strings.Contains(out, "(did you mean "+want+"?)") {
			t.Errorf("tensorfs %s: exit %d, %q, want a suggestion of %q", in, status, out, want)
		}
	}
	if out, _ := captureRun(t, "help", "remot"); !strings.Contains(out, "did you mean remote?") {
		t.Errorf("tensorfs help remot: %q", out)
	}
}

// captureRun runs the command line args as main does and returns what
// it wrote to stdout and stderr, and its exit status.
func captureRun(t *testing.T, args ...string) (string, int) {
	t.Helper()
	f, err := os.CreateTemp(t.TempDir(), "out")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	stdout, stderr := os.Stdout, os.Stderr
	os.Stdout, os.Stderr = f, f
	status := run(args)
	os.Stdout, os.Stderr = stdout, stderr
	out, err := os.ReadFile(f.Name())
	if err != nil {
		t.Fatal(err)
	}
	return string(out), status
}
