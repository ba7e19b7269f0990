package quant

import (
	"encoding/binary"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/lazyweights/tensorfs/dtype"
)

func (b *builder) drop(name string) {
	delete(b.tensors, name)
	b.order = slices.DeleteFunc(b.order, func(n string) bool { return n == name })
}

func (b *builder) edit(name string, f func(e *stEntryT)) {
	e := b.tensors[name]
	f(&e)
	b.tensors[name] = e
}

// TestBrokenWeights: every way a weight can be broken leaves it out of
// the views with a Problem naming it, hides its parts, and keeps the rest.
func TestBrokenWeights(t *testing.T) {
	variant := func(name string) func(*rand.Rand) (*builder, map[string][]float32) {
		for _, v := range variants {
			if v.name == name {
				return v.make
			}
		}
		panic(name)
	}
	cases := []struct {
		name, variant, weight, why string
		mutate                     func(b *builder)
	}{
		{"bnb without quant_state", "bnb_fp4", "model.layers.0.mlp.down_proj.weight", "quant_state is missing",
			func(b *builder) { b.drop("model.layers.0.mlp.down_proj.weight.quant_state.bitsandbytes__fp4") }},
		{"bnb absmax short", "bnb_fp4_double", "model.layers.0.mlp.down_proj.weight", "absmax is U8",
			func(b *builder) {
				b.edit("model.layers.0.mlp.down_proj.weight.absmax", func(e *stEntryT) { e.shape[0]--; e.data = e.data[1:] })
			}},
		{"bnb state of another type", "bnb_nf4_single", "model.layers.0.mlp.down_proj.weight", "differs from its name",
			func(b *builder) {
				b.edit("model.layers.0.mlp.down_proj.weight.quant_state.bitsandbytes__nf4", func(e *stEntryT) {
					e.data = []byte(strings.Replace(string(e.data), `"nf4"`, `"fp4"`, 1))
				})
			}},
		{"gptq scales of the wrong shape", "gptq_v2", "model.layers.0.mlp.up_proj.weight", "scales is F16",
			func(b *builder) {
				b.edit("model.layers.0.mlp.up_proj.scales", func(e *stEntryT) { e.shape[0]--; e.data = e.data[2*e.shape[1]:] })
			}},
		{"gptq without qzeros", "gptq_v2", "model.layers.0.mlp.up_proj.weight", "missing",
			func(b *builder) { b.drop("model.layers.0.mlp.up_proj.qzeros") }},
		{"bnb 8-bit in a GPU tile layout", "bnb_int8", "model.layers.0.mlp.down_proj.weight", "weight_format 1 is a GPU tile layout",
			func(b *builder) {
				b.edit("model.layers.0.mlp.down_proj.weight_format", func(e *stEntryT) { e.data = []byte{1} })
			}},
		{"bnb 8-bit SCB short", "bnb_int8", "model.layers.0.mlp.down_proj.weight", "SCB is F32 [23]",
			func(b *builder) {
				b.edit("model.layers.0.mlp.down_proj.SCB", func(e *stEntryT) { e.shape[0]--; e.data = e.data[4:] })
			}},
		{"bnb 8-bit weight not int8", "bnb_int8", "model.layers.0.mlp.down_proj.weight", "not I8 [out, in]",
			func(b *builder) {
				b.edit("model.layers.0.mlp.down_proj.weight", func(e *stEntryT) { e.dt = "U8" })
			}},
		{"mlx mxfp4 scales of the wrong dtype", "mlx_mxfp4", "model.layers.0.mlp.experts.down_proj.weight", "scales is F8_E4M3",
			func(b *builder) {
				b.edit("model.layers.0.mlp.experts.down_proj.scales", func(e *stEntryT) { e.dt = "F8_E4M3" })
			}},
		{"mlx mxfp4 with biases", "mlx_mxfp4", "model.layers.0.mlp.experts.down_proj.weight", "has no biases",
			func(b *builder) {
				b.put("model.layers.0.mlp.experts.down_proj.biases", "BF16", []int64{2, 6, 4}, make([]byte, 96))
			}},
		{"int-quantized zero point of another shape", "ct_int8_asym_group", "model.layers.0.mlp.up_proj.weight", "weight_zero_point has shape [24 2]",
			func(b *builder) {
				b.edit("model.layers.0.mlp.up_proj.weight_zero_point", func(e *stEntryT) { e.shape[1]--; e.data = e.data[:24*2*4] })
			}},
		{"mlx biases missing", "mlx_2bit_g32", "model.layers.0.self_attn.q_proj.weight", "biases is missing",
			func(b *builder) { b.drop("model.layers.0.self_attn.q_proj.biases") }},
		{"mlx scales F8", "mlx_2bit_g32", "model.layers.0.self_attn.q_proj.weight", "scales is F8_E4M3",
			func(b *builder) {
				b.edit("model.layers.0.self_attn.q_proj.scales", func(e *stEntryT) { e.dt = "F8_E4M3"; e.data = e.data[:len(e.data)/2] })
			}},
		{"fbgemm scale missing", "fbgemm_fp8", "model.layers.0.self_attn.o_proj.weight", "weight_scale is missing",
			func(b *builder) { b.drop("model.layers.0.self_attn.o_proj.weight_scale") }},
		{"e8m0 scale of the wrong shape", "deepseek_v4_e8m0", "layers.0.attn.wq_a.weight", "scale has shape",
			func(b *builder) {
				b.edit("layers.0.attn.wq_a.scale", func(e *stEntryT) { e.shape = []int64{3, 2} })
			}},
		{"nvfp4 without global scale", "ct_nvfp4", "model.layers.0.mlp.gate_proj.weight", "weight_global_scale is missing",
			func(b *builder) { b.drop("model.layers.0.mlp.gate_proj.weight_global_scale") }},
		{"nvfp4 scale BF16", "ct_nvfp4", "model.layers.0.mlp.gate_proj.weight", "not F8_E4M3",
			func(b *builder) {
				b.edit("model.layers.0.mlp.gate_proj.weight_scale", func(e *stEntryT) { e.dt = "U8" })
			}},
		{"packed weight_shape too wide", "ct_int8_channel", "model.layers.0.mlp.down_proj.weight", "does not fit",
			func(b *builder) {
				b.edit("model.layers.0.mlp.down_proj.weight_shape", func(e *stEntryT) { e.data = u32s([]uint32{20, 99}) })
			}},
	}
	for _, cs := range cases {
		t.Run(cs.name, func(t *testing.T) {
			b, want := variant(cs.variant)(rand.New(rand.NewPCG(1, 2)))
			cs.mutate(b)
			c := b.build(t)
			r := c.plan(t)
			if weightByName(r, cs.weight) != nil {
				t.Errorf("broken weight %s is served", cs.weight)
			}
			i := slices.IndexFunc(r.Problems, func(p Problem) bool { return p.Name == cs.weight })
			if i < 0 {
				t.Fatalf("no problem names %s: %v", cs.weight, r.Problems)
			}
			if why := r.Problems[i].Why; !strings.Contains(why, cs.why) || strings.ContainsAny(why, "\n") {
				t.Errorf("why %q, want it to say %q", why, cs.why)
			}
			if len(r.Weights) != len(want)-1 {
				t.Errorf("%d weights served, want the other %d", len(r.Weights), len(want)-1)
			}
			if _, stored := c.data[cs.weight]; stored && !slices.Contains(r.Hidden, cs.weight) {
				t.Errorf("the stored %s is not hidden", cs.weight)
			}
			for n := range c.data {
				if strings.HasPrefix(n, strings.TrimSuffix(cs.weight, ".weight")+".") && !slices.Contains(r.Hidden, n) {
					t.Errorf("part %s of the broken weight is not hidden", n)
				}
			}
		})
	}
}

