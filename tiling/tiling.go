// Package tiling is the geometry of an array tiled from boxes, as a
// distributed checkpoint saves a tensor sharded over ranks: whether the
// boxes cover every element exactly once (Check), and which box holds an
// element (Index). Both cost O(n log n) for n boxes along any dimension,
// never a comparison of every pair. It is a leaf: index/dcp and backing
// import it; it imports nothing of tensorfs.
package tiling

import (
	"cmp"
	"fmt"
	"slices"
	"sort"
)

// Box is the box [Start[k], Start[k]+Shape[k]) along each dim k of an
// array.
type Box struct {
	Start, Shape []int64
}

// empty reports whether b holds no element.
func (b Box) empty() bool {
	for _, s := range b.Shape {
		if s == 0 {
			return true
		}
	}
	return false
}

// contains reports whether b holds the element at p.
func (b Box) contains(p []int64) bool {
	for k, x := range p {
		if x < b.Start[k] || x-b.Start[k] >= b.Shape[k] {
			return false
		}
	}
	return true
}

// MaxWork bounds the pieces Check looks at, per box: a tiling torch
// writes (a grid of shards, uneven or not, shards along several dims)
// costs a few per box; only a tiling cut so irregularly that no piece of
// one box meets another's along any dim costs more.
const MaxWork = 64

// Check reports whether the non-empty boxes cover the array of the given
// shape exactly: every element in one box, none in two, none outside.
// Each box must have len(shape) dims and lie inside the array (checked).
//
// It compares the sum of the boxes' indicator functions with the
// array's, one dim at a time: along dim k the sum is a step function
// whose value at 0 and whose jumps (where a box starts or ends) are sums
// of boxes of one dim fewer, checked the same way after the pieces that
// cancel (a box that ends where an identical one starts) are merged. A
// grid of n boxes costs O(n log n); the error names an element held
// twice (and the two boxes) or held by none.
func Check(shape []int64, boxes []Box) error {
	c := &checker{shape: shape, boxes: boxes}
	var terms []term
	for i, b := range boxes {
		if len(b.Start) != len(shape) || len(b.Shape) != len(shape) {
			return fmt.Errorf("the chunk at %v has %d/%d dims for %d", b.Start, len(b.Start), len(b.Shape), len(shape))
		}
		for k := range shape {
			if b.Start[k] < 0 || b.Shape[k] < 0 || b.Start[k] > shape[k] || b.Shape[k] > shape[k]-b.Start[k] {
				return fmt.Errorf("the chunk at %v of sizes %v is outside the shape %v", b.Start, b.Shape, shape)
			}
		}
		if !b.empty() {
			terms = append(terms, term{box: i, c: 1})
		}
	}
	for _, s := range shape {
		if s == 0 {
			return nil // no element; the boxes inside it are empty
		}
	}
	c.work = int64(MaxWork)*int64(len(terms)) + 1<<10
	c.path = make([]int64, len(shape))
	c.jump = make([]bool, len(shape))
	if c.verify(terms, 0, 1) {
		return nil
	}
	if c.over {
		return fmt.Errorf("the %d chunks tile the tensor too irregularly to check (more than %d pieces)", len(terms), int64(MaxWork)*int64(len(terms))+1<<10)
	}
	return c.witness()
}

// term is a box (of the dims from the current one on) with a
// coefficient: the sum of boxes that cancel or add up.
type term struct {
	box int
	c   int64
}

// event is where a term starts (c > 0 for a box) or ends along a dim.
type event struct {
	x int64
	t term
}

type checker struct {
	shape []int64
	boxes []Box
	work  int64
	over  bool    // the work ran out
	path  []int64 // the coordinates of the piece being checked
	jump  []bool  // whether path[k] is a jump (else the value at 0)
}

