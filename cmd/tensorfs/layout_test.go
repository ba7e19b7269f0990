package main

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// TestLayoutTableNamesEveryPackage holds docs/DEVELOPING.md's layout
// table to the module's packages as `go list ./...` finds them: every
// directory with a non-test Go file (skipping testdata, and directories
// whose names start with "." or "_", as the go command does) is named in
// the table, and every folder the table names exists. A new package is a
// new row (or a name in a row) of the table.
func TestLayoutTableNamesEveryPackage(t *testing.T) {
	root := filepath.Join("..", "..")
	doc, err := os.ReadFile(filepath.Join(root, "docs", "DEVELOPING.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, table, ok := strings.Cut(string(doc), "\n## Layout\n")
	if !ok {
		t.Fatal("docs/DEVELOPING.md has no ## Layout section")
	}
	table, _, _ = strings.Cut(table, "\n## ")
	named := map[string]bool{}
	first := regexp.MustCompile("^\\| ([^|]*) \\|")
	path := regexp.MustCompile("`([a-z0-9_/]+)/?`")
	for _, line := range strings.Split(table, "\n") {
		m := first.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		for _, p := range path.FindAllStringSubmatch(m[1], -1) {
			named[strings.TrimSuffix(p[1], "/")] = true
		}
	}
	if len(named) == 0 {
		t.Fatal("the layout table names no package")
	}
	var pkgs []string
	err = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		name := d.Name()
		if d.IsDir() {
			if p != root && (name == "testdata" || strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_")) {
				return filepath.SkipDir
			}
			return nil
		}
		if strings.HasSuffix(name, ".go") && !strings.HasSuffix(name, "_test.go") {
			rel, _ := filepath.Rel(root, filepath.Dir(p))
			pkgs = append(pkgs, filepath.ToSlash(rel))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(pkgs)
	pkgs = slices.Compact(pkgs)
	for _, p := range pkgs {
		if !named[p] {
			t.Errorf("package %s is not in docs/DEVELOPING.md's layout table", p)
		}
	}
	for p := range named {
		if st, err := os.Stat(filepath.Join(root, filepath.FromSlash(p))); err != nil || !st.IsDir() {
			t.Errorf("docs/DEVELOPING.md's layout table names %s/, which is not a folder of the module", p)
		}
	}
}
