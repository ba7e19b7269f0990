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
	// GroupOrder is the order of config_groups' keys in the file
	// (compressed-tensors applies groups in it); nil when unknown.
	GroupOrder []string
	// Meta is a torchao checkpoint's safetensors __metadata__ (its string
	// entries; WithTorchAO), nil for every other method.
	Meta map[string]string
}

// Find reads the scheme from the files beside the checkpoint, given by name
// ("config.json", "hf_quant_config.json", "quantize_config.json") →
// contents; (nil, nil) when none names a quantization. The first that names
// one wins, in that order: config.json's quantization_config, then
// hf_quant_config.json (ModelOpt), then quantize_config.json (older GPTQ),
// then config.json's quantization (MLX).
//
// Only the quantization objects are decoded, each within MaxObject bytes:
// the rest of a configuration (a model's config.json can hold megabytes
// of vocabulary maps and lists) is checked to be JSON and skipped, never
// built into values.
func Find(files map[string][]byte) (*Config, error) {
	var top quantKeys
	_, hasTop := files["config.json"]
	if hasTop {
		var err error
		if top, err = readKeys("config.json", files["config.json"]); err != nil {
			return nil, err
		}
		if q := top.QuantizationConfig; q != nil {
			m, ok := q.(map[string]any)
			if !ok {
				return nil, fmt.Errorf("config.json: quantization_config is not an object")
			}
			meth, _ := m["quant_method"].(string)
			if meth != "" {
				return &Config{File: "config.json", Method: strings.ToLower(meth), Params: m, GroupOrder: groupOrder(top.qcRaw)}, nil
			}
			// mlx-lm writes its "quantization" again as
			// "quantization_config", without a quant_method
			if _, mlx := top.Quantization.(map[string]any); !mlx {
				return nil, fmt.Errorf("config.json: quantization_config has no quant_method")
			}
		}
	}
	if b, ok := files["hf_quant_config.json"]; ok {
		m, err := readKeys("hf_quant_config.json", b)
		if err != nil {
			return nil, err
		}
		q, ok := m.Quantization.(map[string]any)
		if !ok {
			return nil, fmt.Errorf("hf_quant_config.json: no quantization object")
		}
		return &Config{File: "hf_quant_config.json", Method: "modelopt", Params: q}, nil
	}
	if b, ok := files["quantize_config.json"]; ok {
		if len(b) > MaxObject {
			return nil, fmt.Errorf("quantize_config.json: %d bytes, over %d", len(b), MaxObject)
		}
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
	if hasTop {
		if q := top.Quantization; q != nil {
			m, ok := q.(map[string]any)
			if !ok {
				return nil, fmt.Errorf("config.json: quantization is not an object")
			}
			return &Config{File: "config.json", Method: "mlx", Params: m}, nil
		}
	}
	return nil, nil
}

// MaxObject bounds the bytes of a quantization object Find decodes
// (quantization_config, an MLX quantization with its per-module
// overrides, quantize_config.json): its values cost many times its bytes.
const MaxObject = 4 << 20

// quantKeys are the members of a configuration Find reads, decoded.
type quantKeys struct {
	QuantizationConfig any // "quantization_config", nil when absent or null
	Quantization       any // "quantization"
	qcRaw              []byte
}

// groupOrder returns the keys of quantization_config's config_groups in
// the order the file gives them (a decoded map has none), nil when there
// are none.
func groupOrder(qc []byte) []string {
	all := func(string) bool { return true }
	m, ok := topMembers(qc, func(k string) bool { return k == "config_groups" })
	if !ok || len(m) == 0 {
		return nil
	}
	groups, _ := topMembers(m[len(m)-1].val, all)
	var out []string
	for _, g := range groups {
		out = append(out, g.key)
	}
	return out
}

// readKeys decodes only the quantization objects of the JSON object b
// (keys compared exactly, as Python's json reads them; a key given twice:
// the last); the other members are only stepped over.
func readKeys(file string, b []byte) (quantKeys, error) {
	var raw struct{ QuantizationConfig, Quantization []byte }
	if !json.Valid(b) {
		var v struct{}
		err := json.Unmarshal(b, &v) // the syntax error, with its offset
		return quantKeys{}, fmt.Errorf("%s: not a JSON object: %v", file, err)
	}
	members, ok := topMembers(b, func(k string) bool { return k == "quantization_config" || k == "quantization" })
	if !ok {
		return quantKeys{}, fmt.Errorf("%s: not a JSON object", file)
	}
	for _, m := range members {
		switch m.key {
		case "quantization_config":
			raw.QuantizationConfig = m.val
		case "quantization":
			raw.Quantization = m.val
		}
	}
	k := quantKeys{qcRaw: raw.QuantizationConfig}
	for _, f := range []struct {
		key string
		raw []byte
		dst *any
	}{{"quantization_config", raw.QuantizationConfig, &k.QuantizationConfig}, {"quantization", raw.Quantization, &k.Quantization}} {
		if f.raw == nil {
			continue
		}
		if len(f.raw) > MaxObject {
			return quantKeys{}, fmt.Errorf("%s: %s is %d bytes, over %d", file, f.key, len(f.raw), MaxObject)
		}
		if err := json.Unmarshal(f.raw, f.dst); err != nil {
			return quantKeys{}, fmt.Errorf("%s: %s: %v", file, f.key, err)
		}
	}
	return k, nil
}

type member struct {
	key string
	val []byte
}

// topMembers returns the members of the JSON object b whose keys keep
// takes, in order (b is valid JSON: json.Valid), each value a slice of b;
// ok false when b is not an object.
func topMembers(b []byte, keep func(string) bool) (out []member, ok bool) {
	i := skipSpace(b, 0)
	if i >= len(b) || b[i] != '{' {
		return nil, false
	}
	i = skipSpace(b, i+1)
	for i < len(b) && b[i] == '"' {
		ke := skipString(b, i)
		key := string(b[i+1 : ke-1])
		if strings.IndexByte(key, '\\') >= 0 {
			if err := json.Unmarshal(b[i:ke], &key); err != nil {
				return nil, false
			}
		}
		i = skipSpace(b, ke)
		if i >= len(b) || b[i] != ':' {
			return nil, false
		}
		vs := skipSpace(b, i+1)
		ve := skipValue(b, vs)
		if keep(key) {
			out = append(out, member{key, b[vs:ve]})
		}
		i = skipSpace(b, ve)
		if i < len(b) && b[i] == ',' {
			i = skipSpace(b, i+1)
		}
	}
	return out, true
}

func skipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}

// skipString returns the offset after the string that starts at b[i] ('"').
func skipString(b []byte, i int) int {
	for i++; i < len(b); i++ {
		switch b[i] {
		case '\\':
			i++
		case '"':
			return i + 1
		}
	}
	return len(b)
}

// skipValue returns the offset after the valid JSON value at b[i].
func skipValue(b []byte, i int) int {
	depth := 0
	for i < len(b) {
		switch c := b[i]; {
		case c == '"':
			i = skipString(b, i)
		case c == '{' || c == '[':
			depth++
			i++
		case c == '}' || c == ']':
			if depth == 0 {
				return i // the end of the object around a scalar
			}
			depth--
			i++
		case c == ',' || c == ':' || c == ' ' || c == '\t' || c == '\n' || c == '\r':
			if depth == 0 {
				return i
			}
			i++
		default:
			i++
		}
		if depth == 0 && i > 0 && (b[i-1] == '}' || b[i-1] == ']' || b[i-1] == '"') {
			return i
		}
	}
	return i
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