// verify checks that the sum of the terms, as boxes of dims k..., is
// want times the array's box of those dims.
func (c *checker) verify(terms []term, k int, want int64) bool {
	if k == len(c.shape) {
		var s int64
		for _, t := range terms {
			s += t.c
		}
		return s == want
	}
	c.work -= int64(len(terms))
	if c.work < 0 {
		c.over = true
		return false
	}
	evs := make([]event, 0, 2*len(terms))
	for _, t := range terms {
		b := c.boxes[t.box]
		evs = append(evs, event{b.Start[k], t})
		if end := b.Start[k] + b.Shape[k]; end < c.shape[k] {
			evs = append(evs, event{end, term{t.box, -t.c}})
		}
	}
	slices.SortFunc(evs, func(a, b event) int {
		if r := cmp.Compare(a.x, b.x); r != 0 {
			return r
		}
		return c.compareFrom(a.t.box, b.t.box, k+1)
	})
	if want != 0 && (len(evs) == 0 || evs[0].x != 0) {
		c.path[k], c.jump[k] = 0, false
		return c.verify(nil, k+1, want)
	}
	var group []term
	for i := 0; i < len(evs); {
		x := evs[i].x
		group = group[:0]
		for ; i < len(evs) && evs[i].x == x; i++ {
			t := evs[i].t
			// Equal boxes of the dims after k are adjacent: merge them.
			if n := len(group); n > 0 && c.compareFrom(group[n-1].box, t.box, k+1) == 0 {
				group[n-1].c += t.c
				if group[n-1].c == 0 {
					group = group[:n-1]
				}
				continue
			}
			group = append(group, t)
		}
		w := int64(0)
		if x == 0 {
			w = want
		}
		if len(group) == 0 && w == 0 {
			continue
		}
		c.path[k], c.jump[k] = x, x != 0
		if !c.verify(slices.Clone(group), k+1, w) {
			return false
		}
	}
	return true
}

// compareFrom orders boxes a and b by their extents along dims from k on.
func (c *checker) compareFrom(a, b, k int) int {
	ba, bb := c.boxes[a], c.boxes[b]
	for j := k; j < len(c.shape); j++ {
		if r := cmp.Compare(ba.Start[j], bb.Start[j]); r != 0 {
			return r
		}
		if r := cmp.Compare(ba.Shape[j], bb.Shape[j]); r != 0 {
			return r
		}
	}
	return 0
}

// maxWitness bounds the element-in-box tests of witness.
const maxWitness = 1 << 24

// witness explains a failed check: the sums differ at path, so the
// count of boxes holding an element differs from 1 at one of the
// corners path - e for e over the dims that were jumps. It names the
// first such element and what holds it.
func (c *checker) witness() error {
	var dims []int
	for k, j := range c.jump {
		if j {
			dims = append(dims, k)
		}
	}
	if len(dims) < 31 && int64(len(c.boxes))<<len(dims) <= maxWitness {
		p := make([]int64, len(c.shape))
		for e := 0; e < 1<<len(dims); e++ {
			copy(p, c.path)
			for i, k := range dims {
				if e&(1<<i) != 0 {
					p[k]--
				}
			}
			var holders []int
			for i, b := range c.boxes {
				if !b.empty() && b.contains(p) {
					holders = append(holders, i)
					if len(holders) == 2 {
						break
					}
				}
			}
			switch len(holders) {
			case 0:
				return fmt.Errorf("no chunk holds the element at %v: the chunks leave holes or overlap", p)
			case 2:
				return fmt.Errorf("the chunks at %v and %v overlap (both hold the element at %v)", c.boxes[holders[0]].Start, c.boxes[holders[1]].Start, p)
			}
		}
	}
	return fmt.Errorf("the chunks do not tile the tensor: they leave holes or overlap near the element at %v", c.path)
}

// Index finds the box that holds an element, in O(log n) steps per dim
// for n boxes: along each dim but the last, a segment tree of the
// boxes' extents (each box at O(log n) nodes), whose nodes index the
// boxes they hold along the next dim; along the last, the boxes sorted
// by start (they are disjoint there). The boxes must be disjoint
// (Check); empty ones are left out.
type Index struct {
	boxes []Box
	root  *level
}

// level indexes boxes along dim k.
type level struct {
	k      int
	ids    []int32 // the last dim: sorted by start; a small set: any order
	linear bool    // ids are searched one by one
	coords []int64 // the boxes' starts and ends along k, sorted, distinct
	size   int     // leaves of the tree (a power of two)
	nodes  []*level
}

