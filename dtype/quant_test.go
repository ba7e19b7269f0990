package dtype

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/rand"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/lazyweights/tensorfs/internal/testenv"
)

// quantTypes are the dtypes that must have a dequantizer.
var quantTypes = []DType{Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q8_1, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, Q8_K,
	IQ2_XXS, IQ2_XS, IQ3_XXS, IQ1_S, IQ4_NL, IQ3_S, IQ2_S, IQ4_XS, IQ1_M, TQ1_0, TQ2_0, MXFP4, NVFP4, Q1_0, Q2_0,
	IQ2_K, IQ3_K, IQ4_K, IQ5_K, IQ6_K, // ik_llama.cpp's (quant_ik.go)
}

// quantRefTensor is one tensor of a GGUF file, as the minimal walker below
// reads it: enough to find its bytes, independent of package index.
type quantRefTensor struct {
	name   string
	ggml   uint32
	elems  int64
	offset int64 // absolute
}

// quantWalkGGUF reads the tensor table of a (trusted, test) GGUF v2/v3
// file.
func quantWalkGGUF(t testing.TB, b []byte) []quantRefTensor {
	t.Helper()
	pos := 0
	u32 := func() uint32 { v := binary.LittleEndian.Uint32(b[pos:]); pos += 4; return v }
	u64 := func() uint64 { v := binary.LittleEndian.Uint64(b[pos:]); pos += 8; return v }
	str := func() string { n := int(u64()); s := string(b[pos : pos+n]); pos += n; return s }
	if string(b[:4]) != "GGUF" {
		t.Fatalf("not GGUF")
	}
	pos = 4
	if v := u32(); v != 2 && v != 3 {
		t.Fatalf("GGUF version %d", v)
	}
	nt, nkv := u64(), u64()
	align := uint64(32)
	var skip func(typ uint32) uint64
	skip = func(typ uint32) uint64 {
		switch typ {
		case 0, 1, 7:
			pos++
		case 2, 3:
			pos += 2
		case 4, 5:
			return uint64(u32())
		case 6:
			pos += 4
		case 10, 11, 12:
			return u64()
		case 8:
			str()
		case 9:
			et, n := u32(), u64()
			for i := uint64(0); i < n; i++ {
				skip(et)
			}
		default:
			t.Fatalf("value type %d", typ)
		}
		return 0
	}
	for i := uint64(0); i < nkv; i++ {
		key := str()
		v := skip(u32())
		if key == "general.alignment" {
			align = v
		}
	}
	var ts []quantRefTensor
	for i := uint64(0); i < nt; i++ {
		var rt quantRefTensor
		rt.name = str()
		nd := u32()
		rt.elems = 1
		for j := uint32(0); j < nd; j++ {
			rt.elems *= int64(u64())
		}
		rt.ggml = u32()
		rt.offset = int64(u64())
		ts = append(ts, rt)
	}
	data := (uint64(pos) + align - 1) / align * align
	for i := range ts {
		ts[i].offset += int64(data)
	}
	sort.Slice(ts, func(i, j int) bool { return ts[i].offset < ts[j].offset })
	return ts
}

func quantFromGGML(t testing.TB, code uint32) DType {
	t.Helper()
	for _, d := range All() {
		if d.Info().GGML >= 0 && uint32(d.Info().GGML) == code {
			return d
		}
	}
	t.Fatalf("ggml type %d not in the table", code)
	return Invalid
}

