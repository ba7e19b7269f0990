package quant

import (
	"encoding/json"
	"math/rand/v2"
	"runtime"
	"testing"
)

// benchCheckpoints builds one weight of about 8 M elements per scheme, with
// random codes and valid scales (the values do not matter to the speed).
func benchCheckpoint(b *testing.B, scheme string) (*ckpt, *Weight) {
	r := rand.New(rand.NewPCG(1, 2))
	rnd := func(n int) []byte {
		p := make([]byte, n)
		for i := range p {
			p[i] = byte(r.Uint32())
		}
		return p
	}
	fill16 := func(n int, v uint16) []byte {
		p := make([]byte, 2*n)
		for i := 0; i < n; i++ {
			p[2*i], p[2*i+1] = byte(v), byte(v>>8)
		}
		return p
	}
	const O, I = 2048, 4096
	X := "model.layers.0.mlp.down_proj"
	var bd *builder
	switch scheme {
	case "fp8-block":
		bd = newBuilder(map[string]any{"quantization_config": map[string]any{"quant_method": "fp8", "weight_block_size": []int{128, 128}}})
		w := rnd(O * I)
		for i := range w {
			w[i] &= 0x77
		}
		bd.put(X+".weight", "F8_E4M3", []int64{O, I}, w)
		bd.put(X+".weight_scale_inv", "F32", []int64{O / 128, I / 128}, f32s(scales(r, O*I/128/128, -10, -4)))
	case "fp8-channel":
		bd = newBuilder(map[string]any{"quantization_config": map[string]any{"quant_method": "compressed-tensors", "format": "float-quantized"}})
		bd.put(X+".weight", "F8_E4M3", []int64{O, I}, rnd(O*I))
		bd.put(X+".weight_scale", "BF16", []int64{O, 1}, fill16(O, 0x3a80))
	case "mxfp4":
		bd = newBuilder(map[string]any{"quantization_config": map[string]any{"quant_method": "mxfp4"}})
		X = "model.layers.0.mlp.experts.gate_up_proj"
		// one expert of gpt-oss-120b's gate_up_proj: [5760, 2880] stored,
		// [2880, 5760] logical
		bd.put(X+"_blocks", "U8", []int64{1, 5760, 90, 16}, rnd(5760*90*16))
		s := rnd(5760 * 90)
		for i := range s {
			s[i] = 120 + s[i]%16
		}
		bd.put(X+"_scales", "U8", []int64{1, 5760, 90}, s)
	case "nvfp4":
		bd = newBuilder(map[string]any{})
		bd.files["hf_quant_config.json"] = []byte(`{"quantization":{"quant_algo":"NVFP4","group_size":16}}`)
		bd.put(X+".weight", "U8", []int64{O, I / 2}, rnd(O*I/2))
		s := rnd(O * I / 16)
		for i := range s {
			s[i] = 0x08 + s[i]%0x70
		}
		bd.put(X+".weight_scale", "F8_E4M3", []int64{O, I / 16}, s)
		bd.put(X+".weight_scale_2", "F32", []int64{}, f32s([]float32{0.001}))
	case "int4-packed":
		bd = newBuilder(map[string]any{"quantization_config": map[string]any{"quant_method": "compressed-tensors", "format": "pack-quantized",
			"config_groups": map[string]any{"g": map[string]any{"targets": []any{"Linear"}, "weights": map[string]any{"num_bits": 4, "group_size": 128}}}}})
		bd.put(X+".weight_packed", "I32", []int64{O, I / 8}, rnd(O*I/2))
		bd.put(X+".weight_scale", "BF16", []int64{O, I / 128}, fill16(O*I/128, 0x3a80))
		bd.put(X+".weight_zero_point", "I32", []int64{O / 8, I / 128}, rnd(O*I/128/2))
	case "awq":
		bd = newBuilder(map[string]any{"quantization_config": map[string]any{"quant_method": "awq", "bits": 4, "group_size": 128, "version": "gemm"}})
		bd.put(X+".qweight", "I32", []int64{I, O / 8}, rnd(O*I/2))
		bd.put(X+".qzeros", "I32", []int64{I / 128, O / 8}, rnd(I/128*O/2))
		bd.put(X+".scales", "F16", []int64{I / 128, O}, fill16(I/128*O, 0x1c00))
	case "gptq":
		bd, _ = gptqCase(r, 4, 128, "gptq", false, O, I)
	case "gptq-desc-act":
		bd, _ = gptqCase(r, 4, 128, "gptq", true, O, I)
	case "bnb-nf4":
		bd = newBuilder(map[string]any{"quantization_config": map[string]any{"quant_method": "bitsandbytes", "load_in_4bit": true, "bnb_4bit_quant_type": "nf4"}})
		X += ".weight"
		n := O * I
		nb := n / 64
		bd.put(X, "U8", []int64{int64(n / 2), 1}, rnd(n/2))
		bd.put(X+".absmax", "U8", []int64{int64(nb)}, rnd(nb))
		bd.put(X+".quant_map", "F32", []int64{16}, f32s(scales(r, 16, -1, 0)))
		bd.put(X+".nested_absmax", "F32", []int64{int64(nb / 256)}, f32s(scales(r, nb/256, -6, -2)))
		bd.put(X+".nested_quant_map", "F32", []int64{256}, f32s(scales(r, 256, -2, 0)))
		js, _ := json.Marshal(map[string]any{"quant_type": "nf4", "blocksize": 64, "shape": []int{O, I}, "nested_blocksize": 256, "nested_offset": 0.05, "nested_dtype": "float32"})
		bd.put(X+".quant_state.bitsandbytes__nf4", "U8", []int64{int64(len(js))}, js)
	case "mlx-affine-3bit":
		bd = newBuilder(map[string]any{"quantization": map[string]any{"bits": 3, "group_size": 64}})
		bd.put(X+".weight", "U32", []int64{O, I * 3 / 32}, rnd(O*I*3/8))
		bd.put(X+".scales", "BF16", []int64{O, I / 64}, fill16(O*I/64, 0x3a80))
		bd.put(X+".biases", "BF16", []int64{O, I / 64}, fill16(O*I/64, 0xbc00))
	case "mlx-affine":
		bd = newBuilder(map[string]any{"quantization": map[string]any{"bits": 4, "group_size": 64}})
		bd.put(X+".weight", "U32", []int64{O, I / 8}, rnd(O*I/2))
		bd.put(X+".scales", "BF16", []int64{O, I / 64}, fill16(O*I/64, 0x3a80))
		bd.put(X+".biases", "BF16", []int64{O, I / 64}, fill16(O*I/64, 0xbc00))
	}
	c := bd.build(b)
	res := c.plan(b)
	if len(res.Weights) != 1 || len(res.Problems) != 0 {
		b.Fatalf("%s: %+v", scheme, res)
	}
	return c, &res.Weights[0]
}

