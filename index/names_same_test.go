package index

import (
	"math/rand/v2"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// nmSameAsBefore runs AssignPaths and the implementation before it
// (names_old_test.go) on tensors with these names, in this order, and
// fails unless they give every tensor the same path, or both fail (with
// the same message when names are duplicated: SHA-256 collisions, the
// other failure, cannot be made).
func nmSameAsBefore(t testing.TB, names []string) {
	t.Helper()
	newIdx, oldIdx := &Index{}, &Index{}
	for _, n := range names {
		newIdx.Tensors = append(newIdx.Tensors, Tensor{Name: n})
		oldIdx.Tensors = append(oldIdx.Tensors, Tensor{Name: n})
	}
	newErr, oldErr := AssignPaths(newIdx), oldAssignPaths(oldIdx)
	if (newErr == nil) != (oldErr == nil) || (newErr != nil && newErr.Error() != oldErr.Error()) {
		t.Fatalf("names %q: error %v, before %v", names, newErr, oldErr)
	}
	if newErr != nil {
		return
	}
	for i := range names {
		if got, want := newIdx.Tensors[i].Path, oldIdx.Tensors[i].Path; got != want {
			t.Fatalf("names %q: %q has the path %q, before %q", names, names[i], got, want)
		}
	}
	for _, n := range names {
		if got, want := NameToPath(n), oldJoinCut(oldEncodeName(n)); got != want {
			t.Fatalf("NameToPath(%q) = %q, before %q", n, got, want)
		}
	}
}

// nmTrickyName draws a name from atoms rich in the rule's hard cases:
// empty components, '.', '..', leading dots, '%' and things that look
// like its escapes, NUL and control bytes, invalid and multi-byte UTF-8,
// and components around the 251- and 255-byte limits, with escapes and
// multi-byte characters where they are cut.
func nmTrickyName(r *rand.Rand) string {
	atoms := []string{"a", "b", "/", "/", "/", ".", "..", ".x", "%", "%2E", "%25", "%~", "%%",
		"\x00", "\x1f", "\x7f", "\n", "\xff", "\xc3", "\xe6\x97", "é", "日", " ", "~", "a%"}
	long := func() string {
		n := 200 + r.IntN(70)
		switch r.IntN(5) {
		case 0:
			return strings.Repeat("q", n)
		case 1:
			return strings.Repeat("é", n/2) // 2 bytes each
		case 2:
			return strings.Repeat("日", n/3)
		case 3:
			return strings.Repeat("%", n/3) // 3 bytes each once escaped
		default:
			return strings.Repeat("q", n-3*(n/60)) + strings.Repeat("\x00", n/60)
		}
	}
	var b strings.Builder
	for i, n := 0, r.IntN(8); i < n; i++ {
		if r.IntN(12) == 0 {
			b.WriteString(long())
		} else {
			b.WriteString(atoms[r.IntN(len(atoms))])
		}
	}
	return b.String()
}

// nmTrickySet draws a list of names: some below others (files that are
// also directories, before and after cutting), some differing only past
// a cut, some duplicated when dup.
func nmTrickySet(r *rand.Rand, dup bool) []string {
	var names []string
	for i, n := 0, 1+r.IntN(30); i < n; i++ {
		switch k := r.IntN(6); {
		case k < 2 || len(names) == 0:
			names = append(names, nmTrickyName(r))
		case k == 2: // below an earlier name
			names = append(names, names[r.IntN(len(names))]+"/"+nmTrickyName(r))
		case k == 3: // beside an earlier name
			names = append(names, names[r.IntN(len(names))]+nmTrickyName(r))
		case k == 4: // an earlier name's directory
			p := names[r.IntN(len(names))]
			if j := strings.LastIndexByte(p, '/'); j >= 0 {
				names = append(names, p[:j])
			}
		default: // the same long prefix, cut to the same bytes
			names = append(names, strings.Repeat("z", 240)+nmTrickyName(r))
		}
	}
	if !dup {
		slices.Sort(names)
		names = slices.Compact(names)
	} else if len(names) > 0 {
		names = append(names, names[r.IntN(len(names))])
	}
	r.Shuffle(len(names), func(i, j int) { names[i], names[j] = names[j], names[i] })
	if r.IntN(2) == 0 {
		slices.Sort(names) // as Load leaves them
	}
	return names
}

// TestAssignPathsSameAsBefore: AssignPaths walks names in place (no slice
// of components, no set of directories) and gives every name the path the
// implementation before it gave, byte for byte, on thousands of generated
// sets of tricky names, sorted and not, with duplicates (the same error)
// and deep chains.
func TestAssignPathsSameAsBefore(t *testing.T) {
	r := rand.New(rand.NewPCG(20, 2000))
	for round := 0; round < 4000; round++ {
		nmSameAsBefore(t, nmTrickySet(r, round%8 == 7))
	}
	// Deep chains, and the files that are their directories.
	chain := strings.Repeat("a/", 500)
	for _, names := range [][]string{
		{chain + "x", chain[:len(chain)-1], chain + "x/y", "a"},
		{chain + strings.Repeat("w", 300), chain + strings.Repeat("w", 300) + "/v", "a/" + chain},
		{strings.Repeat("./", 300), strings.Repeat("../", 300), strings.Repeat("/", 300), "", "/"},
		{"a", "a!", "a/b", "a.", "a0", "a/"},
		{"", "", "/"},
		{},
	} {
		nmSameAsBefore(t, names)
		slices.Sort(names)
		nmSameAsBefore(t, names)
	}
}

// FuzzAssignPathsSameAsBefore holds AssignPaths to the implementation
// before it on any list of names (the first byte separates them;
// duplicates are kept).
func FuzzAssignPathsSameAsBefore(f *testing.F) {
	f.Add([]byte("\na\na/b\n.\n..\n\n/x\na%\n%2E\n\x00\na\n"))
	f.Add([]byte("|b|a/|a|a!|a/c|a/c/d"))
	f.Add([]byte("\n" + strings.Repeat("x", 300) + "\n" + strings.Repeat("x", 300) + "/y\n" + strings.Repeat("%", 90)))
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) == 0 {
			return
		}
		nmSameAsBefore(t, strings.Split(string(data[1:]), string(data[:1])))
	})
}

