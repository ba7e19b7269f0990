package index

import (
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"
)

// nmAssign runs AssignPaths on tensors with these names and returns the
// paths by name.
func nmAssign(t testing.TB, names ...string) map[string]string {
	t.Helper()
	idx := &Index{}
	for _, n := range names {
		idx.Tensors = append(idx.Tensors, Tensor{Name: n})
	}
	if err := AssignPaths(idx); err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, tn := range idx.Tensors {
		out[tn.Name] = tn.Path
	}
	return out
}

func TestNameToPathHardCases(t *testing.T) {
	long := strings.Repeat("x", 300)
	cases := []struct {
		name, path string
	}{
		{"model.layers.0.self_attn.q_proj.weight", "model.layers.0.self_attn.q_proj.weight"},
		{"model/encoder.weight", "model/encoder.weight"},
		{"optimizer/state/0/exp_avg", "optimizer/state/0/exp_avg"},
		{"", "%"},
		{"/", "%/%"},
		{"a//b", "a/%/b"},
		{"/a", "%/a"},
		{"a/", "a/%"},
		{".", "%2E"},
		{"..", "%2E."},
		{"...", "%2E.."},
		{"a/../b", "a/%2E./b"},
		{"./a", "%2E/a"},
		{".hidden", "%2Ehidden"},
		{".tensorfs", "%2Etensorfs"},
		{".f32/x", "%2Ef32/x"},
		{"a.b.", "a.b."},
		{"a\x00b", "a%00b"},
		{"\x00", "%00"},
		{"100%", "100%25"},
		{"%", "%25"},
		{"%25", "%2525"},
		{"%2E", "%252E"},
		{"tab\there\nnl", "tab%09here%0Anl"},
		{"del\x7f", "del%7F"},
		{"bad\xffutf8\xc3", "bad%FFutf8%C3"},
		{"é/ü/日本", "é/ü/日本"},
		{"\ufffd", "\ufffd"},
		{"space name", "space name"},
		{"back\\slash", "back\\slash"},
		{strings.Repeat("y", 251), strings.Repeat("y", 251)},
		{strings.Repeat("y", 255) + "/f", strings.Repeat("y", 255) + "/f"},
	}
	for _, c := range cases {
		got := NameToPath(c.name)
		if got != c.path {
			t.Errorf("NameToPath(%q) = %q, want %q", c.name, got, c.path)
			continue
		}
		back, err := PathToName(got)
		if err != nil || back != c.name {
			t.Errorf("PathToName(%q) = %q, %v; want %q", got, back, err, c.name)
		}
	}

	// A component over the limit is cut, with a hash; directory components
	// may be 255 bytes, the file component 251.
	for _, name := range []string{long, long + "/f", "d/" + strings.Repeat("y", 252), strings.Repeat("é", 200), strings.Repeat("%", 100)} {
		p := NameToPath(name)
		for _, c := range strings.Split(p, "/") {
			if len(c) > maxComponent {
				t.Errorf("NameToPath(%.20q...) has a component of %d bytes", name, len(c))
			}
			if !utf8.ValidString(c) {
				t.Errorf("cut component %q is not valid UTF-8", c)
			}
		}
		last := p[strings.LastIndexByte(p, '/')+1:]
		if len(last) > maxFileComponent || !strings.Contains(p, hashMarker) {
			t.Errorf("NameToPath(%.20q...) = %q: file component of %d bytes, or nothing cut", name, p, len(last))
		}
		if _, err := PathToName(p); err == nil || !strings.Contains(err.Error(), "cut") {
			t.Errorf("PathToName of a cut path: %v, want an error that says it is cut", err)
		}
	}
	// Long components that share a prefix stay apart.
	a, b := NameToPath(long+"a"), NameToPath(long+"b")
	if a == b {
		t.Errorf("two long names share the path %q", a)
	}
}