func TestPlanWithoutConfig(t *testing.T) {
	b := newBuilder(nil)
	f8 := make([]byte, 130*260)
	b.put("a.weight", "F8_E4M3", []int64{130, 260}, f8)
	b.put("a.weight_scale_inv", "F32", []int64{2, 3}, make([]byte, 24))
	b.put("b.weight", "F8_E4M3", []int64{4, 4}, f8[:16]) // a per-tensor scale: ambiguous, left alone
	b.put("b.weight_scale", "F32", []int64{}, make([]byte, 4))
	b.put("e.gate_up_proj_blocks", "U8", []int64{2, 8, 1, 16}, make([]byte, 256))
	b.put("e.gate_up_proj_scales", "U8", []int64{2, 8, 1}, make([]byte, 16))
	b.put("n.weight", "BF16", []int64{4}, make([]byte, 8))
	c := b.build(t)
	delete(c.files, "config.json")
	r := c.plan(t)
	var names []string
	for _, w := range r.Weights {
		names = append(names, w.Name)
	}
	if !slices.Equal(names, []string{"a.weight", "e.gate_up_proj"}) || len(r.Problems) != 0 {
		t.Errorf("weights %v, problems %v", names, r.Problems)
	}
	if !slices.Equal(r.Hidden, []string{"a.weight_scale_inv", "e.gate_up_proj_blocks", "e.gate_up_proj_scales"}) {
		t.Errorf("hidden %v", r.Hidden)
	}
	if w := weightByName(r, "e.gate_up_proj"); w == nil || !slices.Equal(w.Shape, []int64{2, 32, 8}) {
		t.Errorf("mxfp4 shape: %+v", w)
	}
	// nothing quantized: no scheme, nothing hidden
	b = newBuilder(nil)
	b.put("n.weight", "BF16", []int64{4}, make([]byte, 8))
	c = b.build(t)
	if r := Plan(nil, c.tensors, nil); r.Scheme != "" || len(r.Hidden)+len(r.Weights)+len(r.Problems) != 0 {
		t.Errorf("plain checkpoint planned as %+v", r)
	}
}

