package view

import (
	"encoding/binary"
	"strings"
	"testing"

	"github.com/lazyweights/tensorfs/dtype"
)

// TestSafetensorsHeader: the header is the length, the JSON the export
// writes (metadata first, keys sorted; tensors in the given order, data
// offsets running on) and spaces to a multiple of 8.
func TestSafetensorsHeader(t *testing.T) {
	two := []HeaderTensor{
		{Name: "b", DType: dtype.F32, Shape: []int64{2, 2}, Size: 16},
		{Name: "a<x>", DType: dtype.BF16, Shape: nil, Size: 2},
	}
	for _, tc := range []struct {
		name    string
		meta    map[string]string
		tensors []HeaderTensor
		want    string
	}{
		{"meta", map[string]string{"z": "1", "format": "pt"}, two,
			`{"__metadata__":{"format":"pt","z":"1"},"b":{"dtype":"F32","shape":[2,2],"data_offsets":[0,16]},"a<x>":{"dtype":"BF16","shape":[],"data_offsets":[16,18]}}`},
		{"no meta", nil, two,
			`{"b":{"dtype":"F32","shape":[2,2],"data_offsets":[0,16]},"a<x>":{"dtype":"BF16","shape":[],"data_offsets":[16,18]}}`},
		{"empty meta", map[string]string{}, nil, `{"__metadata__":{}}`},
		{"nothing", nil, nil, `{}`},
	} {
		h, err := SafetensorsHeader(tc.meta, tc.tensors)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if len(h)%8 != 0 || len(h) < 8 {
			t.Fatalf("%s: %d bytes, want a multiple of 8", tc.name, len(h))
		}
		n := binary.LittleEndian.Uint64(h)
		if int(n) != len(h)-8 {
			t.Errorf("%s: length %d, want %d", tc.name, n, len(h)-8)
		}
		if got := strings.TrimRight(string(h[8:]), " "); got != tc.want {
			t.Errorf("%s: header\n%s\nwant\n%s", tc.name, got, tc.want)
		}
	}
}