// smallLevel is the count of boxes searched one by one.
const smallLevel = 8

// NewIndex indexes the non-empty boxes (disjoint, of the same dims).
func NewIndex(boxes []Box) *Index {
	ix := &Index{boxes: boxes}
	var ids []int32
	dims := 0
	for i, b := range boxes {
		if !b.empty() {
			ids = append(ids, int32(i))
			dims = len(b.Start)
		}
	}
	if len(ids) == 0 {
		return ix
	}
	b := &builder{ix: ix, dims: dims, left: int64(MaxWork)*int64(len(ids)) + 1<<10}
	ix.root = b.build(ids, 0)
	return ix
}

type builder struct {
	ix   *Index
	dims int
	left int64 // entries the tree may still hold: past them, levels are searched one by one
}

func (b *builder) build(ids []int32, k int) *level {
	boxes := b.ix.boxes
	if len(ids) <= smallLevel || k >= b.dims || b.left < int64(len(ids)) {
		return &level{k: k, ids: ids, linear: true}
	}
	if k == b.dims-1 {
		b.left -= int64(len(ids))
		slices.SortFunc(ids, func(x, y int32) int { return cmp.Compare(boxes[x].Start[k], boxes[y].Start[k]) })
		return &level{k: k, ids: ids}
	}
	l := &level{k: k}
	l.coords = make([]int64, 0, 2*len(ids))
	for _, i := range ids {
		l.coords = append(l.coords, boxes[i].Start[k], boxes[i].Start[k]+boxes[i].Shape[k])
	}
	slices.Sort(l.coords)
	l.coords = slices.Compact(l.coords)
	l.size = 1
	for l.size < len(l.coords)-1 {
		l.size *= 2
	}
	lists := make([][]int32, 2*l.size)
	entries := int64(0)
	for _, i := range ids {
		if entries > b.left {
			return &level{k: k, ids: ids, linear: true}
		}
		lo, _ := slices.BinarySearch(l.coords, boxes[i].Start[k])
		hi, _ := slices.BinarySearch(l.coords, boxes[i].Start[k]+boxes[i].Shape[k])
		// The canonical nodes of leaves [lo, hi).
		for lo, hi = lo+l.size, hi+l.size; lo < hi; lo, hi = lo/2, hi/2 {
			if lo&1 == 1 {
				lists[lo] = append(lists[lo], i)
				lo++
				entries++
			}
			if hi&1 == 1 {
				hi--
				lists[hi] = append(lists[hi], i)
				entries++
			}
		}
	}
	b.left -= entries
	l.nodes = make([]*level, 2*l.size)
	for n, ids := range lists {
		if len(ids) > 0 {
			l.nodes[n] = b.build(ids, k+1)
		}
	}
	return l
}

// Find returns the index (in the boxes given to NewIndex) of the box
// holding the element at p, or -1, and how many boxes it tested (at
// most a few per dim and level of the tree, whatever the count of
// boxes: the tests hold reads to it).
func (ix *Index) Find(p []int64) (box, probes int) {
	if ix.root == nil {
		return -1, 0
	}
	return ix.root.find(ix.boxes, p)
}

func (l *level) find(boxes []Box, p []int64) (box, probes int) {
	if l.linear {
		for n, i := range l.ids {
			if boxes[i].contains(p) {
				return int(i), n + 1
			}
		}
		return -1, len(l.ids)
	}
	x := p[l.k]
	if l.nodes == nil { // the last dim
		j := sort.Search(len(l.ids), func(j int) bool { return boxes[l.ids[j]].Start[l.k] > x }) - 1
		if j >= 0 && boxes[l.ids[j]].contains(p) {
			return int(l.ids[j]), 1
		}
		return -1, 1
	}
	leaf := sort.Search(len(l.coords), func(j int) bool { return l.coords[j] > x }) - 1
	if leaf < 0 || leaf >= len(l.coords)-1 {
		return -1, 0
	}
	for n := leaf + l.size; n >= 1; n /= 2 {
		if sub := l.nodes[n]; sub != nil {
			i, pr := sub.find(boxes, p)
			probes += pr
			if i >= 0 {
				return i, probes
			}
		}
	}
	return -1, probes
}
