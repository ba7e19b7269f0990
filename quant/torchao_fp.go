package quant

import (
	"encoding/json"
	"fmt"
	"math"
	"math/bits"
	"sync"

	"github.com/lazyweights/tensorfs/dtype"
	"github.com/lazyweights/tensorfs/index"
)

// torchao's floating-point block formats (prototype/mx_formats), read at
// pytorch/ao 36027d82d1ad:
//
//   - NVFP4Tensor (nvfp4_tensor.py dequantize, get_hp_scales): qdata U8
//     [.., M, K/2], two E2M1 codes a byte, low nibble first (kernels.py
//     unpack_uint4); scale F8_E4M3 one per 16 along K, [.., M, K/16] or
//     swizzled (is_swizzled_scales: utils.py to_blocked over the
//     (L·M) × (K/16) matrix, padded to 128 × 4 tiles, each tile stored as
//     32 × 16: scale (r, c) at tile (r/128, c/4), byte
//     (r%32)·16 + (r%128/32)·4 + c%4); optional per_tensor_scale F32, one
//     value or one per expert [E, 1, 1]: hp = per_tensor_scale · f32(scale),
//     W = f32(code) · hp in float32.
//   - MXTensor (mx_tensor.py dequantize, to_dtype, get_fp_scale): qdata
//     F8_E4M3 / F8_E5M2 [.., M, K], U8 [.., M, K/2] for float4_e2m1fn_x2
//     (packed as NVFP4's), or U8 [.., M, K] for "fp6_e2m3" / "fp6_e3m2",
//     one code a byte in its low 6 bits (kernels.py f32_to_f6_*_unpacked;
//     no fp6 packing at this commit), decoded by custom_fp_utils.py
//     _floatx_unpacked_to_f32 (fp6Table); scale E8M0 (F8_E8M0 or U8) one
//     per block_size along K, plain or swizzled as above; s = 2^(e−127)
//     (NaN for 255), then in orig_dtype D: W = D(code) · D(s), each
//     rounded to D as torch computes a D tensor's product (exact unless it
//     leaves D's range).

// aoFPKernel is NVFP4Tensor's and MXTensor's kernel; the weight is
// rows = L·M rows of cols = K.
type aoFPKernel struct {
	m, cols, bs int64
	fp4         bool          // two E2M1 codes a byte
	codes       *[256]float32 // FP8 and fp6 elements' values, D(code) (nil: fp4)
	fp6         bool          // one fp6 code a byte (U8)
	mx          bool          // E8M0 scales (else E4M3)
	swz         bool
	pts         int         // NVFP4 per_tensor_scale: 0 none, 1 one, 2 per expert
	out         dtype.DType // MX: orig_dtype
	// lo, hi: the scales for which every product code·scale is a normal
	// bf16 value or zero, exact (a code has at most 4 significant bits)
	lo, hi float32
}

// exactRange sets lo and hi from the codes' smallest nonzero and largest
// finite magnitudes: min·lo ≥ 2^-126 and max·hi ≤ 2^127 (NaN and Inf
// codes stay NaN and Inf whatever the scale).
func (k *aoFPKernel) exactRange() {
	mn, mx := float32(0.5), float32(6) // E2M1
	if k.codes != nil {
		mn, mx = float32(math.Inf(1)), 0
		for _, v := range k.codes {
			a := float32(math.Abs(float64(v)))
			if a == 0 || math.IsNaN(float64(a)) || math.IsInf(float64(a), 0) {
				continue
			}
			mn, mx = min(mn, a), max(mx, a)
		}
	}
	k.lo = float32(math.Ldexp(1, -126)) / mn
	k.hi = float32(math.Ldexp(1, 127)) / mx
}

// swzOff is the byte of scale (r, c) in to_blocked's layout of a matrix of
// ncb tiles of 4 scale columns a row of tiles.
func swzOff(r, c, ncb int64) int64 {
	return ((r/128)*ncb+c/4)*512 + (r%32)*16 + (r%128/32)*4 + c%4
}

// aoFPRect is what one rect call reads: the codes and scales of rows
// [r0, r1), columns [c0, c1) (scale columns [j0, j1)).
type aoFPRect struct {
	codes, sc             []byte
	r0, c0, c1, j0, j1, w int64
	sbase                 int64 // swizzled: the offset sc starts at
	ncb                   int64 // tiles of 4 scale columns a row of tiles
}

