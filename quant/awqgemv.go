package quant

import (
	"encoding/binary"
	"fmt"
	"math"
	"unsafe"

	"github.com/lazyweights/tensorfs/dtype"
)

// AWQ GEMV and GEMV-fast (casper-hansen/AutoAWQ awq/modules/linear/gemv.py
// and gemv_fast.py, WQLinear_GEMV.from_linear and pack_intweight;
// AutoAWQ_kernels awq_ext/quantization_new/gemv/gemv_cuda.cu for
// GEMV-fast's arithmetic). Both keep nn.Linear's [out, in] orientation.
// zw = calculate_zeros_width(in, group): ceil(in/group/8), rounded up to a
// multiple of 1, 2 or 4 for groups ≥ 128, 64 or 32 (other groups are not
// packed by AutoAWQ); the scale and zero rows past in/group are padding.
//
// version "gemv": X.qweight I32 [out, in/8], nibble i of word (n, c) the
// code of column 8c+i (order 0..7); X.qzeros I32 [out, zw], nibble i of
// word (n, c) the zero of group 8c+i; X.scales F16 [out, 8·zw].
// W[n, k] = (q - z) * s, g = k/group: exact in float32 with an F16 scale,
// so the same value whichever order the kernel computes it in.
//
// version "gemv_fast": X.qweight I16 [out/4, in]: rows n = 4·n4 + r
// interleaved by 64 columns: code (n, k) is nibble 256·(k2/64) + 64·r +
// k2%64 of row n4 (two nibbles a byte, low first), where within each 32
// columns k = 8a + 2b + c is stored at k2 = 8b + 4c + a (pack_intweight's
// two shuffles); X.scales and X.scaled_zeros F16 [8·zw, out] (transposed).
// The kernel dequantizes by __hfma2(q, s, scaled_zero) in half precision:
// W[n, k] = f16(q·s + sz), one rounding (computed exactly in float64,
// then rounded to nearest even half).

type awqGemvKernel struct {
	in, out, gsize, zw int64
	fast               bool
}

// awqZerosWidth is AutoAWQ's calculate_zeros_width; 0 for a group it
// does not pack.
func awqZerosWidth(in, group int64) int64 {
	var mult int64
	switch {
	case group >= 128:
		mult = 1
	case group == 64:
		mult = 2
	case group == 32:
		mult = 4
	default:
		return 0
	}
	return ceilDiv(ceilDiv(in/group, 8), mult) * mult
}

// fastPerm[p] is where GEMV-fast stores column p of 32 (k = 8a + 2b + c
// at 8b + 4c + a).
var fastPerm = func() (t [32]int) {
	for p := range t {
		a, b, c := p/8, p/2%4, p%2
		t[p] = 8*b + 4*c + a
	}
	return t
}()

// fastInv is fastPerm's inverse: the column of stored nibble q.
var fastInv = func() (t [32]uint8) {
	for p, q := range fastPerm {
		t[q] = uint8(p)
	}
	return t
}()

// fastNatural puts the 32 nibbles of src (one chunk of 32 columns as
// GEMV-fast stores it) in column order into dst: column k, low nibble first.
// Stored nibble p (index bits b1 b0 c a1 a0) holds column k = 8a + 2b + c,
// its index bits rotated left by 3 within 5: four swaps of index bits,
// (0,3), (0,1), (0,4), (0,2), each a delta swap on the two words (bit 4 the
// word).
func fastNatural(dst, src []byte) {
	d, c := (*[16]byte)(dst[:16]), (*[16]byte)(src[:16])
	lo, hi := natWords(binary.LittleEndian.Uint64(c[:8]), binary.LittleEndian.Uint64(c[8:]))
	binary.LittleEndian.PutUint64(d[:8], lo)
	binary.LittleEndian.PutUint64(d[8:], hi)
}

