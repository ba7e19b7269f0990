package fs

import (
	"encoding/json"
	"testing"
)

// TestWithoutKey: a converted export's config.json loses its
// quantization_config, wherever it is among the members, every other
// byte kept; an object without it is returned as it is.
func TestWithoutKey(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{`{"a": 1, "quantization_config": {"quant_method": "fp8", "x": [1, {"y": 2}]}, "b": "c"}`, `{"a": 1, "b": "c"}`},
		{`{"quantization_config": {}, "a": 1}`, `{ "a": 1}`},
		{"{\n  \"a\": 1,\n  \"quantization_config\": null\n}\n", "{\n  \"a\": 1\n}\n"},
		{`{"quantization_config": 1}`, `{}`},
		{`{"a": {"quantization_config": 1}}`, `{"a": {"quantization_config": 1}}`},
		{`{}`, `{}`},
	} {
		got, err := withoutKey([]byte(tc.in), "quantization_config")
		if err != nil {
			t.Errorf("%s: %v", tc.in, err)
			continue
		}
		if string(got) != tc.want {
			t.Errorf("%s: got %q, want %q", tc.in, got, tc.want)
		}
		if !json.Valid(got) {
			t.Errorf("%s: %q is not JSON", tc.in, got)
		}
	}
	if _, err := withoutKey([]byte(`[1]`), "quantization_config"); err == nil {
		t.Error("an array: no error")
	}
}