var benchSchemes = []string{"fp8-block", "fp8-channel", "mxfp4", "nvfp4", "int4-packed", "awq", "gptq", "gptq-desc-act", "bnb-nf4", "mlx-affine", "mlx-affine-3bit"}

// BenchmarkDequantize reads each scheme's weight in 1 Mi-element pieces,
// from memory; elements/s is the figure (also as MB/s of float32 output),
// and elements per second of the process's CPU time (with -cpu 1, the
// figure per core on a machine whose other load makes wall time wait).
func BenchmarkDequantize(b *testing.B) {
	for _, sc := range benchSchemes {
		b.Run(sc, func(b *testing.B) {
			c, w := benchCheckpoint(b, sc)
			benchDequantize(b, c, w, false)
		})
	}
}

// benchDequantize reads w in 1 Mi-element pieces from c's parts in
// memory, round and round, for b.N pieces: elements/s is the figure (also
// as MB/s of float32 output), and elements per second of the process's
// CPU time (with -cpu 1, the figure per core on a machine whose other
// load makes wall time wait). gc collects the generator's garbage first.
func benchDequantize(b *testing.B, c *ckpt, w *Weight, gc bool) {
	parts := make([][]byte, len(w.Parts))
	for i, p := range w.Parts {
		parts[i] = c.data[p]
	}
	read := func(part int, off int64, p []byte) error {
		copy(p, parts[part][off:])
		return nil
	}
	const chunk = 1 << 20
	dst := make([]float32, chunk)
	n := w.NumElements()
	b.SetBytes(4 * chunk)
	if gc {
		runtime.GC()
	}
	b.ResetTimer()
	cpu0 := cpuTime()
	at := int64(0)
	for i := 0; i < b.N; i++ {
		if at+chunk > n {
			at = 0
		}
		if err := w.Dequantize(read, at, dst); err != nil {
			b.Fatal(err)
		}
		at += chunk
	}
	b.ReportMetric(float64(b.N)*chunk/b.Elapsed().Seconds()/1e9, "Gelem/s")
	if cpu := cpuTime() - cpu0; cpu > 0 {
		b.ReportMetric(float64(b.N)*chunk/cpu.Seconds()/1e9, "Gelem/cpu-s")
	}
}
