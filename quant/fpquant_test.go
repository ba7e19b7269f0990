package quant

import (
	"encoding/binary"
	"math"
	"math/big"
	"math/bits"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

// TestFPQuantForms: an FP-Quant checkpoint (quant_method fp_quant) with a
// module in each stored form. The master weight (store_master_weights:
// X.weight BF16) is served as stored; the real-quantized module (qweight,
// scales) is named in one line and left out, its bias served; lm_head
// (modules_to_not_convert) is a plain tensor; every rotation matrix and
// global scale is out of the views, and nothing is a Problem of the
// checkpoint as a whole.
func TestFPQuantForms(t *testing.T) {
	b := newBuilder(map[string]any{"quantization_config": map[string]any{"quant_method": "fp_quant", "forward_dtype": "mxfp4",
		"forward_method": "quest", "backward_dtype": "bf16", "hadamard_group_size": 32, "store_master_weights": true,
		"pseudoquantization": false, "transform_init": "hadamard", "modules_to_not_convert": []any{"lm_head"}}})
	buffers := func(x string) []string {
		var n []string
		for _, s := range fpQuantBuffers {
			n = append(n, x+s)
		}
		return n
	}
	master, quant := "model.layers.0.mlp.up_proj", "model.layers.0.mlp.down_proj"
	b.put(master+".weight", "BF16", []int64{4, 64}, make([]byte, 512))
	b.put(quant+".qweight", "U8", []int64{4, 32}, make([]byte, 128))
	b.put(quant+".scales", "U8", []int64{4, 2}, make([]byte, 8))
	b.put(quant+".bias", "BF16", []int64{4}, make([]byte, 8))
	for _, x := range []string{master, quant} {
		for _, n := range buffers(x) {
			shape := []int64{32, 32}
			if strings.HasSuffix(n, "_global_scale") {
				shape = []int64{1}
			}
			b.put(n, "BF16", shape, make([]byte, 2*shape[0]*shape[len(shape)-1]))
		}
	}
	b.put("lm_head.weight", "BF16", []int64{8, 64}, make([]byte, 1024))
	r := b.build(t).plan(t)
	if len(r.Weights) != 0 || len(r.Problems) != 1 || r.Scheme != "fp-quant" {
		t.Fatalf("scheme %q, weights %v, problems %v", r.Scheme, r.Weights, r.Problems)
	}
	p := r.Problems[0]
	if p.Name != quant+".weight" || !strings.Contains(p.Why, "Hadamard") || !strings.Contains(p.Why, "config.json") || strings.Contains(p.Why, "\n") {
		t.Errorf("problem %v", p)
	}
	for _, n := range []string{master + ".weight", quant + ".bias", "lm_head.weight"} {
		if r.IsHidden(n) {
			t.Errorf("the plain %s is hidden", n)
		}
	}
	for _, n := range append(append(buffers(master), buffers(quant)...), quant+".qweight", quant+".scales") {
		if !r.IsHidden(n) {
			t.Errorf("%s is in the converted views", n)
		}
	}
}

// fpqHadamard is H = bf16(hadamard(32)·32^-1/2) (Sylvester, as scipy's
// hadamard), its columns permuted by perm when not nil (a "gsr"-like,
// non-symmetric H), as BF16 bytes and values.
func fpqHadamard(perm []int) ([]byte, []float32) {
	u := math.Float32bits(float32(math.Pow(32, -0.5)))
	m := math.Float32frombits((u + 0x7fff + (u >> 16 & 1)) &^ 0xffff) // to bf16, nearest even
	b := make([]byte, 2*32*32)
	v := make([]float32, 32*32)
	for j := 0; j < 32; j++ {
		for i := 0; i < 32; i++ {
			c := i
			if perm != nil {
				c = perm[i]
			}
			x := m
			if bits.OnesCount(uint(j&c))%2 == 1 {
				x = -m
			}
			v[32*j+i] = x
			binary.LittleEndian.PutUint16(b[2*(32*j+i):], uint16(math.Float32bits(x)>>16))
		}
	}
	return b, v
}

// TestFPQuantMXFP4: FP-Quant MXFP4 with hadamard_group_size 32 and
// weight_global_scale 1 (forward_method quest) is its weight Q·Hᵀ per
// group of 32, bit-exact to the exact sum rounded once to float32 (the
// expected values computed here with math/big: the codes' E2M1 values,
// 2^(s−127) per 32, the stored BF16 H; NaN for E8M0 255, Inf past
// float32), for a symmetric and a column-permuted H; nvfp4, group 64, a
// global scale of 3 and an H of mixed magnitudes are named.
func TestFPQuantMXFP4(t *testing.T) {
	qc := func(fwd string, g int) map[string]any {
		return map[string]any{"quantization_config": map[string]any{"quant_method": "fp_quant", "forward_dtype": fwd, "forward_method": "quest",
			"backward_dtype": "bf16", "hadamard_group_size": g, "store_master_weights": false, "pseudoquantization": false}}
	}
	one := []byte{0x80, 0x3f} // bf16 1.0
	r := rand.New(rand.NewPCG(44, 5))
	perm := r.Perm(32)
	mods := []struct {
		x    string
		perm []int
	}{{"model.layers.0.mlp.up_proj", nil}, {"model.layers.0.self_attn.q_proj", perm}, {"model.layers.0.self_attn.k_proj", nil}}
	O, I := 6, 96
	G := I / 32
	b := newBuilder(qc("mxfp4", 32))
	want := map[string][]float32{}
	for k, m := range mods {
		q := make([]byte, O*I/2)
		for i := range q {
			q[i] = byte(r.IntN(256))
		}
		sc := make([]byte, O*G)
		for i := range sc {
			sc[i] = byte(110 + r.IntN(30))
		}
		if k == 0 {
			sc[0], sc[1], sc[2] = 255, 0, 254 // NaN, 2^-127, 2^127 (some past float32)
		}
		hb, hv := fpqHadamard(m.perm)
		if k == 2 { // an identity times 2^-20·(1+2^-7), scales from 2^-127: the products round (subnormal), once
			for i := range hv {
				hv[i] = 0
				binary.LittleEndian.PutUint16(hb[2*i:], 0)
				if i%33 == 0 {
					hv[i] = math.Float32frombits(0x3581 << 16)
					binary.LittleEndian.PutUint16(hb[2*i:], 0x3581)
				}
			}
			for i := range sc {
				sc[i] = byte(r.IntN(4))
			}
		}
		b.put(m.x+".qweight", "U8", []int64{int64(O), int64(I / 2)}, q)
		b.put(m.x+".scales", "U8", []int64{int64(O), int64(G)}, sc)
		b.put(m.x+".weight_global_scale", "BF16", []int64{1}, one)
		b.put(m.x+".act_global_scale", "BF16", []int64{1}, one)
		b.put(m.x+".forward_hadamard_matrix", "BF16", []int64{32, 32}, hb)
		b.put(m.x+".backward_hadamard_matrix", "BF16", []int64{32, 32}, hb)
		b.put(m.x+".bias", "BF16", []int64{int64(O)}, make([]byte, 2*O))
		W := make([]float32, O*I)
		for o := 0; o < O; o++ {
			for c := 0; c < I; c++ {
				g, j := c/32, c%32
				e := sc[o*G+g]
				if e == 255 {
					W[o*I+c] = float32(math.NaN())
					continue
				}
				sum := new(big.Float).SetPrec(256)
				for i := 0; i < 32; i++ {
					n := q[(o*I+32*g+i)/2] >> (4 * uint(i%2)) & 15
					term := new(big.Float).SetPrec(256).SetFloat64(float64(fp4Values[n]))
					term.Mul(term, new(big.Float).SetFloat64(float64(hv[32*j+i])))
					sum.Add(sum, term)
				}
				sum.SetMantExp(sum, int(e)-127)
				W[o*I+c], _ = sum.Float32()
			}
		}
		want[m.x+".weight"] = W
	}
	c := b.build(t)
	res := c.plan(t)
	if len(res.Problems) != 0 || len(res.Weights) != len(mods) || res.Scheme != "fp-quant" {
		t.Fatalf("scheme %q, weights %v, problems %v", res.Scheme, res.Weights, res.Problems)
	}
	for name, W := range want {
		w := weightByName(res, name)
		got := c.whole(t, w)
		nan, inf := 0, 0
		for i := range W {
			if math.IsNaN(float64(W[i])) {
				nan++
				if !math.IsNaN(float64(got[i])) {
					t.Fatalf("%s[%d] = %v, want NaN", name, i, got[i])
				}
				continue
			}
			if math.IsInf(float64(W[i]), 0) {
				inf++
			}
			if math.Float32bits(got[i]) != math.Float32bits(W[i]) && !(W[i] == 0 && got[i] == 0) {
				t.Fatalf("%s[%d] = %v, want %v", name, i, got[i], W[i])
			}
		}
		if strings.Contains(name, "up_proj") && (nan != 32 || inf == 0) {
			t.Errorf("%s: %d NaNs, %d infinities: the case lost its E8M0 255 or 254", name, nan, inf)
		}
		checkRanges(t, c, w, got)
		x := strings.TrimSuffix(name, ".weight")
		for _, s := range append(append([]string{}, fpQuantCodes[:2]...), fpQuantBuffers...) {
			if !res.IsHidden(x + s) {
				t.Errorf("%s%s is in the converted views", x, s)
			}
		}
		if res.IsHidden(x + ".bias") {
			t.Errorf("%s.bias is hidden", x)
		}
	}
	// the forms that are not served: named, never their codes
	for _, cs := range []struct {
		name, why string
		config    map[string]any
		edit      func(*builder)
	}{
		{"nvfp4", `forward_dtype "nvfp4"`, qc("nvfp4", 32), nil},
		{"group 64", "hadamard_group_size 64", qc("mxfp4", 64), nil},
		{"global scale 3", "weight_global_scale 3", qc("mxfp4", 32), func(b *builder) {
			b.edit(mods[0].x+".weight_global_scale", func(e *stEntryT) { e.data = []byte{0x40, 0x40} })
		}},
		{"H of two magnitudes", "magnitude", qc("mxfp4", 32), func(b *builder) {
			b.edit(mods[0].x+".forward_hadamard_matrix", func(e *stEntryT) { e.data = append([]byte{0x80, 0x3f}, e.data[2:]...) })
		}},
	} {
		t.Run(cs.name, func(t *testing.T) {
			nb := newBuilder(cs.config)
			for _, n := range b.order {
				e := b.tensors[n]
				nb.put(n, e.dt, e.shape, e.data)
			}
			if cs.edit != nil {
				cs.edit(nb)
			}
			res := nb.build(t).plan(t)
			w := mods[0].x + ".weight"
			i := slices.IndexFunc(res.Problems, func(p Problem) bool { return p.Name == w })
			if weightByName(res, w) != nil || i < 0 || !strings.Contains(res.Problems[i].Why, cs.why) || !strings.Contains(res.Problems[i].Why, "Hadamard") {
				t.Fatalf("weights %v, problems %v", res.Weights, res.Problems)
			}
			if !res.IsHidden(mods[0].x+".qweight") || !res.IsHidden(mods[0].x+".scales") {
				t.Errorf("the codes are in the views")
			}
		})
	}
}

// BenchmarkFPQuant: go test ./quant -run XX -bench FPQuant -cpu 1 (a
// [2048, 4096] MXFP4 weight, H a column-permuted Hadamard matrix).
func BenchmarkFPQuant(b *testing.B) {
	r := rand.New(rand.NewPCG(1, 2))
	const O, I = 2048, 4096
	bd := newBuilder(map[string]any{"quantization_config": map[string]any{"quant_method": "fp_quant", "forward_dtype": "mxfp4", "hadamard_group_size": 32}})
	x := "model.layers.0.mlp.up_proj"
	q := make([]byte, O*I/2)
	for i := range q {
		q[i] = byte(r.Uint32())
	}
	sc := make([]byte, O*I/32)
	for i := range sc {
		sc[i] = byte(110 + r.IntN(30))
	}
	hb, _ := fpqHadamard(r.Perm(32))
	bd.put(x+".qweight", "U8", []int64{O, I / 2}, q)
	bd.put(x+".scales", "U8", []int64{O, I / 32}, sc)
	bd.put(x+".weight_global_scale", "BF16", []int64{1}, []byte{0x80, 0x3f})
	bd.put(x+".forward_hadamard_matrix", "BF16", []int64{32, 32}, hb)
	c := bd.build(b)
	res := c.plan(b)
	if len(res.Weights) != 1 || len(res.Problems) != 0 {
		b.Fatalf("%+v", res)
	}
	benchDequantize(b, c, &res.Weights[0], true)
}

// fpqRelabelled is a BF16 H = ±m·r_j·c_i·(−1)^popcount((A·j ⊕ t) & ρ_i): a
// Sylvester Hadamard matrix with its rows relabelled by a random affine
// map over GF(2) (as sequency order is), or permuted at random when
// rowPerm, its columns permuted, random row and column signs.
func fpqRelabelled(r *rand.Rand, m float32, rowPerm bool) []byte {
	var a [5]int
	rows := make([]int, 32)
	for {
		for k := range a {
			a[k] = r.IntN(32)
		}
		t, seen := r.IntN(32), map[int]bool{}
		for j := range rows {
			rows[j] = t
			for k := 0; k < 5; k++ {
				if j>>k&1 == 1 {
					rows[j] ^= a[k]
				}
			}
			seen[rows[j]] = true
		}
		if len(seen) == 32 {
			break
		}
	}
	if rowPerm {
		rows = r.Perm(32)
	}
	rho := r.Perm(32)
	var rs, cs [32]bool
	for i := range rs {
		rs[i], cs[i] = r.IntN(2) == 1, r.IntN(2) == 1
	}
	b := make([]byte, 2*32*32)
	for j := 0; j < 32; j++ {
		for i := 0; i < 32; i++ {
			u := math.Float32bits(m) >> 16
			if (bits.OnesCount(uint(rows[j]&rho[i]))%2 == 1) != (rs[j] != cs[i]) {
				u |= 0x8000
			}
			binary.LittleEndian.PutUint16(b[2*(32*j+i):], uint16(u))
		}
	}
	return b
}

// TestFPQuantFastPath: the fast Walsh–Hadamard path (dtype.Hadamard32)
// gives the table path's bits (the exact sum rounded once, checked
// against math/big in TestFPQuantMXFP4), whole and in sub-ranges, for
// random codes, scales (0, 254 and 255 included), magnitudes and H with
// relabelled rows, permuted columns and flipped signs; an H whose rows
// are permuted at random is read by the table.
func TestFPQuantFastPath(t *testing.T) {
	r := rand.New(rand.NewPCG(44, 7))
	for trial := 0; trial < 40; trial++ {
		O, I := 1+r.IntN(5), 32*(1+r.IntN(6))
		m := math.Float32frombits(uint32(0x3e00+r.IntN(0x180)) << 16) // bf16 in [2^-3, 2^0)
		if trial%4 == 1 {
			m = math.Float32frombits(uint32(0x3580+r.IntN(0x80)) << 16) // near 2^-20
		}
		rowPerm := trial%5 == 4
		b := newBuilder(map[string]any{"quantization_config": map[string]any{"quant_method": "fp_quant", "forward_dtype": "mxfp4",
			"forward_method": "quest", "hadamard_group_size": 32, "pseudoquantization": false}})
		x := "model.layers.0.mlp.down_proj"
		q := make([]byte, O*I/2)
		for i := range q {
			q[i] = byte(r.Uint32())
		}
		sc := make([]byte, O*I/32)
		for i := range sc {
			sc[i] = byte(r.IntN(256))
		}
		sc[0] = []byte{0, 254, 255, 127}[trial%4]
		b.put(x+".qweight", "U8", []int64{int64(O), int64(I / 2)}, q)
		b.put(x+".scales", "U8", []int64{int64(O), int64(I / 32)}, sc)
		b.put(x+".weight_global_scale", "BF16", []int64{1}, []byte{0x80, 0x3f})
		b.put(x+".forward_hadamard_matrix", "BF16", []int64{32, 32}, fpqRelabelled(r, m, rowPerm))
		c := b.build(t)
		res := c.plan(t)
		if len(res.Weights) != 1 || len(res.Problems) != 0 {
			t.Fatalf("trial %d: weights %v, problems %v", trial, res.Weights, res.Problems)
		}
		w := &res.Weights[0]
		k := w.kern.(*fpQuantKernel)
		if (k.fwht == nil) != rowPerm {
			t.Fatalf("trial %d: fast path %v for an H with rows permuted %v", trial, k.fwht != nil, rowPerm)
		}
		if rowPerm {
			continue
		}
		got := c.whole(t, w)
		checkRanges(t, c, w, got)
		slow := &fpQuantKernel{cols: k.cols}
		slow.table(c.data[x+".forward_hadamard_matrix"], m, map[string]*[16][256][8]uint64{})
		w.kern = slow
		want := c.whole(t, w)
		for i := range want {
			if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
				t.Fatalf("trial %d (m %v): [%d] = %v (%#x), the table's %v (%#x)", trial, m, i, got[i], math.Float32bits(got[i]), want[i], math.Float32bits(want[i]))
			}
		}
	}
}
