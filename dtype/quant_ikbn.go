package dtype

// ik_llama.cpp's BitNet ternary types IQ1_BN and IQ2_BN (ggml codes 134,
// 135): each row is a scale (row_meta_size in its ggml.c: an fp16 for
// IQ1_BN, a float32 for IQ2_BN) followed by blocks of 64 ternary codes t
// in {−1, 0, +1}. A weight is scale·t, the float32 product: that is what
// ik_llama.cpp's matrix multiplication computes with (iqk_gemm_1bit.cpp
// multiplies each row's integer dot product of the codes by the row's
// scale, read from the row's head), what its CUDA dequantizers write
// (convert.cu, d·(t) after skipping the scale) and what its own
// IQ2_BN_R4 dequantizer writes (d4[k]·(q − 1)). Its CPU
// dequantize_row_iq1_bn / _iq2_bn give t from blocks alone (the row's
// scale neither skipped nor applied), so the reference
// (testdata/ikllama2/seed47bn, README.md there) is those t, from the
// blocks after the scale, times the scale. IQ2_BN's fourth code (3, which
// ik_llama.cpp's quantizer never writes) is t = 2 as
// dequantize_row_iq2_bn gives it.

// bnRowTypes are the _BN types in quant_ikrow.go's shape.
var bnRowTypes = []ikRowType{
	{"IQ1_BN", 134, 2, 13, dequantIQ1BNRow},
	{"IQ2_BN", 135, 4, 16, dequantIQ2BNRow},
}

// iq1bnTrits[q][j] is t+1 for trit j of an IQ1_BN byte q, as
// dequantize_row_iq1_bn reads it: v = q·3^(4−j) mod 256, t+1 =
// (v + v/2) / 128. Byte extra's trit i16 is the same with j = i16.
var iq1bnTrits = func() (t [256][5]uint8) {
	mult := [5]uint8{81, 27, 9, 3, 1}
	for q := range t {
		for j, m := range mult {
			v := uint32(uint8(q) * m)
			t[q][j] = uint8((v + v>>1) >> 7)
		}
	}
	return t
}()

// bnValues returns scale·t for t = −1, 0, 1, 2 (index t+1), each the
// float32 product (a negative scale gives −0 for t = 0).
func bnValues(d float32) [4]float32 {
	var v [4]float32
	for i := range v {
		v[i] = d * float32(i-1)
	}
	return v
}

// IQ1_BN: fp16 d; blocks {u8 ql[12]; u8 extra}: per 16 elements i16,
// three bytes of five trits (ql[3·i16+k] holds elements 16·i16+5k+j) and
// element 16·i16+15 in trit i16 of extra.
func dequantIQ1BNRow(dst []float32, meta, blocks []byte) {
	const bs = 13
	v := bnValues(quantHalfAt(meta))
	for i := 0; i < len(dst)/64; i++ {
		b := (*[bs]byte)(blocks[i*bs:])
		y := (*[64]float32)(dst[i*64:])
		ex := &iq1bnTrits[b[12]]
		for i16 := 0; i16 < 4; i16++ {
			yy := (*[16]float32)(y[16*i16:])
			for k := 0; k < 3; k++ {
				tr := &iq1bnTrits[b[3*i16+k]]
				yk := (*[5]float32)(yy[5*k:])
				yk[0], yk[1], yk[2], yk[3], yk[4] = v[tr[0]&3], v[tr[1]&3], v[tr[2]&3], v[tr[3]&3], v[tr[4]&3]
			}
			yy[15] = v[ex[i16]&3]
		}
	}
}

// IQ2_BN: float32 d; blocks {u8 qs[16]}: element j + 16·l is bits 2l..2l+1
// of qs[j], t = code − 1.
func dequantIQ2BNRow(dst []float32, meta, blocks []byte) {
	const bs = 16
	v := bnValues(ikRowF32(meta))
	for i := 0; i < len(dst)/64; i++ {
		qs := (*[bs]byte)(blocks[i*bs:])
		y := (*[64]float32)(dst[i*64:])
		for j, q := range qs {
			y[j] = v[q&3]
			y[j+16] = v[q>>2&3]
			y[j+32] = v[q>>4&3]
			y[j+48] = v[q>>6]
		}
	}
}
