package dcpwrite

import (
	"fmt"
	"os"
	"path/filepath"
)

// Reformulated writes into dir a DCP as Megatron's torch_dist saves a
// tensor its distributed optimizer flattened
// (megatron/core/dist_checkpointing/strategies/resharding.py): "w", of
// original shape orig with element i (row-major) equal to i, cut into
// grid local chunks, is saved in the shape grid + [elements of a local
// chunk], each cell a local chunk flattened row-major, with
// mcore_data's nd_reformulated_orig_global_shape = orig. Each saved
// chunk holds run cells along the grid's last dimension; with pieces >
// 1, each cell is saved in that many chunks along the flattened
// dimension (a cell split between ranks).
func Reformulated(dir string, orig, grid []int64, run, pieces int64) error {
	d := len(orig)
	if len(grid) != d || run < 1 || pieces < 1 || grid[d-1]%run != 0 || (pieces > 1 && run != 1) {
		return fmt.Errorf("dcpwrite: Reformulated: bad grid %v, run %d, pieces %d for %v", grid, run, pieces, orig)
	}
	local := make([]int64, d)
	ce := int64(1)
	for i := range d {
		local[i] = orig[i] / grid[i]
		ce *= local[i]
	}
	if ce%pieces != 0 {
		return fmt.Errorf("dcpwrite: Reformulated: %d elements in %d pieces", ce, pieces)
	}
	saved := append(append([]int64{}, grid...), ce)
	strides := make([]int64, d) // of orig, in elements
	s := int64(1)
	for i := d - 1; i >= 0; i-- {
		strides[i] = s
		s *= orig[i]
	}
	// cell returns the elements of the local chunk at grid position g.
	cell := func(g []int64) []float32 {
		out := make([]float32, 0, ce)
		l := make([]int64, d)
		for range ce {
			var flat int64
			for i := range d {
				flat += (g[i]*local[i] + l[i]) * strides[i]
			}
			out = append(out, float32(flat))
			for i := d - 1; i >= 0; i-- {
				if l[i]++; l[i] < local[i] {
					break
				}
				l[i] = 0
			}
		}
		return out
	}
	f := &file{name: "__0_0.distcp"}
	t := Tensor{FQN: "w", DType: "float32", Size: saved}
	g := make([]int64, d)
	for {
		var vals []float32
		for k := range run {
			gk := append([]int64{}, g...)
			gk[d-1] += k
			vals = append(vals, cell(gk)...)
		}
		piece := ce / pieces
		for p := range pieces {
			size := make([]int64, d+1)
			for i := range size {
				size[i] = 1
			}
			size[d-1], size[d] = run, piece
			if pieces == 1 {
				size[d] = ce
			}
			off := append(append([]int64{}, g...), p*piece)
			part := vals
			if pieces > 1 {
				part = vals[p*piece : (p+1)*piece]
			}
			it, err := f.tensor(size, part, "")
			if err != nil {
				return err
			}
			t.Chunks = append(t.Chunks, Chunk{off, size, it})
		}
		// The next chunk's first cell, row-major, run cells at a time
		// along the last dimension.
		g[d-1] += run
		i := d - 1
		for ; i > 0 && g[i] >= grid[i]; i-- {
			g[i] = 0
			g[i-1]++
		}
		if g[0] >= grid[0] {
			break
		}
	}
	c := &Checkpoint{Tensors: []Tensor{t}, MCore: map[string][]int64{"w": orig}}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, f.name), f.buf.Bytes(), 0o644); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, ".metadata"), c.Metadata(), 0o644)
}
