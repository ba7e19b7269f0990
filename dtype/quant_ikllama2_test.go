package dtype

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"math"
	"math/rand"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// ikDoc is testdata/ikllama2's NAME.json (gen_ik_types.py).
type ikDoc struct {
	Tensors []struct {
		Name         string  `json:"name"`
		Type         string  `json:"type"`
		Code         uint32  `json:"code"`
		Shape        []int64 `json:"shape"`
		RowHeader    int     `json:"row_header"`
		RowBytes     int     `json:"row_bytes"`
		FileOffset   int     `json:"file_offset"`
		Bytes        int     `json:"bytes"`
		SHA256Blocks string  `json:"sha256_blocks"`
		SHA256F32    string  `json:"sha256_f32"`
	} `json:"tensors"`
}

// ikFixture is one testdata/ikllama2 tensor: its bytes (row headers
// included) and ik_llama.cpp's dequantization of them.
type ikFixture struct {
	name, typ string
	code      uint32
	rows, n   int
	rowBytes  int
	raw       []byte
	ref       []float32
}

func ikFixtures(t testing.TB, name string) []ikFixture {
	t.Helper()
	base := filepath.Join("testdata", "ikllama2", name)
	var doc ikDoc
	js, err := os.ReadFile(base + ".json")
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(js, &doc); err != nil {
		t.Fatal(err)
	}
	file, err := os.ReadFile(base + ".gguf")
	if err != nil {
		t.Fatal(err)
	}
	refAll, err := os.ReadFile(base + ".f32ref")
	if err != nil {
		t.Fatal(err)
	}
	var out []ikFixture
	pos := 0
	for _, tn := range doc.Tensors {
		if len(tn.Shape) != 2 || tn.FileOffset < 0 || tn.FileOffset+tn.Bytes > len(file) {
			t.Fatalf("%s: bad entry %+v", tn.Name, tn)
		}
		f := ikFixture{name: tn.Name, typ: tn.Type, code: tn.Code, rows: int(tn.Shape[0]), n: int(tn.Shape[1]), rowBytes: tn.RowBytes}
		f.raw = file[tn.FileOffset : tn.FileOffset+tn.Bytes]
		if f.rows*f.rowBytes != len(f.raw) {
			t.Fatalf("%s: %d bytes, want %d rows of %d", tn.Name, len(f.raw), f.rows, f.rowBytes)
		}
		refBytes := refAll[pos : pos+4*f.rows*f.n]
		pos += len(refBytes)
		if sum := sha256.Sum256(f.raw); hex.EncodeToString(sum[:]) != tn.SHA256Blocks {
			t.Fatalf("%s: blocks' sha256 differs from the .json", tn.Name)
		}
		if sum := sha256.Sum256(refBytes); hex.EncodeToString(sum[:]) != tn.SHA256F32 {
			t.Fatalf("%s: reference's sha256 differs from the .json", tn.Name)
		}
		f.ref = make([]float32, f.rows*f.n)
		for i := range f.ref {
			f.ref[i] = math.Float32frombits(binary.LittleEndian.Uint32(refBytes[4*i:]))
		}
		out = append(out, f)
	}
	if pos != len(refAll) {
		t.Fatalf("tensors hold %d reference bytes, .f32ref %d", pos, len(refAll))
	}
	return out
}

// ikCompare fails on the first few elements whose bits differ.
func ikCompare(t *testing.T, what string, got, want []float32) {
	t.Helper()
	bad := 0
	for i := range want {
		if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
			if bad < 5 {
				t.Errorf("%s: element %d: got %v (%#08x), want %v (%#08x)", what, i, got[i], math.Float32bits(got[i]), want[i], math.Float32bits(want[i]))
			}
			bad++
		}
	}
	if bad > 0 {
		t.Errorf("%s: %d of %d elements differ", what, bad, len(want))
	}
}

// TestQuantIKTrellis checks Q6_0 and the _KT types against ik_llama.cpp's own
// dequantize_row_* bit for bit (testdata/ikllama2, made by ikref.cpp from
// ik_llama.cpp's own quantizers): Q6_0 through its block dequantizer, the
// _KT types row by row (a 4-byte scale heads each row).
func TestQuantIKTrellis(t *testing.T) {
	for _, accel := range accelModes() {
		t.Run(pathName(accel), func(t *testing.T) {
			setAccel(t, accel)
			testQuantIKTrellis(t)
		})
	}
}

