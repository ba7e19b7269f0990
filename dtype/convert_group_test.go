package dtype

import (
	"bytes"
	"fmt"
	"math"
	"math/rand/v2"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// groupWant is ref (float32 elements) in view dtype to, as the F32
// converters take them there (F16 and BF16 round once).
func groupWant(t *testing.T, ref []float32, to DType) []byte {
	t.Helper()
	b := make([]byte, 4*len(ref))
	for i, v := range ref {
		le.PutUint32(b[4*i:], math.Float32bits(v))
	}
	if to == F32 {
		return b
	}
	c, ok := ConverterFor(F32, to)
	if !ok {
		t.Fatalf("no F32 -> %s", to)
	}
	out := make([]byte, len(ref)*int(to.ElemSize()))
	c(out, b)
	return out
}

// TestGroupConverter: each row-interleaved type of testdata/ikllama2's
// seed*r fixtures (ik_llama.cpp's own quantizers and
// dequantize_row_*_r8/_r4; seed45r: 8 rows of 512 of each of the first
// eight) is a DType
// with its rows per group, sized by whole groups, and its GroupConverter
// gives ik_llama.cpp's float32s bit for bit (F64 exactly, F16 and BF16
// rounded from them): whole groups into their rows, and any run of a
// group's blocks into a narrower stride, writing nothing else.
func TestGroupConverter(t *testing.T) {
	rng := rand.New(rand.NewPCG(45, 4))
	seen := map[DType]bool{}
	fixtures, err := filepath.Glob(filepath.Join("testdata", "ikllama2", "seed*r.json"))
	if err != nil || len(fixtures) == 0 {
		t.Fatalf("no testdata/ikllama2/seed*r.json: %v", err)
	}
	var all []ikFixture
	for _, js := range fixtures {
		all = append(all, ikFixtures(t, strings.TrimSuffix(filepath.Base(js), ".json"))...)
	}
	for _, f := range all {
		d, ok := ByGGML(f.code)
		if !ok || d.String() != f.typ || d.RowGroup() == 0 || f.rows%int(d.RowGroup()) != 0 {
			t.Fatalf("%s: code %d is %s, %v, rows per group %d", f.typ, f.code, d, ok, d.RowGroup())
		}
		if _, ok := ByName(f.typ); !ok {
			t.Errorf("ByName(%s) fails", f.typ)
		}
		seen[d] = true
		g, n := int(d.RowGroup()), int64(f.n)
		if size, ok := d.TensorSize(int64(f.rows)*n, n); !ok || size != int64(len(f.raw)) {
			t.Errorf("%s: TensorSize %d, %v; want %d", d, size, ok, len(f.raw))
		}
		if _, ok := d.ByteSize(int64(f.rows) * n); ok {
			t.Errorf("%s: ByteSize sizes it without its rows", d)
		}
		if _, ok := d.TensorSize(int64(g-1)*n, n); ok && g > 1 {
			t.Errorf("%s: %d rows sized, not whole groups of %d", d, g-1, g)
		}
		if _, ok := ConverterFor(d, F32); ok {
			t.Errorf("%s has a block Converter", d)
		}
		groupBytes, ok := d.GroupSize(n)
		if !ok || groupBytes*int64(f.rows/g) != int64(len(f.raw)) {
			t.Fatalf("%s: GroupSize %d, %v", d, groupBytes, ok)
		}
		ib := int(d.Info().BlockBytes) * g // an interleaved block
		blocks := int(n / d.Info().BlockElems)
		for _, to := range targets {
			conv, ok := GroupConverterFor(d, to)
			if !ok {
				t.Fatalf("no %s -> %s", d, to)
			}
			want := groupWant(t, f.ref, to)
			es := int(to.ElemSize())
			rowOut := int(n) * es
			got := bytes.Repeat([]byte{0xa5}, len(want))
			meta := int(d.GroupMeta())
			for r := 0; r < f.rows; r += g {
				grp := f.raw[r/g*int(groupBytes) : (r/g+1)*int(groupBytes)]
				conv(got[r*rowOut:], rowOut, grp[:meta], grp[meta:])
			}
			if !bytes.Equal(got, want) {
				t.Errorf("%s -> %s: whole groups differ from ik_llama.cpp's", d, to)
			}
			// A run [b0, b1) of a group's blocks into rows of its width:
			// each row's part, nothing around it.
			for k := 0; k < 8; k++ {
				grp := rng.IntN(f.rows / g)
				b0 := rng.IntN(blocks)
				b1 := b0 + 1 + rng.IntN(blocks-b0)
				w := (b1 - b0) * int(d.Info().BlockElems) * es
				stride := w + rng.IntN(3)*es
				dst := bytes.Repeat([]byte{0x5a}, (g-1)*stride+w+7)
				at := grp*int(groupBytes) + meta
				conv(dst, stride, f.raw[at-meta:at], f.raw[at+b0*ib:at+b1*ib])
				for r := 0; r < g; r++ {
					row := (grp*g + r) * rowOut
					lo := row + b0*int(d.Info().BlockElems)*es
					if !bytes.Equal(dst[r*stride:r*stride+w], want[lo:lo+w]) {
						t.Errorf("%s -> %s: blocks [%d, %d) of group %d, row %d differ", d, to, b0, b1, grp, r)
					}
					end := (r + 1) * stride
					if r == g-1 {
						end = len(dst)
					}
					if gap := dst[r*stride+w : end]; bytes.Count(gap, []byte{0x5a}) != len(gap) {
						t.Errorf("%s -> %s: wrote between rows (stride %d, width %d)", d, to, stride, w)
					}
				}
			}
		}
	}
	for i := range ikGroups {
		if d := firstGroup + DType(i); !seen[d] {
			t.Errorf("%s: not in testdata/ikllama2's seed*r fixtures", d)
		}
	}
}

// TestGroupConverterContract: a GroupConverter refuses (panics on) a src
// that is not whole interleaved blocks, a stride shorter than a row's part
// and a dst too short for the rows, allocates nothing, and no other type
// has one.
func TestGroupConverterContract(t *testing.T) {
	mustPanic := func(what string, f func()) {
		t.Helper()
		defer func() {
			if recover() == nil {
				t.Errorf("%s: no panic", what)
			}
		}()
		f()
	}
	for i := range ikGroups {
		d := firstGroup + DType(i)
		g := int(d.RowGroup())
		ib := int(d.Info().BlockBytes) * g
		w := int(d.Info().BlockElems) * 4
		conv, ok := GroupConverterFor(d, F32)
		if !ok {
			t.Fatalf("%s: no converter", d)
		}
		src := make([]byte, 2*ib)
		for j := 1; j < len(src); j += 2 {
			src[j] = 0x3b // finite fp16 scales, whatever else
		}
		head := make([]byte, d.GroupMeta())
		mustPanic(fmt.Sprintf("%s partial block", d), func() { conv(make([]byte, 1<<16), 2*w, head, src[:ib+1]) })
		mustPanic(fmt.Sprintf("%s short stride", d), func() { conv(make([]byte, 1<<16), 2*w-1, head, src) })
		mustPanic(fmt.Sprintf("%s short dst", d), func() { conv(make([]byte, (g-1)*2*w+2*w-1), 2*w, head, src) })
		if len(head) > 0 {
			mustPanic(fmt.Sprintf("%s short head", d), func() { conv(make([]byte, 1<<16), 2*w, head[1:], src) })
		}
		dst := make([]byte, g*2*w)
		if !raceEnabled {
			if a := testing.AllocsPerRun(20, func() { conv(dst, 2*w, head, src) }); a != 0 {
				t.Errorf("%s: %v allocations per conversion", d, a)
			}
		}
	}
	for _, d := range All() {
		for _, to := range targets {
			if _, ok := GroupConverterFor(d, to); ok != (d.RowGroup() != 0) {
				t.Errorf("GroupConverterFor(%s, %s): %v", d, to, ok)
			}
		}
		if _, ok := GroupConverterFor(d, I32); ok {
			t.Errorf("GroupConverterFor(%s, I32)", d)
		}
	}
}

// BenchmarkGroupConvert reports the F32 and BF16 GroupConverter of each
// row-interleaved type (what a view converts with) on 64 random rows of
// 4096 elements (finite fp16 scales), a group per call, as best-Melem/s
// (the best of the calls).
func BenchmarkGroupConvert(b *testing.B) {
	const rows, cols = 64, 4096
	for i := range ikGroups {
		d := firstGroup + DType(i)
		gb, _ := d.GroupSize(cols)
		g := int(d.RowGroup())
		src := make([]byte, rows/g*int(gb))
		rng := rand.New(rand.NewPCG(uint64(d), 1))
		for j := range src {
			src[j] = byte(rng.Uint32())
			if j%2 == 1 {
				src[j] &= 0x3b // every fp16 finite, wherever the scales are
			}
		}
		for _, to := range []DType{F32, BF16} {
			conv, _ := GroupConverterFor(d, to)
			rowOut := cols * int(to.ElemSize())
			dst := make([]byte, rows*rowOut)
			b.Run(d.String()+"/"+to.String(), func(b *testing.B) {
				best := time.Duration(math.MaxInt64)
				for n := 0; n < b.N; n++ {
					t0 := time.Now()
					m := int(d.GroupMeta())
					for r := 0; r < rows/g; r++ {
						grp := src[r*int(gb) : (r+1)*int(gb)]
						conv(dst[r*g*rowOut:], rowOut, grp[:m], grp[m:])
					}
					best = min(best, time.Since(t0))
				}
				b.ReportMetric(float64(rows*cols)/best.Seconds()/1e6, "best-Melem/s")
			})
		}
	}
}

// TestGroupConverterHead: a type whose groups start with a head (its rows'
// scales: ikGroup.meta) is converted a chunk of blocks at a time with
// that head, as its dequantizer converts the whole group: a synthetic
// type of 4 rows, a float32 scale each in the head, blocks of 32 int8
// per row, 4 bytes at a time.
func TestGroupConverterHead(t *testing.T) {
	const rows, be, meta = 4, 32, 16
	g := ikGroup{name: "T_R4", rows: rows, blockElems: be, blockBytes: rows * be, meta: meta,
		deq: func(y [][]float32, grp []byte, ib int) {
			b := grp[meta+ib*rows*be:]
			for k := 0; k < rows; k++ {
				d := math.Float32frombits(le.Uint32(grp[4*k:]))
				for e := 0; e < be; e++ {
					y[k][be*ib+e] = d * float32(int8(b[(e/4)*4*rows+4*k+e%4]))
				}
			}
		}}
	rng := rand.New(rand.NewPCG(4, 16))
	for _, blocks := range []int{1, 3, 100} { // 100: chunks of 32 blocks
		n := blocks * be
		grp := make([]byte, meta+blocks*g.blockBytes)
		for i := range grp {
			grp[i] = byte(rng.Uint32())
		}
		for k := 0; k < rows; k++ {
			le.PutUint32(grp[4*k:], math.Float32bits(float32(rng.NormFloat64())))
		}
		ref := make([]float32, rows*n) // the whole group, as ikGroupDequantizer does
		y := make([][]float32, rows)
		for k := range y {
			y[k] = ref[k*n : (k+1)*n]
		}
		for ib := 0; ib < blocks; ib++ {
			g.deq(y, grp, ib)
		}
		for _, to := range targets {
			conv := groupKernel(&g, F32, to)
			want := groupWant(t, ref, to)
			es := int(to.ElemSize())
			got := make([]byte, len(want))
			conv(got, n*es, grp[:meta], grp[meta:])
			if !bytes.Equal(got, want) {
				t.Errorf("%d blocks to %s: whole group differs", blocks, to)
			}
			b0 := rng.IntN(blocks)
			b1 := b0 + 1 + rng.IntN(blocks-b0)
			w := (b1 - b0) * be * es
			part := make([]byte, (rows-1)*w+w)
			conv(part, w, grp[:meta], grp[meta+b0*g.blockBytes:meta+b1*g.blockBytes])
			for k := 0; k < rows; k++ {
				lo := (k*n + b0*be) * es
				if !bytes.Equal(part[k*w:(k+1)*w], want[lo:lo+w]) {
					t.Errorf("%d blocks to %s: blocks [%d, %d) of row %d differ", blocks, to, b0, b1, k)
				}
			}
		}
	}
}
