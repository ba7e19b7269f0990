package client

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"math"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

func TestReadFloat32(t *testing.T) {
	path := filepath.Join(tempDir(t), "m.safetensors")
	f32 := []float32{0.5, -1, float32(math.Inf(1)), 3e38}
	var f32b, f64b []byte
	for _, v := range f32 {
		f32b = binary.LittleEndian.AppendUint32(f32b, math.Float32bits(v))
		f64b = binary.LittleEndian.AppendUint64(f64b, math.Float64bits(float64(v)))
	}
	writeSafetensors(t, path, nil, []stTensor{
		{"f32", "F32", []int64{2, 2}, f32b},
		{"f16", "F16", []int64{3}, f16Bytes([]float32{1, -2, 0.5})},
		{"bf16", "BF16", []int64{2}, bf16Bytes([]float32{1.5, -4})},
		{"f64", "F64", []int64{4}, f64b},
		{"empty", "F32", []int64{0}, nil},
		{"ids", "I64", []int64{1}, make([]byte, 8)},
	})
	c, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	for _, tt := range []struct {
		name string
		want []float32
		err  error
	}{
		{"f32", f32, nil},
		{"f16", []float32{1, -2, 0.5}, nil},
		{"bf16", []float32{1.5, -4}, nil},
		{"f64", f32, nil},
		{"empty", []float32{}, nil},
		{"ids", nil, ErrNotConvertible},
		{"missing", nil, ErrNoTensor},
	} {
		got, err := c.ReadFloat32(tt.name)
		var te *TensorError
		switch {
		case tt.err != nil && (!errors.Is(err, tt.err) || !errors.As(err, &te) || te.Name != tt.name):
			t.Errorf("%s: %v, want a *TensorError wrapping %v", tt.name, err, tt.err)
		case tt.err == nil && (err != nil || !slices.Equal(got, tt.want)):
			t.Errorf("%s: %v, %v; want %v", tt.name, got, err, tt.want)
		}
	}
}

// TestReadFloat32TooLarge: a tensor of more than MaxReadValues bytes of
// float32 values is refused before anything is allocated (a sparse file:
// nothing is read).
func TestReadFloat32TooLarge(t *testing.T) {
	path := filepath.Join(tempDir(t), "big.safetensors")
	n := int64(MaxReadValues/4 + 1)
	hdr, _ := json.Marshal(map[string]any{"w": map[string]any{"dtype": "F32", "shape": []int64{n}, "data_offsets": []int64{0, 4 * n}}})
	for len(hdr)%8 != 0 {
		hdr = append(hdr, ' ')
	}
	b := binary.LittleEndian.AppendUint64(nil, uint64(len(hdr)))
	if err := os.WriteFile(path, append(b, hdr...), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(path, int64(8+len(hdr))+4*n); err != nil {
		t.Fatal(err)
	}
	c, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.ReadFloat32("w"); !errors.Is(err, ErrTooLarge) {
		t.Errorf("ReadFloat32 of %d values: %v, want ErrTooLarge", n, err)
	}
}
