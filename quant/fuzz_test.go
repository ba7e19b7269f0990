package quant

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math/bits"
	"runtime"
	"strings"
	"testing"

	"github.com/lazyweights/tensorfs/dtype"
	"github.com/lazyweights/tensorfs/index"
)

var fuzzSuffixes = []string{".weight", ".weight_scale_inv", ".scale", ".weight_scale", ".weight_scale_2", ".input_scale",
	"_blocks", "_scales", ".weight_packed", ".weight_zero_point", ".weight_g_idx", ".weight_shape", ".weight_global_scale",
	".qweight", ".qzeros", ".scales", ".g_idx", ".biases", ".weight.absmax", ".weight.quant_map", ".weight.nested_absmax",
	".weight.nested_quant_map", ".weight.quant_state.bitsandbytes__nf4", ".weight.quant_state.bitsandbytes__fp4", "_scale", ""}

var fuzzDTypes = []dtype.DType{dtype.F8E4M3, dtype.F32, dtype.BF16, dtype.F16, dtype.F8E8M0, dtype.U8, dtype.I32, dtype.U32, dtype.I64, dtype.F8E5M2}

var fuzzConfigs = []string{
	`{"quant_method":"fp8","weight_block_size":[%d,%d]}`,
	`{"quant_method":"fp8"}`,
	`{"quant_method":"fbgemm_fp8"}`,
	`{"quant_method":"compressed-tensors","format":"float-quantized","config_groups":{"g":{"targets":["Linear"],"weights":{"num_bits":8,"block_structure":[%d,%d]}}}}`,
	`{"quant_method":"compressed-tensors","format":"pack-quantized","config_groups":{"g":{"targets":["Linear"],"weights":{"num_bits":%d,"group_size":%d}}}}`,
	`{"quant_method":"compressed-tensors","format":"nvfp4-pack-quantized"}`,
	`{"quant_method":"mxfp4"}`,
	`{"quant_method":"modelopt","quant_algo":"NVFP4"}`,
	`{"quant_method":"modelopt","quant_algo":"FP8"}`,
	`{"quant_method":"awq","bits":%d,"group_size":%d}`,
	`{"quant_method":"gptq","bits":%d,"group_size":%d,"checkpoint_format":"gptq"}`,
	`{"quant_method":"gptq","bits":%d,"group_size":%d,"checkpoint_format":"gptq_v2"}`,
	`{"quant_method":"bitsandbytes","load_in_4bit":true}`,
	`{"bits":%d,"group_size":%d}`,
	`null`,
	`{"quant_method":"compressed-tensors","format":"pack-quantized","ignore":["re:.*1.*"],"config_groups":{"a":{"targets":["re:.*0.*"],"weights":{"num_bits":%d,"group_size":%d}},"b":{"targets":["Linear"],"weights":{"num_bits":8,"group_size":32}}}}`,
	`{"quant_method":"fp8","weight_format":"mxfp8","weight_block_size":[%d,%d]}`,
}

// fuzzInput turns bytes into a configuration and a list of tensors.
func fuzzInput(raw []byte) (*Config, []index.Tensor) {
	next := func() byte {
		if len(raw) == 0 {
			return 0
		}
		b := raw[0]
		raw = raw[1:]
		return b
	}
	dim := func() int64 {
		switch b := next(); {
		case b < 200:
			return int64(b%64) + 1
		case b < 250:
			return int64(b) * 16
		default:
			return int64(binary.LittleEndian.Uint32([]byte{next(), next(), next(), next()}))<<8 + 1
		}
	}
	tmpl := fuzzConfigs[int(next())%len(fuzzConfigs)]
	var cfg *Config
	if tmpl != "null" {
		js := tmpl
		a, b := int(next())%10-1, int(next())*2-1
		if strings.Contains(tmpl, "%d") {
			js = fmt.Sprintf(tmpl, a, b)
		}
		var m map[string]any
		if json.Unmarshal([]byte(js), &m) == nil {
			method, _ := m["quant_method"].(string)
			if method == "" {
				method = "mlx"
			}
			cfg = &Config{File: "config.json", Method: method, Params: m}
		}
	}
	var ts []index.Tensor
	for n := int(next()) % 10; n > 0; n-- {
		prefix := []string{"a", "b", "e.gate_up_proj"}[int(next())%3]
		name := prefix + fuzzSuffixes[int(next())%len(fuzzSuffixes)]
		dt := fuzzDTypes[int(next())%len(fuzzDTypes)]
		shape := make([]int64, int(next())%5)
		for i := range shape {
			shape[i] = dim()
		}
		elems, ok := int64(1), true
		for _, d := range shape {
			hi, lo := bits.Mul64(uint64(elems), uint64(d))
			if hi != 0 || lo > 1<<50 {
				ok = false
				break
			}
			elems = int64(lo)
		}
		if !ok {
			continue
		}
		ts = append(ts, index.Tensor{Name: name, DType: dt, Shape: shape, Size: elems * dt.ElemSize()})
	}
	return cfg, ts
}

