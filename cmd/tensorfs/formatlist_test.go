package main

import (
	"bytes"
	"os"
	"strings"
	"testing"

	"github.com/lazyweights/tensorfs/formats"
)

// helpOf returns command name's -h text.
func helpOf(t *testing.T, name string) string {
	t.Helper()
	f, ok := commandFlags(t)[name]
	if !ok {
		t.Fatalf("no command %s", name)
	}
	var b bytes.Buffer
	f.help(&b)
	return b.String()
}

// TestFormatListsAgree: every format family of formats.Families (which
// holds every row of the format table: formats.TestFamilies) is named
// by `tensorfs -h`, `help mount`, `ls -h`, the README, docs/FORMATS.md
// and formats/doc.go, so that a format added to the table cannot be
// left out of one of them (`tensorfs -h` once lacked PaddlePaddle, `help
// mount` DCP and Paddle, `ls -h` every format).
func TestFormatListsAgree(t *testing.T) {
	var top bytes.Buffer
	printHelp(&top)
	texts := map[string]string{
		"tensorfs -h": top.String(),
		"help mount":  helpOf(t, "mount"),
		"ls -h":       helpOf(t, "ls"),
	}
	for _, file := range []string{"../../README.md", "../../docs/FORMATS.md", "../../formats/doc.go"} {
		data, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		texts[strings.TrimPrefix(file, "../../")] = string(data)
	}
	for where, text := range texts {
		flat := strings.Join(strings.Fields(strings.ReplaceAll(text, "//", "")), " ")
		for _, f := range formats.Families {
			if !strings.Contains(flat, f.Title) {
				t.Errorf("%s does not name the format %q (formats.Families)", where, f.Title)
			}
		}
	}
	// formats/doc.go's table has a line per row of the table.
	doc := texts["formats/doc.go"]
	for _, fm := range formats.Table {
		if !strings.Contains(doc, "\n//\t"+fm.Name+" ") {
			t.Errorf("formats/doc.go's table has no row %s", fm.Name)
		}
	}
}

// TestMountHelpNamesTheTree: help mount names every directory of the
// mounted tree that docs/TREE.md describes at the top level.
func TestMountHelpNamesTheTree(t *testing.T) {
	h := helpOf(t, "mount")
	for _, d := range []string{".tensorfs/index.json", ".f32/", ".f16/", ".bf16/", ".f64/", ".npy/", ".split/", ".safetensors/"} {
		if !strings.Contains(h, d) {
			t.Errorf("help mount does not name %s", d)
		}
	}
}
