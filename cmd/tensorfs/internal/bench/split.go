package bench

import (
	"fmt"

	"github.com/lazyweights/tensorfs/view"
)

// splitParts is how many parts the split phase cuts each tensor into: one
// per GPU of an 8-GPU node.
const splitParts = 8

// splitPhase reads every tensor of rank 2 or more whole, then all its
// splitParts parts along dim 0, then along dim 1, through the mount's
// .split/ tree, each pass from the page cache (the backing file warmed
// first), and adds a row for each dim: the parts' throughput against the
// whole tensors'. Reading all parts costs ≤ 1.2× the whole along dim 0
// (ratio ≥ 0.83) and ≤ 2× along dim 1 (ratio ≥ 0.5).
func (b *harness) splitPhase(fds []int, s *server, tensors []tensor, row func(name, label, baseline string, base, m measurement, target float64)) error {
	var ts []tensor
	for _, t := range tensors {
		if len(t.shape) >= 2 {
			ts = append(ts, t)
		}
	}
	if len(ts) == 0 {
		b.logf("no tensor of rank 2 or more: no split to measure")
		return nil
	}
	if _, err := warm(fds); err != nil {
		return fmt.Errorf("bench: %v", err)
	}
	whole, err := b.measure(s, len(ts), b.fileJob(s.mnt, "", ts))
	if err != nil {
		return err
	}
	for dim, target := range []float64{1 / 1.2, 0.5} {
		var parts []tensor
		for _, t := range ts {
			for k := range splitParts {
				sp := view.Split{Dim: dim, Parts: splitParts, Part: k}
				_, size, _, err := view.SliceExtent(t.path, t.shape, t.dtype, sp)
				if err != nil {
					return fmt.Errorf("bench: %s: %v", t.path, err)
				}
				p := t
				p.path = fmt.Sprintf(".split/%d/%d/%d/%s", dim, splitParts, k, t.path)
				p.size = size
				parts = append(parts, p)
			}
		}
		if _, err := warm(fds); err != nil {
			return fmt.Errorf("bench: %v", err)
		}
		m, err := b.measure(s, len(parts), b.fileJob(s.mnt, "", parts))
		if err != nil {
			return err
		}
		row(fmt.Sprintf("split_dim%d", dim), fmt.Sprintf("all %d parts along dim %d", splitParts, dim), "whole tensors", whole, m, target)
	}
	return nil
}
