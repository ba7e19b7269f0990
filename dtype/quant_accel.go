package dtype

import "encoding/binary"

// The vector path of the hot dequantizers (Q4_K, Q6_K, Q8_0, Q8_1, TQ2_0,
// IQ4_XS, IQ4_NL, MXFP4, NVFP4 and the IQ2/IQ3 grids). Go computes each
// block's float32 scales (and mins) exactly as the plain loop does, and for
// the grid types puts each group's grid bytes and sign mask (eight at a
// time, in uint64 words) into a batch; a primitive (quant_accel_amd64.go,
// AVX2) then does the per-element float32 arithmetic in ggml's order. With
// useAccel false (no AVX2, or the purego tag) the plain loops run; tests
// compare the two paths on every type.

// quantSignMask spreads the 8 bits of s over 8 bytes: 0xFF where the bit
// is set, element 0 in the low byte.
func quantSignMask(s uint8) uint64 {
	t := uint64(s) * 0x0101010101010101 & 0x8040201008040201
	return ((t + 0x7f7f7f7f7f7f7f7f) & 0x8080808080808080 >> 7) * 0xff
}

// quantBatch holds one block's codes (256), sign masks and scales.
type quantBatch struct {
	q     [256]byte
	neg   [256]byte
	scale [16]float32
	min   [16]float32 // stays 0: x - 0 is x
}

// kvaluesIdentity makes quantNib's lookup the nibble itself.
var kvaluesIdentity = [16]int8{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15}

func dequantQ4KAccel(dst []float32, src []byte) {
	const bs = 144
	n := len(src) / bs
	var s quantBatch
	for i := 0; i < n; i++ {
		b := (*[bs]byte)(src[i*bs:])
		d := quantHalfAt(b[0:])
		min := quantHalfAt(b[2:])
		scales := (*[12]byte)(b[4:])
		for j := 0; j < 8; j++ {
			sc, m := quantScaleMinK4(j, scales)
			s.scale[j], s.min[j] = d*float32(sc), min*float32(m)
		}
		quantNib(dst[i*256:], b[16:], 4, 32, 32, s.scale[:8], s.min[:8], &kvaluesIdentity)
	}
}

func dequantQ6KAccel(dst []float32, src []byte) {
	const bs = 210
	n := len(src) / bs
	var scale [16]float32
	for i := 0; i < n; i++ {
		b := (*[bs]byte)(src[i*bs:])
		d := quantHalfAt(b[208:])
		for g := 0; g < 16; g++ {
			scale[g] = d * float32(int8(b[192+g]))
		}
		quantQ6K((*[256]float32)(dst[i*256:]), b, &scale)
	}
}

func dequantIQ4XSAccel(dst []float32, src []byte) {
	const bs = 136
	n := len(src) / bs
	var s quantBatch
	for i := 0; i < n; i++ {
		b := (*[bs]byte)(src[i*bs:])
		d := quantHalfAt(b[0:])
		sh := uint32(binary.LittleEndian.Uint16(b[2:]))
		for ib := 0; ib < 8; ib++ {
			ls := int32(b[4+ib/2]>>(4*(ib%2))&0xf) | int32(sh>>(2*ib)&3)<<4
			s.scale[2*ib] = d * float32(ls-32)
			s.scale[2*ib+1] = s.scale[2*ib]
		}
		quantNib(dst[i*256:], b[8:], 8, 16, 16, s.scale[:], s.min[:], &kvaluesIQ4NL)
	}
}

// quantBatchBig holds the scales of up to 128 blocks of 32.
type quantBatchBig struct {
	scale [256]float32
	min   [256]float32
}

