package quant

// GPTQ 3-bit (AutoGPTQ auto_gptq/nn_modules/qlinear/qlinear_cuda_old.py,
// pack and the torch forward for bits == 3, commit 179776bd; GPTQModel
// packs the same): 32 in-rows of one out-column are three I32 words of
// consecutive qweight rows [3t, 3t+3), value j of the 32 at bits
// [3j, 3j+3) of the 96-bit little-endian number w0 | w1<<32 | w2<<64
// (values 10 and 21 straddle two words: the reference's wf table with its
// two fix-ups). qzeros packs 32 out-columns in three words of one row the
// same way. Otherwise as gptq.go: Wt[i, o] = scales[g, o] * (q - z), z the
// stored zero (+1 in format gptq, v1), g = g_idx[i] or i / group_size.

// codes3 are the eight codes as floats.
var codes3 = [8]float32{0, 1, 2, 3, 4, 5, 6, 7}

// code3 is value j (0..31) of the 96-bit number lo | hi<<64.
func code3(lo uint64, hi uint32, j int64) uint32 {
	switch {
	case j < 21:
		return uint32(lo>>(3*j)) & 7
	case j == 21:
		return uint32(lo>>63) | (hi<<1)&6
	default:
		return (hi >> (3*j - 64)) & 7
	}
}

// triple3 is the triple whose three words are words r, r+ow and r+2·ow
// of b (little-endian), as lo | hi<<64. (gather3 and rect3's whole
// triples read them inline: this does not inline, and there it costs.)
func triple3(b []byte, r, ow int64) (lo uint64, hi uint32) {
	return uint64(le32(b, r)) | uint64(le32(b, r+ow))<<32, le32(b, r+2*ow)
}

// get3 is value j of a run of three-word triples (b little-endian words).
func get3(b []byte, j int64) uint32 {
	lo, hi := triple3(b, 3*(j/32), 1)
	return code3(lo, hi, j%32)
}

func (k *gptqKernel) rect3(s *scratch, o0, o1, i0, i1 int64, dst []float32) error {
	t0, t1 := i0/32, (i1-1)/32+1
	qw, err := s.strided(0, 0, 4*k.out, 3*t0, 3*t1, 4*o0, 4*o1)
	if err != nil {
		return err
	}
	gidx, err := k.groupIndex(s, i0, i1)
	if err != nil {
		return err
	}
	groups, pos := groupsOf(gidx, i0, i1, k.gsize)
	ow, iw := o1-o0, i1-i0
	c0 := 32 * (o0 / 32) // the first column of the zeros' first triple
	zw := k.out / 32 * 3
	z0, z1 := 3*(o0/32), 3*((o1-1)/32+1)
	// tb[(o*ng + d)*8 + v]: the value of code v in group groups[d],
	// column o0+o: scales * (v - z), the loop's operations
	ng := int64(len(groups))
	n := ng * ow * 8
	tb := s.flts[3]
	if int64(cap(tb)) < n {
		tb = make([]float32, n)
	}
	tb = tb[:n]
	s.flts[3] = tb
	for d, g := range groups {
		qz, err := s.strided(1, 1, 4*zw, g, g+1, 4*z0, 4*z1)
		if err != nil {
			return err
		}
		srow, err := s.stridedFloats(2, 2, k.sdt, k.out, g, g+1, o0, o1)
		if err != nil {
			return err
		}
		for o := o0; o < o1; o++ {
			zv := float32(get3(qz, o-c0)) + k.plus1
			sv := srow[o-o0]
			t := (*[8]float32)(tb[((o-o0)*ng+int64(d))*8:])
			for v, f := range codes3 {
				t[v] = sv * (f - zv)
			}
		}
	}
	// at[j]: element i0+j's table offset within its column's tables
	at := make([]uint32, iw)
	for j, d := range pos {
		at[j] = uint32(d) * 8
	}
	// whole triples [f0, f1), the cut ones around them value by value
	f0, f1 := (i0+31)/32, i1/32
	for o := int64(0); o < ow; o++ {
		tc := tb[o*ng*8 : (o+1)*ng*8]
		col := dst[o*iw : (o+1)*iw]
		if f0 < f1 {
			j0, j1 := 32*f0-i0, 32*f1-i0
			r := 3*(f0-t0)*ow + o
			if gidx != nil {
				gather3(col[j0:j1], qw, r, ow, tc, at[j0:j1])
			} else {
				for j := j0; j < j1; j, r = j+32, r+3*ow {
					if as := (*[32]uint32)(at[j:]); as[0] == as[31] {
						lo := uint64(le32(qw, r)) | uint64(le32(qw, r+ow))<<32
						decode3((*[32]float32)(col[j:]), lo, le32(qw, r+2*ow), (*[8]float32)(tc[as[0]:]))
					} else {
						gather3(col[j:j+32], qw, r, ow, tc, as[:])
					}
				}
			}
		}
		for t := t0; t < t1; t++ {
			if t >= f0 && t < f1 {
				continue
			}
			// a triple the rectangle cuts, value by value
			lo, hi := triple3(qw, 3*(t-t0)*ow+o, ow)
			for i := max(i0, 32*t); i < min(i1, 32*t+32); i++ {
				col[i-i0] = tc[at[i-i0]+code3(lo, hi, i-32*t)]
			}
		}
	}
	return nil
}