// TestAssignPathsDeepMemory: paths for 400 names 2,000 components deep
// (1.6 MB of names, the file of issue 20) cost no memory beyond their own
// (none here: a path equal to its name is the name), not sets of their
// 800,000 directories and a slice of every name's components: 207 MB
// allocated before, under 1 KB now. Bytes counted, not time.
func TestAssignPathsDeepMemory(t *testing.T) {
	const n, depth = 400, 2000
	chain := strings.Repeat("/a", depth-1)
	idx := &Index{Tensors: make([]Tensor, n)}
	var names int
	for k := range idx.Tensors {
		idx.Tensors[k].Name = strconv.Itoa(k) + chain
		names += len(idx.Tensors[k].Name)
	}
	slices.SortFunc(idx.Tensors, func(a, b Tensor) int { return strings.Compare(a.Name, b.Name) })
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	err := AssignPaths(idx)
	runtime.ReadMemStats(&after)
	if err != nil {
		t.Fatal(err)
	}
	for _, tn := range idx.Tensors {
		if tn.Path != tn.Name {
			t.Fatalf("%.20q...: path %.20q...", tn.Name, tn.Path)
		}
	}
	alloc := after.TotalAlloc - before.TotalAlloc
	t.Logf("%d names %d deep (%d bytes): AssignPaths allocated %d bytes", n, depth, names, alloc)
	if alloc > uint64(names)/4 {
		t.Errorf("AssignPaths allocated %d bytes for %d bytes of names: over a quarter of them", alloc, names)
	}
}
