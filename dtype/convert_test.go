package dtype

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"strings"
	"testing"

	"github.com/x448/float16"
)

// accelModes lists the kernel paths this machine can run: pure Go always,
// assembly when the CPU has it.
func accelModes() []bool {
	if hasAccel {
		return []bool{false, true}
	}
	return []bool{false}
}

// setAccel switches the assembly kernels for the rest of the test.
func setAccel(t testing.TB, on bool) {
	old := useAccel
	useAccel = on && hasAccel
	t.Cleanup(func() { useAccel = old })
}

func pathName(accel bool) string {
	if accel {
		return "asm"
	}
	return "go"
}

// elemBits reads element i of a buffer of dtype d (F4: nibble i).
func elemBits(d DType, b []byte, i int) uint64 {
	switch d {
	case F64:
		return binary.LittleEndian.Uint64(b[8*i:])
	case F32:
		return uint64(binary.LittleEndian.Uint32(b[4*i:]))
	case F16, BF16:
		return uint64(binary.LittleEndian.Uint16(b[2*i:]))
	case F4:
		return uint64(b[i/2] >> (4 * (i % 2)) & 15)
	}
	return uint64(b[i])
}

func putElem(d DType, b []byte, i int, v uint64) {
	switch d {
	case F64:
		binary.LittleEndian.PutUint64(b[8*i:], v)
	case F32:
		binary.LittleEndian.PutUint32(b[4*i:], uint32(v))
	case F16, BF16:
		binary.LittleEndian.PutUint16(b[2*i:], uint16(v))
	default:
		b[i] = byte(v)
	}
}

func elemCount(d DType, nbytes int) int {
	i := d.Info()
	return nbytes / int(i.BlockBytes) * int(i.BlockElems)
}

// mustConvert converts src from one dtype to another into a fresh buffer
// with a guard area, and checks the guard is untouched.
func mustConvert(t testing.TB, from, to DType, src []byte) []byte {
	t.Helper()
	c, ok := ConverterFor(from, to)
	if !ok {
		t.Fatalf("no converter %s -> %s", from, to)
	}
	n := elemCount(from, len(src)) * int(to.ElemSize())
	dst := make([]byte, n+16)
	for i := range dst {
		dst[i] = 0xA5
	}
	c(dst, src)
	for i := n; i < len(dst); i++ {
		if dst[i] != 0xA5 {
			t.Fatalf("%s -> %s wrote past its %d output bytes (byte %d)", from, to, n, i)
		}
	}
	return dst[:n]
}

// checkAgainstRef compares every element of the conversion of src with the
// reference.
func checkAgainstRef(t *testing.T, from, to DType, src []byte, useBig bool) {
	t.Helper()
	got := mustConvert(t, from, to, src)
	bad := 0
	for i := range elemCount(from, len(src)) {
		v := elemBits(from, src, i)
		want := refConvert(from, to, v, useBig)
		if g := elemBits(to, got, i); g != want {
			if bad++; bad <= 5 {
				t.Errorf("%s %#x -> %s: got %#x, want %#x", from, v, to, g, want)
			}
		}
	}
	if bad > 5 {
		t.Errorf("%s -> %s: %d mismatches in all", from, to, bad)
	}
}

// TestExhaustive16 converts every binary16 and bfloat16 value to every
// target, on every kernel path, and compares with the math/big reference.
// The inputs run in one buffer (the assembly takes the bulk) and again at
// odd lengths (the Go tail takes the rest).
func TestExhaustive16(t *testing.T) {
	for _, from := range []DType{F16, BF16} {
		src := make([]byte, 2*65536)
		for v := range 65536 {
			binary.LittleEndian.PutUint16(src[2*v:], uint16(v))
		}
		for _, to := range targets {
			for _, accel := range accelModes() {
				t.Run(fmt.Sprintf("%s-%s/%s", from, to, pathName(accel)), func(t *testing.T) {
					setAccel(t, accel)
					checkAgainstRef(t, from, to, src, true)
					checkAgainstRef(t, from, to, src[2*7:2*(7+1000+31)], true)
				})
			}
		}
	}
}

