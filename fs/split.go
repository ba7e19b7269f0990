package fs

import (
	"encoding/json"
	"strconv"
	"sync"

	"github.com/lazyweights/tensorfs/view"
)

// Tensor-parallel slices: <place>/.split/<dim>/<parts>/<part>/<path> is
// part <part> of <parts> of the tensor at <path> along <dim> (view.Split),
// in every place that shows tensors. Nothing is built for them: .split/
// is one static directory per place, and everything below it is the
// place's variant (doc.go, "Variants"), its parameters in the place bits
// of the node ID above the base place:
//
//	bits 4-10   dim+1  (0: not given)
//	bits 11-20  parts  (0: not given)
//	bits 21-30  part+1 (0: not given)
//
// A directory of the split levels (<dim>/, <parts>/ and <part>/, the
// last the root of the place's path tree in that variant) has the node
// ID place<<32 (no slot); a node of the path tree below <part>/ its
// usual slot+1 with the variant's place. So a variant costs nothing until
// looked up, and nothing per tensor: a file's size and reader are
// computed from the parameters, as a converted file's from its dtype.
//
// Which tensors a part shows: those of the base place that have the
// dimension and, for a quantized type served as stored, whose part falls
// on whole blocks; directories: those with a file of the base place of
// rank > dim below them (the largest rank below each directory is worked
// out once per base place, on the first lookup of a split in it: a byte
// per directory). A directory holding only quantized tensors none of
// whose parts fall on blocks is listed, empty.
const (
	splitDir = ".split"
	// maxSplitParts bounds <parts>: the bits the node ID has for it.
	maxSplitParts = 1023
	// maxSplitDim bounds <dim> (index.MaxDims dims at most).
	maxSplitDim = 63

	splitDimShift   = 4
	splitPartsShift = 11
	splitPartShift  = 21
	splitFieldMask  = 0x3ff
	splitDimMask    = 0x7f
)

// splitPlace returns base's variant for the levels given: level 1 dim,
// level 2 dim and parts, level 3 all three.
func splitPlace(base place, level int, s view.Split) place {
	p := base | place(s.Dim+1)<<splitDimShift
	if level >= 2 {
		p |= place(s.Parts) << splitPartsShift
	}
	if level >= 3 {
		p |= place(s.Part+1) << splitPartShift
	}
	return p
}

// splitOf decodes place p: its split level (0: not a split variant, or
// an encoding never given out: -1) and its parameters.
func splitOf(p place) (level int, s view.Split) {
	if p&^placeBase == 0 {
		return 0, s
	}
	dimF := int(p>>splitDimShift) & splitDimMask
	partsF := int(p>>splitPartsShift) & splitFieldMask
	partF := int(p>>splitPartShift) & splitFieldMask
	s = view.Split{Dim: dimF - 1, Parts: partsF, Part: partF - 1}
	switch {
	case p>>31 != 0 || dimF == 0:
		return -1, s
	case partsF == 0 && partF == 0:
		return 1, s
	case partsF == 0:
		return -1, s
	case partF == 0:
		return 2, s
	case s.Part >= s.Parts:
		return -1, s
	}
	return 3, s
}

// splitRanks is, per base place, the largest rank of a file it shows
// below each directory, worked out on first use.
type splitRanks struct {
	once [16]sync.Once
	rank [16][]uint8 // per directory, ranks over 255 as 255
}

// dirRank returns the largest rank of a file that base place b shows
// below directory d.
func (r *Root) dirRank(b place, d uint32) uint8 {
	sr := &r.splitRanks
	sr.once[b].Do(func() {
		pt, in := r.paths, r.places[b]
		rk := make([]uint8, len(pt.dirStart)-1)
		for d := len(rk) - 1; d >= 0; d-- {
			lo, hi := pt.children(uint32(d))
			var m uint8
			for s := lo; s < hi; s++ {
				if pt.in(s)&in == 0 {
					continue
				}
				ref := pt.slots[s]
				v := uint8(255)
				if ref&fileRef == 0 {
					v = rk[ref]
				} else if n := len(pt.tensors[ref&^fileRef].Shape); n < 255 {
					v = uint8(n)
				}
				m = max(m, v)
			}
			rk[d] = m
		}
		sr.rank[b] = rk
	})
	return sr.rank[b][d]
}

// splitShows reports whether place p, a split variant (level 3) or not,
// shows slot s, which its base place shows.
func (r *Root) splitShows(p place, s uint32) bool {
	level, sp := splitOf(p)
	if level == 0 {
		return true
	}
	ref := r.paths.slots[s]
	if ref&fileRef == 0 {
		return int(r.dirRank(p&placeBase, ref)) > sp.Dim
	}
	f := r.fileIn(ref&^fileRef, p)
	return f.kind == kindTensor
}