func (k *aoFPKernel) rect(s *scratch, r0, r1, c0, c1 int64, dst []float32) error {
	q, err := k.read(s, r0, r1, c0, c1)
	if err != nil {
		return err
	}
	w := q.w
	g, lastE := float32(1), int64(-1)
	// NVFP4, whole blocks of a large tile: the table of every scale
	// byte's 16 values (nvTable: fp4 · (e4m3 · g), the same
	// multiplications), looked up a row at a time (dtype.Lookup4)
	whole := !k.mx && useLookup && c0%16 == 0 && c1%16 == 0 && (r1-r0)*w >= 1<<12
	// MX fp4, whole blocks: the table of every E8M0 byte's 16 values in
	// orig_dtype (each entry by the same operations as an element)
	var mxAll *[256][16]float32
	if k.mx && k.fp4 && useLookup && c0%k.bs == 0 && c1%k.bs == 0 {
		mxAll = mxfp4Table(k.out)
	}
	for r := r0; r < r1; r++ {
		if k.pts != 0 {
			e := int64(0)
			if k.pts == 2 {
				e = r / k.m
			}
			if e != lastE {
				f, err := s.floats(3, 2, dtype.F32, e, 1)
				if err != nil {
					return err
				}
				g, lastE = f[0], e
			}
		}
		out := dst[(r-r0)*w : (r-r0+1)*w]
		if whole || mxAll != nil {
			all := mxAll
			if all == nil {
				all = s.nvTable(g, false)
			}
			k.lookupRow(s, &q, r, out, all)
			continue
		}
		k.blocksRow(&q, r, out, g)
	}
	return nil
}

// read reads the codes and the scales of rows [r0, r1), columns [c0,
// c1): the scales plain, one strided read; swizzled, the 128-row tiles'
// bytes for the tile columns touched.
func (k *aoFPKernel) read(s *scratch, r0, r1, c0, c1 int64) (aoFPRect, error) {
	nc := k.cols / k.bs
	j0, j1 := c0/k.bs, (c1-1)/k.bs+1
	w := c1 - c0
	var codes []byte
	var err error
	if k.fp4 {
		codes, err = s.strided(0, 0, k.cols/2, r0, r1, c0/2, (c1-1)/2+1)
	} else {
		codes, err = s.strided(0, 0, k.cols, r0, r1, c0, c1)
	}
	if err != nil {
		return aoFPRect{}, err
	}
	var sc []byte
	var sbase int64 // swizzled: the offset sc starts at
	ncb := ceilDiv(nc, 4)
	if k.swz {
		t0, t1 := r0/128, (r1-1)/128
		cb0, cb1 := j0/4, (j1-1)/4
		sbase = (t0*ncb + cb0) * 512
		sc, err = s.bytes(1, 1, sbase, ((t1*ncb+cb1)+1)*512-sbase)
	} else {
		sc, err = s.strided(1, 1, nc, r0, r1, j0, j1)
	}
	if err != nil {
		return aoFPRect{}, err
	}
	return aoFPRect{codes: codes, sc: sc, r0: r0, c0: c0, c1: c1, j0: j0, j1: j1, w: w, sbase: sbase, ncb: ncb}, nil
}

// lookupRow decodes row r of whole fp4 blocks into out by table: all
// holds every scale byte's 16 values.
func (k *aoFPKernel) lookupRow(s *scratch, q *aoFPRect, r int64, out []float32, all *[256][16]float32) {
	codes, sc, r0, c0, c1, j0, j1, sbase, ncb := q.codes, q.sc, q.r0, q.c0, q.c1, q.j0, q.j1, q.sbase, q.ncb
	idx := sc[(r-r0)*(j1-j0) : (r-r0+1)*(j1-j0)]
	if k.swz {
		if int64(cap(s.bufs[4])) < j1-j0 {
			s.bufs[4] = make([]byte, j1-j0)
		}
		idx = s.bufs[4][:j1-j0]
		for j := j0; j < j1; j++ {
			idx[j-j0] = sc[swzOff(r, j, ncb)-sbase]
		}
	}
	bw := (c1 - c0) / 2
	dtype.Lookup4(out, codes[(r-r0)*bw:(r-r0+1)*bw], int(k.bs/2), all[:], idx)
}