func testQuantIKTrellis(t *testing.T) {
	seen := map[string]bool{}
	for _, f := range ikFixtures(t, "seed44") {
		seen[f.typ] = true
		got := make([]float32, len(f.ref))
		if d, ok := ByGGML(f.code); ok && d.RowMeta() == 0 {
			if d.String() != f.typ {
				t.Fatalf("%s: code %d is %s, want %s", f.name, f.code, d, f.typ)
			}
			deq, ok := quantDequantizer(d)
			if !ok {
				t.Fatalf("%s: no dequantizer", d)
			}
			deq(got, f.raw)
		} else {
			if d, ok := ByGGML(f.code); !ok || d.String() != f.typ || d.RowMeta() != 4 {
				t.Fatalf("%s: code %d is %s (row meta %d), want %s with a 4-byte scale per row", f.name, f.code, d, d.RowMeta(), f.typ)
			}
			deq, ok := ktRowDequantizer(f.code)
			if !ok {
				t.Fatalf("%s: code %d has no dequantizer", f.typ, f.code)
			}
			for r := 0; r < f.rows; r++ {
				if err := deq(got[r*f.n:(r+1)*f.n], f.raw[r*f.rowBytes:(r+1)*f.rowBytes]); err != nil {
					t.Fatal(err)
				}
			}
		}
		ikCompare(t, f.typ, got, f.ref)
	}
	for _, typ := range []string{"Q6_0", "IQ1_KT", "IQ2_KT", "IQ3_KT", "IQ4_KT"} {
		if !seen[typ] {
			t.Errorf("%s: not in testdata/ikllama2", typ)
		}
	}
}

// TestKTRuns: the _KT rows through the assembly kernels and through Go
// give the same bits, for random blocks under row scales that are zero,
// negative, subnormal, huge, infinite and NaN (the fixtures of
// TestQuantIKTrellis hold both to ik_llama.cpp's own C).
func TestKTRuns(t *testing.T) {
	if !hasAccel {
		t.Skip("no AVX2 on this CPU: only the Go path runs")
	}
	rng := rand.New(rand.NewSource(158))
	scales := []float32{1, -0.75, 0, float32(math.Copysign(0, -1)), 1e-40, 3e38, float32(math.Inf(1)), float32(math.Inf(-1)), float32(math.NaN()), math.Float32frombits(0x7fa00001)}
	for _, k := range ktRowTypes {
		deq, _ := ktRowDequantizer(k.code)
		for _, sc := range scales {
			for _, blocks := range []int{1, 2, 5} {
				row := make([]byte, 4+blocks*k.blockBytes)
				rng.Read(row)
				binary.LittleEndian.PutUint32(row, math.Float32bits(sc))
				got := make([]float32, 256*blocks)
				want := make([]float32, 256*blocks)
				useAccel = true
				err1 := deq(got, row)
				useAccel = false
				err2 := deq(want, row)
				useAccel = hasAccel
				if err1 != nil || err2 != nil {
					t.Fatalf("%s: %v, %v", k.name, err1, err2)
				}
				for i := range want {
					if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
						t.Fatalf("%s, scale %v, %d blocks: element %d: asm %#08x, Go %#08x", k.name, sc, blocks, i, math.Float32bits(got[i]), math.Float32bits(want[i]))
					}
				}
			}
		}
	}
}

// TestQuantKTRowSize: a _KT row that is not a 4-byte scale and whole blocks
// is refused in one line naming the type.
func TestQuantKTRowSize(t *testing.T) {
	for _, k := range ktRowTypes {
		deq, ok := ktRowDequantizer(k.code)
		if !ok {
			t.Fatalf("%s: no dequantizer", k.name)
		}
		dst := make([]float32, 512)
		for _, n := range []int{0, 3, 4 + k.blockBytes - 1, 4 + k.blockBytes + 1, k.blockBytes * 2} {
			err := deq(dst, make([]byte, n))
			if err == nil || !strings.Contains(err.Error(), k.name) || strings.Contains(err.Error(), "\n") {
				t.Errorf("%s row of %d bytes: %v", k.name, n, err)
			}
		}
		if err := deq(dst, make([]byte, 4+2*k.blockBytes)); err != nil {
			t.Errorf("%s: %v", k.name, err)
		}
	}
}

