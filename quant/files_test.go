package quant

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/lazyweights/tensorfs/index"
	"github.com/lazyweights/tensorfs/internal/testenv"
)

// TestSchemesStayInQuant: the loader (formats/) and the mount (fs/)
// name no scheme, no method, no file that only names a quantization and
// no key of config.json that names one: that knowledge is quant's
// (schemes, SchemeOnly, ConfigKeys, MayPair). A string literal in their
// product files equal to one fails.
func TestSchemesStayInQuant(t *testing.T) {
	names := map[string]bool{"hf_quant_config.json": true, "quantize_config.json": true, "quantization_config": true}
	for _, s := range schemes {
		names[s.method], names[s.name] = true, true
	}
	// The schemes a planner refines its row's into (p.scheme = "...").
	fset := token.NewFileSet()
	inspectProduct(t, fset, ".", func(n ast.Node) {
		if a, ok := n.(*ast.AssignStmt); ok && len(a.Lhs) == 1 && len(a.Rhs) == 1 {
			if sel, ok := a.Lhs[0].(*ast.SelectorExpr); ok && sel.Sel.Name == "scheme" {
				if lit, ok := a.Rhs[0].(*ast.BasicLit); ok && lit.Kind == token.STRING {
					s, _ := strconv.Unquote(lit.Value)
					names[s] = true
				}
			}
		}
	})
	if !names["fp8-block"] || !names["mlx-affine"] || !names["compressed"] {
		t.Fatalf("scheme names not found: %v", names)
	}
	// A scheme's name that is a word the others use for something else.
	delete(names, "compressed") // formats' refused compressed files (gzip, xz...)
	for _, dir := range []string{"../formats", "../fs"} {
		inspectProduct(t, fset, dir, func(n ast.Node) {
			if lit, ok := n.(*ast.BasicLit); ok && lit.Kind == token.STRING {
				if s, err := strconv.Unquote(lit.Value); err == nil && names[s] {
					t.Errorf("%s: %q: quant's to name (quant.SchemeOnly, ConfigKeys, MayPair)", fset.Position(lit.Pos()), s)
				}
			}
		})
	}
}

// inspectProduct calls f for every node of the Go files of dir but its
// tests.
func inspectProduct(t *testing.T, fset *token.FileSet, dir string, f func(ast.Node)) {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil || len(files) == 0 {
		t.Fatalf("%s: no Go files (%v)", dir, err)
	}
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		file, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		ast.Inspect(file, func(n ast.Node) bool {
			f(n)
			return true
		})
	}
}

// TestMayPair: whatever Plan joins, hides or refuses without a
// configuration, in every shared quantization fixture and in pairs
// built here, MayPair saw coming; a checkpoint of none of its names has
// nothing to plan.
func TestMayPair(t *testing.T) {
	var sets [][]index.Tensor
	dir := testenv.Path(t, "quant")
	ents, err := os.ReadDir(dir)
	if err != nil {
		testenv.SkipOrFail(t, err.Error())
	}
	for _, e := range ents {
		if e.IsDir() {
			sets = append(sets, loadDir(t, filepath.Join(dir, e.Name())).tensors)
		}
	}
	b := newBuilder(nil)
	b.put("a.weight", "F8_E4M3", []int64{2, 2}, make([]byte, 4))
	b.put("a.weight_scale_inv", "F32", []int64{1, 1}, make([]byte, 4))
	b.put("e.gate_up_proj_blocks", "U8", []int64{2, 32, 1, 16}, make([]byte, 2*32*16))
	b.put("e.gate_up_proj_scales", "U8", []int64{2, 32, 1}, make([]byte, 2*32))
	sets = append(sets, b.build(t).tensors)
	plain := newBuilder(nil)
	plain.put("n.weight", "BF16", []int64{4}, make([]byte, 8))
	sets = append(sets, plain.build(t).tensors)
	paired := 0
	for _, ts := range sets {
		r := Plan(nil, ts, func(string) ([]byte, error) { return nil, os.ErrNotExist })
		found := len(r.Weights)+len(r.Hidden)+len(r.Problems) > 0
		if found && !MayPair(ts) {
			t.Errorf("Plan without a configuration found %d weights, %v hidden, %v, but MayPair says none: %v", len(r.Weights), r.Hidden, r.Problems, tensorNames(ts))
		}
		if found {
			paired++
		}
	}
	if paired < 2 || MayPair(sets[len(sets)-1]) {
		t.Errorf("%d sets paired; plain: %v", paired, MayPair(sets[len(sets)-1]))
	}
}

func tensorNames(ts []index.Tensor) []string {
	var out []string
	for i := range ts {
		out = append(out, ts[i].Name)
	}
	slices.Sort(out)
	return out
}

// TestConfigFiles: the files quant names are those Find reads, and a
// tree of logical weights drops the ones that only name a scheme and
// MLX's key only for MLX.
func TestConfigFiles(t *testing.T) {
	for _, f := range ConfigFiles {
		cfg, err := Find(map[string][]byte{f: []byte(`{"quantization_config":{"quant_method":"awq"},"quant_method":"gptq","quantization":{"bits":4,"group_size":64}}`)})
		if err != nil || cfg == nil || cfg.File != f {
			t.Errorf("Find(%s) = %+v, %v", f, cfg, err)
		}
		if SchemeOnly(f) == (f == "config.json") {
			t.Errorf("SchemeOnly(%s) = %v", f, SchemeOnly(f))
		}
	}
	if k := ConfigKeys("mlx-affine"); !slices.Equal(k, []string{"quantization_config", "quantization"}) {
		t.Errorf("mlx: %v", k)
	}
	if k := ConfigKeys("awq"); !slices.Equal(k, []string{"quantization_config"}) {
		t.Errorf("awq: %v", k)
	}
}
