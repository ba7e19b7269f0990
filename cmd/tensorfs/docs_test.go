package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestDocsNameOnlyTheirPages: every page README.md and docs/*.md name
// (FOO.md, as a link or in text) is in the repository, beside the page
// or at its root, unless its paragraph says it lies in ../shared, outside it
// (docs/TREE.md opened by pointing at a SPEC.md that a clone lacks).
func TestDocsNameOnlyTheirPages(t *testing.T) {
	pages, err := filepath.Glob("../../docs/*.md")
	if err != nil {
		t.Fatal(err)
	}
	pages = append(pages, "../../README.md")
	name := regexp.MustCompile(`[A-Za-z0-9_./-]*[A-Za-z0-9_-]\.md\b`)
	for _, p := range pages {
		data, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		for i, line := range strings.Split(string(data), "\n\n") {
			if strings.Contains(line, "../shared") {
				continue
			}
			for _, m := range name.FindAllString(line, -1) {
				if strings.HasPrefix(m, "http") || strings.Contains(line, "://"+m) {
					continue
				}
				found := false
				for _, dir := range []string{filepath.Dir(p), "../..", "../../docs"} {
					if _, err := os.Stat(filepath.Join(dir, m)); err == nil {
						found = true
					}
				}
				if !found {
					t.Errorf("%s, paragraph %d, names %s, which is not in the repository", strings.TrimPrefix(p, "../../"), i+1, m)
				}
			}
		}
	}
}