// blocksRow decodes row r into out a block at a time: the block's scale
// (g: NVFP4's per_tensor_scale for the row), then its codes, rounded to
// MX's orig_dtype.
func (k *aoFPKernel) blocksRow(q *aoFPRect, r int64, out []float32, g float32) {
	codes, sc, r0, c0, c1, j0, j1, w, sbase, ncb := q.codes, q.sc, q.r0, q.c0, q.c1, q.j0, q.j1, q.w, q.sbase, q.ncb
	for c := c0; c < c1; {
		j := c / k.bs
		e := min((j+1)*k.bs, c1)
		var sb byte
		if k.swz {
			sb = sc[swzOff(r, j, ncb)-sbase]
		} else {
			sb = sc[(r-r0)*(j1-j0)+j-j0]
		}
		var hp float32
		if k.mx {
			hp = e8m0(sb)
			if k.out != dtype.F32 {
				hp = roundTo(k.out, hp)
			}
		} else {
			hp = e4m3Table[sb]
			if k.pts != 0 {
				hp = g * hp
			}
		}
		o := out[c-c0 : e-c0]
		if k.fp4 {
			brow := codes[(r-r0)*((c1-1)/2+1-c0/2):]
			if useLookup && c&1 == 0 && e&1 == 0 {
				// the block's 16 values first, each by the same
				// multiplication, then a byte's two codes at a time
				var blk [16]float32
				for n := range blk {
					blk[n] = fp4Values[n] * hp
				}
				in := brow[c/2-c0/2 : e/2-c0/2]
				o = o[:2*len(in)]
				for i, b := range in {
					o[2*i] = blk[b&15]
					o[2*i+1] = blk[b>>4]
				}
			} else {
				for cc := c; cc < e; cc++ {
					b := brow[cc/2-c0/2]
					if cc&1 == 1 {
						b >>= 4
					}
					o[cc-c] = fp4Values[b&15] * hp
				}
			}
		} else {
			dtype.Lookup8(o, codes[(r-r0)*w+c-c0:(r-r0)*w+e-c0], k.codes, hp)
		}
		if k.mx {
			switch {
			case k.out == dtype.BF16 && useLookup && hp >= k.lo && hp <= k.hi:
				// every product is a bf16 value already: no
				// rounding changes it (the scale's range checked)
			case k.out == dtype.BF16:
				for i := range o {
					o[i] = roundBF16(o[i])
				}
			case k.out == dtype.F16:
				for i := range o {
					o[i] = roundF16(o[i])
				}
			}
		}
		c = e
	}
}

// mxfp4Tables holds, per orig_dtype (F32, BF16, F16), every E8M0 byte's
// 16 E2M1 values: D(code) · D(2^(e−127)) rounded to D, made once.
var mxfp4Tables [3]struct {
	once sync.Once
	t    *[256][16]float32
}

func mxfp4Table(out dtype.DType) *[256][16]float32 {
	i := 0
	switch out {
	case dtype.BF16:
		i = 1
	case dtype.F16:
		i = 2
	}
	m := &mxfp4Tables[i]
	m.once.Do(func() {
		m.t = new([256][16]float32)
		for b := range m.t {
			hp := roundTo(out, e8m0(byte(b)))
			for n := range m.t[b] {
				m.t[b][n] = roundTo(out, fp4Values[n]*hp)
			}
		}
	})
	return m.t
}

// e8m0 is an E8M0 scale's value, 2^(e−127), NaN for 255 (get_fp_scale).
func e8m0(e byte) float32 { return e8m0Values[e] }

var e8m0Values = func() *[256]float32 {
	var t [256]float32
	for e := range t {
		t[e] = float32(math.Ldexp(1, e-127))
	}
	t[255] = float32(math.NaN())
	return &t
}()