// fastNaturals is fastNatural for each 64 columns of a row: the 32 bytes
// at src[128·b:] (its two chunks) into dst[32·b:], for len(dst)/32 blocks.
func fastNaturals(dst, src []byte) {
	for b := 0; b+32 <= len(dst); b += 32 {
		d, c := (*[32]byte)(dst[b:b+32]), (*[32]byte)(src[4*b:4*b+32])
		lo, hi := natWords(binary.LittleEndian.Uint64(c[:8]), binary.LittleEndian.Uint64(c[8:16]))
		lo2, hi2 := natWords(binary.LittleEndian.Uint64(c[16:24]), binary.LittleEndian.Uint64(c[24:]))
		binary.LittleEndian.PutUint64(d[:8], lo)
		binary.LittleEndian.PutUint64(d[8:16], hi)
		binary.LittleEndian.PutUint64(d[16:24], lo2)
		binary.LittleEndian.PutUint64(d[24:], hi2)
	}
}

// natWords is fastNatural on the chunk's two little-endian words.
func natWords(lo, hi uint64) (uint64, uint64) {
	const m03, m01, m02, odd = 0x0000_0000_f0f0_f0f0, 0x00f0_00f0_00f0_00f0, 0x0000_f0f0_0000_f0f0, 0xf0f0_f0f0_f0f0_f0f0
	// (0,3): nibbles 1, 3, 5, 7 with 8, 10, 12, 14
	t, u := (lo>>28^lo)&m03, (hi>>28^hi)&m03
	lo, hi = lo^t^t<<28, hi^u^u<<28
	// (0,1): nibbles 1, 5, 9, 13 with 2, 6, 10, 14
	t, u = (lo>>4^lo)&m01, (hi>>4^hi)&m01
	lo, hi = lo^t^t<<4, hi^u^u<<4
	// (0,4): the odd nibbles of lo with the even ones of hi
	lo, hi = lo&^odd|hi&^odd<<4, hi&odd|lo&odd>>4
	// (0,2): nibbles 1, 3, 9, 11 with 4, 6, 12, 14
	t, u = (lo>>12^lo)&m02, (hi>>12^hi)&m02
	return lo ^ t ^ t<<12, hi ^ u ^ u<<12
}

// f16Round is x rounded to the nearest half (ties to even), as float32.
func f16Round(x float64) float32 {
	if x != x || x == 0 {
		return float32(x)
	}
	a := math.Abs(x)
	var r float64
	switch {
	case a >= 65520: // past the midpoint of 65504 and 2^16
		r = math.Inf(1)
	default:
		_, e := math.Frexp(a) // a = f·2^e, f in [0.5, 1)
		q := math.Ldexp(1, max(e-1, -14)-10)
		r = math.RoundToEven(a/q) * q
	}
	return float32(math.Copysign(r, x))
}

// fmaTable makes t[v] = f16(v·s + sz), the sum exact in float64: by
// roundF16 when the sum is a float32, else by f16Round.
func fmaTable(t *[16]float32, s, sz float64) {
	for v := range t {
		e := float64(v)*s + sz
		if x := float32(e); float64(x) == e {
			t[v] = roundF16(x)
		} else {
			t[v] = f16Round(e)
		}
	}
}

// codeF32[v] is v.
var codeF32 = [16]float32{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15}

// fmaExact32 reports whether v·s + sz is computed exactly in float32 for
// every v in 0..15, s and sz f16 values (as float32): both finite and
// nonzero, the sum a multiple of 2^lo (lo = max(−24, min(E(s), E(sz)) − 10),
// E the exponent) and under 2^hi in magnitude (hi = max(E(s)+5, E(sz)+1)
// + 1), so it has at most hi − lo ≤ 24 significant bits: a float32, and
// the product v·s (15 bits) is one too.
func fmaExact32(s, sz float32) bool {
	bs, bz := math.Float32bits(s)>>23&0xff, math.Float32bits(sz)>>23&0xff
	if bs == 0 || bz == 0 || bs == 0xff || bz == 0xff { // zero (no f16 is a float32 subnormal), Inf, NaN
		return false
	}
	es, ez := int(bs)-127, int(bz)-127
	lo := max(-24, min(es, ez)-10)
	hi := max(es+5, ez+1) + 1
	return hi-lo <= 24
}

