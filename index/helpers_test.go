package index

import (
	"errors"
	"math"
	"strings"
	"testing"
)

// checkError checks that err is a one-line *FormatError containing want.
func checkError(t *testing.T, err error, want string) {
	t.Helper()
	if err == nil {
		t.Fatalf("no error, want one containing %q", want)
	}
	var fe *FormatError
	if !errors.As(err, &fe) || !errors.Is(err, ErrFormat) {
		t.Errorf("error %v is %T, not a *FormatError", err, err)
	}
	if strings.ContainsAny(err.Error(), "\n\r") {
		t.Errorf("error is not one line: %q", err)
	}
	if !strings.Contains(err.Error(), want) {
		t.Errorf("error %q does not contain %q", err, want)
	}
}

// ggufAllTypesWant is what the GGUF parser makes of one key of every
// type (a copy of index/gguf's, which TestGGUFValid checks).
func ggufAllTypesWant() map[string]any {
	return map[string]any{
		"u8":          uint64(200),
		"i8":          int64(-128),
		"u16":         uint64(65535),
		"i16":         int64(-32768),
		"u32":         uint64(4000000000),
		"i32":         int64(-7),
		"f32":         float64(float32(0.1)),
		"bool.t":      true,
		"bool.f":      false,
		"str":         "héllo",
		"u64":         uint64(1<<63 + 5),
		"i64":         int64(1) << 62,
		"f64":         -2.5,
		"f32.nan":     "NaN",
		"f64.inf":     "-Inf",
		"arr.u8":      Uint8s{1, 2, 255},
		"arr.i8":      []int8{-1, 7},
		"arr.u16":     []uint16{1, 65535},
		"arr.i16":     []int16{-2},
		"arr.u32":     []uint32{7, 1 << 31},
		"arr.i32":     []int32{3, -1},
		"arr.f32":     []float32{1.5, -1000},
		"arr.f32.inf": []any{1.5, "+Inf"},
		"arr.bool":    []bool{true, false, true},
		"arr.str":     []string{"a", "", "<0x0A>"},
		"arr.u64":     []uint64{math.MaxUint64},
		"arr.i64":     []int64{-2},
		"arr.f64":     []float64{0.25},
		"arr.empty":   []int32{},
		"arr.nested":  []any{[]string{"x"}, []any{Uint8s{9}}},
	}
}