// TestQuantRefFiles checks every dequantizer against ggml's own output: for
// each testdata/gguf/quantized/X.gguf, the float32 values of every tensor in
// file order equal X.gguf.f32ref bit for bit.
func TestQuantRefFiles(t *testing.T) {
	dir := testenv.Path(t, "gguf/quantized")
	files, err := filepath.Glob(filepath.Join(dir, "*.gguf"))
	if err != nil || len(files) == 0 {
		testenv.SkipOrFail(t, "no GGUF files in "+dir)
	}
	covered := map[DType]bool{}
	for _, path := range files {
		t.Run(filepath.Base(path), func(t *testing.T) {
			b, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			ref, err := os.ReadFile(path + ".f32ref")
			if err != nil {
				t.Fatal(err)
			}
			var got []byte
			for _, rt := range quantWalkGGUF(t, b) {
				d := quantFromGGML(t, rt.ggml)
				size, ok := d.ByteSize(rt.elems)
				if !ok {
					t.Fatalf("%s: %d elements of %s", rt.name, rt.elems, d)
				}
				raw := b[rt.offset : rt.offset+size]
				switch {
				case d == F32:
					got = append(got, raw...)
				case d.Kind() == KindQuant:
					deq, ok := quantDequantizer(d)
					if !ok {
						t.Fatalf("%s: no dequantizer for %s", rt.name, d)
					}
					f := make([]float32, rt.elems)
					deq(f, raw)
					for _, v := range f {
						got = binary.LittleEndian.AppendUint32(got, math.Float32bits(v))
					}
					covered[d] = true
				default: // F16, BF16: the converter, where it exists yet
					conv, ok := ConverterFor(d, F32)
					if !ok {
						t.Skipf("%s: no %s→F32 converter yet", rt.name, d)
					}
					out := make([]byte, 4*rt.elems)
					conv(out, raw)
					got = append(got, out...)
				}
			}
			if len(got) != len(ref) {
				t.Fatalf("dequantized %d bytes, .f32ref has %d", len(got), len(ref))
			}
			bad := 0
			for i := 0; i < len(ref); i += 4 {
				g, w := binary.LittleEndian.Uint32(got[i:]), binary.LittleEndian.Uint32(ref[i:])
				if g != w {
					if bad < 5 {
						t.Errorf("element %d: got %#08x (%g), ggml %#08x (%g)", i/4, g, math.Float32frombits(g), w, math.Float32frombits(w))
					}
					bad++
				}
			}
			if bad > 0 {
				t.Errorf("%d of %d elements differ", bad, len(ref)/4)
			}
		})
	}
	// The files hold the ten types ggml's reference quantizer made.
	for _, d := range []DType{Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K} {
		if !covered[d] && !t.Skipped() {
			t.Errorf("%s: no reference file checked it", d)
		}
	}
}

// quantRandomBlocks returns n random blocks of d whose fp16/E8M0 scales
// are finite (random bytes elsewhere).
func quantRandomBlocks(rng *rand.Rand, d DType, n int) []byte {
	bs := int(d.Info().BlockBytes)
	b := make([]byte, n*bs)
	rng.Read(b)
	for i := 0; i < n; i++ {
		blk := b[i*bs : (i+1)*bs]
		for _, off := range quantHalfOffsets(d) {
			// exponent field in 1..29: finite, normal
			h := uint16(rng.Intn(1<<15)) | uint16(rng.Intn(2))<<15
			e := uint16(1 + rng.Intn(29))
			h = h&^(0x1f<<10) | e<<10
			binary.LittleEndian.PutUint16(blk[off:], h)
		}
	}
	return b
}

// quantHalfOffsets gives the byte offsets of a block's fp16 fields.
func quantHalfOffsets(d DType) []int {
	switch d {
	case Q4_0, Q5_0, Q8_0, IQ4_NL, IQ2_XXS, IQ2_XS, IQ3_XXS, IQ1_S, IQ3_S, IQ2_S, IQ4_XS, Q1_0, Q2_0:
		return []int{0}
	case Q4_1, Q5_1, Q8_1, Q4_K, Q5_K:
		return []int{0, 2}
	case IQ2_K, IQ3_K, IQ4_K, IQ5_K, IQ6_K:
		return []int{0}
	case TQ1_0:
		return []int{52}
	case TQ2_0:
		return []int{64}
	case Q2_K:
		return []int{80, 82}
	case Q3_K:
		return []int{108}
	case Q6_K:
		return []int{208}
	}
	return nil
}

