package fs

import (
	"fmt"
	"slices"
	"testing"

	"github.com/hanwen/go-fuse/v2/fuse"

	"github.com/lazyweights/tensorfs/dtype"
)

// TestViewsShareTree: every view shows the one path tree through its
// node IDs (place<<32 | slot+1): a node is the same slot in every view
// and a different inode in each; a directory with nothing a view holds
// below it is absent from that view (listed and looked up); .npy/ names
// its files <name>.npy, or <name>.npy% beside a directory <name>.npy;
// listings resume at every offset they gave, and every listed name looks
// up to the node listed.
func TestViewsShareTree(t *testing.T) {
	idx, src := fixture(t, []spec{
		{"ints/a", dtype.I64, []int64{3}},
		{"ints/deep/b", dtype.I32, []int64{2}},
		{"mixed/i", dtype.U8, []int64{4}},
		{"mixed/w", dtype.F16, []int64{2, 2}},
		{"q", dtype.F32, []int64{2}},
		{"q.npy/z", dtype.BF16, []int64{2}},
		{"w", dtype.F32, []int64{4}},
	})
	for _, opts := range []Options{{}, {View: dtype.F16}} {
		r := newRoot(t, idx, src, opts)
		w, w16 := r.lookupPath("w"), r.lookupPath(".f16/w")
		if w == nil || w16 == nil || w.id == w16.id || uint32(w.id) != uint32(w16.id) || w.id>>32 != uint64(placeTop) || w16.id>>32 != uint64(placeF16) {
			t.Fatalf("w: node IDs %#x and %#x, want one slot in two places", w.id, w16.id)
		}
		for p, want := range map[string]bool{
			".f16/ints": false, ".f16/ints/deep": false, ".f16/mixed": true, ".f16/mixed/i": false, ".f16/mixed/w": true,
			".npy/ints/deep/b.npy": true, ".npy/q.npy%": true, ".npy/q.npy": true, ".npy/q.npy/z.npy": true, ".npy/w.npy": true,
			".npy/w": false, ".npy/q.npy%/x": false, ".npy/w.npy%": false, ".npy/mixed/w.npy": true, ".npy/mixed/w": false,
			".native/ints/a": opts.View != dtype.Invalid, "ints": opts.View == dtype.Invalid, "mixed/w": true,
		} {
			if e := r.lookupPath(p); (e != nil) != want {
				t.Errorf("view %v: %s: found %v, want %v", opts.View, p, e != nil, want)
			}
		}
		if e := r.lookupPath(".npy/q.npy"); e == nil || !e.isDir() {
			t.Errorf(".npy/q.npy is not the directory")
		}
		fs := newRawFS(r)
		for _, dir := range []string{"", ".f16", ".f16/mixed", ".npy", ".npy/ints", ".f32", ".bf16"} {
			d := r.lookupPath(dir)
			if d == nil {
				t.Fatalf("%q missing", dir)
			}
			type item struct {
				name string
				id   uint64
				next uint64
			}
			list := func(off uint64) []item {
				var out []item
				r.listing(d, off, func(c *node, next uint64) bool {
					out = append(out, item{c.name, c.id, next})
					return true
				})
				return out
			}
			all := list(0)
			if dir == ".f16" && slices.ContainsFunc(all, func(it item) bool { return it.name == "ints" }) {
				t.Errorf(".f16 lists ints/, which holds no F16 tensor")
			}
			for i, it := range all {
				if rest := list(it.next); !slices.Equal(rest, all[i+1:]) {
					t.Errorf("%s: listing resumed at %d: %v, want %v", dir, it.next, rest, all[i+1:])
				}
				var out fuse.EntryOut
				if st := fs.Lookup(nil, &fuse.InHeader{NodeId: d.id}, it.name, &out); st != fuse.OK || out.NodeId != it.id {
					t.Errorf("%s/%s: lookup gives %#x (%v), listed %#x", dir, it.name, out.NodeId, st, it.id)
				}
				if n, ok := r.resolve(it.id); !ok || n.isDir() != (out.Mode&dirMode == dirMode) {
					t.Errorf("%s/%s: node %#x does not resolve", dir, it.name, it.id)
				}
			}
			var a fuse.Attr
			r.fillAttr(d, &a)
			dirs := 0
			for _, it := range all {
				if n, _ := r.resolve(it.id); n.isDir() {
					dirs++
				}
			}
			if a.Nlink != uint32(2+dirs) {
				t.Errorf("%s: %d links for %d subdirectories", dir, a.Nlink, dirs)
			}
		}
		if got := fmt.Sprint(namesOf(r.lookupPath(".npy"))); got != "[.split ints mixed q.npy% q.npy w.npy]" {
			t.Errorf(".npy lists %s", got)
		}
	}
}
