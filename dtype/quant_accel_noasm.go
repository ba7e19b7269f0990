//go:build !amd64 || purego

package dtype

// The primitives of quant_accel.go in Go, for builds without the assembly
// (useAccel is false there, so the dequantizers take their plain loops; these
// keep the package building and are what the assembly computes).

func quantNib(dst []float32, q []byte, chunks, chunk, stride int, scale, min []float32, lut *[16]int8) {
	for c := 0; c < chunks; c++ {
		qc, y := q[c*stride:c*stride+chunk], dst[2*c*chunk:]
		for k, b := range qc {
			y[k] = float32(float32(lut[b&15])*scale[2*c]) - min[2*c]
			y[chunk+k] = float32(float32(lut[b>>4])*scale[2*c+1]) - min[2*c+1]
		}
	}
}

func quantQ6K(dst *[256]float32, b *[210]byte, scale *[16]float32) {
	for h := 0; h < 2; h++ {
		ql, qh := b[64*h:], b[128+32*h:]
		for l := 0; l < 32; l++ {
			g := 8*h + l/16
			dst[128*h+l] = float32(int32(ql[l]&15|(qh[l]&3)<<4)-32) * scale[g]
			dst[128*h+l+32] = float32(int32(ql[l+32]&15|(qh[l]>>2&3)<<4)-32) * scale[g+2]
			dst[128*h+l+64] = float32(int32(ql[l]>>4|(qh[l]>>4&3)<<4)-32) * scale[g+4]
			dst[128*h+l+96] = float32(int32(ql[l+32]>>4|(qh[l]>>6)<<4)-32) * scale[g+6]
		}
	}
}

func quantSigned(dst []float32, q, neg []byte, scale []float32) {
	for i, c := range q {
		dst[i] = float32(float32(c)*scale[i/16]) * quantSign[neg[i]&1]
	}
}

func quantQ8(dst []float32, b []byte, stride, off int) {
	for i := 0; i+stride <= len(b); i += stride {
		d := quantHalfAt(b[i:])
		for j := 0; j < 32; j++ {
			dst[32*(i/stride)+j] = float32(int8(b[i+off+j])) * d
		}
	}
}

func quantTQ2(dst []float32, b []byte, blocks int, scale []float32) {
	for i := 0; i < blocks; i++ {
		for j := 0; j < 64; j += 32 {
			for l := 0; l < 4; l++ {
				for m := 0; m < 32; m++ {
					dst[256*i+4*j+32*l+m] = float32(int32(b[66*i+j+m]>>(2*l)&3)-1) * scale[i]
				}
			}
		}
	}
}