func TestAssignPathsFileAndDirectory(t *testing.T) {
	cases := []struct {
		names []string
		want  map[string]string
	}{
		{[]string{"a", "a/b"}, map[string]string{"a": "a%", "a/b": "a/b"}},
		{[]string{"a", "a/b", "a/b/c"}, map[string]string{"a": "a%", "a/b": "a/b%", "a/b/c": "a/b/c"}},
		{[]string{"", "/x"}, map[string]string{"": "%%", "/x": "%/x"}},
		{[]string{"a%", "a", "a/b"}, map[string]string{"a%": "a%25", "a": "a%", "a/b": "a/b"}},
		{[]string{".", "./x"}, map[string]string{".": "%2E%", "./x": "%2E/x"}},
		{[]string{"x", "y/x"}, map[string]string{"x": "x", "y/x": "y/x"}},
	}
	for _, c := range cases {
		got := nmAssign(t, c.names...)
		for n, want := range c.want {
			if got[n] != want {
				t.Errorf("names %q: %q -> %q, want %q", c.names, n, got[n], want)
			}
			back, err := PathToName(got[n])
			if err != nil || back != n {
				t.Errorf("PathToName(%q) = %q, %v; want %q", got[n], back, err, n)
			}
		}
	}
	// A file that is also a directory, with a name long enough to be cut.
	long := strings.Repeat("z", 260)
	got := nmAssign(t, long, long+"/b")
	dir := got[long+"/b"][:strings.IndexByte(got[long+"/b"], '/')]
	if got[long] == dir {
		t.Errorf("file and directory share %q", dir)
	}
	nmCheckPaths(t, got)
}

func TestAssignPathsDuplicate(t *testing.T) {
	idx := &Index{Tensors: []Tensor{{Name: "a"}, {Name: "a"}}}
	err := AssignPaths(idx)
	if err == nil || !strings.Contains(err.Error(), `has the same path "a" as tensor "a"`) {
		t.Errorf("duplicate names: %v", err)
	}
}

func TestPathToNameRefuses(t *testing.T) {
	for _, p := range []string{
		"",        // empty path
		"a//b",    // empty component
		".x",      // leading dot
		"a/.",     // dot
		"a%zz",    // bad escape
		"a%2",     // short escape
		"a%2e",    // lower-case hex
		"a%41",    // escape of a byte that needs none
		"a%%",     // two suffixes
		"a\x00b",  // raw NUL
		"a\nb",    // raw control byte
		"a\xffb",  // raw invalid UTF-8
		"x%~0123", // cut component
	} {
		if name, err := PathToName(p); err == nil {
			t.Errorf("PathToName(%q) = %q, want an error", p, name)
		} else if strings.Contains(err.Error(), "\n") {
			t.Errorf("PathToName(%q) error is not one line: %q", p, err)
		}
	}
}

// nmCheckPaths checks the invariants of a set of assigned paths.
func nmCheckPaths(t testing.TB, paths map[string]string) {
	t.Helper()
	seen := map[string]string{}
	dirs := map[string]bool{}
	for name, p := range paths {
		if other, dup := seen[p]; dup {
			t.Fatalf("%q and %q share the path %q", name, other, p)
		}
		seen[p] = name
		comps := strings.Split(p, "/")
		for i, c := range comps {
			limit := maxComponent
			if i == len(comps)-1 {
				limit = maxFileComponent
			}
			switch {
			case c == "" || c == "." || c == "..":
				t.Fatalf("%q -> %q: component %q", name, p, c)
			case c[0] == '.':
				t.Fatalf("%q -> %q: component starts with '.'", name, p)
			case strings.IndexByte(c, 0) >= 0:
				t.Fatalf("%q -> %q: NUL", name, p)
			case len(c) > limit:
				t.Fatalf("%q -> %q: component of %d bytes", name, p, len(c))
			case !utf8.ValidString(c):
				t.Fatalf("%q -> %q: not UTF-8", name, p)
			}
			if i < len(comps)-1 {
				dirs[strings.Join(comps[:i+1], "/")] = true
			}
		}
		back, err := PathToName(p)
		if strings.Contains(p, hashMarker) {
			if err == nil {
				t.Fatalf("PathToName(%q) of a cut path = %q", p, back)
			}
		} else if err != nil || back != name {
			t.Fatalf("PathToName(%q) = %q, %v; want %q", p, back, err, name)
		}
	}
	for p, name := range seen {
		if dirs[p] {
			t.Fatalf("%q -> %q is also a directory", name, p)
		}
	}
}

// nmRandomName draws a name from an alphabet rich in the hard cases.
func nmRandomName(r *rand.Rand) string {
	atoms := []string{"a", "b", "/", "/", ".", "..", "%", "%2E", "\x00", "\n", "\xff", "\xc3", "é", "日", " ", "~", "%~"}
	n := r.IntN(8)
	var b strings.Builder
	for i := 0; i < n; i++ {
		b.WriteString(atoms[r.IntN(len(atoms))])
	}
	if r.IntN(20) == 0 {
		b.WriteString(strings.Repeat("q", 240+r.IntN(40)))
	}
	return b.String()
}

