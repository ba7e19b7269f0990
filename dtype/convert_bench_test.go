package dtype

import (
	"math"
	"math/rand/v2"
	"testing"
	"time"
)

// BenchmarkConvert measures each conversion into a 1 MiB output buffer,
// beside a plain copy of 1 MiB: b.SetBytes counts output bytes, so the
// MB/s columns compare directly with /copy.
//
//	go test -run XXX -bench Convert -benchtime 200x -count 3 ./dtype
//	go test -tags purego -run XXX -bench Convert ./dtype
func BenchmarkConvert(b *testing.B) {
	const out = 1 << 20
	rng := rand.New(rand.NewPCG(21, 22))
	b.Run("copy", func(b *testing.B) {
		src, dst := make([]byte, out), make([]byte, out)
		b.SetBytes(out)
		for b.Loop() {
			copy(dst, src)
		}
	})
	for _, p := range []struct{ from, to DType }{
		{BF16, F32}, {F16, F32}, {F32, F16}, {F32, BF16},
		{F32, F64}, {F64, F32}, {F64, F16}, {F64, BF16},
		{F16, BF16}, {BF16, F16}, {F8E4M3, BF16}, {F4, F16}, {Q4_0, F32}, {Q4_K, F16},
	} {
		c, ok := ConverterFor(p.from, p.to)
		if !ok {
			continue
		}
		fi := p.from.Info()
		elems := out / int(p.to.ElemSize())
		src := make([]byte, elems/int(fi.BlockElems)*int(fi.BlockBytes))
		if p.from.IsFloatView() {
			// Weight-like values: normal, standard deviation 0.02.
			f64 := make([]byte, 8*elems)
			for i := range elems {
				le.PutUint64(f64[8*i:], math.Float64bits(rng.NormFloat64()*0.02))
			}
			c64, _ := ConverterFor(F64, p.from)
			c64(src, f64)
		} else {
			for i := range src {
				src[i] = byte(rng.Uint32())
			}
		}
		dst := make([]byte, out)
		b.Run(p.from.String()+"-"+p.to.String(), func(b *testing.B) {
			b.SetBytes(out)
			for b.Loop() {
				c(dst, src)
			}
		})
	}
}

// BenchmarkConvertVsCopy times each of the main conversions and a plain
// copy of the same number of output bytes alternately, in every iteration
// of one run, and reports both rates (output GB/s, one core) and their
// ratio, so that noise on a shared machine hits both alike:
//
//	go test -run XXX -bench ConvertVsCopy -benchtime 2000x -count 3 ./dtype
func BenchmarkConvertVsCopy(b *testing.B) {
	const out = 1 << 20
	rng := rand.New(rand.NewPCG(23, 24))
	for _, p := range []struct{ from, to DType }{
		{BF16, F32}, {F16, F32}, {F32, F16}, {F32, BF16},
	} {
		c, ok := ConverterFor(p.from, p.to)
		if !ok {
			b.Fatalf("no converter %s to %s", p.from, p.to)
		}
		elems := out / int(p.to.ElemSize())
		f64 := make([]byte, 8*elems)
		for i := range elems {
			le.PutUint64(f64[8*i:], math.Float64bits(rng.NormFloat64()*0.02))
		}
		src := make([]byte, elems*int(p.from.ElemSize()))
		c64, _ := ConverterFor(F64, p.from)
		c64(src, f64)
		dst := make([]byte, out)
		csrc, cdst := make([]byte, out), make([]byte, out)
		copy(csrc, f64)
		b.Run(p.from.String()+"-"+p.to.String(), func(b *testing.B) {
			var tCopy, tConv time.Duration
			b.SetBytes(2 * out)
			for b.Loop() {
				t0 := time.Now()
				copy(cdst, csrc)
				t1 := time.Now()
				c(dst, src)
				tConv += time.Since(t1)
				tCopy += t1.Sub(t0)
			}
			n := float64(b.N) * out
			copyRate, convRate := n/tCopy.Seconds()/1e9, n/tConv.Seconds()/1e9
			b.ReportMetric(copyRate, "copy-GB/s")
			b.ReportMetric(convRate, "conv-GB/s")
			b.ReportMetric(convRate/copyRate, "conv/copy")
		})
	}
}
