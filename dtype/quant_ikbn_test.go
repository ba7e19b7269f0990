package dtype

import (
	"encoding/binary"
	"math"
	"slices"
	"testing"
)

// TestQuantIKBN checks IQ1_BN and IQ2_BN row by row against
// testdata/ikllama2/seed47bn (ik_llama.cpp's own quantize_iq1_bn/_iq2_bn;
// the reference is its dequantize_row_iq1_bn/_iq2_bn of the blocks after
// each row's scale, times that scale: README.md there), bit for bit.
func TestQuantIKBN(t *testing.T) {
	seen := map[string]bool{}
	for _, f := range ikFixtures(t, "seed47bn") {
		d, ok := ByGGML(f.code)
		if !ok || d.String() != f.typ || d.Info().BlockElems != 64 {
			t.Fatalf("%s: code %d is %v (%v)", f.name, f.code, d, ok)
		}
		deq, ok := rowDequantizer(d)
		if !ok {
			t.Fatalf("%s: no row dequantizer", d)
		}
		meta := int(d.RowMeta())
		if rs, ok := d.RowSize(int64(f.n)); !ok || int(rs) != f.rowBytes {
			t.Fatalf("%s: row size %d (%v), the file's %d", d, rs, ok, f.rowBytes)
		}
		got := make([]float32, len(f.ref))
		buf := make([]float32, f.n+1)
		for r := 0; r < f.rows; r++ {
			buf[f.n] = -7
			row := f.raw[r*f.rowBytes : (r+1)*f.rowBytes]
			deq(buf[:f.n], row[:meta], row[meta:])
			if buf[f.n] != -7 {
				t.Fatalf("%s row %d: wrote past the row", d, r)
			}
			copy(got[r*f.n:], buf[:f.n])
		}
		ikCompare(t, f.typ, got, f.ref)
		seen[f.typ] = true
	}
	if !seen["IQ1_BN"] || !seen["IQ2_BN"] {
		t.Errorf("seed47bn holds %v, want IQ1_BN and IQ2_BN", seen)
	}
}

// TestQuantIKBNScale: a weight is the float32 product scale·t, for any
// scale the row holds: a negative one gives −0 for t = 0, and IQ2_BN's
// code 3 (which ik_llama.cpp's quantizer never writes; its
// dequantize_row_iq2_bn reads it as t = 2) gives 2·scale.
func TestQuantIKBNScale(t *testing.T) {
	bits := func(v []float32) (b []uint32) {
		for _, x := range v {
			b = append(b, math.Float32bits(x))
		}
		return b
	}
	nz := math.Float32bits(float32(math.Copysign(0, -1)))
	// IQ2_BN, scale −0.5: qs[0] = codes 0, 1, 2, 3 (elements 0, 16, 32, 48).
	blocks := make([]byte, 16)
	blocks[0] = 0 | 1<<2 | 2<<4 | 3<<6
	meta := binary.LittleEndian.AppendUint32(nil, math.Float32bits(-0.5))
	y := make([]float32, 64)
	dequantIQ2BNRow(y, meta, blocks)
	if got, want := bits([]float32{y[0], y[16], y[32], y[48]}), []uint32{math.Float32bits(0.5), nz, math.Float32bits(-0.5), math.Float32bits(-1)}; !slices.Equal(got, want) {
		t.Errorf("IQ2_BN codes 0..3 with scale −0.5: %#x, want %#x", got, want)
	}
	// IQ1_BN, scale −2 (fp16 0xc000): byte 0 holds trits 0, 1, 2, 0, 0 as
	// ik_llama.cpp's quantizer packs them: idx = 0·1 + 1·3 + 2·9 = 21,
	// stored as ceil(256·21/243) = 23.
	blocks = make([]byte, 13)
	blocks[0] = 23
	y = make([]float32, 64)
	dequantIQ1BNRow(y, []byte{0x00, 0xc0}, blocks)
	if got, want := bits(y[:5]), []uint32{math.Float32bits(2), nz, math.Float32bits(-2), math.Float32bits(2), math.Float32bits(2)}; !slices.Equal(got, want) {
		t.Errorf("IQ1_BN trits of 23 with scale −2: %#x, want %#x", got, want)
	}
}
