package view

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"

	"github.com/lazyweights/tensorfs/backing"
	"github.com/lazyweights/tensorfs/dtype"
	"github.com/lazyweights/tensorfs/index"
)

// raw is one representation of a tensor as bytes, without clamping:
// readRaw fills p with the bytes [off, off+len(p)), which the caller has
// clamped to the representation's size (len(p) > 0).
type raw interface {
	readRaw(p []byte, off int64) error
}

// newRaw returns the native representation of t (its stored dtype,
// little-endian, row-major) after checking t against src.
func newRaw(t *index.Tensor, src backing.Source) (raw, error) {
	n, err := checkRaw(t, src)
	if err != nil {
		return nil, err
	}
	return buildRaw(t, src, n), nil
}

// checkRaw checks t against src as New promises (a known dtype, shape and
// size that agree, every byte the tensor refers to inside src) and returns
// its number of elements. It allocates nothing unless it fails.
func checkRaw(t *index.Tensor, src backing.Source) (int64, error) {
	if t == nil {
		return 0, errors.New("view: nil tensor")
	}
	if src == nil {
		return 0, fmt.Errorf("view: %s: no backing file", t.Name)
	}
	if !t.DType.Valid() {
		return 0, fmt.Errorf("view: %s: unknown dtype %v", t.Name, t.DType)
	}
	n, ok := index.Elements(t.Shape)
	if !ok {
		return 0, fmt.Errorf("view: %s: shape %v has a negative dim or too many elements", t.Name, t.Shape)
	}
	size, ok := t.DType.TensorSize(n, dtype.RowLen(t.Shape))
	if !ok || size != t.Size {
		return 0, fmt.Errorf("view: %s: size %d bytes does not match %s shape %v", t.Name, t.Size, t.DType, t.Shape)
	}
	if t.Offset < 0 {
		return 0, fmt.Errorf("view: %s: negative offset %d", t.Name, t.Offset)
	}
	if t.Strides == nil {
		if t.Offset > src.Size() || t.Size > src.Size()-t.Offset {
			return 0, fmt.Errorf("view: %s: bytes %d..%d lie outside %s (%d bytes)", t.Name, t.Offset, t.Offset+t.Size, src.Name(), src.Size())
		}
	} else if err := checkStrided(t, src, n); err != nil {
		return 0, err
	}
	return n, nil
}

// buildRaw returns the native representation of t, of n elements, which
// checkRaw has accepted.
func buildRaw(t *index.Tensor, src backing.Source, n int64) raw {
	var r raw
	if t.Strides == nil {
		r = &contiguous{src: src, base: t.Offset, name: t.Name}
	} else {
		r = buildStrided(t, src, n)
	}
	if unit := t.DType.Info().Unit; t.BigEndian && unit > 1 {
		r = &swapped{raw: r, unit: int64(unit)}
	}
	return r
}

// contiguous is a tensor stored as one range of its source.
type contiguous struct {
	src  backing.Source
	base int64 // byte offset of the tensor in src
	name string
}

func (c *contiguous) readRaw(p []byte, off int64) error {
	n, err := c.src.ReadAt(p, c.base+off)
	if n == len(p) {
		return nil
	}
	return readError(c.name, c.src, c.base+off+int64(n), err)
}

// readError is the error of a read from src that stopped at byte at.
func readError(name string, src backing.Source, at int64, err error) error {
	if err == nil || err == io.EOF {
		return fmt.Errorf("view: %s: %s ended at byte %d: %w", name, src.Name(), at, io.ErrUnexpectedEOF)
	}
	return fmt.Errorf("view: %s: %w", name, err)
}

// strided is a tensor whose elements are scattered in its source: element
// with multi-index i lives at base + es*sum(i[k]*stride[k]). The dims are
// normalized: no dims of size 1, and no two adjacent dims that could be
// one (stride[k] == size[k+1]*stride[k+1]), so the innermost dim gives the
// longest contiguous runs there are.
type strided struct {
	src    backing.Source
	name   string
	base   int64   // byte offset of element 0
	es     int64   // bytes per element
	size   []int64 // normalized dims, outer to inner; at least 2, or 1 with stride != 1
	stride []int64 // in elements
}