// fp6Table is every byte's value by torchao's _floatx_unpacked_to_f32
// (custom_fp_utils.py, pytorch/ao 36027d82d1ad) with ebits exponent and
// mbits mantissa bits, its uint8 arithmetic wrapping as torch's does:
// sign bit 1<<(ebits+mbits); zero; subnormal (exponent field 0) m·2^(1−
// bias−mbits), normalised; else the exponent field (x without its sign
// bit, shifted by mbits: bits 6 and 7, which torchao never writes,
// included) − bias + 127 and the mantissa copied into a float32's fields.
func fp6Table(ebits, mbits uint) *[256]float32 {
	var t [256]float32
	sign := uint8(1) << (ebits + mbits)
	bias := uint8(1)<<(ebits-1) - 1
	mmask := uint8(1)<<mbits - 1
	for b := range t {
		x := uint8(b)
		s := x & sign
		pos := x ^ s
		var f uint32
		switch {
		case pos == 0:
		case pos>>mbits == 0:
			// the loop over mantissa_cmp: i the top bit of m, shifted
			// left by mbits − i to make the implicit 1
			m := pos & mmask
			i := uint(bits.Len8(m) - 1)
			ls := mbits - i
			f = (1-uint32(bias)+127-uint32(ls))<<23 + uint32(m-1<<i)<<(ls+23-mbits)
		default:
			e := pos>>mbits - bias + 127 // uint8: wraps as torch's
			f = uint32(e)<<23 | uint32(pos&mmask)<<(23-mbits)
		}
		f |= uint32(s) << (23 - mbits + 8 - ebits)
		t[b] = math.Float32frombits(f)
	}
	return &t
}

// fp6Tables holds, per element ("fp6_e2m3", "fp6_e3m2") and orig_dtype D
// (F32, BF16, F16), D(code) for every byte: to_dtype's
// data_hp.to(target_dtype) (in F16 the codes past 65504, in bits 6 and 7
// only, are Inf).
var fp6Tables = func() (t [2][3]*[256]float32) {
	for i, f := range []*[256]float32{fp6Table(2, 3), fp6Table(3, 2)} {
		for j, dt := range []dtype.DType{dtype.F32, dtype.BF16, dtype.F16} {
			t[i][j] = new([256]float32)
			for b, v := range f {
				t[i][j][b] = roundTo(dt, v)
			}
		}
	}
	return
}()

// aoInt decodes attribute key as one integer (absent: def).
func aoInt(e *aoEntry, key string, def int64) (int64, bool) {
	raw, ok := e.Data[key]
	if !ok {
		return def, true
	}
	var f float64
	if err := json.Unmarshal(raw, &f); err != nil || f != float64(int64(f)) {
		return 0, false
	}
	return int64(f), true
}

// aoBool decodes attribute key as a bool (absent or null: false).
func aoBool(e *aoEntry, key string) (bool, bool) {
	raw, ok := e.Data[key]
	if !ok || string(raw) == "null" {
		return false, true
	}
	var b bool
	err := json.Unmarshal(raw, &b)
	return b, err == nil
}

// mxElems sets an MXTensor's element codes (elem_dtype) and orig_dtype;
// a message says why they are not served.
func (k *aoFPKernel) mxElems(e *aoEntry) string {
	var ok bool
	var v struct {
		Type string `json:"_type"`
		Data string `json:"_data"`
	}
	raw := e.Data["elem_dtype"]
	if err := json.Unmarshal(raw, &v); err != nil {
		_ = json.Unmarshal(raw, &v.Data) // fp6: a plain string
	}
	switch v.Data {
	case "float8_e4m3fn":
		k.codes = e4m3Table
	case "float8_e5m2":
		k.codes = e5m2Table
	case "float4_e2m1fn_x2":
		k.fp4 = true
	case "fp6_e2m3", "fp6_e3m2":
		k.fp6 = true
	default:
		return fmt.Sprintf("torchao MXTensor elem_dtype %s is not served", paramStr(raw))
	}
	if k.out, ok = aoDType(e, "orig_dtype", dtype.F32); !ok {
		return "torchao MXTensor orig_dtype is not float32, bfloat16 or float16"
	}
	if k.fp6 {
		i, j := 0, 0
		if v.Data == "fp6_e3m2" {
			i = 1
		}
		switch k.out {
		case dtype.BF16:
			j = 1
		case dtype.F16:
			j = 2
		}
		k.codes = fp6Tables[i][j]
	}
	return ""
}

// perTensorScale sets NVFP4's per_tensor_scale t (one value, or one per
// expert of the L of a 3-D weight); a message says why it is not read.
func (k *aoFPKernel) perTensorScale(t *index.Tensor, nv bool, nd int, L int64) string {
	switch {
	case !nv:
		return "torchao MXTensor with a per_tensor_scale"
	case t.DType != dtype.F32:
		return fmt.Sprintf("torchao NVFP4Tensor per_tensor_scale is %s, not F32", t.DType)
	case isScalar(t) && len(t.Shape) != 3:
		k.pts = 1
	case nd == 3 && shapeIs(t, L, 1, 1):
		k.pts = 2
	default:
		return fmt.Sprintf("torchao NVFP4Tensor per_tensor_scale %v is neither one value nor one per expert", t.Shape)
	}
	return ""
}

