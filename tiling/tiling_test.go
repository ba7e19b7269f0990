package tiling

import (
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

// cut splits the box b of a random tiling: along a random dim, at a
// random place, recursively, until depth runs out.
func cut(r *rand.Rand, b Box, depth int, out *[]Box) {
	k := r.IntN(len(b.Shape))
	if depth == 0 || b.Shape[k] < 2 {
		*out = append(*out, b)
		return
	}
	at := 1 + r.Int64N(b.Shape[k]-1)
	lo := Box{slices.Clone(b.Start), slices.Clone(b.Shape)}
	hi := Box{slices.Clone(b.Start), slices.Clone(b.Shape)}
	lo.Shape[k] = at
	hi.Start[k] += at
	hi.Shape[k] -= at
	cut(r, lo, depth-1, out)
	cut(r, hi, depth-1, out)
}

// counts is the brute force: how many boxes hold each element.
func counts(shape []int64, boxes []Box) (each []int, ok bool) {
	n := int64(1)
	for _, s := range shape {
		n *= s
	}
	each = make([]int, n)
	p := make([]int64, len(shape))
	for e := int64(0); e < n; e++ {
		rem := e
		for k := len(shape) - 1; k >= 0; k-- {
			p[k] = rem % shape[k]
			rem /= shape[k]
		}
		for _, b := range boxes {
			if !b.empty() && b.contains(p) {
				each[e]++
			}
		}
	}
	for _, c := range each {
		if c != 1 {
			return each, false
		}
	}
	return each, true
}

// TestCheckAgainstBruteForce: Check accepts exactly the tilings in
// which every element is in one box, on random guillotine tilings of
// 1 to 4 dims and their spoilt copies (a box moved, grown, dropped or
// doubled), and names an element held twice or by none.
func TestCheckAgainstBruteForce(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	good, bad := 0, 0
	for it := 0; it < 3000; it++ {
		d := 1 + r.IntN(4)
		shape := make([]int64, d)
		for k := range shape {
			shape[k] = 1 + r.Int64N(6)
		}
		var boxes []Box
		cut(r, Box{make([]int64, d), slices.Clone(shape)}, r.IntN(8), &boxes)
		if it%2 == 1 && len(boxes) > 0 {
			i := r.IntN(len(boxes))
			b := Box{slices.Clone(boxes[i].Start), slices.Clone(boxes[i].Shape)}
			k := r.IntN(d)
			switch r.IntN(4) {
			case 0: // move
				if b.Start[k] > 0 {
					b.Start[k]--
				} else if b.Start[k]+b.Shape[k] < shape[k] {
					b.Start[k]++
				}
				boxes[i] = b
			case 1: // grow
				if b.Start[k]+b.Shape[k] < shape[k] {
					b.Shape[k]++
				}
				boxes[i] = b
			case 2: // drop
				boxes = slices.Delete(boxes, i, i+1)
			case 3: // double
				boxes = append(boxes, b)
			}
		}
		_, want := counts(shape, boxes)
		err := Check(shape, boxes)
		if (err == nil) != want {
			t.Fatalf("shape %v boxes %v: Check = %v, brute force says tiled = %v", shape, boxes, err, want)
		}
		if err != nil {
			bad++
			if strings.Contains(err.Error(), "near") {
				t.Errorf("shape %v boxes %v: %v: no element named", shape, boxes, err)
			}
		} else {
			good++
		}
		if want {
			ix := NewIndex(boxes)
			each := make([]int64, d)
			n := int64(1)
			for _, s := range shape {
				n *= s
			}
			for e := int64(0); e < n; e++ {
				rem := e
				for k := d - 1; k >= 0; k-- {
					each[k] = rem % shape[k]
					rem /= shape[k]
				}
				i, _ := ix.Find(each)
				if i < 0 || !boxes[i].contains(each) {
					t.Fatalf("shape %v boxes %v: Find(%v) = %d", shape, boxes, each, i)
				}
			}
		}
	}
	if good < 1000 || bad < 500 {
		t.Fatalf("%d tilings, %d not: the generator is off", good, bad)
	}
}

// TestCheckLinear: the tilings of issue 34 (65,536 [1,1] chunks along
// dim 1, and along dim 0; a column in one chunk beside a column in
// 32,768) cost Check a few pieces per box, and Find a few probes per
// element: the pairwise comparison it replaces made n²/2.
func TestCheckLinear(t *testing.T) {
	const n = 1 << 16
	for _, c := range []struct {
		name  string
		shape []int64
		boxes func() []Box
	}{
		{"dim 1", []int64{1, n}, func() []Box {
			var bs []Box
			for i := int64(0); i < n; i++ {
				bs = append(bs, Box{[]int64{0, i}, []int64{1, 1}})
			}
			return bs
		}},
		{"dim 0", []int64{n, 1}, func() []Box {
			var bs []Box
			for i := int64(0); i < n; i++ {
				bs = append(bs, Box{[]int64{i, 0}, []int64{1, 1}})
			}
			return bs
		}},
		{"column beside a split column", []int64{n / 2, 2}, func() []Box {
			bs := []Box{{[]int64{0, 0}, []int64{n / 2, 1}}}
			for i := int64(0); i < n/2; i++ {
				bs = append(bs, Box{[]int64{i, 1}, []int64{1, 1}})
			}
			return bs
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			boxes := c.boxes()
			if err := Check(c.shape, boxes); err != nil {
				t.Fatal(err)
			}
			// The work Check did: the budget it was given less what is left.
			used := checkWork(c.shape, boxes)
			if used > 4*int64(len(boxes)) {
				t.Errorf("Check looked at %d pieces for %d boxes", used, len(boxes))
			}
			ix := NewIndex(boxes)
			p := make([]int64, 2)
			total := 0
			for p[0] = 0; p[0] < c.shape[0]; p[0]++ {
				for p[1] = 0; p[1] < c.shape[1]; p[1]++ {
					i, probes := ix.Find(p)
					if i < 0 || !boxes[i].contains(p) {
						t.Fatalf("Find(%v) = %d", p, i)
					}
					total += probes
				}
			}
			if total > 40*n {
				t.Errorf("Find probed %d boxes for %d elements", total, n)
			}
			// One overlap among them is found and named.
			boxes = append(boxes, Box{slices.Clone(boxes[len(boxes)-1].Start), []int64{1, 1}})
			if err := Check(c.shape, boxes); err == nil || !strings.Contains(err.Error(), "overlap (both hold the element") {
				t.Fatalf("a doubled chunk: %v", err)
			}
		})
	}
}

// checkWork runs Check's verification and returns the pieces it looked
// at.
func checkWork(shape []int64, boxes []Box) int64 {
	c := &checker{shape: shape, boxes: boxes, path: make([]int64, len(shape)), jump: make([]bool, len(shape))}
	var terms []term
	for i := range boxes {
		terms = append(terms, term{box: i, c: 1})
	}
	const budget = 1 << 40
	c.work = budget
	c.verify(terms, 0, 1)
	return budget - c.work
}

// TestCheckRefuses: the dims and bounds of each box are checked.
func TestCheckRefuses(t *testing.T) {
	for _, c := range []struct {
		boxes []Box
		err   string
	}{
		{[]Box{{[]int64{0}, []int64{4, 2}}}, "dims"},
		{[]Box{{[]int64{0, 1}, []int64{4, 2}}}, "outside the shape"},
		{[]Box{{[]int64{0, 0}, []int64{4, 1}}}, "no chunk holds the element at [0 1]"},
		{[]Box{{[]int64{0, 0}, []int64{4, 2}}, {[]int64{1, 1}, []int64{1, 1}}}, "the chunks at [0 0] and [1 1] overlap (both hold the element at [1 1])"},
	} {
		err := Check([]int64{4, 2}, c.boxes)
		if err == nil || !strings.Contains(err.Error(), c.err) {
			t.Errorf("%v: %v, want %q", c.boxes, err, c.err)
		}
	}
	if err := Check([]int64{0, 3}, []Box{{[]int64{0, 0}, []int64{0, 3}}}); err != nil {
		t.Errorf("empty: %v", err)
	}
}
