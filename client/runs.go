package client

import (
	"cmp"
	"slices"

	"github.com/lazyweights/tensorfs/backing"
	"github.com/lazyweights/tensorfs/index"
)

// runs cuts sel, Stream's tensors, into runs for its workers when they
// are read from sources that fetch ahead (backing.Planner: a remote
// one): each source's tensors in the order of their bytes, cut into
// runs of about equal bytes, about Parallel in all (no more than the
// sources serve at once with a request each: PlanLimit), each announced to
// its source as one plan as its worker starts it, so that its reads cost
// the store one request (remote: one GET) rather than one per tensor.
// It returns nil, Stream then taking the tensors one at a time in
// index order, unless every tensor is delivered as stored from one
// range of such a source, whole (no Split), with no two sharing bytes;
// and with Parallel 1 unless the runs keep index order (Begin's order).
// chunk is the length of every pool buffer (0: they differ). workers is
// how many runs to read at once: Parallel, or PlanLimit when less (a
// source of several files may have a few more runs than that).
func (c *Checkpoint) runs(sel []TensorInfo, opts StreamOptions, chunk int64) (runs [][]TensorInfo, workers int) {
	if opts.Split != nil || c.mount != "" || c.idx == nil || c.files == nil || chunk <= 0 {
		return nil, 0
	}
	bySrc := map[int][]TensorInfo{}
	var srcs []int // in the order of their first tensor
	var total int64
	limit := opts.Parallel // runs read at once with a request each
	for _, t := range sel {
		if t.Index < 0 || t.Index >= len(c.idx.Tensors) {
			return nil, 0
		}
		it := &c.idx.Tensors[t.Index]
		to := opts.DType
		if to != AsStored && !c.convertible(t, to) {
			to = AsStored
		}
		if !native(t, to) || !it.Contiguous() || it.Source < 0 || it.Source >= len(c.files) {
			return nil, 0
		}
		p, ok := c.files[it.Source].(backing.Planner)
		if !ok {
			return nil, 0
		}
		limit = min(limit, max(1, p.PlanLimit()))
		if _, seen := bySrc[it.Source]; !seen {
			srcs = append(srcs, it.Source)
		}
		bySrc[it.Source] = append(bySrc[it.Source], t)
		total += it.Size
	}
	target := max(1, total/int64(limit))
	for _, s := range srcs {
		ts := bySrc[s]
		stored := func(t TensorInfo) *index.Tensor { return &c.idx.Tensors[t.Index] }
		slices.SortStableFunc(ts, func(a, b TensorInfo) int { return cmp.Compare(stored(a).Offset, stored(b).Offset) })
		var bytes int64
		for i, t := range ts {
			if i > 0 && stored(t).Offset < stored(ts[i-1]).Offset+stored(ts[i-1]).Size {
				return nil, 0 // two tensors share bytes (tied weights)
			}
			bytes += stored(t).Size
		}
		// k runs of this source's bytes; a tensor goes to the run its
		// middle byte falls in.
		k := max(1, int((bytes+target/2)/target))
		first := len(runs)
		runs = append(runs, make([][]TensorInfo, k)...)
		var cum int64
		for _, t := range ts {
			n := stored(t).Size
			j := 0
			if bytes > 0 {
				j = min(k-1, int(float64(cum+n/2)/float64(bytes)*float64(k)))
			}
			runs[first+j] = append(runs[first+j], t)
			cum += n
		}
	}
	runs = slices.DeleteFunc(runs, func(r []TensorInfo) bool { return len(r) == 0 })
	if opts.Parallel == 1 {
		i := 0
		for _, r := range runs {
			for _, t := range r {
				if t.Index != sel[i].Index {
					return nil, 0
				}
				i++
			}
		}
	}
	return runs, limit
}

// plan announces run, about to be read tensor after tensor in reads of
// chunk bytes, to its source (runs made it: every tensor a range of one
// backing.Planner).
func (c *Checkpoint) plan(run []TensorInfo, chunk int64) {
	it := &c.idx.Tensors[run[0].Index]
	ranges := make([]backing.Range, len(run))
	for i, t := range run {
		it := &c.idx.Tensors[t.Index]
		ranges[i] = backing.Range{Off: it.Offset, Len: it.Size}
	}
	c.files[it.Source].(backing.Planner).PrefetchPlan(ranges, chunk)
}