// TestQuantSubRange: a range of whole blocks taken from the middle of a
// tensor dequantizes to the same values as that range of the whole.
func TestQuantSubRange(t *testing.T) {
	rng := rand.New(rand.NewSource(1))
	for _, d := range quantTypes {
		t.Run(d.String(), func(t *testing.T) {
			deq, ok := quantDequantizer(d)
			if !ok {
				t.Fatalf("no dequantizer")
			}
			bs, be := int(d.Info().BlockBytes), int(d.Info().BlockElems)
			const n = 37
			src := quantRandomBlocks(rng, d, n)
			whole := make([]float32, n*be)
			deq(whole, src)
			for _, r := range [][2]int{{0, 1}, {5, 6}, {3, 20}, {36, 37}, {17, 37}, {1, 36}} {
				part := make([]float32, (r[1]-r[0])*be+3)
				for i := range part {
					part[i] = -7 // sentinel past the end
				}
				deq(part, src[r[0]*bs:r[1]*bs])
				for i := 0; i < (r[1]-r[0])*be; i++ {
					if math.Float32bits(part[i]) != math.Float32bits(whole[r[0]*be+i]) {
						t.Fatalf("blocks [%d,%d) element %d: %g, whole gives %g", r[0], r[1], i, part[i], whole[r[0]*be+i])
					}
				}
				for _, v := range part[(r[1]-r[0])*be:] {
					if v != -7 {
						t.Fatalf("blocks [%d,%d): wrote past the blocks' elements", r[0], r[1])
					}
				}
			}
			// A trailing partial block is ignored.
			part := make([]float32, 2*be)
			deq(part, src[:2*bs-1])
			for i := be; i < 2*be; i++ {
				if part[i] != 0 {
					t.Fatalf("partial block written")
				}
			}
		})
	}
}

// TestQuantDequantizerTable: exactly the listed types have a dequantizer;
// the others (and non-quant dtypes) report false.
func TestQuantDequantizerTable(t *testing.T) {
	want := map[DType]bool{}
	for _, d := range quantTypes {
		want[d] = true
	}
	for _, d := range append(All(), Invalid, DType(250)) {
		_, ok := quantDequantizer(d)
		if ok != want[d] {
			t.Errorf("%s: dequantizer %v, want %v", d, ok, want[d])
		}
		if ok && d.Kind() != KindQuant {
			t.Errorf("%s: dequantizer for a non-quant dtype", d)
		}
	}
}

// TestQuantHalf checks the fp16 widening on all 65536 inputs against
// math.Ldexp.
func TestQuantHalf(t *testing.T) {
	for h := 0; h < 1<<16; h++ {
		got := quantHalf(uint16(h))
		s, e, m := h>>15, (h>>10)&0x1f, h&0x3ff
		var want float64
		switch {
		case e == 0x1f && m != 0:
			bits := math.Float32bits(got)
			if bits&0x7fc00000 != 0x7fc00000 || bits&0x3fffff != uint32(m)<<13&0x3fffff || bits>>31 != uint32(s) {
				t.Fatalf("%#04x: NaN widened to %#08x", h, bits)
			}
			continue
		case e == 0x1f:
			want = math.Inf(1)
		case e == 0:
			want = math.Ldexp(float64(m), -24)
		default:
			want = math.Ldexp(float64(m+1024), e-25)
		}
		if s == 1 {
			want = -want
		}
		if math.Float32bits(got) != math.Float32bits(float32(want)) {
			t.Fatalf("%#04x: %g, want %g", h, got, want)
		}
	}
}

// quantBlock builds one block from fields at byte offsets.
func quantBlock(size int, fields ...any) []byte {
	b := make([]byte, size)
	for i := 0; i < len(fields); i += 2 {
		off := fields[i].(int)
		switch v := fields[i+1].(type) {
		case uint16:
			binary.LittleEndian.PutUint16(b[off:], v)
		case uint32:
			binary.LittleEndian.PutUint32(b[off:], v)
		case []byte:
			copy(b[off:], v)
		case byte:
			b[off] = v
		}
	}
	return b
}

func quantSeq(n int, f func(i int) byte) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = f(i)
	}
	return b
}