// TestExhaustiveSmall converts every value of the 8-bit formats and every
// F4 pair (both nibbles of all 256 bytes) to every target.
func TestExhaustiveSmall(t *testing.T) {
	src := make([]byte, 256)
	for v := range src {
		src[v] = byte(v)
	}
	for _, from := range []DType{F8E4M3, F8E5M2, F8E8M0, F4} {
		for _, to := range targets {
			t.Run(fmt.Sprintf("%s-%s", from, to), func(t *testing.T) {
				checkAgainstRef(t, from, to, src, true)
			})
		}
	}
}

// TestKnownValues pins the format decodings to values written out by hand,
// so that a wrong reference cannot hide a wrong converter.
func TestKnownValues(t *testing.T) {
	tests := []struct {
		from DType
		v    uint64
		want float64 // NaN for NaN
	}{
		{F8E4M3, 0x7e, 448}, {F8E4M3, 0xfe, -448}, {F8E4M3, 0x01, 1.0 / 512},
		{F8E4M3, 0x08, 1.0 / 64}, {F8E4M3, 0x38, 1}, {F8E4M3, 0x7f, math.NaN()},
		{F8E4M3, 0x78, 256}, {F8E4M3, 0x80, math.Copysign(0, -1)},
		{F8E5M2, 0x7b, 57344}, {F8E5M2, 0x7c, math.Inf(1)}, {F8E5M2, 0xfc, math.Inf(-1)},
		{F8E5M2, 0x01, 1.0 / 65536}, {F8E5M2, 0x3c, 1}, {F8E5M2, 0x7d, math.NaN()},
		{F8E8M0, 0, math.Ldexp(1, -127)}, {F8E8M0, 127, 1}, {F8E8M0, 254, math.Ldexp(1, 127)},
		{F8E8M0, 255, math.NaN()},
		{F4, 0, 0}, {F4, 1, 0.5}, {F4, 2, 1}, {F4, 3, 1.5}, {F4, 4, 2}, {F4, 5, 3},
		{F4, 6, 4}, {F4, 7, 6}, {F4, 8, math.Copysign(0, -1)}, {F4, 15, -6},
		{F16, 0x7bff, 65504}, {F16, 0x0001, math.Ldexp(1, -24)}, {F16, 0x3c00, 1},
		{BF16, 0x3f80, 1}, {BF16, 0x7f7f, math.Ldexp(255, 120)}, {BF16, 0x0001, math.Ldexp(1, -133)},
	}
	for _, tc := range tests {
		src := make([]byte, 8)
		if tc.from == F4 {
			src[0] = byte(tc.v) | byte(tc.v)<<4 // same value in both nibbles
		} else {
			putElem(tc.from, src, 0, tc.v)
			src = src[:tc.from.ElemSize()]
		}
		got := math.Float64frombits(binary.LittleEndian.Uint64(mustConvert(t, tc.from, F64, src)))
		if math.IsNaN(tc.want) {
			if !math.IsNaN(got) {
				t.Errorf("%s %#x: got %v, want NaN", tc.from, tc.v, got)
			}
			continue
		}
		if got != tc.want || math.Signbit(got) != math.Signbit(tc.want) {
			t.Errorf("%s %#x: got %v, want %v", tc.from, tc.v, got, tc.want)
		}
	}
	// F4 nibble order: the low nibble is element 0.
	got := mustConvert(t, F4, F32, []byte{0x72}) // elements 1.0 (0x2), then 6.0 (0x7)
	if a, b := math.Float32frombits(binary.LittleEndian.Uint32(got)), math.Float32frombits(binary.LittleEndian.Uint32(got[4:])); a != 1 || b != 6 {
		t.Errorf("F4 0x72 -> [%v %v], want [1 6] (low nibble first)", a, b)
	}
}

