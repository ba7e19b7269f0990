package main

import (
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