// TestQuantKnownBlocks checks hand-computed values for each layout, so a
// type without a reference file (Q8_K, IQ4_NL, MXFP4) is still pinned.
// fp16 0x3c00 = 1, 0x3800 = 0.5, 0x4000 = 2, 0xbc00 = -1.
func TestQuantKnownBlocks(t *testing.T) {
	nib := quantSeq(16, func(i int) byte { return byte(i) | byte(15-i)<<4 })
	tests := []struct {
		d    DType
		src  []byte
		want func(i int) float64
	}{
		{Q4_0, quantBlock(18, 0, uint16(0x4000), 2, nib), func(i int) float64 {
			if i < 16 {
				return 2 * float64(i-8)
			}
			return 2 * float64(15-(i-16)-8)
		}},
		{Q4_1, quantBlock(20, 0, uint16(0x3800), 2, uint16(0xbc00), 4, nib), func(i int) float64 {
			if i < 16 {
				return 0.5*float64(i) - 1
			}
			return 0.5*float64(15-(i-16)) - 1
		}},
		// qh bit j set for odd j: element j gets +16.
		{Q5_0, quantBlock(22, 0, uint16(0x3c00), 2, uint32(0xaaaaaaaa), 6, nib), func(i int) float64 {
			v := i % 16
			if i >= 16 {
				v = 15 - (i - 16)
			}
			return float64(v + 16*(i%2) - 16)
		}},
		{Q5_1, quantBlock(24, 0, uint16(0x4000), 2, uint16(0x3c00), 4, uint32(0xffff0000), 8, nib), func(i int) float64 {
			if i < 16 {
				return 2*float64(i) + 1
			}
			return 2*float64(15-(i-16)+16) + 1
		}},
		{Q8_0, quantBlock(34, 0, uint16(0xbc00), 2, quantSeq(32, func(i int) byte { return byte(int8(i*8 - 128)) })), func(i int) float64 {
			return -float64(i*8 - 128)
		}},
		{IQ4_NL, quantBlock(18, 0, uint16(0x3800), 2, nib), func(i int) float64 {
			if i < 16 {
				return 0.5 * float64(kvaluesIQ4NL[i])
			}
			return 0.5 * float64(kvaluesIQ4NL[15-(i-16)])
		}},
		{MXFP4, quantBlock(17, 0, byte(130), 1, nib), func(i int) float64 { // 2^(130-128) = 4
			if i < 16 {
				return 4 * float64(kvaluesMXFP4[i])
			}
			return 4 * float64(kvaluesMXFP4[15-(i-16)])
		}},
		{MXFP4, quantBlock(17, 0, byte(0), 1, nib), func(i int) float64 { // 2^-128
			if i < 16 {
				return math.Ldexp(float64(kvaluesMXFP4[i]), -128)
			}
			return math.Ldexp(float64(kvaluesMXFP4[15-(i-16)]), -128)
		}},
		{MXFP4, quantBlock(17, 0, byte(1), 1, quantSeq(16, func(int) byte { return 0x71 })), func(i int) float64 { // 2^-127
			if i < 16 {
				return math.Ldexp(1, -127)
			}
			return math.Ldexp(12, -127)
		}},
		{Q8_K, quantBlock(292, 0, math.Float32bits(0.25), 4, quantSeq(256, func(i int) byte { return byte(i) })), func(i int) float64 {
			return 0.25 * float64(int8(i))
		}},
		// Q4_K: d=1, dmin=0.5; scales: sub-block j<4 scale j+1, min j; j>=4 scale/min from the packed bytes.
		{Q4_K, quantBlock(144, 0, uint16(0x3c00), 2, uint16(0x3800),
			4, []byte{1, 2, 3, 4, 0, 1, 2, 3, 0x5 | 0x4<<4, 0x6 | 0x5<<4, 0x7 | 0x6<<4, 0x8 | 0x7<<4},
			16, quantSeq(128, func(i int) byte { return byte(i%16) | byte(i%16)<<4 })), func(i int) float64 {
			sub := i / 32
			sc := []float64{1, 2, 3, 4, 5, 6, 7, 8}[sub]
			mn := []float64{0, 1, 2, 3, 4, 5, 6, 7}[sub]
			return sc*float64(i%16) - 0.5*mn
		}},
		// Q6_K: d=0.5, scales[k]=k-8, quant value (l%64) - 32 via ql/qh layout.
		{Q6_K, quantBlock(210, 208, uint16(0x3800), 192, quantSeq(16, func(i int) byte { return byte(int8(i - 8)) })), func(i int) float64 {
			return 0.5 * float64(i/16-8) * -32 // all quants zero: value -32
		}},
		// Q2_K: d=1, dmin=2, scales[k] = (k%16) | (1<<4), quants all 3.
		{Q2_K, quantBlock(84, 0, quantSeq(16, func(i int) byte { return byte(i) | 1<<4 }), 16, quantSeq(64, func(int) byte { return 0xff }),
			80, uint16(0x3c00), 82, uint16(0x4000)), func(i int) float64 {
			return float64(i/16)*3 - 2
		}},
		// Q3_K: d=1; all 6-bit scales 33 (low nibble 1, high bits 2); quants 2 with hmask set: value 2.
		{Q3_K, quantBlock(110, 0, quantSeq(32, func(int) byte { return 0xff }), 32, quantSeq(64, func(int) byte { return 0xaa }),
			96, []byte{0x11, 0x11, 0x11, 0x11, 0x11, 0x11, 0x11, 0x11, 0xaa, 0xaa, 0xaa, 0xaa}, 108, uint16(0x3c00)), func(i int) float64 {
			return 2 * float64(0x21-32) // 6-bit scale 0x21 = 33
		}},
		// Q5_K: d=1, dmin=0; all scales 1; ql low nibble 1, high 2; qh all set: 17 and 18.
		{Q5_K, quantBlock(176, 0, uint16(0x3c00), 2, uint16(0),
			4, []byte{1, 1, 1, 1, 0, 0, 0, 0, 1, 1, 1, 1}, 16, quantSeq(32, func(int) byte { return 0xff }),
			48, quantSeq(128, func(int) byte { return 0x21 })), func(i int) float64 {
			if i%64 < 32 {
				return 17
			}
			return 18
		}},
	}
	for _, tc := range tests {
		t.Run(tc.d.String(), func(t *testing.T) {
			deq, ok := quantDequantizer(tc.d)
			if !ok {
				t.Fatal("no dequantizer")
			}
			be := int(tc.d.Info().BlockElems)
			if len(tc.src) != int(tc.d.Info().BlockBytes) {
				t.Fatalf("test block is %d bytes, want %d", len(tc.src), tc.d.Info().BlockBytes)
			}
			got := make([]float32, be)
			deq(got, tc.src)
			var errs []string
			for i := range got {
				if w := float32(tc.want(i)); math.Float32bits(got[i]) != math.Float32bits(w) && !(got[i] == 0 && w == 0) {
					errs = append(errs, fmt.Sprintf("[%d]=%g want %g", i, got[i], w))
				}
			}
			if len(errs) > 0 {
				if len(errs) > 6 {
					errs = append(errs[:6], "...")
				}
				t.Errorf("%d wrong: %s", len(errs), strings.Join(errs, " "))
			}
		})
	}
}

