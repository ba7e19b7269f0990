package main

import (
	"flag"
	"os"
	"regexp"
	"strings"
	"testing"
)

// cliSections splits docs/CLI.md into its command sections: a heading
// "## `tensorfs NAME ..." up to the next "## " heading.
func cliSections(t *testing.T) map[string]string {
	t.Helper()
	page, err := os.ReadFile("../../docs/CLI.md")
	if err != nil {
		t.Fatal(err)
	}
	head := regexp.MustCompile("^## `tensorfs ([a-z]+)")
	sections := map[string]string{}
	name := ""
	for _, line := range strings.SplitAfter(string(page), "\n") {
		if strings.HasPrefix(line, "## ") {
			name = ""
			if m := head.FindStringSubmatch(line); m != nil {
				name = m[1]
				if _, dup := sections[name]; dup {
					t.Errorf("docs/CLI.md describes %s twice", name)
				}
			}
		}
		if name != "" {
			sections[name] += line
		}
	}
	return sections
}

// remoteSection is docs/CLI.md's section of the remote flags, which
// `tensorfs help remote` prints.
const remoteSection = "## Remote-source and cache flags"

// TestCLIPageNamesEveryFlag: docs/CLI.md has one section per command, and
// that section names every flag the command defines, as --NAME, so the
// page and the code cannot drift apart; the remote flags are named once,
// in the remote section, which each command taking them points to as
// `tensorfs help remote` does.
func TestCLIPageNamesEveryFlag(t *testing.T) {
	sections := cliSections(t)
	page, err := os.ReadFile("../../docs/CLI.md")
	if err != nil {
		t.Fatal(err)
	}
	_, remote, ok := strings.Cut(string(page), "\n"+remoteSection+"\n")
	if !ok {
		t.Fatalf("docs/CLI.md has no section %q", remoteSection)
	}
	remote, _, _ = strings.Cut(remote, "\n## ")
	names := func(text, flag string) bool {
		return regexp.MustCompile(`--` + regexp.QuoteMeta(flag) + `($|[^a-z0-9-])`).MatchString(text)
	}
	for name, f := range commandFlags(t) {
		text, ok := sections[name]
		if !ok {
			t.Errorf("docs/CLI.md has no section \"## `tensorfs %s ...`\"", name)
			continue
		}
		if f.hasGroup(groupRemote) && !strings.Contains(text, "`tensorfs help remote`") {
			t.Errorf("docs/CLI.md, section %s, does not point to `tensorfs help remote` for its remote flags", name)
		}
		f.VisitAll(func(fl *flag.Flag) {
			switch {
			case flagGroup(fl) == groupRemote:
				if !names(remote, fl.Name) {
					t.Errorf("docs/CLI.md, section %q, does not name --%s (a flag of %s)", remoteSection, fl.Name, name)
				}
			case !names(text, fl.Name):
				t.Errorf("docs/CLI.md, section %s, does not name --%s", name, fl.Name)
			}
		})
	}
	for name := range sections {
		if findCommand(name) == nil {
			t.Errorf("docs/CLI.md describes %s, which is no command", name)
		}
	}
}