// checkStrided checks a strided tensor of n elements against src: every
// element it refers to lies inside src, with no overflow on the way.
func checkStrided(t *index.Tensor, src backing.Source, n int64) error {
	es := t.DType.ElemSize()
	if es == 0 {
		return fmt.Errorf("view: %s: %s packs elements in blocks and cannot be strided", t.Name, t.DType)
	}
	if len(t.Strides) != len(t.Shape) {
		return fmt.Errorf("view: %s: %d strides for %d dims", t.Name, len(t.Strides), len(t.Shape))
	}
	if len(t.Shape) > index.MaxDims {
		return fmt.Errorf("view: %s: %d dims (at most %d)", t.Name, len(t.Shape), index.MaxDims)
	}
	if n == 0 {
		return nil
	}
	// The lowest and highest element offsets.
	var lo, hi int64
	for k, d := range t.Shape {
		if d == 1 {
			continue
		}
		s := t.Strides[k]
		span, ok := mul(d-1, s)
		if !ok {
			return fmt.Errorf("view: %s: stride %d of dim %d overflows", t.Name, s, k)
		}
		if span < 0 {
			lo, ok = add(lo, span)
		} else {
			hi, ok = add(hi, span)
		}
		if !ok {
			return fmt.Errorf("view: %s: strides %v overflow", t.Name, t.Strides)
		}
	}
	loByte, ok1 := mul(lo, es)
	hiByte, ok2 := mul(hi+1, es)
	first, ok3 := add(t.Offset, loByte)
	end, ok4 := add(t.Offset, hiByte)
	if !ok1 || !ok2 || !ok3 || !ok4 || first < 0 || end > src.Size() {
		return fmt.Errorf("view: %s: strided elements reach outside %s (%d bytes)", t.Name, src.Name(), src.Size())
	}
	return nil
}

// buildStrided returns the representation of a strided tensor of n
// elements that checkStrided has accepted: a contiguous one when the
// strides describe a contiguous range after all.
func buildStrided(t *index.Tensor, src backing.Source, n int64) raw {
	if n == 0 {
		return &contiguous{src: src, base: t.Offset, name: t.Name}
	}
	// Normalize: drop dims of size 1, merge a dim into the one outside it
	// when that one steps exactly over it.
	var size, stride []int64
	for k, d := range t.Shape {
		if d == 1 {
			continue
		}
		s := t.Strides[k]
		if j := len(size) - 1; j >= 0 && stride[j] == d*s {
			size[j] *= d
			stride[j] = s
			continue
		}
		size = append(size, d)
		stride = append(stride, s)
	}
	if len(size) == 0 || (len(size) == 1 && stride[0] == 1) {
		return &contiguous{src: src, base: t.Offset, name: t.Name}
	}
	return &strided{src: src, name: t.Name, base: t.Offset, es: t.DType.ElemSize(), size: size, stride: stride}
}

// mul returns a*b and whether it did not overflow.
func mul(a, b int64) (int64, bool) {
	if a == 0 || b == 0 {
		return 0, true
	}
	c := a * b
	if c/b != a || (a == -1 && b == -1<<63) || (b == -1 && a == -1<<63) {
		return 0, false
	}
	return c, true
}

// add returns a+b and whether it did not overflow.
func add(a, b int64) (int64, bool) {
	c := a + b
	if (b > 0 && c < a) || (b < 0 && c > a) {
		return 0, false
	}
	return c, true
}

const (
	// maxTileRows caps the rows of one transposed tile (see readTile).
	maxTileRows = 256
	// tileBytes is the size of one chunk of a tile: small enough to stay
	// in the L1 cache while it is transposed.
	tileBytes = 16 << 10
)