func benchDequant(b *testing.B, d DType, src []byte) {
	deq, _ := quantDequantizer(d)
	dst := make([]float32, len(src)/int(d.Info().BlockBytes)*int(d.Info().BlockElems))
	b.SetBytes(int64(len(src)))
	b.ResetTimer()
	best := time.Duration(math.MaxInt64)
	for i := 0; i < b.N; i++ {
		t0 := time.Now()
		deq(dst, src)
		if el := time.Since(t0); el < best {
			best = el
		}
	}
	// The machine is shared: the best run is the figure to compare (as the
	// C side of docs/BENCHMARKS.md takes the best of its runs).
	b.ReportMetric(float64(len(dst))/best.Seconds()/1e6, "best-Melem/s")
	b.ReportMetric(float64(len(src))/best.Seconds()/1e6, "best-MB/s")
}

// BenchmarkDequant reports throughput in bytes of quantized input per
// second, on 4096 random blocks of each type (finite scales); with
// TENSORFS_DEQUANT_BENCH=FILE.gguf, on the tensors of that file instead
// (one sub-benchmark per tensor of a quantized type: the same bytes that
// the C side of docs/BENCHMARKS.md dequantizes).
func BenchmarkDequant(b *testing.B) {
	if path := os.Getenv("TENSORFS_DEQUANT_BENCH"); path != "" {
		data, err := os.ReadFile(path)
		if err != nil {
			b.Fatal(err)
		}
		for _, rt := range quantWalkGGUF(b, data) {
			d := quantFromGGML(b, rt.ggml)
			if _, ok := quantDequantizer(d); !ok {
				continue
			}
			size, _ := d.ByteSize(rt.elems)
			b.Run(d.String(), func(b *testing.B) { benchDequant(b, d, data[rt.offset:rt.offset+size]) })
		}
		return
	}
	for _, d := range quantTypes {
		src := quantRandomBlocks(rand.New(rand.NewSource(2)), d, 4096)
		b.Run(d.String(), func(b *testing.B) { benchDequant(b, d, src) })
	}
}
