package integration

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// quantDir writes a one-file checkpoint with config.json cfg.
func quantDir(t *testing.T, cfg any, tensors []stTensor) string {
	t.Helper()
	dir := t.TempDir()
	writeSafetensors(t, filepath.Join(dir, "model.safetensors"), tensors, nil)
	b, err := json.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "config.json"), b, 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

// TestQuantUnusableNeverCodes: a block-FP8 checkpoint whose
// weight_block_size cannot be used, or whose method tensorfs does not
// know (issue 41: `cat --dtype f32` and `convert --dtype bf16` exited 0
// with the unscaled codes, 1.0 where the weight is 2.0, and convert wrote
// weight_scale_inv as a tensor of the model): cat --dtype fails naming
// the weight, convert --dtype and load --dtype leave the weight and its
// scale out with one line naming it; the stored tree still has both.
func TestQuantUnusableNeverCodes(t *testing.T) {
	tensors := []stTensor{
		{Name: "l.weight", DType: "F8_E4M3", Shape: []int64{4, 64}, Data: bytes.Repeat([]byte{0x38}, 256)}, // 1.0
		{Name: "l.weight_scale_inv", DType: "F32", Shape: []int64{1, 1}, Data: binary.LittleEndian.AppendUint32(nil, math.Float32bits(2))},
		{Name: "n.weight", DType: "F32", Shape: []int64{2}, Data: make([]byte, 8)},
	}
	for _, cs := range []struct {
		name string
		qc   map[string]any
		why  string
	}{
		{"block [0,0]", map[string]any{"quant_method": "fp8", "weight_block_size": []any{0, 0}}, "weight_block_size [0,0]"},
		{"block [128]", map[string]any{"quant_method": "fp8", "weight_block_size": []any{128}}, "weight_block_size [128]"},
		{"block [-128,128]", map[string]any{"quant_method": "fp8", "weight_block_size": []any{-128, 128}}, "weight_block_size [-128,128]"},
		{"block [1.5,128]", map[string]any{"quant_method": "fp8", "weight_block_size": []any{1.5, 128}}, "weight_block_size [1.5,128]"},
		{"block [128,128,128]", map[string]any{"quant_method": "fp8", "weight_block_size": []any{128, 128, 128}}, "weight_block_size [128,128,128]"},
		{"method mxfp8", map[string]any{"quant_method": "mxfp8"}, `method "mxfp8"`},
	} {
		t.Run(cs.name, func(t *testing.T) {
			src := quantDir(t, map[string]any{"quantization_config": cs.qc}, tensors)
			named := func(what string, r result) {
				t.Helper()
				if n := strings.Count(r.stderr, "left out of the converted views"); n != 1 || !strings.Contains(r.stderr, `weight "l.weight" left out of the converted views: `) || !strings.Contains(r.stderr, cs.why) {
					t.Errorf("%s: %d lines, want one naming l.weight and %s:\n%s", what, n, cs.why, r.stderr)
				}
			}
			r := runTensorfs(t, "cat", "--dtype", "f32", src, "l.weight")
			if r.code == 0 || len(r.stdout) != 0 {
				t.Errorf("cat --dtype f32: exit 0 with %d bytes (the unscaled codes)", len(r.stdout))
			}
			named("cat --dtype f32", r)
			out := filepath.Join(t.TempDir(), "out.safetensors")
			r = runTensorfs(t, "convert", "--dtype", "bf16", "--quiet", src, out)
			named("convert --dtype bf16", r)
			got := stEntries(t, out)
			for _, a := range []string{"l.weight", "l.weight_scale_inv"} {
				if _, ok := got[a]; ok {
					t.Errorf("convert --dtype bf16 wrote %s", a)
				}
			}
			if _, ok := got["n.weight"]; !ok || r.code != 0 {
				t.Errorf("convert --dtype bf16: exit %d, n.weight written %v", r.code, ok)
			}
			r = runTensorfs(t, "load", "--dtype", "bf16", "--sha256", "--quiet", src)
			named("load --dtype bf16", r)
			if strings.Contains(r.stdout, "l.weight") || !strings.Contains(r.stdout, "n.weight") {
				t.Errorf("load --dtype bf16 --sha256:\n%s", r.stdout)
			}
			if r := runTensorfs(t, "cat", src, "l.weight"); r.code != 0 || !bytes.Equal([]byte(r.stdout), tensors[0].Data) {
				t.Errorf("cat (stored): exit %d, %d bytes", r.code, len(r.stdout))
			}
		})
	}
}