// readRaw gathers the elements overlapping [off, off+len(p)) in row-major
// order, walking their multi-index like an odometer: along the innermost
// dim a run of elements with stride 1 is one read straight into p; other
// strides take one read per element (or, for stride 0, one read and
// copies), except whole rows of a transposed layout, which go by tiles
// (readTile). Partial elements at either end read just their bytes.
func (s *strided) readRaw(p []byte, off int64) error {
	nd := len(s.size)
	var idxArr [index.MaxDims]int64
	idx := idxArr[:nd]
	es := s.es
	end := off + int64(len(p))
	e := off / es // current element (row-major number)
	var se int64  // its source element offset
	rem := e
	for k := nd - 1; k >= 0; k-- {
		idx[k] = rem % s.size[k]
		rem /= s.size[k]
		se += idx[k] * s.stride[k]
	}
	in := nd - 1
	inSize, inStride := s.size[in], s.stride[in]
	transposed := nd >= 2 && s.stride[in-1] == 1 && inStride != 0 && inStride != 1
	pos := off
	for pos < end {
		if transposed && idx[in] == 0 && pos == e*es {
			rows := min((end-pos)/(inSize*es), s.size[in-1]-idx[in-1], maxTileRows)
			if rows >= 2 {
				if err := s.readTile(p[pos-off:], se, rows); err != nil {
					return err
				}
				pos += rows * inSize * es
				e += rows * inSize
				idx[in-1] += rows - 1
				se += rows - 1
				se = s.carry(idx, se, in-1)
				continue
			}
		}
		if inStride == 1 {
			elemStart := e * es
			run := inSize - idx[in]
			runEnd := elemStart + run*es
			b := min(end, runEnd)
			if err := s.read(p[pos-off:b-off], s.base+se*es+(pos-elemStart)); err != nil {
				return err
			}
			pos = b
			if pos >= end {
				break
			}
			e += run
			se += run
		} else {
			full := int64(-1) // where in p a whole copy of the element is (stride 0)
			for idx[in] < inSize && pos < end {
				elemStart := e * es
				b := min(end, elemStart+es)
				dst := p[pos-off : b-off]
				if full >= 0 {
					copy(dst, p[full:]) // pos == elemStart here: only a run's first element can start mid-element
				} else {
					if err := s.read(dst, s.base+se*es+(pos-elemStart)); err != nil {
						return err
					}
					if inStride == 0 && pos == elemStart && b == elemStart+es {
						full = pos - off
					}
				}
				pos = b
				e++
				idx[in]++
				se += inStride
			}
			if pos >= end {
				break
			}
		}
		se -= inSize * inStride
		idx[in] = 0
		se = s.carry(idx, se, in-1)
	}
	return nil
}

// carry steps dim k of the multi-index idx by one, carrying into the outer
// dims, and returns the source element offset se updated to match. Dims
// inside k must be at 0 already.
func (s *strided) carry(idx []int64, se int64, k int) int64 {
	for ; k >= 0; k-- {
		idx[k]++
		se += s.stride[k]
		if idx[k] < s.size[k] {
			break
		}
		se -= s.size[k] * s.stride[k]
		idx[k] = 0
	}
	return se
}

// readTile fills dst with rows whole output rows of a transposed layout
// (the second-innermost dim has stride 1), starting at the row whose first
// element is at source element se. Element (i, j) of the rows lives at
// se + i + j*inStride, so for each j the rows' elements are one contiguous
// source range: the tile is read a chunk of columns at a time into pooled
// scratch, one read per column, and transposed into dst.
func (s *strided) readTile(dst []byte, se, rows int64) error {
	in := len(s.size) - 1
	inSize, inStride := s.size[in], s.stride[in]
	es := s.es
	sc := scratchPool.Get().(*scratch)
	defer scratchPool.Put(sc)
	colBytes := rows * es
	chunk := max(1, tileBytes/colBytes)
	for j0 := int64(0); j0 < inSize; j0 += chunk {
		cols := min(chunk, inSize-j0)
		for c := int64(0); c < cols; c++ {
			seg := sc.src[c*colBytes : (c+1)*colBytes]
			if err := s.read(seg, s.base+(se+(j0+c)*inStride)*es); err != nil {
				return err
			}
		}
		transpose(dst[j0*es:], sc.src[:cols*colBytes], rows, cols, inSize*es, es)
	}
	return nil
}