func TestFind(t *testing.T) {
	for _, cs := range []struct {
		files  map[string]string
		method string
		err    string
	}{
		{map[string]string{"config.json": `{"model_type":"llama"}`}, "", ""},
		{map[string]string{}, "", ""},
		{map[string]string{"config.json": `{"quantization_config":{"quant_method":"FP8"}}`}, "fp8", ""},
		{map[string]string{"config.json": `{}`, "hf_quant_config.json": `{"quantization":{"quant_algo":"NVFP4"}}`}, "modelopt", ""},
		{map[string]string{"quantize_config.json": `{"bits":4,"group_size":128}`}, "gptq", ""},
		{map[string]string{"config.json": `{"quantization":{"bits":4,"group_size":64}}`}, "mlx", ""},
		{map[string]string{"config.json": `{"quantization_config":{"quant_method":"awq"},"quantization":{"bits":4}}`}, "awq", ""},
		{map[string]string{"config.json": `{"quantization":{"bits":4,"group_size":64},"quantization_config":{"bits":4,"group_size":64}}`}, "mlx", ""},
		{map[string]string{"config.json": `{"quantization_config":`}, "", "config.json: not a JSON object"},
		{map[string]string{"config.json": `{"quantization_config":{"bits":4}}`}, "", "no quant_method"},
		{map[string]string{"config.json": `{"quantization_config":[1]}`}, "", "not an object"},
	} {
		files := map[string][]byte{}
		for k, v := range cs.files {
			files[k] = []byte(v)
		}
		cfg, err := Find(files)
		switch {
		case cs.err != "":
			if err == nil || !strings.Contains(err.Error(), cs.err) {
				t.Errorf("%v: error %v, want %q", cs.files, err, cs.err)
			}
		case err != nil:
			t.Errorf("%v: %v", cs.files, err)
		case cs.method == "" && cfg != nil:
			t.Errorf("%v: found %+v", cs.files, cfg)
		case cs.method != "" && (cfg == nil || cfg.Method != cs.method):
			t.Errorf("%v: found %+v, want %s", cs.files, cfg, cs.method)
		}
	}
}

func TestUnknownMethod(t *testing.T) {
	cfg := &Config{File: "config.json", Method: "eetq", Params: map[string]any{}}
	r := Plan(cfg, nil, nil)
	if len(r.Problems) != 1 || !strings.Contains(r.Problems[0].Why, `"eetq"`) || len(r.Weights) != 0 {
		t.Errorf("%+v", r)
	}
}