// TestQuantMXFP8: an MXFP8 checkpoint (transformers' finegrained
// weight_format mxfp8: F8_E4M3 weight, F8_E8M0 weight_scale_inv per 32
// along in) is its weights through cat --dtype f32: E4M3 value *
// 2^(e8m0-127), bit for bit, NaN for scale 255 (issue 41: served as its
// raw codes).
func TestQuantMXFP8(t *testing.T) {
	const O, I = 3, 96
	codes := make([]byte, O*I)
	for i := range codes {
		if codes[i] = byte(i * 37); codes[i]&0x7f == 0x7f {
			codes[i] ^= 1 // no NaN code: the scale's NaN is the one tested
		}
	}
	sc := []byte{127, 128, 120, 0, 254, 130, 126, 255, 100}
	src := quantDir(t, map[string]any{"quantization_config": map[string]any{"quant_method": "fp8", "weight_format": "mxfp8", "weight_block_size": []any{128, 128}}}, []stTensor{
		{Name: "m.weight", DType: "F8_E4M3", Shape: []int64{O, I}, Data: codes},
		{Name: "m.weight_scale_inv", DType: "F8_E8M0", Shape: []int64{O, I / 32}, Data: sc},
	})
	r := runTensorfs(t, "cat", "--dtype", "f32", src, "m.weight")
	if r.code != 0 || len(r.stdout) != 4*O*I {
		t.Fatalf("cat --dtype f32: exit %d, %d bytes: %s", r.code, len(r.stdout), r.stderr)
	}
	for i := range O * I {
		c, e := codes[i], sc[(i/I)*(I/32)+(i%I)/32]
		m, x := float64(c&7), int(c>>3&15)
		v := (1 + m/8) * math.Ldexp(1, x-7)
		if x == 0 {
			v = m / 8 * math.Ldexp(1, -6)
		}
		if c&0x80 != 0 {
			v = -v
		}
		want := float32(v) * float32(math.Ldexp(1, int(e)-127))
		got := math.Float32frombits(binary.LittleEndian.Uint32([]byte(r.stdout[4*i:])))
		if e == 255 {
			if !math.IsNaN(float64(got)) {
				t.Fatalf("element %d: %v, want NaN (scale 255)", i, got)
			}
			continue
		}
		if math.Float32bits(got) != math.Float32bits(want) {
			t.Fatalf("element %d: %v, want %v (code %#x, scale %d)", i, got, want, c, e)
		}
	}
}

// TestQuantCTGroupsStable: compressed-tensors with two config_groups
// (int4 in groups of 128 for the attention, int8 in groups of 64 for the
// MLP): convert --dtype f32 writes both layers, the same bytes on every
// run (issue 41: one layer was left out, which one changing from run to
// run with Go's map order).
func TestQuantCTGroupsStable(t *testing.T) {
	layer := func(x string, bits, gs int) []stTensor {
		const O, I = 4, 256
		f := 32 / bits
		words := make([]byte, 4*O*I/f)
		for i := range words {
			words[i] = byte(i*29 + bits)
		}
		scale := make([]byte, 2*O*(I/gs))
		for i := 0; i < len(scale); i += 2 {
			scale[i+1] = 0x3c // bf16 0.0078125
		}
		return []stTensor{
			{Name: x + ".weight_packed", DType: "I32", Shape: []int64{O, int64(I / f)}, Data: words},
			{Name: x + ".weight_scale", DType: "BF16", Shape: []int64{O, int64(I / gs)}, Data: scale},
			{Name: x + ".weight_shape", DType: "I32", Shape: []int64{2}, Data: []byte{O, 0, 0, 0, 0, 1, 0, 0}},
		}
	}
	ts := append(layer("model.layers.0.self_attn.q_proj", 4, 128), layer("model.layers.0.mlp.up_proj", 8, 64)...)
	src := quantDir(t, map[string]any{"quantization_config": map[string]any{"quant_method": "compressed-tensors", "format": "pack-quantized", "ignore": []any{"lm_head"},
		"config_groups": map[string]any{
			"group_0": map[string]any{"targets": []any{"re:.*self_attn.*"}, "weights": map[string]any{"num_bits": 4, "type": "int", "strategy": "group", "group_size": 128, "symmetric": true}},
			"group_1": map[string]any{"targets": []any{"re:.*mlp.*"}, "weights": map[string]any{"num_bits": 8, "type": "int", "strategy": "group", "group_size": 64, "symmetric": true}},
		}}}, ts)
	var first []byte
	for run := range 6 {
		out := filepath.Join(t.TempDir(), "out.safetensors")
		if r := runTensorfs(t, "convert", "--dtype", "f32", "--quiet", src, out); r.code != 0 || strings.Contains(r.stderr, "left out") {
			t.Fatalf("run %d: convert --dtype f32: exit %d: %s", run, r.code, r.stderr)
		}
		b, err := os.ReadFile(out)
		if err != nil {
			t.Fatal(err)
		}
		got := stEntries(t, out)
		for _, w := range []string{"model.layers.0.self_attn.q_proj.weight", "model.layers.0.mlp.up_proj.weight"} {
			if e, ok := got[w]; !ok || e.DType != "F32" || len(e.Data) != 4*4*256 {
				t.Fatalf("run %d: %s not written (%v)", run, w, ok)
			}
		}
		if first == nil {
			first = b
		} else if !bytes.Equal(b, first) {
			t.Fatalf("run %d wrote other bytes than run 0", run)
		}
	}
}