// TestReferencesAgree checks the two references against each other on
// random float64 values for every narrower target.
func TestReferencesAgree(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	n := 20000
	for _, to := range []DType{F32, F16, BF16} {
		for range n {
			v := randF64Bits(rng, formats[to])
			r := refDecode(F64, v)
			if a, b := refBig(r, formats[to]), refFloat(r, formats[to]); a != b {
				t.Fatalf("F64 %#x -> %s: refBig %#x, refFloat %#x", v, to, a, b)
			}
		}
	}
}

// randF64Bits returns a float64 bit pattern aimed at format t: an exponent
// in or near t's range (sometimes anywhere), and a mantissa whose bits
// below t's rounding position are one of the hard cases: zero, exactly
// half, just under or over half, or random. Some are NaN or Inf.
func randF64Bits(rng *rand.Rand, t format) uint64 {
	sign := uint64(rng.IntN(2)) << 63
	switch rng.IntN(40) {
	case 0:
		return sign | 0x7ff0000000000000 | rng.Uint64()>>12 // NaN or Inf
	case 1:
		return rng.Uint64() // anything
	case 2:
		return sign | rng.Uint64()>>12 // f64 subnormal
	}
	bias := t.bias()
	lo, hi := 1-bias-t.mbits-3, bias+2 // exponents in [lo, hi]
	e := lo + rng.IntN(hi-lo+1)
	be := uint64(e + 1023)
	cut := 52 - t.mbits // bits below the rounding position
	if e < 1-bias {
		cut += 1 - bias - e
	}
	cut = min(cut, 52)
	m := rng.Uint64() >> 12
	if cut > 0 {
		low := uint64(1) << (cut - 1) // half
		switch rng.IntN(6) {
		case 0:
			low = 0
		case 1:
			low--
		case 2:
			low++
		case 3:
			low = rng.Uint64() & (1<<cut - 1)
		case 4:
			low = 1<<cut - 1
		}
		m = m&^(1<<cut-1) | low&(1<<cut-1)
	}
	return sign | be<<52 | m&(1<<52-1)
}

// randF32Bits is randF64Bits for a float32 source.
func randF32Bits(rng *rand.Rand, t format) uint32 {
	sign := uint32(rng.IntN(2)) << 31
	switch rng.IntN(40) {
	case 0:
		return sign | 0x7f800000 | rng.Uint32()>>9
	case 1:
		return rng.Uint32()
	case 2:
		return sign | rng.Uint32()>>9
	}
	bias := t.bias()
	lo, hi := max(1-bias-t.mbits-3, -126), min(bias+2, 127)
	e := lo + rng.IntN(hi-lo+1)
	be := uint32(e + 127)
	cut := 23 - t.mbits
	if e < 1-bias {
		cut += 1 - bias - e
	}
	cut = min(cut, 23)
	m := rng.Uint32() >> 9
	if cut > 0 {
		low := uint32(1) << (cut - 1)
		switch rng.IntN(6) {
		case 0:
			low = 0
		case 1:
			low--
		case 2:
			low++
		case 3:
			low = rng.Uint32() & (1<<cut - 1)
		case 4:
			low = 1<<cut - 1
		}
		m = m&^(1<<cut-1) | low&(1<<cut-1)
	}
	return sign | be<<23 | m&(1<<23-1)
}