// dequantNib32Accel is IQ4_NL and MXFP4: blocks of 32 (bs bytes, 16 of
// nibbles at off), scale(block), lut; up to 128 blocks a call.
func dequantNib32Accel(dst []float32, src []byte, bs, off int, scale func(b []byte) float32, lut *[16]int8) {
	n := len(src) / bs
	var s quantBatchBig
	for i := 0; i < n; i += 128 {
		k := min(128, n-i)
		for j := 0; j < k; j++ {
			d := scale(src[(i+j)*bs:])
			s.scale[2*j], s.scale[2*j+1] = d, d
		}
		quantNib(dst[i*32:], src[i*bs+off:], k, 16, bs, s.scale[:2*k], s.min[:2*k], lut)
	}
}

// dequantQ8Accel is Q8_0 (34-byte blocks) and Q8_1 (36): an fp16 scale,
// then 32 int8 codes at off.
func dequantQ8Accel(dst []float32, src []byte, bs, off int) {
	quantQ8(dst, src[:len(src)/bs*bs], bs, off)
}

func dequantTQ2_0Accel(dst []float32, src []byte) {
	const bs = 66
	n := len(src) / bs
	var scale [128]float32
	for i := 0; i < n; i += 128 {
		k := min(128, n-i)
		for j := 0; j < k; j++ {
			scale[j] = quantHalfAt(src[(i+j)*bs+64:])
		}
		quantTQ2(dst[i*256:], src[i*bs:], k, scale[:k])
	}
}

func dequantIQ4NLAccel(dst []float32, src []byte) {
	dequantNib32Accel(dst, src, 18, 2, quantHalfAt, &kvaluesIQ4NL)
}

func dequantMXFP4Accel(dst []float32, src []byte) {
	dequantNib32Accel(dst, src, 17, 1, func(b []byte) float32 { return quantE8M0Half(b[0]) }, &kvaluesMXFP4)
}

// quantBatchNV holds up to 64 NVFP4 blocks' nibbles, contiguous, and
// their sub-block scales.
type quantBatchNV struct {
	q     [64 * 32]byte
	scale [512]float32
	min   [512]float32
}

func dequantNVFP4Accel(dst []float32, src []byte) {
	const bs = 36
	n := len(src) / bs
	var s quantBatchNV
	for i := 0; i < n; i += 64 {
		k := min(64, n-i)
		for j := 0; j < k; j++ {
			b := (*[bs]byte)(src[(i+j)*bs:])
			for sb := 0; sb < 4; sb++ {
				d := quantUE4M3(b[sb])
				s.scale[8*j+2*sb], s.scale[8*j+2*sb+1] = d, d
			}
			copy(s.q[32*j:32*j+32], b[4:])
		}
		quantNib(dst[i*64:], s.q[:32*k], 4*k, 8, 8, s.scale[:8*k], s.min[:8*k], &kvaluesMXFP4)
	}
}

// group puts group k of 8: grid bytes g and the sign mask neg.
func (s *quantBatch) group(k int, g, neg uint64) {
	binary.LittleEndian.PutUint64(s.q[8*k:], g)
	binary.LittleEndian.PutUint64(s.neg[8*k:], neg)
}

func dequantIQ2XXSAccel(dst []float32, src []byte) {
	const bs = 66
	n := len(src) / bs
	var s quantBatch
	for i := 0; i < n; i++ {
		b := (*[bs]byte)(src[i*bs:])
		d := quantHalfAt(b[0:])
		for ib := 0; ib < 8; ib++ {
			a0 := binary.LittleEndian.Uint32(b[2+8*ib:])
			a1 := binary.LittleEndian.Uint32(b[6+8*ib:])
			db := float32(d*(0.5+float32(a1>>28))) * 0.25
			s.scale[2*ib], s.scale[2*ib+1] = db, db
			for l := 0; l < 4; l++ {
				s.group(4*ib+l, iq2xxsGrid[uint8(a0>>(8*l))], ksigns64[a1>>(7*l)&127])
			}
		}
		quantSigned(dst[i*256:], s.q[:], s.neg[:], s.scale[:])
	}
}

