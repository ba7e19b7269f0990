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

// TestHelpGroups: -h prints every flag of every command exactly once,
// under the heading of its group; at most 14 everyday flags come before
// the other groups; every flag the group table names exists.
func TestHelpGroups(t *testing.T) {
	heading := map[string]bool{}
	for _, g := range flagGroups {
		heading[g] = true
	}
	named := map[string]bool{}
	for name, f := range commandFlags(t) {
		var b bytes.Buffer
		f.help(&b)
		under := map[string][]string{} // flag name -> headings it is printed under
		group := ""
		for _, line := range strings.Split(b.String(), "\n") {
			switch {
			case heading[line]:
				group = line
			case strings.HasPrefix(line, "  --"):
				fl := strings.Fields(line)[0][2:]
				under[fl] = append(under[fl], group)
			}
		}
		everyday := 0
		f.VisitAll(func(fl *flag.Flag) {
			named[fl.Name] = true
			want := flagGroup(fl)
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