// TestF32Source: every sign, exponent and top-16-bit pattern with 48
// patterns of the low bits (the rounding bits of binary16 and bfloat16),
// then random values aimed at each target, on every kernel path.
func TestF32Source(t *testing.T) {
	var vals []uint32
	step := 1
	if raceEnabled || testing.Short() {
		step = 7
	}
	for hi := 0; hi < 1<<16; hi += step {
		for b13 := range 8 {
			for _, low := range []uint32{0, 1, 0xfff, 0x1000, 0x1001, 0x1fff} {
				vals = append(vals, uint32(hi)<<16|uint32(b13)<<13|low)
			}
		}
	}
	rng := rand.New(rand.NewPCG(3, 4))
	for range 50000 {
		for _, to := range []DType{F16, BF16} {
			vals = append(vals, randF32Bits(rng, formats[to]))
		}
	}
	src := make([]byte, 4*len(vals))
	for i, v := range vals {
		binary.LittleEndian.PutUint32(src[4*i:], v)
	}
	for _, to := range targets {
		for _, accel := range accelModes() {
			t.Run(fmt.Sprintf("%s/%s", to, pathName(accel)), func(t *testing.T) {
				setAccel(t, accel)
				checkAgainstRef(t, F32, to, src, false)
				checkAgainstRef(t, F32, to, src[4*3:4*(3+101)], false)
			})
		}
	}
	t.Run("big", func(t *testing.T) { // a sample against the big.Float reference too
		for _, to := range targets {
			checkAgainstRef(t, F32, to, src[len(src)-4*20000:], true)
		}
	})
}

// TestF64Source: random float64 values aimed at each target's rounding
// positions and exponent range (subnormal results, overflow thresholds),
// against both references. F64 to F16 and BF16 round once, directly.
func TestF64Source(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	var vals []uint64
	for range 100000 {
		for _, to := range []DType{F32, F16, BF16} {
			vals = append(vals, randF64Bits(rng, formats[to]))
		}
	}
	// Values that round differently when rounded through binary32 first.
	vals = append(vals,
		0x3ff0_0200_0000_0001, // 1 + 2^-11 + tiny: F16 rounds up; via F32 it would tie and go down
		0x3ff0_1000_0000_0001, // BF16 likewise (1 + 2^-8 + tiny)
		0x40ef_fe00_0000_0001, // just above 65520 - ... overflow edge region for F16
		0x40ef_fe00_0000_0000, // 65520: the F16 overflow tie -> Inf
		0x40ef_fdff_ffff_ffff, // just under: 65504
		0x3e70_0000_0000_0000, // 2^-24: smallest F16 subnormal
		0x3e60_0000_0000_0000, // 2^-25: tie -> 0
		0x3e60_0000_0000_0001, // just above 2^-25 -> 2^-24
	)
	src := make([]byte, 8*len(vals))
	for i, v := range vals {
		binary.LittleEndian.PutUint64(src[8*i:], v)
	}
	for _, to := range targets {
		t.Run(to.String(), func(t *testing.T) {
			checkAgainstRef(t, F64, to, src, false)
			checkAgainstRef(t, F64, to, src[len(src)-8*30000:], true)
		})
	}
	// The double-rounding cases by name.
	for _, tc := range []struct {
		v    uint64
		to   DType
		want uint64
	}{
		{0x3ff0_0200_0000_0001, F16, 0x3c01},
		{0x3ff0_1000_0000_0001, BF16, 0x3f81},
		{0x40ef_fe00_0000_0000, F16, 0x7c00},
		{0x40ef_fdff_ffff_ffff, F16, 0x7bff},
		{0x3e60_0000_0000_0000, F16, 0x0000},
		{0x3e60_0000_0000_0001, F16, 0x0001},
	} {
		src := binary.LittleEndian.AppendUint64(nil, tc.v)
		if got := elemBits(tc.to, mustConvert(t, F64, tc.to, src), 0); got != tc.want {
			t.Errorf("F64 %#x -> %s: got %#x, want %#x", tc.v, tc.to, got, tc.want)
		}
	}
}

