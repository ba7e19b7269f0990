package fs

import (
	"fmt"
	"strings"
	"testing"

	"github.com/lazyweights/tensorfs/dtype"
	"github.com/lazyweights/tensorfs/index"
)

// deepIndex returns an index of n tensors whose names are depth
// components deep: "a/a/.../a/k" (k the tensor's number) when shared,
// all in one chain of directories, else "k/a/.../a", n chains.
func deepIndex(n, depth int, shared bool) (*index.Index, *memSource) {
	idx := &index.Index{Format: "safetensors", Sources: []string{"/ckpt/deep.safetensors"}}
	chain := strings.Repeat("a/", depth-1)
	for i := 0; i < n; i++ {
		name := fmt.Sprintf("%s%d", chain, i)
		if !shared {
			name = fmt.Sprintf("%d/%s", i, chain[:len(chain)-1])
		}
		// Path set here: index.AssignPaths has its own cost.
		idx.Tensors = append(idx.Tensors, index.Tensor{Name: name, Path: name, DType: dtype.BF16, Shape: []int64{2}, Offset: int64(i) * 4, Size: 4})
	}
	sortTensors(idx)
	return idx, &memSource{name: idx.Sources[0], data: make([]byte, n*4)}
}

// TestDeepNames builds trees of names 32,767 components deep in time and
// memory linear in their bytes. Before, each directory's path was built
// again below it and every prefix hashed, per tensor: time and memory
// grew with depth squared, and the 40 names sharing one chain took
// minutes and gigabytes.
func TestDeepNames(t *testing.T) {
	const depth = 32767
	cases := []struct {
		n      int
		shared bool
	}{
		{40, true}, // 40 tensors at the bottom of one chain
		{2, false}, // two chains
	}
	if raceEnabled { // ten times slower: the shape, not the size
		cases = cases[:1]
		cases[0].n = 4
	}
	for _, tc := range cases {
		idx, src := deepIndex(tc.n, depth, tc.shared)
		r := newRoot(t, idx, src, Options{})
		for _, dir := range []string{"", ".f32/", ".npy/"} {
			for i := range idx.Tensors {
				p := dir + idx.Tensors[i].Path
				if dir == ".npy/" {
					p += npySuffix
				}
				if e := r.lookupPath(p); e == nil || e.isDir() || e.file.t != &idx.Tensors[i] {
					t.Fatalf("%s%d: not found", dir, i)
				}
			}
		}
		doc := parseIndex(t, r)
		if len(doc.Tensors) != tc.n || doc.Tensors[0].Path != idx.Tensors[0].Path {
			t.Errorf("index.json: %d tensors", len(doc.Tensors))
		}
		// Six trees (stored, four views, .npy), each of its chains of
		// depth-1 directories and the files, plus the top level's few.
		chains := tc.n
		if tc.shared {
			chains = 1
		}
		if want := uint64(6 * (chains*(depth-1) + tc.n)); r.Nodes() < want || r.Nodes() > want+30 {
			t.Errorf("%d nodes, want about %d", r.Nodes(), want)
		}
	}
}
