package dtype

// Independent reference for the converters: sources are decoded by the
// formula of their format into exact values, and rounded to the target by
// math/big.Float at the target's precision (refBig) or by explicit
// round-to-nearest-even float64 arithmetic (refFloat). Neither calls the
// code under test; TestReferencesAgree checks them against each other.

import (
	"math"
	"math/big"
)

// format describes a binary floating-point layout.
type format struct {
	ebits, mbits int
	ieee         bool // all-ones exponent: Inf (mantissa 0) or NaN
	e4m3         bool // only S.1111.111 is NaN, no Inf
	unsigned     bool // no sign bit (E8M0)
	noMant       bool // E8M0: value 2^(e-127), 0xFF NaN
	payload      bool // a NaN carries a payload into the target
	fnuz         int  // "fnuz": this bias, no Inf, no -0, 0x80 the only NaN (positive, no payload)
}

var formats = map[DType]format{
	F64:    {ebits: 11, mbits: 52, ieee: true, payload: true},
	F32:    {ebits: 8, mbits: 23, ieee: true, payload: true},
	F16:    {ebits: 5, mbits: 10, ieee: true, payload: true},
	BF16:   {ebits: 8, mbits: 7, ieee: true, payload: true},
	F8E5M2: {ebits: 5, mbits: 2, ieee: true, payload: true},
	F8E4M3: {ebits: 4, mbits: 3, e4m3: true},
	F8E8M0: {ebits: 8, unsigned: true, noMant: true},
	F4:     {ebits: 2, mbits: 1},

	F8E4M3FNUZ: {ebits: 4, mbits: 3, fnuz: 8},
	F8E5M2FNUZ: {ebits: 5, mbits: 2, fnuz: 16},
}

func (f format) bias() int {
	if f.fnuz != 0 {
		return f.fnuz
	}
	return 1<<(f.ebits-1) - 1
}

// refVal is one decoded source element.
type refVal struct {
	neg, nan, inf bool
	frac          uint64 // NaN: the mantissa, left-aligned in 64 bits (0: no payload)
	sig           uint64 // finite: value = sig * 2^exp
	exp           int
}

// refDecode decodes the element with bits v of dtype d by formula.
func refDecode(d DType, v uint64) refVal {
	f := formats[d]
	if f.noMant { // E8M0
		if v == 0xff {
			return refVal{nan: true}
		}
		return refVal{sig: 1, exp: int(v) - 127}
	}
	if f.fnuz != 0 && v == 0x80 {
		return refVal{nan: true}
	}
	var r refVal
	r.neg = v>>(f.ebits+f.mbits)&1 == 1
	e := int(v >> f.mbits & (1<<f.ebits - 1))
	m := v & (1<<f.mbits - 1)
	maxE := 1<<f.ebits - 1
	switch {
	case f.ieee && e == maxE && m == 0:
		r.inf = true
	case f.ieee && e == maxE || f.e4m3 && e == maxE && m == 1<<f.mbits-1:
		r.nan = true
		if f.payload {
			r.frac = m << (64 - f.mbits)
		}
	case e == 0:
		r.sig, r.exp = m, 1-f.bias()-f.mbits
	default:
		r.sig, r.exp = 1<<f.mbits|m, e-f.bias()-f.mbits
	}
	return r
}

// refSpecial encodes NaN, Inf and zero in target format t, and reports
// whether r was one of them. NaN: quiet, the source's sign, the top bits of
// the source payload.
func refSpecial(r refVal, t format) (uint64, bool) {
	var sign uint64
	if r.neg {
		sign = 1 << (t.ebits + t.mbits)
	}
	expAll := uint64(1<<t.ebits-1) << t.mbits
	switch {
	case r.nan:
		return sign | expAll | 1<<(t.mbits-1) | r.frac>>(64-t.mbits), true
	case r.inf:
		return sign | expAll, true
	case r.sig == 0:
		return sign, true
	}
	return sign, false
}

// refBig converts r to target format t, rounding with math/big.Float.
func refBig(r refVal, t format) uint64 {
	sign, done := refSpecial(r, t)
	if done {
		return sign
	}
	x := new(big.Float).SetMantExp(new(big.Float).SetUint64(r.sig), r.exp)
	bias := t.bias()
	emin, emax := 1-bias, bias
	e := x.MantExp(nil) - 1 // x in [2^e, 2^(e+1))
	p := t.mbits + 1        // significant bits available at this exponent
	if e < emin {
		p -= emin - e
	}
	z := new(big.Float)
	switch {
	case p >= 1:
		z.SetMode(big.ToNearestEven).SetPrec(uint(p)).Set(x)
	case p == 0: // below the smallest subnormal, at or above half of it
		half := new(big.Float).SetMantExp(big.NewFloat(1), emin-t.mbits-1)
		if x.Cmp(half) != 0 {
			z.SetMantExp(big.NewFloat(1), emin-t.mbits)
		}
	}
	if z.Sign() == 0 {
		return sign
	}
	ze := z.MantExp(nil) - 1
	if ze > emax {
		return sign | uint64(1<<t.ebits-1)<<t.mbits
	}
	if ze < emin {
		m, acc := new(big.Float).SetMantExp(z, t.mbits-emin).Uint64()
		if acc != big.Exact {
			panic("refBig: inexact subnormal")
		}
		return sign | m
	}
	m, acc := new(big.Float).SetMantExp(z, t.mbits-ze).Uint64()
	if acc != big.Exact || m>>t.mbits != 1 {
		panic("refBig: bad normal")
	}
	return sign | uint64(ze+bias)<<t.mbits | m&(1<<t.mbits-1)
}

// refFloat converts r (whose value must fit a float64 exactly, which every
// source does) to target format t, rounding with float64 arithmetic: cut
// to a multiple of the target's quantum, compare the exact remainder with
// one half.
func refFloat(r refVal, t format) uint64 {
	sign, done := refSpecial(r, t)
	if done {
		return sign
	}
	x := math.Ldexp(float64(r.sig), r.exp)
	bias := t.bias()
	emin, emax := 1-bias, bias
	_, e := math.Frexp(x)
	e-- // x in [2^e, 2^(e+1))
	qe := max(e, emin) - t.mbits
	y := math.Ldexp(x, -qe) // exact: a power-of-two scaling into [0, 2^(mbits+1))
	n := math.Floor(y)
	if rem := y - n; rem > 0.5 || rem == 0.5 && math.Mod(n, 2) == 1 {
		n++
	}
	if n == 0 {
		return sign
	}
	v := math.Ldexp(n, qe)
	_, ve := math.Frexp(v)
	ve--
	switch {
	case ve > emax:
		return sign | uint64(1<<t.ebits-1)<<t.mbits
	case ve < emin:
		return sign | uint64(math.Ldexp(v, t.mbits-emin))
	default:
		m := uint64(math.Ldexp(v, t.mbits-ve)) - 1<<t.mbits
		return sign | uint64(ve+bias)<<t.mbits | m
	}
}

// refConvert is the expected output bits of one element: an identity
// conversion copies, anything else decodes and rounds (refBig when big is
// set, refFloat otherwise).
func refConvert(from, to DType, v uint64, useBig bool) uint64 {
	if from == to {
		return v
	}
	r := refDecode(from, v)
	if useBig {
		return refBig(r, formats[to])
	}
	return refFloat(r, formats[to])
}
