package quant

import (
	"encoding/json"
	"fmt"
	"strings"
)

// Config is a checkpoint's quantization scheme as its files name it.
type Config struct {
	File   string         // the file that named it: "config.json", "hf_quant_config.json", "quantize_config.json"
	Method string         // quant_method, lower case ("fp8", "compressed-tensors", ..., "modelopt", "mlx")
	Params map[string]any // the quantization object as parsed
}

// Find reads the scheme from the files beside the checkpoint, given by name
// ("config.json", "hf_quant_config.json", "quantize_config.json") →
// contents; (nil, nil) when none names a quantization. The first that names
// one wins, in that order: config.json's quantization_config, then
// hf_quant_config.json (ModelOpt), then quantize_config.json (older GPTQ),
// then config.json's quantization (MLX).
func Find(files map[string][]byte) (*Config, error) {
	var top map[string]any
	if b, ok := files["config.json"]; ok {
		if err := json.Unmarshal(b, &top); err != nil {
			return nil, fmt.Errorf("config.json: not a JSON object: %v", err)
		}
		if q, ok := top["quantization_config"]; ok && q != nil {
			m, ok := q.(map[string]any)
			if !ok {
				return nil, fmt.Errorf("config.json: quantization_config is not an object")
			}
			meth, _ := m["quant_method"].(string)
			if meth != "" {
				return &Config{File: "config.json", Method: strings.ToLower(meth), Params: m}, nil
			}
			// mlx-lm writes its "quantization" again as
			// "quantization_config", without a quant_method
			if _, mlx := top["quantization"].(map[string]any); !mlx {
				return nil, fmt.Errorf("config.json: quantization_config has no quant_method")
			}
		}
	}
	if b, ok := files["hf_quant_config.json"]; ok {
		var m map[string]any
		if err := json.Unmarshal(b, &m); err != nil {
			return nil, fmt.Errorf("hf_quant_config.json: not a JSON object: %v", err)
		}
		q, ok := m["quantization"].(map[string]any)
		if !ok {
			return nil, fmt.Errorf("hf_quant_config.json: no quantization object")
		}
		return &Config{File: "hf_quant_config.json", Method: "modelopt", Params: q}, nil
	}
	if b, ok := files["quantize_config.json"]; ok {
		var m map[string]any
		if err := json.Unmarshal(b, &m); err != nil {
			return nil, fmt.Errorf("quantize_config.json: not a JSON object: %v", err)
		}
		meth, _ := m["quant_method"].(string)
		if meth == "" {
			meth = "gptq"
		}
		return &Config{File: "quantize_config.json", Method: strings.ToLower(meth), Params: m}, nil
	}
	if top != nil {
		if q, ok := top["quantization"]; ok && q != nil {
			m, ok := q.(map[string]any)
			if !ok {
				return nil, fmt.Errorf("config.json: quantization is not an object")
			}
			return &Config{File: "config.json", Method: "mlx", Params: m}, nil
		}
	}
	return nil, nil
}

// num returns Params[key] as an integer, def when absent; ok false when
// present and not a whole number.
func num(m map[string]any, key string, def int64) (int64, bool) {
	v, present := m[key]
	if !present || v == nil {
		return def, true
	}
	f, isNum := v.(float64)
	if !isNum || f != float64(int64(f)) {
		return 0, false
	}
	return int64(f), true
}

// paramStr is a configuration value as JSON for a message, at most 64 bytes.
func paramStr(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprintf("%T", v)
	}
	if len(b) > 64 {
		return string(b[:60]) + "..."
	}
	return string(b)
}

func str(m map[string]any, key string) string {
	s, _ := m[key].(string)
	return strings.ToLower(s)
}

func obj(m map[string]any, key string) map[string]any {
	o, _ := m[key].(map[string]any)
	return o
}