// decode3 writes the 32 values of a triple lo | hi<<64 through one
// group's table t (written out as gather3 is).
func decode3(o *[32]float32, lo uint64, hi uint32, t *[8]float32) {
	o[0] = t[lo&7]
	o[1] = t[lo>>3&7]
	o[2] = t[lo>>6&7]
	o[3] = t[lo>>9&7]
	o[4] = t[lo>>12&7]
	o[5] = t[lo>>15&7]
	o[6] = t[lo>>18&7]
	o[7] = t[lo>>21&7]
	o[8] = t[lo>>24&7]
	o[9] = t[lo>>27&7]
	o[10] = t[lo>>30&7]
	o[11] = t[lo>>33&7]
	o[12] = t[lo>>36&7]
	o[13] = t[lo>>39&7]
	o[14] = t[lo>>42&7]
	o[15] = t[lo>>45&7]
	o[16] = t[lo>>48&7]
	o[17] = t[lo>>51&7]
	o[18] = t[lo>>54&7]
	o[19] = t[lo>>57&7]
	o[20] = t[lo>>60&7]
	o[21] = t[uint32(lo>>63)|(hi<<1)&6]
	o[22] = t[hi>>2&7]
	o[23] = t[hi>>5&7]
	o[24] = t[hi>>8&7]
	o[25] = t[hi>>11&7]
	o[26] = t[hi>>14&7]
	o[27] = t[hi>>17&7]
	o[28] = t[hi>>20&7]
	o[29] = t[hi>>23&7]
	o[30] = t[hi>>26&7]
	o[31] = t[hi>>29&7]
}

// gather3 writes the values of the len(out)/32 triples whose first words
// are at r, r+3·ow, … of qw (a triple's three words ow apart), value j of
// each through the table at offset at[j] of tc (its group's).
func gather3(out []float32, qw []byte, r, ow int64, tc []float32, at []uint32) {
	for k := 0; k+32 <= len(out); k, r = k+32, r+3*ow {
		lo := uint64(le32(qw, r)) | uint64(le32(qw, r+ow))<<32
		hi := le32(qw, r+2*ow)
		o, a := (*[32]float32)(out[k:]), (*[32]uint32)(at[k:])
		// written out: constant shifts, no loop (a loop of variable
		// shifts took twice the instructions per value)
		o[0] = tc[a[0]+uint32(lo)&7]
		o[1] = tc[a[1]+uint32(lo>>3)&7]
		o[2] = tc[a[2]+uint32(lo>>6)&7]
		o[3] = tc[a[3]+uint32(lo>>9)&7]
		o[4] = tc[a[4]+uint32(lo>>12)&7]
		o[5] = tc[a[5]+uint32(lo>>15)&7]
		o[6] = tc[a[6]+uint32(lo>>18)&7]
		o[7] = tc[a[7]+uint32(lo>>21)&7]
		o[8] = tc[a[8]+uint32(lo>>24)&7]
		o[9] = tc[a[9]+uint32(lo>>27)&7]
		o[10] = tc[a[10]+uint32(lo>>30)&7]
		o[11] = tc[a[11]+uint32(lo>>33)&7]
		o[12] = tc[a[12]+uint32(lo>>36)&7]
		o[13] = tc[a[13]+uint32(lo>>39)&7]
		o[14] = tc[a[14]+uint32(lo>>42)&7]
		o[15] = tc[a[15]+uint32(lo>>45)&7]
		o[16] = tc[a[16]+uint32(lo>>48)&7]
		o[17] = tc[a[17]+uint32(lo>>51)&7]
		o[18] = tc[a[18]+uint32(lo>>54)&7]
		o[19] = tc[a[19]+uint32(lo>>57)&7]
		o[20] = tc[a[20]+uint32(lo>>60)&7]
		o[21] = tc[a[21]+(uint32(lo>>63)|(hi<<1)&6)]
		o[22] = tc[a[22]+(hi>>2)&7]
		o[23] = tc[a[23]+(hi>>5)&7]
		o[24] = tc[a[24]+(hi>>8)&7]
		o[25] = tc[a[25]+(hi>>11)&7]
		o[26] = tc[a[26]+(hi>>14)&7]
		o[27] = tc[a[27]+(hi>>17)&7]
		o[28] = tc[a[28]+(hi>>20)&7]
		o[29] = tc[a[29]+(hi>>23)&7]
		o[30] = tc[a[30]+(hi>>26)&7]
		o[31] = tc[a[31]+(hi>>29)&7]
	}
}