// splitName parses a canonical decimal name (no sign, no leading zeros)
// of at most max.
func splitName(name string, max int) (int, bool) {
	if name == "" || len(name) > 4 || (len(name) > 1 && name[0] == '0') {
		return 0, false
	}
	for i := 0; i < len(name); i++ {
		if name[i] < '0' || name[i] > '9' {
			return 0, false
		}
	}
	n, err := strconv.Atoi(name)
	if err != nil || n > max {
		return 0, false
	}
	return n, true
}

// splitNode returns the split directory of place p (levels 1 to 3), or
// false when it is no directory of this tree: a dimension no file of the
// base place has, parts out of range.
func (r *Root) splitNode(p place, name string) (node, bool) {
	level, s := splitOf(p)
	base := p & placeBase
	if level < 1 || r.places[base] == 0 || r.paths == nil || s.Dim > maxSplitDim || int(r.dirRank(base, 0)) <= s.Dim {
		return node{}, false
	}
	if level >= 2 && (s.Parts < 1 || s.Parts > maxSplitParts) {
		return node{}, false
	}
	return node{id: uint64(p) << 32, name: name, place: p, isdir: true, r: r}, true
}

// splitLookup looks name up in a split directory: .split/ (e, whose
// split is its base place), or a split level (n.place).
func (r *Root) splitLookup(d *node, name string) (node, bool) {
	if d.e != nil {
		dim, ok := splitName(name, maxSplitDim)
		if !ok {
			return node{}, false
		}
		return r.splitNode(splitPlace(d.e.dir.split, 1, view.Split{Dim: dim}), name)
	}
	level, s := splitOf(d.place)
	switch level {
	case 1:
		parts, ok := splitName(name, maxSplitParts)
		if !ok || parts < 1 {
			return node{}, false
		}
		s.Parts = parts
	case 2:
		part, ok := splitName(name, maxSplitParts)
		if !ok || part >= s.Parts {
			return node{}, false
		}
		s.Part = part
	default:
		return node{}, false
	}
	return r.splitNode(splitPlace(d.place&placeBase, level+1, s), name)
}

// splitDirs lists .split/ of base place b: the dimensions 0 up to the
// largest rank of its files, less one.
func (r *Root) splitDims(b place) int {
	if r.places[b] == 0 || r.paths == nil {
		return 0
	}
	return min(int(r.dirRank(b, 0)), maxSplitDim+1)
}

// isSplitLevel reports whether n is .split/, <dim>/ or <parts>/: a
// directory that shows no path tree.
func (n *node) isSplitLevel() bool {
	if n.e != nil {
		return n.e.dir != nil && n.e.dir.split != 0
	}
	if uint32(n.id) != 0 {
		return false
	}
	level, _ := splitOf(n.place)
	return level == 1 || level == 2
}

// sliceFile makes f, tensor file of a base place, part s of itself: its
// size, and whether it is still one range of its source (formDirect,
// skip bytes in: see fileData.skip). ok is false when the part does not exist (a dimension
// the tensor lacks, bounds off a quantized type's blocks).
func (r *Root) sliceFile(f *fileData, s view.Split) bool {
	t := f.t
	if !s.Valid(t.Shape) {
		return false
	}
	f.part = splitPlace(0, 3, s)
	if f.form == formDirect {
		_, size, one, err := view.SliceExtent(t.Name, t.Shape, t.DType, s)
		if err != nil {
			return false
		}
		if one {
			f.size = size
			return true
		}
		f.form = formNative
	}
	form, ok := f.viewForm()
	if !ok {
		f.size = 0
		return false
	}
	size, err := view.Sizeof(t, r.sources[t.Source], form)
	f.size = size
	return err == nil
}

// sliced reports whether f is a part of its tensor.
func (f *fileData) sliced() bool { return f.part != 0 }

// split returns the part f is of its tensor.
func (f *fileData) split() view.Split {
	_, s := splitOf(f.part)
	return s
}

// skip returns where the bytes of f, a part that is one range of its
// tensor (formDirect), start in the tensor; 0 for a whole tensor.
func (f *fileData) skip() int64 {
	if f.part == 0 {
		return 0
	}
	first, _, _, _ := view.SliceExtent(f.t.Name, f.t.Shape, f.t.DType, f.split())
	return first
}

// splitXattr is the value of user.tensorfs.split.
func splitXattr(f *fileData) string {
	sp := f.split()
	start, end := sp.Bounds(f.t.Shape[sp.Dim])
	b, _ := json.Marshal(struct {
		Dim   int   `json:"dim"`
		Parts int   `json:"parts"`
		Part  int   `json:"part"`
		Start int64 `json:"start"`
		End   int64 `json:"end"`
	}{sp.Dim, sp.Parts, sp.Part, start, end})
	return string(b)
}