// TestX448 cross-checks binary16 against github.com/x448/float16 (round to
// nearest even, NaN quiet with the top payload bits: the same rule).
func TestX448(t *testing.T) {
	for _, accel := range accelModes() {
		t.Run(pathName(accel), func(t *testing.T) {
			setAccel(t, accel)
			src := make([]byte, 2*65536)
			for v := range 65536 {
				binary.LittleEndian.PutUint16(src[2*v:], uint16(v))
			}
			got := mustConvert(t, F16, F32, src)
			for v := range 65536 {
				if g, w := binary.LittleEndian.Uint32(got[4*v:]), math.Float32bits(float16.Frombits(uint16(v)).Float32()); g != w {
					t.Fatalf("F16 %#04x -> F32: got %#x, x448 %#x", v, g, w)
				}
			}
			rng := rand.New(rand.NewPCG(7, 8))
			n := 1 << 20
			if raceEnabled {
				n = 1 << 16
			}
			f32 := make([]byte, 4*n)
			for i := range n {
				var v uint32
				if i%2 == 0 {
					v = rng.Uint32()
				} else {
					v = randF32Bits(rng, formats[F16])
				}
				binary.LittleEndian.PutUint32(f32[4*i:], v)
			}
			got = mustConvert(t, F32, F16, f32)
			for i := range n {
				v := binary.LittleEndian.Uint32(f32[4*i:])
				if g, w := binary.LittleEndian.Uint16(got[2*i:]), float16.Fromfloat32(math.Float32frombits(v)).Bits(); g != w {
					t.Fatalf("F32 %#x -> F16: got %#x, x448 %#x", v, g, w)
				}
			}
		})
	}
}

// TestConverterTable: which pairs convert, and that ConverterFor agrees
// with CanConvert and the dtype table.
func TestConverterTable(t *testing.T) {
	all := append(All(), Invalid, DType(200))
	for _, from := range all {
		for _, to := range all {
			c, ok := ConverterFor(from, to)
			if ok != (c != nil) || ok != CanConvert(from, to) {
				t.Fatalf("%s -> %s: ConverterFor ok=%v c!=nil=%v CanConvert=%v", from, to, ok, c != nil, CanConvert(from, to))
			}
			var want bool
			switch {
			case !to.IsFloatView() || !from.Valid():
				want = false
			case from.Kind() == KindFloat:
				want = true
			case from.Kind() == KindQuant:
				_, want = quantDequantizer(from)
			}
			if ok != want {
				t.Errorf("%s -> %s: ConverterFor ok=%v, want %v", from, to, ok, want)
			}
		}
	}
	for _, d := range []DType{I64, I32, I16, I8, U64, U32, U16, U8, Bool, C64, C128, C32} {
		if CanConvert(d, F32) {
			t.Errorf("%s converts to F32; integers, bool and complex must not", d)
		}
	}
	if CanConvert(F32, I32) || CanConvert(F16, F8E4M3) {
		t.Error("converts to a non-view target")
	}
}

// TestIdentity: a dtype converts to itself by copying, signalling NaNs
// included.
func TestIdentity(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 10))
	for _, d := range targets {
		src := make([]byte, 8*257)
		for i := range src {
			src[i] = byte(rng.Uint32())
		}
		src = src[:int(d.ElemSize())*257]
		if got := mustConvert(t, d, d, src); !bytes.Equal(got, src) {
			t.Errorf("%s -> %s is not a copy", d, d)
		}
	}
}

// TestSubRanges: converting any run of whole blocks equals the same run of
// the whole conversion, for every pair, on every kernel path.
func TestSubRanges(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 12))
	for _, accel := range accelModes() {
		setAccel(t, accel)
		for _, from := range All() {
			for _, to := range targets {
				if !CanConvert(from, to) {
					continue
				}
				bb := int(from.Info().BlockBytes)
				nblocks := 300
				if bb > 8 {
					nblocks = 40
				}
				src := make([]byte, bb*nblocks)
				for i := range src {
					src[i] = byte(rng.Uint32())
				}
				whole := mustConvert(t, from, to, src)
				per := len(whole) / nblocks
				for range 30 {
					a := rng.IntN(nblocks + 1)
					b := a + rng.IntN(nblocks-a+1)
					got := mustConvert(t, from, to, src[a*bb:b*bb])
					if !bytes.Equal(got, whole[a*per:b*per]) {
						t.Fatalf("%s -> %s (%s): blocks [%d,%d) differ from the whole conversion", from, to, pathName(accel), a, b)
					}
				}
			}
		}
	}
}

