package dtype

import (
	"encoding/binary"
	"math"
)

// ik_llama.cpp's 8-bit row-interleaved types that llama-quantize writes
// ("Q8_K repacked", "Q8_KV repacked": examples/quantize/quantize.cpp at
// 8337e4cd), each value the float32 its dequantize_row_q8_k_r8 /
// dequantize_row_q8_KV_r8 (iqk/iqk_quantize.cpp) gives: one product of
// the row's scale and an int8 code. Checked bit for bit against
// testdata/ikllama2/seed49r.

// Q8_K_R8 (399): blocks of 256 for 8 rows, {f16 d[8]; i8 qs[2048]}: row
// k's element 4j+i (j < 64, i < 4) at qs[32j+4k+i], d[k]·q.
func dequantQ8KR8Block(y [][]float32, b []byte, ib int) {
	b = b[:2064]
	qs := (*[2048]byte)(b[16:])
	for k := 0; k < 8; k++ {
		d := quantHalfAt(b[2*k:])
		yk := (*[256]float32)(y[k][256*ib:])
		for j := 0; j < 64; j++ {
			q := (*[4]byte)(qs[32*j+4*k:])
			yj := (*[4]float32)(yk[4*j:])
			yj[0] = d * float32(int8(q[0]))
			yj[1] = d * float32(int8(q[1]))
			yj[2] = d * float32(int8(q[2]))
			yj[3] = d * float32(int8(q[3]))
		}
	}
}

// Q8_KV_R8 (398): a group of 8 rows starts with the rows' float32 scales
// (ggml.c's row_meta_size 4, so 32 bytes), then i8 codes in blocks of 16
// columns for the 8 rows: row k's element 16c+4l+i at 128c+32l+4k+i of
// the codes, d[k]·q. ikGroups' block is 32 columns (ggml.c's blck_size):
// two of those. b is the whole group (meta 32).
func dequantQ8KVR8Block(y [][]float32, b []byte, ib int) {
	var d [8]float32
	for k := range d {
		d[k] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*k:]))
	}
	qs := (*[256]byte)(b[32+256*ib:])
	for k := 0; k < 8; k++ {
		yk := (*[32]float32)(y[k][32*ib:])
		for c := 0; c < 2; c++ {
			for l := 0; l < 4; l++ {
				q := (*[4]byte)(qs[128*c+32*l+4*k:])
				yl := (*[4]float32)(yk[16*c+4*l:])
				yl[0] = d[k] * float32(int8(q[0]))
				yl[1] = d[k] * float32(int8(q[1]))
				yl[2] = d[k] * float32(int8(q[2]))
				yl[3] = d[k] * float32(int8(q[3]))
			}
		}
	}
}

// MXFP4_R8 (353): blocks of 32 for 8 rows, {u8 e[8] (E8M0); u8 qs[128]}:
// row k's elements 4j+i and 4j+i+16 (j < 4, i < 4) in the low and high
// nibble of qs[32j+4k+i], kvalues[nibble]·2^(e[k]−128) as MXFP4's. The
// layout is the one ik_llama.cpp's quantize_mxfp4_r8 writes and its
// repack_mxfp4 makes of MXFP4 rows (iqk_quantize.cpp:4285, :5350); its
// dequantize_row_mxfp4_r8 counts its blocks from the 8 rows' total and
// runs past a group (:4333), so the reference is its dequantize_row_mxfp4
// of the rows the group holds (testdata/ikllama2/README.md).
func dequantMXFP4R8Block(y [][]float32, b []byte, ib int) {
	b = b[:136]
	qs := (*[128]byte)(b[8:])
	for k := 0; k < 8; k++ {
		d := quantE8M0Half(b[k])
		yk := (*[32]float32)(y[k][32*ib:])
		for j := 0; j < 4; j++ {
			q := (*[4]byte)(qs[32*j+4*k:])
			yl, yh := (*[4]float32)(yk[4*j:]), (*[4]float32)(yk[4*j+16:])
			for i := range q {
				yl[i] = float32(kvaluesMXFP4[q[i]&0x0f]) * d
				yh[i] = float32(kvaluesMXFP4[q[i]>>4]) * d
			}
		}
	}
}

// BF16_R16 (230): 16 rows of BF16 interleaved two columns at a time: row
// k's elements 2c and 2c+1 at bf16 32c+2k and 32c+2k+1, as ik_llama.cpp's
// repack_bf16 writes them (iqk_quantize.cpp:7344; it has no dequantizer:
// ggml.c's to_float for it is commented out). A block here is one such
// pair of columns for the 16 rows (64 bytes), the rows' length any even
// number as ik_llama.cpp's; each value is its bf16, exact in float32.
func dequantBF16R16Block(y [][]float32, b []byte, ib int) {
	p := (*[64]byte)(b[:64])
	for k := 0; k < 16; k++ {
		w := binary.LittleEndian.Uint32(p[4*k:]) // the pair's two bf16s
		yk := (*[2]float32)(y[k][2*ib:])
		yk[0] = math.Float32frombits(w << 16)
		yk[1] = math.Float32frombits(w & 0xffff0000)
	}
}

// dequantBF16R16Run is dequantBF16R16Block for nb pairs of columns at
// once (ikGroup.run): row by row, a pair's two bf16s read as one word.
func dequantBF16R16Run(y [][]float32, b []byte, nb int) {
	b = b[:64*nb]
	for k := 0; k < 16; k++ {
		yk := y[k][:2*nb]
		for c := 0; c < nb; c++ {
			w := binary.LittleEndian.Uint32(b[64*c+4*k:])
			yk[2*c] = math.Float32frombits(w << 16)
			yk[2*c+1] = math.Float32frombits(w & 0xffff0000)
		}
	}
}
