package main

import (
	"go/parser"
	"go/token"
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

// layers are the module's packages, bottom to top, as
// docs/DEVELOPING.md's layout explains them: a package imports only
// packages of its own layer or below (TestLayersOneWay). A package not
// listed takes the layer of the nearest listed folder above it.
var layers = [][]string{
	{"dtype", "tiling", "zstdpool", "bytesize", "index/pickle", "source/ollama", "backing/hf/hftest", "backing/s3/s3test", "index/dcp/internal/dcpwrite", "integration", "internal/testenv"},
	{"index"},
	{"index/gguf", "index/hdf5", "index/numpy", "index/onnx", "index/safetensors", "index/torch", "index/paddle", "index/dcp", "index/keras", "quant", "internal/testenv/parsetest"},
	{"backing"},
	{"backing/remote"},
	{"backing/hf", "backing/s3", "backing/httpsrc", "backing/oci"},
	{"view", "formats"},
	{"fs", "check", "source"},
	{"client", "cmd/tensorfs/internal/bench"},
	{"client/cuda"},
	{"cmd/tensorfs"},
}

// modulePackages returns the module's packages as go list ./... finds
// them (see TestLayoutTableNamesEveryPackage), each with the module
// packages its non-test files import.
func modulePackages(t *testing.T, root string) map[string][]string {
	const module = "github.com/lazyweights/tensorfs/"
	pkgs := map[string][]string{}
	fset := token.NewFileSet()
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
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
		if !strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go") {
			return nil
		}
		rel, _ := filepath.Rel(root, filepath.Dir(p))
		rel = filepath.ToSlash(rel)
		f, err := parser.ParseFile(fset, p, nil, parser.ImportsOnly)
		if err != nil {
			return err
		}
		imps := pkgs[rel]
		for _, im := range f.Imports {
			if path, ok := strings.CutPrefix(strings.Trim(im.Path.Value, `"`), module); ok && !slices.Contains(imps, path) {
				imps = append(imps, path)
			}
		}
		pkgs[rel] = imps
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return pkgs
}

// TestLayersOneWay holds the module to its layers: no package imports
// one above it (layers), and the folders have no cycle (index/... never
// imports backing/..., whatever the depth).
func TestLayersOneWay(t *testing.T) {
	pkgs := modulePackages(t, filepath.Join("..", ".."))
	layerOf := func(p string) int {
		for q := p; ; q = filepath.ToSlash(filepath.Dir(q)) {
			for i, l := range layers {
				if slices.Contains(l, q) {
					return i
				}
			}
			if q == "." || q == "/" {
				t.Fatalf("package %s is in no layer of layout_test.go's layers", p)
			}
		}
	}
	top := func(p string) string { s, _, _ := strings.Cut(p, "/"); return s }
	folders := map[string]map[string]bool{}
	for p, imps := range pkgs {
		for _, q := range imps {
			if layerOf(q) > layerOf(p) {
				t.Errorf("%s imports %s, a layer above it", p, q)
			}
			if top(p) != top(q) {
				if folders[top(p)] == nil {
					folders[top(p)] = map[string]bool{}
				}
				folders[top(p)][top(q)] = true
			}
		}
	}
	// A cycle between top-level folders: depth-first search.
	state := map[string]int{} // 1: on the stack, 2: done
	var visit func(f string, path []string)
	visit = func(f string, path []string) {
		switch state[f] {
		case 1:
			t.Errorf("the folders import each other: %s", strings.Join(append(path, f), " -> "))
			return
		case 2:
			return
		}
		state[f] = 1
		for g := range folders[f] {
			visit(g, append(path, f))
		}
		state[f] = 2
	}
	for f := range folders {
		visit(f, nil)
	}
}