// TestContract: a src that is not whole blocks, or a short dst, panics; a
// longer dst is written only at the start; empty input is fine.
func TestContract(t *testing.T) {
	mustPanic := func(name string, f func()) {
		t.Helper()
		defer func() {
			if r := recover(); r == nil {
				t.Errorf("%s: no panic", name)
			} else if msg, _ := r.(string); !strings.HasPrefix(msg, "dtype: ") {
				t.Errorf("%s: panic %v, want a dtype: message", name, r)
			}
		}()
		f()
	}
	c, _ := ConverterFor(F16, F32)
	mustPanic("odd src", func() { c(make([]byte, 8), make([]byte, 3)) })
	mustPanic("short dst", func() { c(make([]byte, 7), make([]byte, 4)) })
	c(nil, nil)
	c(make([]byte, 4), nil)
	dst := []byte{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}
	c(dst, []byte{0x00, 0x3c}) // 1.0
	if !bytes.Equal(dst, []byte{0, 0, 0x80, 0x3f, 5, 6, 7, 8, 9, 10}) {
		t.Errorf("F16 1.0 -> F32 into a longer dst: %x", dst)
	}
	c4, _ := ConverterFor(F4, F16)
	mustPanic("F4 short dst", func() { c4(make([]byte, 3), []byte{0x11}) })
	if c, ok := ConverterFor(F32, F32); ok {
		mustPanic("identity short dst", func() { c(make([]byte, 3), make([]byte, 4)) })
	}
}

// TestNoAllocs: ConverterFor and every converter run without allocating.
func TestNoAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector changes allocation counts")
	}
	src := make([]byte, 1<<15)
	for _, from := range All() {
		for _, to := range targets {
			c, ok := ConverterFor(from, to)
			if !ok {
				continue
			}
			bb := int(from.Info().BlockBytes)
			s := src[:len(src)/bb*bb]
			dst := make([]byte, elemCount(from, len(s))*int(to.ElemSize()))
			if a := testing.AllocsPerRun(20, func() { c(dst, s) }); a != 0 {
				t.Errorf("%s -> %s: %v allocations per conversion", from, to, a)
			}
			if a := testing.AllocsPerRun(20, func() { ConverterFor(from, to) }); a != 0 {
				t.Errorf("ConverterFor(%s, %s): %v allocations", from, to, a)
			}
		}
	}
}

// TestF32Exhaustive converts all 2^32 float32 values to F16 and BF16 on
// every kernel path, against x448/float16 (F16) and the float64 reference
// (BF16). It takes minutes, so it runs only with TENSORFS_EXHAUSTIVE=1.
func TestF32Exhaustive(t *testing.T) {
	if os.Getenv("TENSORFS_EXHAUSTIVE") != "1" {
		t.Skip("set TENSORFS_EXHAUSTIVE=1 to convert all 2^32 float32 values")
	}
	src := make([]byte, 4<<16)
	for hi := range 1 << 16 {
		for lo := range 1 << 16 {
			binary.LittleEndian.PutUint32(src[4*lo:], uint32(hi)<<16|uint32(lo))
		}
		for _, to := range []DType{F16, BF16} {
			var outs [][]byte
			for _, accel := range accelModes() {
				useAccel = accel && hasAccel
				outs = append(outs, mustConvert(t, F32, to, src))
			}
			useAccel = hasAccel
			if len(outs) == 2 && !bytes.Equal(outs[0], outs[1]) {
				t.Fatalf("F32 %#04x____ -> %s: assembly and Go differ", hi, to)
			}
			for lo := range 1 << 16 {
				v := uint32(hi)<<16 | uint32(lo)
				g := binary.LittleEndian.Uint16(outs[0][2*lo:])
				var w uint16
				if to == F16 {
					w = float16.Fromfloat32(math.Float32frombits(v)).Bits()
				} else {
					w = uint16(refConvert(F32, BF16, uint64(v), false))
				}
				if g != w {
					t.Fatalf("F32 %#x -> %s: got %#x, want %#x", v, to, g, w)
				}
			}
		}
	}
}
