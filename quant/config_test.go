package quant

import (
	"encoding/json"
	"reflect"
	"runtime"
	"strings"
	"testing"
)

// TestReadKeys: the quantization objects Find reads without decoding the
// rest are those a full decode finds, keys compared exactly.
func TestReadKeys(t *testing.T) {
	for _, src := range []string{
		`{"quantization_config": {"quant_method": "fp8", "weight_block_size": [128, 128]}}`,
		`{"a": 1, "quantization_config": {"quant_method": "fp8"}, "b": [1, {"c": "}"}], "quantization": {"bits": 4}}`,
		`{"a":1,"quantization_config":{"quant_method":"gptq"},"z":true}`,
		` { "x" : "q\"}]" , "quantization" : { "group_size" : 64 , "bits" : 4 } , "n" : null } `,
		`{"quantization\u005fconfig": {"quant_method": "awq"}}`,
		`{"Quantization_Config": {"quant_method": "awq"}, "QUANTIZATION": {"bits": 4}}`,
		`{"quantization_config": {"quant_method": "a"}, "quantization_config": {"quant_method": "b"}}`,
		`{"quantization_config": null, "quantization": 7}`,
		`{"v": 1e5, "w": -0.5, "quantization": "s"}`,
		`{}`,
	} {
		var full map[string]any
		if err := json.Unmarshal([]byte(src), &full); err != nil {
			t.Fatal(err)
		}
		k, err := readKeys("config.json", []byte(src))
		if err != nil {
			t.Errorf("%s: %v", src, err)
			continue
		}
		if !reflect.DeepEqual(k.QuantizationConfig, full["quantization_config"]) || !reflect.DeepEqual(k.Quantization, full["quantization"]) {
			t.Errorf("%s: read %v / %v, want %v / %v", src, k.QuantizationConfig, k.Quantization, full["quantization_config"], full["quantization"])
		}
	}
	for _, bad := range []string{`[1]`, `"s"`, `{"a": }`, `{"a": 1`, ``} {
		if _, err := readKeys("config.json", []byte(bad)); err == nil || !strings.Contains(err.Error(), "config.json: not a JSON object") {
			t.Errorf("%q: %v", bad, err)
		}
	}
	big := `{"quantization_config": {"quant_method": "fp8", "x": "` + strings.Repeat("a", MaxObject) + `"}}`
	if _, err := Find(map[string][]byte{"config.json": []byte(big)}); err == nil || !strings.Contains(err.Error(), "over") {
		t.Errorf("a quantization_config over MaxObject: %v", err)
	}
}

// TestFindBigConfig: a 14 MB config.json of which only a small
// quantization_config matters (issue 41: `ls` peaked at 421-580 MiB, the
// whole file decoded into map[string]any) is read in memory bounded by a
// small multiple of its bytes: Find allocates less than the file's size.
func TestFindBigConfig(t *testing.T) {
	var sb strings.Builder
	sb.WriteString(`{"aux": [`)
	for i := range 3_400_000 {
		if i > 0 {
			sb.WriteString(",")
		}
		sb.WriteString("0.5")
	}
	sb.WriteString(`], "quantization_config": {"quant_method": "fp8", "weight_block_size": [128, 128]}}`)
	b := []byte(sb.String())
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	cfg, err := Find(map[string][]byte{"config.json": b})
	runtime.ReadMemStats(&after)
	if err != nil || cfg == nil || cfg.Method != "fp8" {
		t.Fatalf("%+v, %v", cfg, err)
	}
	if got := after.TotalAlloc - before.TotalAlloc; got > uint64(len(b)) {
		t.Errorf("Find allocated %d bytes for a %d-byte config.json", got, len(b))
	}
}

// FuzzReadKeys: on any bytes readKeys does not panic, and on a JSON
// object it finds the quantization objects a full decode finds.
func FuzzReadKeys(f *testing.F) {
	f.Add([]byte(`{"a": [1, "}"], "quantization_config": {"quant_method": "fp8", "config_groups": {"b": {}, "a": {}}}, "quantization": 1}`))
	f.Add([]byte(`{"quantization\u005fconfig":{"x":"\"}"},"q":{}}`))
	f.Add([]byte(` {"quantization" : [ ] } `))
	f.Fuzz(func(t *testing.T, b []byte) {
		k, err := readKeys("config.json", b)
		var full map[string]any
		if json.Unmarshal(b, &full) != nil {
			return // not an object: an error or not, no panic
		}
		if err != nil {
			if len(b) < MaxObject {
				t.Fatalf("%q: %v", b, err)
			}
			return
		}
		if !reflect.DeepEqual(k.QuantizationConfig, full["quantization_config"]) || !reflect.DeepEqual(k.Quantization, full["quantization"]) {
			t.Fatalf("%q: read %v / %v, want %v / %v", b, k.QuantizationConfig, k.Quantization, full["quantization_config"], full["quantization"])
		}
		groupOrder(k.qcRaw)
	})
}
