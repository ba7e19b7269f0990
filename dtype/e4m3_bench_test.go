//go:build unix

package dtype

import (
	"math"
	"syscall"
	"testing"
	"time"
)

// cpuTime is the process's user+system CPU time, for a benchmark figure
// that a loaded machine's waiting does not dilute.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkScaleE4M3 compares ScaleE4M3 with Lookup8 on the E4M3 table,
// 16 Ki codes a call (a step of a block-FP8 read): Gelem/cpu-s is the
// figure per core (run with -cpu 1 on a loaded machine).
func BenchmarkScaleE4M3(b *testing.B) {
	var tbl [256]float32
	for c := range tbl {
		tbl[c] = math.Float32frombits(e4m3ToF32Bits(uint8(c)))
	}
	src := make([]byte, 1<<14)
	for i := range src {
		src[i] = byte(i*167 + 3)
	}
	dst := make([]float32, len(src))
	for _, k := range []struct {
		name string
		f    func()
	}{
		{"ScaleE4M3", func() { ScaleE4M3(dst, src, 1.0/1024) }},
		{"Lookup8", func() { Lookup8(dst, src, &tbl, 1.0/1024) }},
	} {
		b.Run(k.name, func(b *testing.B) {
			b.SetBytes(int64(len(src)))
			cpu0 := cpuTime()
			for range b.N {
				k.f()
			}
			b.ReportMetric(float64(b.N)*float64(len(src))/b.Elapsed().Seconds()/1e9, "Gelem/s")
			if cpu := cpuTime() - cpu0; cpu > 0 {
				b.ReportMetric(float64(b.N)*float64(len(src))/cpu.Seconds()/1e9, "Gelem/cpu-s")
			}
		})
	}
}