var (
	f32ToF16, _ = dtype.ConverterFor(dtype.F32, dtype.F16)
	f16ToF32, _ = dtype.ConverterFor(dtype.F16, dtype.F32)
)

// fmaTables is fmaTable for every table, tbls[g] of sc[g·stride] and
// sz[g·stride], at once: the sums that are a float32 (every one but where
// the scale and scaled zero are far apart in magnitude, or not finite)
// are rounded to f16 by dtype's converters (F16C on amd64; roundF16's
// rounding, TestRoundTo), the others by f16Round after.
func (s *scratch) fmaTables(tbls [][16]float32, sc, sz []float32, stride int64) {
	slow := false
	for g := range tbls {
		s32, z32 := sc[int64(g)*stride], sz[int64(g)*stride]
		t := &tbls[g]
		if fmaExact32(s32, z32) {
			for v := range t {
				t[v] = float32(codeF32[v]*s32) + z32
			}
			continue
		}
		sv, zv := float64(s32), float64(z32)
		for v := range t {
			e := float64(v)*sv + zv
			x := float32(e)
			if float64(x) != e {
				slow, x = true, 0
			}
			t[v] = x
		}
	}
	flat := unsafe.Slice((*byte)(unsafe.Pointer(&tbls[0][0])), 64*len(tbls))
	h := s.buffer(5, int64(len(flat)/2))
	f32ToF16(h, flat)
	f16ToF32(flat, h)
	if !slow {
		return
	}
	for g := range tbls {
		sv, zv := float64(sc[int64(g)*stride]), float64(sz[int64(g)*stride])
		for v := range tbls[g] {
			if e := float64(v)*sv + zv; float64(float32(e)) != e {
				tbls[g][v] = f16Round(e)
			}
		}
	}
}

