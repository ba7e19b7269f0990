package dcp

import (
	"fmt"

	"github.com/lazyweights/tensorfs/index"
)

// Megatron's torch_dist saves a tensor that its distributed optimizer
// flattened (a ShardedTensor with a flattened_range) in a reformulated
// shape: global shape [X, Y, Z] cut into local chunks [x, y, z] is saved
// as [X/x, Y/y, Z/z, x·y·z], one cell per local chunk, the chunk's
// elements flattened row-major along the last dimension
// (megatron/core/dist_checkpointing/strategies/resharding.py; its
// loader views each saved cell as [x, y, z] and places it at offset
// cell·[x, y, z]). Where every saved chunk holds whole cells, each cell
// is one contiguous tile of the original tensor, and tensorfs serves the
// tensor in the shape the model holds (mcore_data's
// nd_reformulated_orig_global_shape) as tiles. A chunk that splits the
// flattened dimension (a cell saved by several ranks) makes a cell a
// run of rows, not a box: such a tensor stays listed in not_read, with
// why.

// unreformulate returns the tiles of the tensor of original shape orig
// that Megatron saved in shape saved as chunks (whose elements are
// elem bytes), or why it cannot.
func unreformulate(saved, orig []int64, elem int64, chunks []index.Chunk) ([]index.Chunk, string) {
	prefix := fmt.Sprintf("saved by Megatron in the reformulated shape %v of %v (mcore_data nd_reformulated_orig_global_shape)", saved, orig)
	d := len(orig)
	if len(saved) != d+1 {
		return nil, fmt.Sprintf("%s, which is not a grid of the original's dimensions and one flattened dimension: not read", prefix)
	}
	local := make([]int64, d)
	cellElems, cells := int64(1), int64(1)
	for i := range d {
		if saved[i] <= 0 || orig[i]%saved[i] != 0 {
			return nil, fmt.Sprintf("%s: dimension %d (%d) is not cut into %d equal chunks: not read", prefix, i, orig[i], saved[i])
		}
		local[i] = orig[i] / saved[i]
		cellElems *= local[i] // ≤ the saved tensor's last dimension: checked below
		cells *= saved[i]
		if cellElems > saved[d] || cells > MaxChunks {
			break
		}
	}
	if cellElems != saved[d] {
		return nil, fmt.Sprintf("%s: a chunk of the original is %v, %d elements, not the %d of the flattened dimension: not read", prefix, local, cellElems, saved[d])
	}
	if cells > MaxChunks {
		return nil, fmt.Sprintf("%s: more than %d chunks of the original: not read", prefix, MaxChunks)
	}
	out := make([]index.Chunk, 0, cells)
	cellBytes := cellElems * elem
	g := make([]int64, d)
	for _, c := range chunks {
		if c.Start[d] != 0 || c.Shape[d] != saved[d] {
			return nil, fmt.Sprintf("%s: its chunk at %v holds elements [%d, %d) of a cell's %d (a cell saved in pieces by several ranks), so a cell is not a box of the original: not read", prefix, c.Start, c.Start[d], c.Start[d]+c.Shape[d], saved[d])
		}
		n, _ := index.Elements(c.Shape[:d])
		if n == 0 || cellBytes == 0 {
			continue
		}
		clear(g)
		for k := range n {
			start := make([]int64, d)
			for i := range d {
				start[i] = (c.Start[i] + g[i]) * local[i]
			}
			out = append(out, index.Chunk{Source: c.Source, Offset: c.Offset + k*cellBytes, Start: start, Shape: local})
			for i := d - 1; i >= 0; i-- { // the next cell of the chunk, row-major
				if g[i]++; g[i] < c.Shape[i] {
					break
				}
				g[i] = 0
			}
		}
	}
	return out, ""
}