// TestBadGroupIndex: a g_idx value outside the groups is an error at read
// time, not a panic or a silently wrong value.
func TestBadGroupIndex(t *testing.T) {
	b, _ := gptqCase(rand.New(rand.NewPCG(3, 4)), 4, 16, "gptq", true, 16, 32)
	b.edit("model.layers.0.mlp.up_proj.g_idx", func(e *stEntryT) {
		e.data = append([]byte{}, e.data...)
		binary.LittleEndian.PutUint32(e.data[4*5:], 7)
	})
	c := b.build(t)
	r := c.plan(t)
	w := weightByName(r, "model.layers.0.mlp.up_proj.weight")
	if w == nil {
		t.Fatalf("%+v", r)
	}
	err := w.Dequantize(c.reader(t, w), 0, make([]float32, w.NumElements()))
	if err == nil || !strings.Contains(err.Error(), "g_idx[5] is 7") {
		t.Errorf("error %v", err)
	}
}

// TestNoSmallReader: without a reader for small tensors, bitsandbytes
// weights are Problems, and compressed-tensors' weight_shape is checked at
// read time.
func TestNoSmallReader(t *testing.T) {
	b, _ := bnbCase(rand.New(rand.NewPCG(5, 6)), "nf4", true)
	c := b.build(t)
	cfg, _ := Find(c.files)
	r := Plan(cfg, c.tensors, nil)
	if len(r.Weights) != 0 || len(r.Problems) != 2 {
		t.Errorf("%+v", r)
	}
	b, _ = ctInt8Case(rand.New(rand.NewPCG(5, 6)))
	b.edit("model.layers.0.mlp.down_proj.weight_shape", func(e *stEntryT) { e.data = u32s([]uint32{20, 35}) })
	c = b.build(t)
	cfg, _ = Find(c.files)
	r = Plan(cfg, c.tensors, nil)
	w := weightByName(r, "model.layers.0.mlp.down_proj.weight")
	if w == nil {
		t.Fatalf("%+v", r)
	}
	if err := w.Dequantize(c.reader(t, w), 3, make([]float32, 5)); err == nil || !strings.Contains(err.Error(), "weight_shape is [20, 35]") {
		t.Errorf("error %v", err)
	}
	_ = dtype.F32
}

// TestGather: both ways of gathering columns (one read a row when dense,
// one read an element when sparse) give the same elements.
func TestGather(t *testing.T) {
	const rows, cols, es = 5, 200, 2
	data := make([]byte, rows*cols*es)
	for i := range data {
		data[i] = byte(i * 7)
	}
	reads := 0
	s := &scratch{parts: 1, read: func(part int, off int64, p []byte) error {
		reads++
		copy(p, data[off:])
		return nil
	}}
	for _, sel := range [][]int64{{3}, {3, 4, 5}, {1, 9, 20}, {0, 100, 199}, {7, 8, 60, 61, 150}} {
		reads = 0
		got, err := s.gather(0, 0, es, cols, 1, 4, sel)
		if err != nil {
			t.Fatal(err)
		}
		var want []byte
		for r := int64(1); r < 4; r++ {
			for _, c := range sel {
				want = append(want, data[(r*cols+c)*es:(r*cols+c+1)*es]...)
			}
		}
		if string(got) != string(want) {
			t.Errorf("%v: got %v, want %v", sel, got, want)
		}
		sparse := sel[len(sel)-1]-sel[0]+1 > 2*int64(len(sel))+16
		if sparse && reads != 3*len(sel) || !sparse && reads > 3 {
			t.Errorf("%v: %d reads", sel, reads)
		}
	}
}

// TestCacheScalesHidden: a quantized checkpoint's KV-cache scales are not
// model weights; without a configuration they are left alone.
func TestCacheScalesHidden(t *testing.T) {
	b, _ := ctNVFP4Case(rand.New(rand.NewPCG(7, 8)))
	b.put("model.layers.0.self_attn.k_scale", "F32", []int64{}, f32s([]float32{1}))
	b.put("model.layers.0.self_attn.v_scale", "F32", []int64{1}, f32s([]float32{1}))
	c := b.build(t)
	r := c.plan(t)
	for _, n := range []string{"model.layers.0.self_attn.k_scale", "model.layers.0.self_attn.v_scale"} {
		if !slices.Contains(r.Hidden, n) {
			t.Errorf("%s not hidden: %v", n, r.Hidden)
		}
	}
	if r := Plan(nil, c.tensors, nil); slices.Contains(r.Hidden, "model.layers.0.self_attn.k_scale") {
		t.Errorf("hidden without a configuration: %v", r.Hidden)
	}
}