// aoFP plans NVFP4Tensor and MXTensor.
func (p *planner) aoFP(name string, e *aoEntry, part map[string]string, stored []string) string {
	cls := e.Type
	nv := cls == "NVFP4Tensor"
	q, sc := p.t(part["qdata"]), p.t(part["scale"])
	k := &aoFPKernel{mx: !nv, out: dtype.F32}
	def := int64(32)
	if nv {
		def = 16
	}
	bs, ok := aoInt(e, "block_size", def)
	if !ok || nv && bs != 16 || !nv && (bs < 2 || bs%2 != 0 || bs > 1<<16) {
		return fmt.Sprintf("torchao %s block_size %s is not one tensorfs reads", cls, paramStr(e.Data["block_size"]))
	}
	k.bs = bs
	if nv {
		k.fp4 = true
	} else if msg := k.mxElems(e); msg != "" {
		return msg
	}
	if k.fp4 {
		q = p.codes(part["qdata"]) // F4 [.., M, K] (f4codes.go): the U8 [.., M, K/2] it holds
	}
	nd := len(q.Shape)
	if nd < 2 || nd > 3 || !dimsOK(q.Shape) {
		return fmt.Sprintf("torchao %s qdata has shape %v, not 2-D or 3-D", cls, q.Shape)
	}
	shape := append([]int64{}, q.Shape...)
	switch {
	case k.fp4 && q.DType != dtype.U8:
		return fmt.Sprintf("torchao %s qdata is %s, not U8 (two E2M1 codes a byte) or F4", cls, p.stored(q))
	case k.fp4:
		shape[nd-1] *= 2
	case k.fp6 && q.DType != dtype.U8:
		return fmt.Sprintf("torchao MXTensor qdata is %s, not U8 (one fp6 code a byte, unpacked)", p.stored(q))
	case k.codes == e4m3Table && q.DType != dtype.F8E4M3, k.codes == e5m2Table && q.DType != dtype.F8E5M2:
		return fmt.Sprintf("torchao MXTensor qdata is %s, not its elem_dtype", q.DType)
	}
	K, M := shape[nd-1], shape[nd-2]
	L := int64(1)
	if nd == 3 {
		L = shape[0]
	}
	if K%bs != 0 {
		return fmt.Sprintf("torchao %s K %d is not a multiple of block_size %d", cls, K, bs)
	}
	k.m, k.cols = M, K
	if k.swz, ok = aoBool(e, "is_swizzled_scales"); !ok {
		return fmt.Sprintf("torchao %s is_swizzled_scales is not a bool", cls)
	}
	if nv && sc.DType != dtype.F8E4M3 || !nv && sc.DType != dtype.F8E8M0 && sc.DType != dtype.U8 {
		return fmt.Sprintf("torchao %s scale is %s, not %s", cls, sc.DType, map[bool]string{true: "F8_E4M3", false: "F8_E8M0"}[nv])
	}
	nc := K / bs
	n := int64(1)
	for _, d := range sc.Shape {
		n *= d
	}
	want := L * M * nc
	if k.swz {
		want = ceilDiv(L*M, 128) * 128 * ceilDiv(nc, 4) * 4
	}
	if !dimsOK(sc.Shape) || n != want || !k.swz && sc.Shape[len(sc.Shape)-1] != nc {
		return fmt.Sprintf("torchao %s scale %v does not hold one scale per %d of %v (swizzled %v)", cls, sc.Shape, bs, shape, k.swz)
	}
	k.exactRange()
	parts := []string{part["qdata"], part["scale"]}
	if pt := part["per_tensor_scale"]; pt != "" {
		if msg := k.perTensorScale(p.t(pt), nv, nd, L); msg != "" {
			return msg
		}
		parts = append(parts, pt)
	}
	var hide []string
	hide = append(hide, stored...)
	scheme := "torchao-nvfp4"
	if !nv {
		scheme = "torchao-mx"
	}
	p.add(name, scheme, shape, parts, k, hide...)
	return ""
}