func (k *awqGemvKernel) rect(s *scratch, o0, o1, i0, i1 int64, dst []float32) error {
	g0, g1 := i0/k.gsize, (i1-1)/k.gsize+1
	ng := g1 - g0
	iw := i1 - i0
	tbls := s.tables(ng)
	var sc, sz []float32
	if k.fast {
		// scales and scaled_zeros [8·zw, out]: rows g0..g1, columns o0..o1
		var err error
		if sc, err = s.stridedFloats(2, 1, dtype.F16, k.out, g0, g1, o0, o1); err != nil {
			return err
		}
		if sz, err = s.stridedFloats(3, 2, dtype.F16, k.out, g0, g1, o0, o1); err != nil {
			return err
		}
	}
	var row []byte
	rowN4 := int64(-1)
	for n := o0; n < o1; n++ {
		out := dst[(n-o0)*iw : (n-o0+1)*iw]
		if k.fast {
			if useLookup {
				s.fmaTables(tbls, sc[n-o0:], sz[n-o0:], o1-o0)
			} else {
				for g := range ng {
					fmaTable(&tbls[g], float64(sc[g*(o1-o0)+n-o0]), float64(sz[g*(o1-o0)+n-o0]))
				}
			}
			n4, r := n/4, n%4
			b0, b1 := 128*(i0/64), 128*((i1-1)/64+1)
			if n4 != rowN4 { // the four rows of n4 share their stored row
				var err error
				if row, err = s.bytes(0, 0, 2*n4*k.in+b0, b1-b0); err != nil {
					return err
				}
				rowN4 = n4
			}
			if useLookup && k.gsize%32 == 0 && i0%32 == 0 && i1%32 == 0 {
				// each chunk of 32 columns put in column order, then each
				// group looked up in its table
				nat := s.buffer(4, iw/2)
				if i0%64 == 0 && i1%64 == 0 {
					fastNaturals(nat, row[32*r:])
				} else {
					for t := i0 / 32; t < i1/32; t++ {
						nib := 256*(t/2) + 64*r + 32*(t%2) - 2*b0
						fastNatural(nat[(32*t-i0)/2:], row[nib/2:nib/2+16])
					}
				}
				if i0%k.gsize == 0 && iw%k.gsize == 0 { // whole groups: one call
					dtype.Lookup4(out, nat, int(k.gsize/2), tbls, nil)
					continue
				}
				for g := g0; g < g1; g++ {
					a, b := max(i0, g*k.gsize), min(i1, (g+1)*k.gsize)
					dtype.Lookup4(out[a-i0:b-i0], nat[(a-i0)/2:(b-i0)/2], int(b-a)/2, tbls[g-g0:g-g0+1], nil)
				}
				continue
			}
			for i := i0; i < i1; {
				// the codes of columns [32t, 32t+32) are the 32 nibbles
				// from nib (64 of row r per 64 columns), in fastPerm's order
				t := i / 32
				ie := min(i1, 32*t+32)
				nib := 256*(t/2) + 64*r + 32*(t%2) - 2*b0
				cs := row[nib/2 : nib/2+16]
				tb := &tbls[i/k.gsize-g0]
				if k.gsize%32 == 0 && ie-i == 32 {
					o := (*[32]float32)(out[i-i0:])
					for j, v := range (*[16]byte)(cs) {
						o[fastInv[2*j]&31] = tb[v&15]
						o[fastInv[2*j+1]&31] = tb[v>>4]
					}
					i = ie
					continue
				}
				for ; i < ie; i++ {
					at := fastPerm[i%32]
					out[i-i0] = tbls[i/k.gsize-g0][cs[at/2]>>(4*(at%2))&15]
				}
			}
			continue
		}
		z0, z1 := g0/8, (g1-1)/8+1
		qz, err := s.bytes(1, 1, 4*(n*k.zw+z0), 4*(z1-z0))
		if err != nil {
			return err
		}
		sc, err := s.floats(2, 2, dtype.F16, n*8*k.zw+g0, ng)
		if err != nil {
			return err
		}
		for g := g0; g < g1; g++ {
			z := float32((le32(qz, g/8-z0) >> (4 * uint(g%8))) & 15)
			sv := sc[g-g0]
			for v := range tbls[g-g0] {
				tbls[g-g0][v] = (float32(v) - z) * sv
			}
		}
		c0 := i0 / 2
		row, err := s.bytes(0, 0, n*k.in/2+c0, (i1+1)/2-c0)
		if err != nil {
			return err
		}
		if useLookup && i0%k.gsize == 0 && k.gsize%2 == 0 && iw%2 == 0 {
			full := iw / k.gsize
			gb := int(k.gsize / 2)
			dtype.Lookup4(out, row[:full*k.gsize/2], gb, tbls[:full], nil)
			if tail := iw % k.gsize; tail > 0 {
				dtype.Lookup4(out[full*k.gsize:], row[full*k.gsize/2:iw/2], int(tail/2), tbls[full:], nil)
			}
			continue
		}
		for i := i0; i < i1; i++ {
			q := row[i/2-c0] >> (4 * (i % 2)) & 15
			out[i-i0] = tbls[i/k.gsize-g0][q]
		}
	}
	return nil
}

// buffer is byte buffer slot's first n bytes, for the kernel's own use
// (no part read into it).
func (s *scratch) buffer(slot int, n int64) []byte {
	if int64(cap(s.bufs[slot])) < n {
		s.bufs[slot] = make([]byte, n)
	}
	s.bufs[slot] = s.bufs[slot][:n]
	return s.bufs[slot]
}

