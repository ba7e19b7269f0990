package fs

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/lazyweights/tensorfs/dtype"
	"github.com/lazyweights/tensorfs/view"
)

// xattr returns e's attribute called name, or "".
func xattr(r *Root, e *node, name string) string {
	for _, kv := range r.xattrs(e) {
		if kv[0] == name {
			return kv[1]
		}
	}
	return ""
}

// TestSplitTree: .split/<dim>/<parts>/<part>/ in every place serves each
// tensor's part as view.NewSlice (NewNPYSlice in .npy/) does, at every
// read size, with the part's shape and split in its xattrs; node IDs
// name the same nodes again; a dimension no tensor has, parts out of
// range, non-canonical numbers and a tensor without the dimension are
// absent; .split/ lists the dimensions, and the levels above a part
// nothing.
func TestSplitTree(t *testing.T) {
	r, src := lazyFixture(t, Options{})
	places := []struct {
		dir string
		dt  dtype.DType
	}{{"", dtype.Invalid}, {".bf16/", dtype.BF16}, {".f16/", dtype.F16}, {".f32/", dtype.F32}, {".f64/", dtype.F64}, {".npy/", dtype.Invalid}}
	for _, pl := range places {
		sp := r.lookupPath(pl.dir + ".split")
		if sp == nil || !sp.isDir() {
			t.Fatalf("%s.split: missing", pl.dir)
		}
		if got := strings.Join(names(sp), ","); got != "0,1" {
			t.Errorf("%s.split lists %q, want 0,1", pl.dir, got)
		}
		for _, missing := range []string{"2", "01", "-0", "+1", "x", "0/0", "0/1024", "0/01", "0/3/3", "0/3/-1", "0/3/02", "1/2/0/scale", "1/2/0/mask", "0/2/0/scale"} {
			if e := r.lookupPath(pl.dir + ".split/" + missing); e != nil {
				t.Errorf("%s.split/%s exists", pl.dir, missing)
			}
		}
		if got := names(r.lookupPath(pl.dir + ".split/0")); len(got) != 0 {
			t.Errorf("%s.split/0 lists %v", pl.dir, got)
		}
		whole := map[string]*node{}
		tensorFiles(r.lookupPath(strings.TrimSuffix(pl.dir, "/")), "", whole)
		for _, split := range []view.Split{{Dim: 0, Parts: 1, Part: 0}, {Dim: 0, Parts: 3, Part: 0}, {Dim: 0, Parts: 3, Part: 2}, {Dim: 1, Parts: 2, Part: 1}, {Dim: 1, Parts: 8, Part: 7}, {Dim: 0, Parts: 1023, Part: 1022}} {
			dir := fmt.Sprintf("%s.split/%d/%d/%d", pl.dir, split.Dim, split.Parts, split.Part)
			parts := map[string]*node{}
			tensorFiles(r.lookupPath(dir), "", parts)
			for p, w := range whole {
				if strings.HasPrefix(p, "/.") {
					continue
				}
				e, listed := parts[p]
				if looked := r.lookupPath(dir + p); (looked != nil) != listed {
					t.Errorf("%s%s: listed %v, looked up %v", dir, p, listed, looked != nil)
				}
				if !split.Valid(w.file.t.Shape) {
					if listed {
						t.Errorf("%s%s: shape %v has no dim %d", dir, p, w.file.t.Shape, split.Dim)
					}
					continue
				}
				if !listed {
					t.Errorf("%s%s: missing", dir, p)
					continue
				}
				var want view.Reader
				var err error
				if pl.dir == ".npy/" {
					want, err = view.NewNPYSlice(w.file.t, src, split)
				} else {
					want, err = view.NewSlice(w.file.t, src, w.file.dtype, split)
				}
				if err != nil {
					t.Fatalf("%s%s: %v", dir, p, err)
				}
				wb := make([]byte, want.Size())
				want.ReadAt(wb, 0)
				for _, step := range []int{1, 3, 1 << 20} {
					if got := readEntry(t, r, e, step); !bytes.Equal(got, wb) {
						t.Errorf("%s%s read by %d: wrong bytes (%d, want %d)", dir, p, step, len(got), len(wb))
					}
				}
				shape, _ := json.Marshal(split.SliceShape(w.file.t.Shape))
				if got := xattr(r, e, xattrShape); got != string(shape) {
					t.Errorf("%s%s: shape %s, want %s", dir, p, got, shape)
				}
				start, end := split.Bounds(w.file.t.Shape[split.Dim])
				wantSplit := fmt.Sprintf(`{"dim":%d,"parts":%d,"part":%d,"start":%d,"end":%d}`, split.Dim, split.Parts, split.Part, start, end)
				if got := xattr(r, e, xattrSplit); got != wantSplit {
					t.Errorf("%s%s: split %s, want %s", dir, p, got, wantSplit)
				}
				if again, ok := r.resolve(e.id); !ok || again.file.size != e.file.size || again.file.t != e.file.t {
					t.Errorf("%s%s: node ID %#x does not name it again", dir, p, e.id)
				}
				if e.file.form == formDirect {
					if off := xattr(r, e, xattrOffset); off != fmt.Sprint(w.file.t.Offset+e.file.skip()) {
						t.Errorf("%s%s: offset %s", dir, p, off)
					}
				}
			}
			if d, ok := r.resolve(r.lookupPath(dir).id); !ok || !d.isDir() {
				t.Errorf("%s: node ID does not name it again", dir)
			}
		}
	}
	// No slice is kept: readers only for the parts read.
	if n := len(r.contents.m); n > 6*6*8 {
		t.Errorf("%d readers kept", n)
	}
}

// TestSplitCostsNothing: looking up every part of every parts count
// keeps nothing per part (no reader is built until a read, and the
// rank table is one byte per directory per place).
func TestSplitCostsNothing(t *testing.T) {
	r, _ := lazyFixture(t, Options{})
	for parts := 1; parts <= maxSplitParts; parts++ {
		for part := 0; part < parts; part += 1 + parts/7 {
			for _, p := range []string{"model/embed", "model/layers.1/attn.weight"} {
				e := r.lookupPath(fmt.Sprintf(".f32/.split/0/%d/%d/%s", parts, part, p))
				if e == nil {
					t.Fatalf("%d/%d %s missing", parts, part, p)
				}
				r.xattrs(e)
			}
		}
	}
	if n := len(r.contents.m); n != 0 {
		t.Errorf("%d readers kept after lookups", n)
	}
}

// TestSplitDirect: a dim-0 part of a contiguous stored tensor is one range
// of its source (served like the whole tensor, spliced where it can be);
// a dim-1 part is gathered.
func TestSplitDirect(t *testing.T) {
	r, src := lazyFixture(t, Options{})
	e := r.lookupPath(".split/0/3/1/model/embed") // [10 4] F32: rows 4..7
	if e == nil || e.file.form != formDirect || e.file.size != 3*16 {
		t.Fatalf("dim-0 part: %+v", e)
	}
	w := r.lookupPath("model/embed")
	if got := readEntry(t, r, e, 7); !bytes.Equal(got, src.data[w.file.t.Offset+4*16:w.file.t.Offset+7*16]) {
		t.Errorf("dim-0 part: wrong bytes")
	}
	if xattr(r, e, xattrOffset) != fmt.Sprint(w.file.t.Offset+4*16) {
		t.Errorf("dim-0 part: offset %s", xattr(r, e, xattrOffset))
	}
	if e := r.lookupPath(".split/1/3/1/model/embed"); e == nil || e.file.form != formNative || xattr(r, e, xattrOffset) != "" {
		t.Errorf("dim-1 part: %+v", e)
	}
}
