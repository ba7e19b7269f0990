package main

import (
	"bytes"
	"flag"
	"strings"
	"testing"
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
