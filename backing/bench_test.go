package backing

import (
	"errors"
	"os"
	"testing"
)

// BenchmarkReadAt reads a 64 MiB page-cached temp file in 1 MiB reads, in
// each mode and with plain os.File.ReadAt for comparison. (Direct bypasses
// the page cache, so it measures the disk.)
func BenchmarkReadAt(b *testing.B) {
	const size = 64 << 20
	const chunk = 1 << 20
	path := writeFile(b, pattern(size, 11))
	// Warm the page cache.
	if _, err := os.ReadFile(path); err != nil {
		b.Fatal(err)
	}
	run := func(b *testing.B, r interface {
		ReadAt([]byte, int64) (int, error)
	}) {
		buf := alignedBuffer(chunk)
		b.SetBytes(chunk)
		b.ResetTimer()
		off := int64(0)
		for b.Loop() {
			if _, err := r.ReadAt(buf, off); err != nil {
				b.Fatal(err)
			}
			off = (off + chunk) % size
		}
	}
	b.Run("os.File", func(b *testing.B) {
		f, err := os.Open(path)
		if err != nil {
			b.Fatal(err)
		}
		defer f.Close()
		run(b, f)
	})
	for _, mode := range modes {
		b.Run(mode.String(), func(b *testing.B) {
			s, err := Open(path, Options{Mode: mode})
			if errors.Is(err, ErrDirectUnsupported) {
				b.Skip(err)
			}
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			run(b, s)
		})
	}
}
