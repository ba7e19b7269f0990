package main

import (
	"bytes"
	"errors"
	"flag"
	"os"
	"strings"
	"testing"

	"github.com/lazyweights/tensorfs/source"
)

// helpTexts are every help text that names the schemes, by what prints
// it: `tensorfs help`, `help remote`, `help help` and each command's -h.
func helpTexts(t *testing.T) map[string]string {
	t.Helper()
	texts := map[string]string{}
	for _, args := range [][]string{{"help"}, {"help", "remote"}, {"help", "help"}} {
		out, status := captureRun(t, args...)
		if status != 0 {
			t.Fatalf("tensorfs %s: exit %d:\n%s", strings.Join(args, " "), status, out)
		}
		texts["tensorfs "+strings.Join(args, " ")] = out
	}
	for name, f := range commandFlags(t) {
		if !f.hasGroup(groupRemote) {
			continue
		}
		var b bytes.Buffer
		f.help(&b)
		texts["tensorfs "+name+" -h"] = b.String()
	}
	return texts
}

// checkHelpNamesSchemes: every help text names every scheme of tab
// that the help names (a row with a Name), `help help` the topic of
// each, and each command's -h its SOURCEs in short (Forms).
func checkHelpNamesSchemes(t *testing.T, tab source.Table) {
	t.Helper()
	flat := func(s string) string { return strings.Join(strings.Fields(s), " ") }
	for what, text := range helpTexts(t) {
		for _, s := range tab {
			if s.Name == "" {
				continue
			}
			want := s.Name
			if what == "tensorfs help help" {
				want = strings.TrimSuffix(s.Prefix, "://")
			}
			if strings.HasSuffix(what, " -h") && !strings.Contains(flat(text), s.Forms) {
				t.Errorf("%s does not name %s's SOURCEs %q:\n%s", what, s.Name, s.Forms, text)
			}
			if !strings.Contains(flat(text), want) {
				t.Errorf("%s does not name the scheme %s:\n%s", what, want, text)
			}
		}
	}
}

// TestHelpNamesEveryScheme: every help text that names the schemes names
// every scheme of the table.
func TestHelpNamesEveryScheme(t *testing.T) {
	checkHelpNamesSchemes(t, schemes)
}

// toyScheme is a test's remote scheme: one row, with a switch and an
// option that takes a value or its environment variable.
func toyScheme(level *string, loud *bool) source.Scheme {
	return source.Scheme{
		Prefix: "toy://",
		Name:   "toy://",
		Forms:  "toy://SHELF/THING",
		Doc:    "REMOTE.md#toy-a-tests-shelf",
		Help:   "toy://SHELF/THING: a thing on a test's shelf, read as a toy reads it.",
		Options: []source.Option{{
			Name: "toy-level", Env: "TENSORFS_TOY_LEVEL",
			Help: "read toys at level `N`",
			Set: func(o *source.RemoteOptions, v string) error {
				if v == "x" {
					return errors.New("not a level")
				}
				*level = v
				return nil
			},
		}, {
			Name: "toy-loud", Bool: true,
			Help: "read toys out loud",
			Set:  func(o *source.RemoteOptions, v string) error { *loud = v == "true"; return nil },
		}},
	}
}

// TestToyScheme: adding one row to the table gives its scheme its
// flags (in the remote group, read into the options, the environment as
// the default), its place in every help text, `tensorfs help toy`, and
// its row of docs/CLI.md.
func TestToyScheme(t *testing.T) {
	var level string
	var loud bool
	toy := toyScheme(&level, &loud)
	defer useSchemes(useSchemes(append(source.Schemes(), toy)))
	defer func(saved *remoteFlags) { remoteOpts = saved }(remoteOpts)

	checkHelpNamesSchemes(t, schemes)
	out, status := captureRun(t, "help", "toy")
	if status != 0 || !strings.Contains(out, toy.Help) || !strings.Contains(out, "--toy-level N\n      remote: read toys at level N (default $TENSORFS_TOY_LEVEL)") || !strings.Contains(out, "--toy-loud\n") {
		t.Errorf("tensorfs help toy: exit %d, not the remote topic with the toy's paragraph and flags:\n%s", status, out)
	}
	for name, f := range commandFlags(t) {
		if !f.hasGroup(groupRemote) {
			continue
		}
		for _, fl := range []string{"toy-level", "toy-loud"} {
			if l := f.Lookup(fl); l == nil || flagGroup(l) != groupRemote {
				t.Errorf("%s: --%s is not a flag of the remote group", name, fl)
			}
		}
	}

	parse := func(args ...string) error {
		level, loud = "", false
		f := newFlags("ls", "SOURCE", "")
		addRemoteFlags(f)
		if err := f.parse(append(args, "toy://shelf/thing"), 1, 1); err != nil {
			return err
		}
		_, err := remoteOptions()
		return err
	}
	if err := parse("--toy-level", "3", "--toy-loud"); err != nil || level != "3" || !loud {
		t.Errorf("--toy-level 3 --toy-loud: %v, level %q, loud %v", err, level, loud)
	}
	t.Setenv("TENSORFS_TOY_LEVEL", "7")
	if err := parse(); err != nil || level != "7" || loud {
		t.Errorf("TENSORFS_TOY_LEVEL=7: %v, level %q, loud %v", err, level, loud)
	}
	if err := parse("--toy-level=5"); err != nil || level != "5" {
		t.Errorf("--toy-level=5 with TENSORFS_TOY_LEVEL=7: %v, level %q", err, level)
	}
	var ue *usageError
	if err := parse("--toy-level", "x"); !errors.As(err, &ue) || err.Error() != "ls: --toy-level: not a level" {
		t.Errorf("--toy-level x: %v, want the usage error \"ls: --toy-level: not a level\"", err)
	}

	rows := schemeRows(schemes)
	if want := "| `toy://` | `toy://SHELF/THING` | `--toy-level`, `--toy-loud` | [REMOTE.md](REMOTE.md#toy-a-tests-shelf) |\n"; !strings.HasSuffix(rows, want) {
		t.Errorf("schemeRows with the toy row ends\n%s\nwant the row\n%s", rows, want)
	}
}