func dequantIQ2XSAccel(dst []float32, src []byte) {
	const bs = 74
	n := len(src) / bs
	var s quantBatch
	for i := 0; i < n; i++ {
		b := (*[bs]byte)(src[i*bs:])
		d := quantHalfAt(b[0:])
		for ib := 0; ib < 8; ib++ {
			sc := b[66+ib]
			s.scale[2*ib] = float32(d*(0.5+float32(sc&0xf))) * 0.25
			s.scale[2*ib+1] = float32(d*(0.5+float32(sc>>4))) * 0.25
			for l := 0; l < 4; l++ {
				q := binary.LittleEndian.Uint16(b[2+2*(4*ib+l):])
				s.group(4*ib+l, iq2xsGrid[q&511], ksigns64[q>>9])
			}
		}
		quantSigned(dst[i*256:], s.q[:], s.neg[:], s.scale[:])
	}
}

func dequantIQ2SAccel(dst []float32, src []byte) {
	const bs = 82
	n := len(src) / bs
	var s quantBatch
	for i := 0; i < n; i++ {
		b := (*[bs]byte)(src[i*bs:])
		d := quantHalfAt(b[0:])
		for ib := 0; ib < 8; ib++ {
			sc := b[74+ib]
			s.scale[2*ib] = float32(d*(0.5+float32(sc&0xf))) * 0.25
			s.scale[2*ib+1] = float32(d*(0.5+float32(sc>>4))) * 0.25
			qh := uint32(b[66+ib])
			for l := 0; l < 4; l++ {
				idx := uint32(b[2+4*ib+l]) | qh<<(8-2*l)&0x300
				s.group(4*ib+l, iq2sGrid[idx], quantSignMask(b[34+4*ib+l]))
			}
		}
		quantSigned(dst[i*256:], s.q[:], s.neg[:], s.scale[:])
	}
}

func dequantIQ3XXSAccel(dst []float32, src []byte) {
	const bs = 98
	n := len(src) / bs
	var s quantBatch
	for i := 0; i < n; i++ {
		b := (*[bs]byte)(src[i*bs:])
		d := quantHalfAt(b[0:])
		for ib := 0; ib < 8; ib++ {
			aux := binary.LittleEndian.Uint32(b[66+4*ib:])
			db := float32(d*(0.5+float32(aux>>28))) * 0.5
			s.scale[2*ib], s.scale[2*ib+1] = db, db
			for l := 0; l < 4; l++ {
				g := uint64(iq3xxsGrid[b[2+8*ib+2*l]]) | uint64(iq3xxsGrid[b[3+8*ib+2*l]])<<32
				s.group(4*ib+l, g, ksigns64[aux>>(7*l)&127])
			}
		}
		quantSigned(dst[i*256:], s.q[:], s.neg[:], s.scale[:])
	}
}

func dequantIQ3SAccel(dst []float32, src []byte) {
	const bs = 110
	n := len(src) / bs
	var s quantBatch
	for i := 0; i < n; i++ {
		b := (*[bs]byte)(src[i*bs:])
		d := quantHalfAt(b[0:])
		for ib := 0; ib < 8; ib++ {
			sc := b[106+ib/2] >> (4 * (ib & 1)) & 0xf
			db := d * float32(1+2*int32(sc))
			s.scale[2*ib], s.scale[2*ib+1] = db, db
			qh := uint32(b[66+ib])
			for l := 0; l < 4; l++ {
				g1 := iq3sGrid[uint32(b[2+8*ib+2*l])|qh<<(8-2*l)&256]
				g2 := iq3sGrid[uint32(b[3+8*ib+2*l])|qh<<(7-2*l)&256]
				s.group(4*ib+l, uint64(g1)|uint64(g2)<<32, quantSignMask(b[74+4*ib+l]))
			}
		}
		quantSigned(dst[i*256:], s.q[:], s.neg[:], s.scale[:])
	}
}