// FuzzPlan: Plan and Dequantize on arbitrary configurations and tensor
// lists do not panic, read only inside each part, and allocate by what
// they are asked for, not by the sizes the input claims.
func FuzzPlan(f *testing.F) {
	f.Add([]byte{0, 128, 64, 2, 0, 0, 0, 2, 10, 20, 1, 1, 2, 1, 2})
	f.Add([]byte{6, 0, 0, 2, 2, 6, 5, 4, 2, 2, 1, 16, 2, 7, 5, 3, 2, 2, 1})
	f.Add([]byte{10, 4, 64, 4, 0, 13, 6, 2, 32, 16, 0, 14, 6, 2, 2, 32, 0, 15, 4, 2, 2, 2, 0, 16, 6, 1, 10})
	f.Add([]byte{12, 0, 0, 3, 0, 0, 5, 1, 100, 0, 18, 5, 1, 2, 0, 22, 4, 1, 40})
	f.Add([]byte{13, 5, 32, 3, 0, 0, 7, 2, 8, 4, 0, 15, 1, 2, 8, 1, 0, 17, 1, 2, 8, 1})
	f.Fuzz(func(t *testing.T, raw []byte) {
		cfg, ts := fuzzInput(raw)
		small := func(name string) ([]byte, error) {
			for i := len(ts) - 1; i >= 0; i-- { // the last of a name, as Plan keeps
				if x := ts[i]; x.Name == name {
					if x.Size > MaxSmall {
						t.Fatalf("small(%s) of %d bytes", name, x.Size)
					}
					b := make([]byte, x.Size)
					copy(b, raw)
					return b, nil
				}
			}
			return nil, fmt.Errorf("no %s", name)
		}
		r := Plan(cfg, ts, small)
		size := map[string]int64{}
		for _, x := range ts {
			size[x.Name] = x.Size
		}
		for i := range r.Weights {
			w := &r.Weights[i]
			read := func(part int, off int64, p []byte) error {
				if part < 0 || part >= len(w.Parts) {
					t.Fatalf("%s: part %d of %d", w.Name, part, len(w.Parts))
				}
				if off < 0 || off+int64(len(p)) > size[w.Parts[part]] {
					t.Fatalf("%s: read [%d, +%d) of %s (%d bytes)", w.Name, off, len(p), w.Parts[part], size[w.Parts[part]])
				}
				for j := range p {
					p[j] = byte(off) + byte(j)*7
				}
				return nil
			}
			n := w.NumElements()
			first := int64(len(raw)*131) % n
			l := min(n-first, 4096)
			var m0, m1 runtime.MemStats
			runtime.ReadMemStats(&m0)
			_ = w.Dequantize(read, first, make([]float32, l))
			runtime.ReadMemStats(&m1)
			if d := m1.TotalAlloc - m0.TotalAlloc; d > 1<<24 {
				t.Fatalf("%s: Dequantize of %d elements allocated %d bytes", w.Name, l, d)
			}
		}
	})
}