// TestIKType: every ik_llama.cpp code tensorfs recognises without serving
// it is named, none is also in the dtype table, and mainline codes are not
// claimed.
func TestIKType(t *testing.T) {
	for code, want := range map[uint32]string{
		202: "Q4_0_R8", 208: "Q8_0_R8", 212: "Q4_K_R4", 214: "Q6_K_R4", 223: "IQ4_XS_R8", 339: "IQ4_K_R4"} {
		name, why, ok := IKType(code)
		if d, served := ByGGML(code); served { // in the table: not named as unserved
			if ok || d.String() != want {
				t.Errorf("code %d: served as %s and IKType %q %v", code, d, name, ok)
			}
			continue
		}
		if !ok || name != want || why == "" || strings.Contains(why, "\n") {
			t.Errorf("code %d: %q %q %v, want %s", code, name, why, ok, want)
		}
	}
	for code := uint32(0); code < 1024; code++ {
		_, _, ik := IKType(code)
		_, known := ByGGML(code)
		if ik && known {
			t.Errorf("code %d is both served and named as unserved", code)
		}
	}
	for _, code := range []uint32{133, 134, 135} { // Q6_0, IQ1_BN, IQ2_BN
		if _, _, ok := IKType(code); ok {
			t.Errorf("code %d is served, not an unserved ik type", code)
		}
	}
	// the row-interleaved types without a group dequantizer stay named
	for code, want := range map[uint32]string{206: "Q5_0_R4", 210: "Q2_K_R4", 230: "BF16_R16", 353: "MXFP4_R8", 397: "Q8_K_R16", 398: "Q8_KV_R8", 399: "Q8_K_R8"} {
		if _, served := ByGGML(code); served {
			continue
		}
		if name, why, ok := IKType(code); !ok || name != want || !strings.Contains(why, "interleaves its rows") {
			t.Errorf("code %d: %q %q %v, want %s unserved", code, name, why, ok, want)
		}
	}
	for _, g := range ikGroups {
		if _, _, ok := IKType(g.code); ok {
			t.Errorf("%s (%d): served and named as unserved", g.name, g.code)
		}
	}
}

// ik_llama.cpp's served types join the dequantizer tests and benchmarks.
func init() { quantTypes = append(quantTypes, Q6_0) }

// BenchmarkDequantKT reports each _KT row dequantizer's throughput
// (best-Melem/s, as BenchmarkDequant) on 64 random rows of 4096 elements
// (a finite row scale); BenchmarkDequant covers Q6_0.
func BenchmarkDequantKT(b *testing.B) {
	const rows, n = 64, 4096
	for _, k := range ktRowTypes {
		rowBytes := 4 + n/256*k.blockBytes
		src := make([]byte, rows*rowBytes)
		rng := rand.New(rand.NewSource(int64(k.code)))
		rng.Read(src)
		for r := 0; r < rows; r++ {
			binary.LittleEndian.PutUint32(src[r*rowBytes:], math.Float32bits(0.01*float32(r+1)))
		}
		deq, _ := ktRowDequantizer(k.code)
		dst := make([]float32, rows*n)
		b.Run(k.name, func(b *testing.B) {
			b.SetBytes(int64(len(src)))
			best := time.Duration(math.MaxInt64)
			for i := 0; i < b.N; i++ {
				t0 := time.Now()
				for r := 0; r < rows; r++ {
					if err := deq(dst[r*n:(r+1)*n], src[r*rowBytes:(r+1)*rowBytes]); err != nil {
						b.Fatal(err)
					}
				}
				if el := time.Since(t0); el < best {
					best = el
				}
			}
			b.ReportMetric(float64(len(dst))/best.Seconds()/1e6, "best-Melem/s")
		})
	}
}

