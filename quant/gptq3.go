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

// get3 is value j of a run of three-word triples (b little-endian words).
func get3(b []byte, j int64) uint32 {
	t := 3 * (j / 32)
	lo := uint64(le32(b, t)) | uint64(le32(b, t+1))<<32
	return code3(lo, le32(b, t+2), j%32)
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
			t := tb[((o-o0)*ng+int64(d))*8:][:8]
			for v := range t {
				t[v] = sv * (float32(v) - zv)
			}
		}
	}
	// at[j]: element i0+j's table offset within its column's tables
	at := make([]int32, iw)
	for j, d := range pos {
		at[j] = d * 8
	}
	var c [32]uint32
	for o := int64(0); o < ow; o++ {
		tc := tb[o*ng*8 : (o+1)*ng*8]
		for t := t0; t < t1; t++ {
			ia, ib := max(i0, 32*t), min(i1, 32*t+32)
			r := 3 * (t - t0) * ow
			lo := uint64(le32(qw, r+o)) | uint64(le32(qw, r+ow+o))<<32
			hi := le32(qw, r+2*ow+o)
			out := dst[o*iw+ia-i0 : o*iw+ib-i0]
			as := at[ia-i0 : ib-i0]
			if ib-ia == 32 {
				if gidx == nil && as[0] == as[31] {
					decode3(out, lo, hi, (*[8]float32)(tc[as[0]:]))
				} else {
					gather3(out, lo, hi, tc, as)
				}
				continue
			}
			for j := range 21 {
				c[j] = uint32(lo>>(3*j)) & 7
			}
			c[21] = uint32(lo>>63) | (hi<<1)&6
			for j := 22; j < 32; j++ {
				c[j] = (hi >> (3*j - 64)) & 7
			}
			for j, q := range c[ia-32*t : ib-32*t] {
				out[j] = tc[as[j]+int32(q)]
			}
		}
	}
	return nil
}

// decode3 writes the 32 values of a triple lo | hi<<64 through one
// group's table t.
func decode3(out []float32, lo uint64, hi uint32, t *[8]float32) {
	o := (*[32]float32)(out)
	for j := range 21 {
		o[j] = t[(lo>>(3*j))&7]
	}
	o[21] = t[uint32(lo>>63)|(hi<<1)&6]
	for j := 22; j < 32; j++ {
		o[j] = t[(hi>>(3*j-64))&7]
	}
}

// gather3 writes the 32 values of a triple lo | hi<<64, value j through
// the table at offset at[j] of tc (its group's).
func gather3(out []float32, lo uint64, hi uint32, tc []float32, at []int32) {
	o, a := (*[32]float32)(out), (*[32]int32)(at)
	for j := range 21 {
		o[j] = tc[a[j]+int32(lo>>(3*j))&7]
	}
	o[21] = tc[a[21]+int32(uint32(lo>>63)|(hi<<1)&6)]
	for j := 22; j < 32; j++ {
		o[j] = tc[a[j]+int32(hi>>(3*j-64))&7]
	}
}