// TestCLIPageSchemeRows: docs/CLI.md's rows of the schemes are the
// table's (schemeRows), and its remote flags section names every
// scheme's own flags (TestCLIPageNamesEveryFlag holds the rest).
func TestCLIPageSchemeRows(t *testing.T) {
	page, err := os.ReadFile("../../docs/CLI.md")
	if err != nil {
		t.Fatal(err)
	}
	want := schemeRowsStart + schemeRows(schemes) + schemeRowsEnd
	if !strings.Contains(string(page), want) {
		t.Errorf("docs/CLI.md does not hold the table's rows of the schemes; want, in the SOURCE section:\n%s", want)
	}
}

// TestRemoteFlagsGrouped: every flag addRemoteFlags defines is in the
// remote group (remoteFlagNames or a scheme's option), and every name
// remoteFlagNames lists is one of them.
func TestRemoteFlagsGrouped(t *testing.T) {
	defer func(saved *remoteFlags) { remoteOpts = saved }(remoteOpts)
	f := newFlags("remote", "", "")
	addRemoteFlags(f)
	f.VisitAll(func(fl *flag.Flag) {
		if flagGroup(fl) != groupRemote {
			t.Errorf("--%s, a remote flag, is printed under %q", fl.Name, flagGroup(fl))
		}
	})
	for _, name := range remoteFlagNames {
		if f.Lookup(name) == nil {
			t.Errorf("remoteFlagNames lists --%s, which addRemoteFlags does not define", name)
		}
	}
}

// TestSchemeFlagsSetOptions: the schemes' own flags reach the options
// a SOURCE is opened with, and are off by default.
func TestSchemeFlagsSetOptions(t *testing.T) {
	defer func(saved *remoteFlags) { remoteOpts = saved }(remoteOpts)
	for _, on := range []bool{false, true} {
		f := newFlags("ls", "SOURCE", "")
		addRemoteFlags(f)
		args := []string{"x"}
		if on {
			args = append(args, "--no-sign-request", "--hf-cache-write", "--proxy-terminates-tls")
		}
		if err := f.parse(args, 1, 1); err != nil {
			t.Fatal(err)
		}
		o, err := remoteOptions()
		if err != nil || o.NoSign != on || o.HF.CacheWrite != on || o.Remote.ProxyTerminatesTLS != on {
			t.Errorf("flags given %v: %v, NoSign %v, HF.CacheWrite %v, ProxyTerminatesTLS %v", on, err, o.NoSign, o.HF.CacheWrite, o.Remote.ProxyTerminatesTLS)
		}
	}
}

// TestInsecureRegistryFlag: --insecure-registry reaches the options an
// oci:// SOURCE is opened with; a bad value is a usage error naming it.
func TestInsecureRegistryFlag(t *testing.T) {
	defer func(saved *remoteFlags) { remoteOpts = saved }(remoteOpts)
	f := newFlags("ls", "SOURCE", "")
	addRemoteFlags(f)
	if err := f.parse([]string{"x", "--insecure-registry", "reg.lan:5000,mirror.lan"}, 1, 1); err != nil {
		t.Fatal(err)
	}
	o, err := remoteOptions()
	if err != nil || len(o.InsecureRegistries) != 2 || o.InsecureRegistries[0] != "reg.lan:5000" || o.InsecureRegistries[1] != "mirror.lan" {
		t.Errorf("--insecure-registry: %v, %q", err, o.InsecureRegistries)
	}
	f = newFlags("ls", "SOURCE", "")
	addRemoteFlags(f)
	err = f.parse([]string{"x", "--insecure-registry", "http://reg.lan"}, 1, 1)
	if err == nil {
		_, err = remoteOptions()
	}
	if err == nil || !strings.Contains(err.Error(), "insecure-registry") || !strings.Contains(err.Error(), `"http://reg.lan" is not a registry HOST[:PORT]`) {
		t.Errorf("a bad --insecure-registry: %v", err)
	}
}