// TestQuantIKRepacked checks the row-interleaved types against
// ik_llama.cpp's own dequantize_row_*_r8/_r4 bit for bit
// (testdata/ikllama2/seed45r, seed46r, seed48r, seed49r, seed50r: 8 or 16 rows of 512 each, from its own
// quantizers), a group of 8 or 4 rows at a time, its head (ikGroup.meta)
// included.
func TestQuantIKRepacked(t *testing.T) {
	seen := map[string]bool{}
	var fixtures []ikFixture
	for _, name := range []string{"seed45r", "seed46r", "seed48r", "seed49r", "seed50r"} {
		fixtures = append(fixtures, ikFixtures(t, name)...)
	}
	for _, f := range fixtures {
		seen[f.typ] = true
		if d, ok := ByGGML(f.code); !ok || d.String() != f.typ {
			t.Fatalf("%s: code %d is %s in the dtype table, %v", f.typ, f.code, d, ok)
		}
		if name, _, ok := IKType(f.code); ok {
			t.Errorf("%s: served, and IKType(%d) = %q", f.typ, f.code, name)
		}
		g, deq, ok := ikGroupDequantizer(f.code)
		if !ok || f.rows%g != 0 {
			t.Fatalf("%s: group %d, %v", f.typ, g, ok)
		}
		for _, e := range ikGroups {
			if e.code == f.code && g*f.rowBytes != e.meta+f.n/e.blockElems*e.blockBytes {
				t.Fatalf("%s: a group is %d bytes in the file, %d + %d/%d·%d by the table", f.typ, g*f.rowBytes, e.meta, f.n, e.blockElems, e.blockBytes)
			}
		}
		got := make([]float32, len(f.ref))
		for r := 0; r < f.rows; r += g {
			deq(got[r*f.n:(r+g)*f.n], f.raw[r*f.rowBytes:(r+g)*f.rowBytes], f.n)
		}
		ikCompare(t, f.typ, got, f.ref)
	}
	for _, g := range ikGroups {
		if !seen[g.name] {
			t.Errorf("%s: not in testdata/ikllama2/seed45r, seed46r, seed48r, seed49r or seed50r", g.name)
		}
	}
}

// BenchmarkDequantIKRepacked reports each row-interleaved type's group
// dequantizer (best-Melem/s) on 64 random rows of 4096 elements (fp16
// and float32 scales kept finite).
func BenchmarkDequantIKRepacked(b *testing.B) {
	const rows, n = 64, 4096
	for _, g := range ikGroups {
		rowBytes := (g.meta + n/g.blockElems*g.blockBytes) / g.rows
		src := make([]byte, rows*rowBytes)
		rand.New(rand.NewSource(int64(g.code))).Read(src)
		for i := 1; i < len(src); i += 2 {
			src[i] &= 0x3b // every fp16 finite, wherever the scales are
		}
		_, deq, _ := ikGroupDequantizer(g.code)
		dst := make([]float32, rows*n)
		b.Run(g.name, func(b *testing.B) {
			best := time.Duration(math.MaxInt64)
			for i := 0; i < b.N; i++ {
				t0 := time.Now()
				for r := 0; r < rows; r += g.rows {
					deq(dst[r*n:(r+g.rows)*n], src[r*rowBytes:(r+g.rows)*rowBytes], n)
				}
				if el := time.Since(t0); el < best {
					best = el
				}
			}
			b.ReportMetric(float64(len(dst))/best.Seconds()/1e6, "best-Melem/s")
		})
	}
}

// TestIKGroupRun: a row of ikGroups with a run converter (BF16_R16) gives
// the same bits through it as through its block dequantizer, block by
// block, on random bytes.
func TestIKGroupRun(t *testing.T) {
	r := rand.New(rand.NewSource(50))
	n := 0
	for _, g := range ikGroups {
		if g.run == nil {
			continue
		}
		n++
		const nb = 37
		b := make([]byte, nb*g.blockBytes)
		for i := range b {
			b[i] = byte(r.Uint32())
		}
		rowsOf := func() ([][]float32, []float32) {
			f := make([]float32, g.rows*nb*g.blockElems)
			y := make([][]float32, g.rows)
			for k := range y {
				y[k] = f[k*nb*g.blockElems : (k+1)*nb*g.blockElems]
			}
			return y, f
		}
		y1, f1 := rowsOf()
		g.run(y1, b, nb)
		y2, f2 := rowsOf()
		for j := 0; j < nb; j++ {
			g.deq(y2, b[j*g.blockBytes:(j+1)*g.blockBytes], j)
		}
		for i := range f1 {
			if math.Float32bits(f1[i]) != math.Float32bits(f2[i]) {
				t.Fatalf("%s: element %d: run %v, blocks %v", g.name, i, f1[i], f2[i])
			}
		}
	}
	if n == 0 {
		t.Fatal("no row of ikGroups has a run converter")
	}
}