// transpose writes the cols x rows matrix of es-byte elements in src
// (column-major: column c is src[c*rows*es:]) into dst row-major with a
// row pitch of pitch bytes: element (i, c) goes to dst[i*pitch+c*es]. It
// goes 8 rows at a time so the lines written stay in cache even when the
// pitch is a multiple of 4 KiB (every row in the same cache set).
func transpose(dst, src []byte, rows, cols, pitch, es int64) {
	const band = 8
	for i0 := int64(0); i0 < rows; i0 += band {
		i1 := min(rows, i0+band)
		for c := int64(0); c < cols; c++ {
			col := src[c*rows*es : (c+1)*rows*es]
			o := i0*pitch + c*es
			switch es {
			case 2:
				for i := i0; i < i1; i++ {
					binary.LittleEndian.PutUint16(dst[o:], binary.LittleEndian.Uint16(col[2*i:]))
					o += pitch
				}
			case 4:
				for i := i0; i < i1; i++ {
					binary.LittleEndian.PutUint32(dst[o:], binary.LittleEndian.Uint32(col[4*i:]))
					o += pitch
				}
			case 8:
				for i := i0; i < i1; i++ {
					binary.LittleEndian.PutUint64(dst[o:], binary.LittleEndian.Uint64(col[8*i:]))
					o += pitch
				}
			default:
				for i := i0; i < i1; i++ {
					copy(dst[o:o+es], col[i*es:])
					o += pitch
				}
			}
		}
	}
}

func (s *strided) read(p []byte, at int64) error {
	n, err := s.src.ReadAt(p, at)
	if n == len(p) {
		return nil
	}
	return readError(s.name, s.src, at+int64(n), err)
}

// swapped serves a big-endian representation little-endian: each unit
// (the element, or a complex number's component) is reversed. Unit
// boundaries are element boundaries or halves of them, so the swap is a
// permutation inside each unit of the underlying representation: a
// partial unit at either end of a read is a contiguous range of the
// underlying unit, read and reversed in place.
type swapped struct {
	raw  raw
	unit int64 // 2, 4 or 8
}

func (s *swapped) readRaw(p []byte, off int64) error {
	u := s.unit
	end := off + int64(len(p))
	pos := off
	if r := pos % u; r != 0 {
		// Leading partial unit: output bytes [r, b) of the unit at ub are
		// its stored bytes [u-b, u-r), reversed.
		ub := pos - r
		b := min(end-ub, u)
		seg := p[:b-r]
		if err := s.raw.readRaw(seg, ub+u-b); err != nil {
			return err
		}
		reverse(seg)
		pos = ub + b
	}
	if whole := (end - pos) / u * u; whole > 0 {
		seg := p[pos-off : pos-off+whole]
		if err := s.raw.readRaw(seg, pos); err != nil {
			return err
		}
		swapUnits(seg, u)
		pos += whole
	}
	if pos < end {
		// Trailing partial unit: output bytes [0, l) are stored bytes
		// [u-l, u), reversed.
		l := end - pos
		seg := p[pos-off:]
		if err := s.raw.readRaw(seg, pos+u-l); err != nil {
			return err
		}
		reverse(seg)
	}
	return nil
}

func reverse(b []byte) {
	for i, j := 0, len(b)-1; i < j; i, j = i+1, j-1 {
		b[i], b[j] = b[j], b[i]
	}
}

// swapUnits reverses every u-byte unit of b (len(b) a multiple of u).
func swapUnits(b []byte, u int64) {
	switch u {
	case 2:
		i := 0
		for ; i+8 <= len(b); i += 8 {
			v := binary.LittleEndian.Uint64(b[i:])
			binary.LittleEndian.PutUint64(b[i:], (v&0x00FF00FF00FF00FF)<<8|(v>>8)&0x00FF00FF00FF00FF)
		}
		for ; i+1 < len(b); i += 2 {
			b[i], b[i+1] = b[i+1], b[i]
		}
	case 4:
		for i := 0; i+3 < len(b); i += 4 {
			binary.LittleEndian.PutUint32(b[i:], binary.BigEndian.Uint32(b[i:]))
		}
	case 8:
		for i := 0; i+7 < len(b); i += 8 {
			binary.LittleEndian.PutUint64(b[i:], binary.BigEndian.Uint64(b[i:]))
		}
	default:
		for i := int64(0); i+u <= int64(len(b)); i += u {
			reverse(b[i : i+u])
		}
	}
}