func TestAssignPathsRandom(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for round := 0; round < 300; round++ {
		set := map[string]bool{}
		for i := 0; i < 1+r.IntN(40); i++ {
			set[nmRandomName(r)] = true
			if r.IntN(3) == 0 { // make file/directory clashes likely
				for n := range set {
					set[n+"/"+nmRandomName(r)] = true
					break
				}
			}
		}
		var names []string
		for n := range set {
			names = append(names, n)
		}
		nmCheckPaths(t, nmAssign(t, names...))
	}
	// Single names round-trip through NameToPath.
	for i := 0; i < 5000; i++ {
		n := nmRandomName(r)
		p := NameToPath(n)
		if strings.Contains(p, hashMarker) {
			continue
		}
		if back, err := PathToName(p); err != nil || back != n {
			t.Fatalf("PathToName(NameToPath(%q) = %q) = %q, %v", n, p, back, err)
		}
	}
}

func FuzzPaths(f *testing.F) {
	f.Add([]byte("\na\na/b\n.\n..\n\n/x\na%\n%2E\n\x00"))
	f.Add([]byte("|model/encoder.weight|model/decoder.weight|model"))
	f.Add([]byte("\n" + strings.Repeat("x", 300) + "\n" + strings.Repeat("x", 300) + "/y"))
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) == 0 {
			return
		}
		// The first byte separates the names.
		parts := strings.Split(string(data[1:]), string(data[:1]))
		set := map[string]bool{}
		var names []string
		for _, n := range parts {
			if !set[n] {
				set[n] = true
				names = append(names, n)
			}
			if p := NameToPath(n); !strings.Contains(p, hashMarker) {
				if back, err := PathToName(p); err != nil || back != n {
					t.Fatalf("PathToName(NameToPath(%q) = %q) = %q, %v", n, p, back, err)
				}
			}
		}
		nmCheckPaths(t, nmAssign(t, names...))
		// PathToName never panics on arbitrary text, and what it accepts
		// is canonical: steps 1 and 2 of the name give it back, up to
		// step 3's suffixes (and without step 4, as PathToName cannot tell
		// a file's component from a directory's).
		if name, err := PathToName(string(data)); err == nil {
			comps := strings.Split(string(data), "/")
			for i, c := range comps {
				if c != "%" && strings.HasSuffix(c, "%") {
					comps[i] = c[:len(c)-1]
				}
			}
			if enc := strings.Join(oldEncodeName(name), "/"); enc != strings.Join(comps, "/") {
				t.Fatalf("PathToName(%q) = %q, whose encoding is %q", data, name, enc)
			}
		}
	})
}

// BenchmarkAssignPaths assigns paths to 100,000 names of a nested torch
// checkpoint.
func BenchmarkAssignPaths(b *testing.B) {
	idx := &Index{Tensors: make([]Tensor, 100000)}
	for i := range idx.Tensors {
		idx.Tensors[i].Name = "model/layers." + strconv.Itoa(i/10) + "/w" + strconv.Itoa(i%10)
	}
	b.ReportAllocs()
	for b.Loop() {
		if err := AssignPaths(idx); err != nil {
			b.Fatal(err)
		}
	}
}

// TestAssignPathsDeep: names 32,767 components deep are given their
// paths in time linear in their length (directories are kept as parent
// and component, not as prefix strings hashed whole: the square of the
// depth, about 20 s and gigabytes for these before), the step 3 '%' rule
// included.
func TestAssignPathsDeep(t *testing.T) {
	chain := strings.Repeat("a/", 32766)
	idx := &Index{}
	for i := 0; i < 20; i++ {
		idx.Tensors = append(idx.Tensors, Tensor{Name: chain + strconv.Itoa(i)})
	}
	idx.Tensors = append(idx.Tensors, Tensor{Name: chain[:len(chain)-1]}, Tensor{Name: chain + "0/x"})
	if err := AssignPaths(idx); err != nil {
		t.Fatal(err)
	}
	for i, want := range map[int]string{0: chain + "0%", 19: chain + "19", 20: chain[:len(chain)-1] + "%", 21: chain + "0/x"} {
		if got := idx.Tensors[i].Path; got != want {
			t.Errorf("tensor %d: path of %d bytes, want %d", i, len(got), len(want))
		}
	}
}
