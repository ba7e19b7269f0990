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

// TestCLIPageNamesEveryFlag: docs/CLI.md has one section per command, and
// that section names every flag the command defines, as --NAME, so the
// page and the code cannot drift apart.
func TestCLIPageNamesEveryFlag(t *testing.T) {
	sections := cliSections(t)
	for name, f := range commandFlags(t) {
		text, ok := sections[name]
		if !ok {
			t.Errorf("docs/CLI.md has no section \"## `tensorfs %s ...`\"", name)
			continue
		}
		f.VisitAll(func(fl *flag.Flag) {
			re := regexp.MustCompile(`--` + regexp.QuoteMeta(fl.Name) + `($|[^a-z0-9-])`)
			if !re.MatchString(text) {
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
