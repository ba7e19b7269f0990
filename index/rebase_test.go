package index

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"reflect"
	"slices"
	"strings"
	"testing"
)

// memberKindNames returns the types of this package that are member
// kinds: those with a kind() method, read from its source (not from a
// list kept by hand), so that a kind added later is found here.
func memberKindNames(t *testing.T) []string {
	t.Helper()
	fset := token.NewFileSet()
	entries, err := os.ReadDir(".")
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		if !strings.HasSuffix(e.Name(), ".go") || strings.HasSuffix(e.Name(), "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, e.Name(), nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range f.Decls {
			fd, ok := d.(*ast.FuncDecl)
			if !ok || fd.Recv == nil || fd.Name.Name != "kind" || len(fd.Recv.List) != 1 {
				continue
			}
			typ := fd.Recv.List[0].Type
			if st, ok := typ.(*ast.StarExpr); ok {
				typ = st.X
			}
			if id, ok := typ.(*ast.Ident); ok {
				names = append(names, id.Name)
			}
		}
	}
	slices.Sort(names)
	return names
}

// sourceNumbers returns, in order, every int field named Source that v
// holds (through pointers, structs and slices): the source numbers a
// member kind names.
func sourceNumbers(v reflect.Value) []int {
	var out []int
	var walk func(v reflect.Value)
	walk = func(v reflect.Value) {
		switch v.Kind() {
		case reflect.Pointer, reflect.Interface:
			if !v.IsNil() {
				walk(v.Elem())
			}
		case reflect.Slice, reflect.Array:
			for i := 0; i < v.Len(); i++ {
				walk(v.Index(i))
			}
		case reflect.Struct:
			for i := 0; i < v.NumField(); i++ {
				if f := v.Type().Field(i); f.Name == "Source" && f.Type.Kind() == reflect.Int {
					out = append(out, int(v.Field(i).Int()))
					continue
				}
				walk(v.Field(i))
			}
		}
	}
	walk(v)
	return out
}

// holdsSources reports whether a value of type t can hold an int field
// named Source (through pointers, structs, slices).
func holdsSources(t reflect.Type, seen map[reflect.Type]bool) bool {
	if seen[t] {
		return false
	}
	seen[t] = true
	switch t.Kind() {
	case reflect.Pointer, reflect.Slice, reflect.Array:
		return holdsSources(t.Elem(), seen)
	case reflect.Struct:
		for i := 0; i < t.NumField(); i++ {
			f := t.Field(i)
			if f.Name == "Source" && f.Type.Kind() == reflect.Int || holdsSources(f.Type, seen) {
				return true
			}
		}
	}
	return false
}

// TestRebaseEveryKind: Index.Rebase moves every source number an index
// holds (tensors, unserved entries, metadata file values, members and
// each member kind's own), for every member kind this package defines:
// the kinds are found in the package's source (a kind() method), so a
// kind added without a sample here fails, and every Source field a
// kind's value holds must have moved (formats' merge and the .keras
// loader renumbered Tiles and Decoded by hand, each only the kind it
// met).
func TestRebaseEveryKind(t *testing.T) {
	parts := []Part{{Source: 1, Offset: 8, Size: 4}, {Source: 2, Offset: 0, Size: 4}}
	samples := map[string]MemberKind{
		"Deflated": &Deflated{Offset: 3},
		"Zstd":     &Zstd{Offset: 3},
		"Latin1":   &Latin1{Offset: 3},
		"Tiles": &Tiles{Shape: []int64{4}, ElemSize: 1, Chunks: []Chunk{
			{Source: 1, Start: []int64{0}, Shape: []int64{2}}, {Source: 2, Start: []int64{2}, Shape: []int64{2}}}},
		"Decoded":     &Decoded{Read: parts},
		"Dequantized": &Dequantized{Parts: parts},
	}
	kinds := memberKindNames(t)
	if len(kinds) == 0 {
		t.Fatal("no member kinds found in the package's source")
	}
	for _, name := range kinds {
		k, ok := samples[name]
		if !ok {
			t.Errorf("member kind %s has no sample in TestRebaseEveryKind: add one whose source numbers are not 0", name)
			continue
		}
		holds := holdsSources(reflect.TypeOf(k), map[reflect.Type]bool{})
		before := sourceNumbers(reflect.ValueOf(k))
		if holds && len(before) == 0 {
			t.Errorf("%s: the sample names no source; give it some", name)
		}
		x := &Index{
			Sources:  []string{"a", "b", "c", ""},
			Tensors:  []Tensor{{Name: "t", Source: 3}},
			Unserved: []Unserved{{Name: "u", Source: 1}},
			Metadata: map[string]any{"s": &FileValue{Source: 2, Type: "string"}, "n": 1.0},
			Members:  []Member{{Source: 3, File: 1, Kind: k}},
		}
		x.Rebase(10)
		m := x.Members[0]
		if m.Source != 13 || m.File != 11 || x.Tensors[0].Source != 13 || x.Unserved[0].Source != 11 {
			t.Errorf("%s: member source %d file %d, tensor %d, unserved %d", name, m.Source, m.File, x.Tensors[0].Source, x.Unserved[0].Source)
		}
		if fv, ok := x.Metadata["s"].(*FileValue); !ok || fv.Source != 12 || x.Metadata["n"] != 1.0 {
			t.Errorf("%s: metadata %v", name, x.Metadata)
		}
		after := sourceNumbers(reflect.ValueOf(m.Kind))
		if len(after) != len(before) {
			t.Fatalf("%s: %d source numbers, then %d", name, len(before), len(after))
		}
		for i := range after {
			if after[i] != before[i]+10 {
				t.Errorf("%s: source number %d is %d after Rebase(10), was %d", name, i, after[i], before[i])
			}
		}
		if again := sourceNumbers(reflect.ValueOf(k)); !slices.Equal(again, before) {
			t.Errorf("%s: the original kind's sources changed: %v, were %v", name, again, before)
		}
	}
}
