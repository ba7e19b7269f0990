package dtype

import (
	"fmt"
	"math"
	"sync"
)

// GroupConverter converts whole interleaved blocks of one group of rows of
// a row-interleaved type (DType.RowGroup: G rows stored as one run of
// blocks, block b of the run holding block b of each of the G rows). head
// is the group's GroupMeta bytes (its rows' scales, for the types that
// keep them; empty for the others) and src k consecutive interleaved
// blocks of the group (len(src) == k*G*BlockBytes, any run of the group's
// blocks); the converter writes each row r < G's k*BlockElems elements,
// in the target dtype, at dst[r*stride:]: with stride the bytes of a row
// of the output, a whole group's blocks land as its G rows, row-major. It
// writes nothing else, is safe for concurrent use, does not allocate, and
// panics when head is short, src is not whole interleaved blocks, stride
// is shorter than a row's part or dst cannot hold the G rows (a bug in
// the caller). Values are the float32 of ik_llama.cpp's
// dequantize_row_*_r4/_r8; F64 is exact, F16 and BF16 round once from
// that float32, as for every quantized type.
type GroupConverter func(dst []byte, stride int, head, src []byte)

// GroupConverterFor returns the converter of the blocks of a group of a
// row-interleaved type to a view dtype, and false for any other pair.
// Row-interleaved types have no Converter: a block holds G rows.
func GroupConverterFor(from, to DType) (GroupConverter, bool) {
	t := targetIndex(to)
	if t < 0 || from.RowGroup() == 0 {
		return nil, false
	}
	c := groupConverters()[from-firstGroup][t]
	return c, c != nil
}

const (
	// maxGroupRows bounds a group's rows (ik_llama.cpp's are 4, 8 or 16).
	maxGroupRows = 16
	// groupChunk is the float32 scratch of a group conversion: a run of
	// interleaved blocks of all G rows at a time.
	groupChunk = 4096
	// maxGroupMeta bounds a group's head (ik_llama.cpp's: 4 float32).
	maxGroupMeta = 64
)

type groupScratch struct {
	y [maxGroupRows][]float32
	f [groupChunk]float32
	b [4 * groupChunk]byte
	// a group's head and a chunk's blocks, as the dequantizers of types
	// with a head take them (the whole group, block ib of it)
	g [maxGroupMeta + 2*groupChunk]byte
}

var groupPool = sync.Pool{New: func() any { return new(groupScratch) }}

// groupConverters is the table of every GroupConverter, built on first use.
var groupConverters = sync.OnceValue(func() *[len(ikGroups)][len(targets)]GroupConverter {
	var c [len(ikGroups)][len(targets)]GroupConverter
	for i := range ikGroups {
		for t, to := range targets {
			c[i][t] = groupKernel(&ikGroups[i], firstGroup+DType(i), to)
		}
	}
	return &c
})

// groupKernel returns the GroupConverter of row-interleaved type from (g,
// its row of ikGroups) to the view dtype to, or nil where a block of all
// its rows does not fit the scratch.
func groupKernel(g *ikGroup, from, to DType) GroupConverter {
	rows, be, gb, meta := g.rows, g.blockElems, g.blockBytes, g.meta
	if rows <= 0 || rows > maxGroupRows || be <= 0 || rows*be > groupChunk || gb <= 0 || meta < 0 || meta > maxGroupMeta {
		return nil
	}
	perChunk := groupChunk / (rows * be) // interleaved blocks per chunk
	if meta != 0 {
		// the head and the chunk's blocks are copied together
		if perChunk = min(perChunk, (len(groupScratch{}.g)-meta)/gb); perChunk == 0 {
			return nil
		}
	}
	outSize := int(to.ElemSize())
	fromF32 := fromF32Kernel(to)
	return func(dst []byte, stride int, head, src []byte) {
		k := len(src) / gb
		if len(head) < meta || len(src)%gb != 0 || stride < k*be*outSize || (k > 0 && len(dst) < (rows-1)*stride+k*be*outSize) {
			panic(fmt.Sprintf("dtype: %s to %s group converter: head of %d bytes (of %d), src of %d bytes (blocks of %d), stride %d, dst of %d bytes", from, to, len(head), meta, len(src), gb, stride, len(dst)))
		}
		s := groupPool.Get().(*groupScratch)
		y := s.y[:rows]
		for ib := 0; ib < k; ib += perChunk {
			nb := min(perChunk, k-ib)
			span := nb * be // elements of each row in this chunk
			for r := range y {
				y[r] = s.f[r*span : (r+1)*span]
			}
			if meta != 0 {
				// a group of these nb blocks after the head
				grp := s.g[:meta+nb*gb]
				copy(grp, head[:meta])
				copy(grp[meta:], src[ib*gb:(ib+nb)*gb])
				for j := 0; j < nb; j++ {
					g.deq(y, grp, j)
				}
			} else if g.run != nil {
				g.run(y, src[ib*gb:(ib+nb)*gb], nb)
			} else {
				for j := 0; j < nb; j++ {
					g.deq(y, src[(ib+j)*gb:(ib+j+1)*gb], j)
				}
			}
			for r, f := range y {
				out := dst[r*stride+ib*be*outSize:][:span*outSize]
				if fromF32 == nil { // F32
					for i, v := range f {
						le.PutUint32(out[4*i:], math.Float32bits(v))
					}
					continue
				}
				b := s.b[:4*span]
				for i, v := range f {
					le.PutUint32(b[4*i:], math.Float32bits(v))
				}
				fromF32(out, b)
			}
		}
		groupPool.Put(s)
	}
}