// planAWQGemv plans version gemv (fast false) or gemv_fast.
func planAWQGemv(p *planner, fast bool) {
	bits, ok1 := num(p.cfg.Params, "bits", 4)
	gsize, ok2 := num(p.cfg.Params, "group_size", 128)
	ver := "gemv"
	zname := ".qzeros"
	if fast {
		ver, zname = "gemv_fast", ".scaled_zeros"
	}
	p.scheme = "awq-" + ver
	for _, nm := range p.names {
		x, ok := cutPart(nm, ".qweight", zname, ".scales")
		if !ok {
			continue
		}
		name := x + ".weight"
		if p.planned(name) {
			continue
		}
		qn, zn, sn := x+".qweight", x+zname, x+".scales"
		all := []string{qn, zn, sn}
		qt, zt, st := p.t(qn), p.t(zn), p.t(sn)
		if !ok1 || !ok2 || bits != 4 || !(gsize == -1 || gsize == 32 || gsize == 64 || gsize >= 128 && gsize <= maxDim) {
			p.fail(name, fmt.Sprintf("AWQ bits %s, group_size %s (version %s): only 4 bits and a group of 32, 64, 128 or more, or -1, are read", paramStr(p.cfg.Params["bits"]), paramStr(p.cfg.Params["group_size"]), ver), all...)
			continue
		}
		if qt == nil || zt == nil || st == nil {
			p.fail(name, fmt.Sprintf("its qweight, %s or scales is missing", zname[1:]), all...)
			continue
		}
		var in, out int64
		switch {
		case !fast && (qt.DType != dtype.I32 || len(qt.Shape) != 2 || !dimsOK(qt.Shape) || qt.Shape[0]%8 != 0):
			p.fail(name, fmt.Sprintf("qweight is %s %v, not I32 [out, in/8] with out a multiple of 8 (AWQ GEMV)", qt.DType, qt.Shape), all...)
			continue
		case fast && (qt.DType != dtype.I16 || len(qt.Shape) != 2 || !dimsOK(qt.Shape) || qt.Shape[0]%2 != 0 || qt.Shape[1]%64 != 0):
			p.fail(name, fmt.Sprintf("qweight is %s %v, not I16 [out/4, in] with out a multiple of 8 and in of 64 (AWQ GEMV-fast)", qt.DType, qt.Shape), all...)
			continue
		case fast:
			out, in = 4*qt.Shape[0], qt.Shape[1]
		default:
			out, in = qt.Shape[0], 8*qt.Shape[1]
		}
		gs := gsize
		if gs < 0 {
			gs = in
		}
		zw := awqZerosWidth(in, gs)
		switch {
		case zw == 0 || in%gs != 0:
			p.fail(name, fmt.Sprintf("AWQ group_size %d with in %d: AutoAWQ's GEMV packs groups of 32, 64 or at least 128 that divide in", gsize, in), all...)
		case st.DType != dtype.F16 || (!fast && !shapeIs(st, out, 8*zw)) || (fast && !shapeIs(st, 8*zw, out)):
			want := []int64{out, 8 * zw}
			if fast {
				want = []int64{8 * zw, out}
			}
			p.fail(name, fmt.Sprintf("scales is %s %v, not F16 %v", st.DType, st.Shape, want), all...)
		case !fast && (zt.DType != dtype.I32 || !shapeIs(zt, out, zw)):
			p.fail(name, fmt.Sprintf("qzeros is %s %v, not I32 [%d, %d]", zt.DType, zt.Shape, out, zw), all...)
		case fast && (zt.DType != dtype.F16 || !shapeIs(zt, 8*zw, out)):
			p.fail(name, fmt.Sprintf("scaled_zeros is %s %v, not F16 [%d, %d]", zt.DType, zt.Shape, 8*zw, out), all...)
		default:
			parts := []string{qn, zn, sn}
			if fast {
				parts = []string{qn, sn, zn}
			}
			p.add(name, p.scheme, []int64{out, in}, parts, &awqGemvKernel{in: in, out: out, gsize: gs, zw: zw, fast: fast})
		}
	}
}
