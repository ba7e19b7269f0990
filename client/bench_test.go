package client

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/lazyweights/tensorfs/backing"
	"golang.org/x/sys/unix"
)

// The benchmarks read a 256 MiB safetensors file from the page cache:
//
//	go test -run '^$' -bench . -benchtime 20x ./client
//
// BenchmarkStreamVsRead times, in every iteration and in the same run, a
// plain sequential read of the file (os.File.Read into one 8 MiB buffer)
// and a client Stream of all its tensors into a sink that touches nothing,
// and reports both rates and their ratio (stream/read).

const benchSize = 256 << 20

var (
	benchOnce sync.Once
	benchDir  string
	benchPath string
	benchErr  error
)

// TestMain removes the benchmark checkpoint.
func TestMain(m *testing.M) {
	code := m.Run()
	if benchDir != "" {
		os.RemoveAll(benchDir)
	}
	os.Exit(code)
}

// diskTempDir returns a temporary directory on a disk-backed filesystem:
// os.TempDir, or /var/tmp where os.TempDir is tmpfs (whose pages are not
// page cache in the sense measured here).
func diskTempDir(pattern string) (string, error) {
	base := os.TempDir()
	var st unix.Statfs_t
	if unix.Statfs(base, &st) == nil && st.Type == unix.TMPFS_MAGIC {
		base = "/var/tmp"
	}
	return os.MkdirTemp(base, pattern)
}

// benchCheckpoint writes (once) a safetensors file of benchSize bytes in
// 32 tensors of 8 MiB of pseudo-random bytes, and reads it once so it is
// in the page cache.
func benchCheckpoint(b *testing.B) string {
	b.Helper()
	benchOnce.Do(func() {
		benchDir, benchErr = diskTempDir("tensorfs-bench")
		if benchErr != nil {
			return
		}
		benchPath = filepath.Join(benchDir, "bench.safetensors")
		const n = 32
		per := int64(benchSize / n)
		hdr := map[string]any{}
		for i := int64(0); i < n; i++ {
			hdr[fmt.Sprintf("layers.%02d.weight", i)] = map[string]any{"dtype": "F16", "shape": []int64{per / 2}, "data_offsets": []int64{i * per, (i + 1) * per}}
		}
		h, _ := json.Marshal(hdr)
		for len(h)%8 != 0 {
			h = append(h, ' ')
		}
		f, err := os.Create(benchPath)
		if err != nil {
			benchErr = err
			return
		}
		defer f.Close()
		f.Write(binary.LittleEndian.AppendUint64(nil, uint64(len(h))))
		f.Write(h)
		block := make([]byte, 1<<20)
		for off := int64(0); off < benchSize; off += int64(len(block)) {
			fillPattern(block, off)
			if _, err := f.Write(block); err != nil {
				benchErr = err
				return
			}
		}
		_, benchErr = plainRead(benchPath, make([]byte, 8<<20))
	})
	if benchErr != nil {
		b.Fatal(benchErr)
	}
	return benchPath
}

// plainRead reads the whole file sequentially into buf, the baseline.
func plainRead(path string, buf []byte) (int64, error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	var n int64
	for {
		m, err := f.Read(buf)
		n += int64(m)
		if err == io.EOF {
			return n, nil
		}
		if err != nil {
			return n, err
		}
	}
}

func BenchmarkSequentialRead(b *testing.B) {
	path := benchCheckpoint(b)
	buf := make([]byte, 8<<20)
	st, _ := os.Stat(path)
	b.SetBytes(st.Size())
	b.ResetTimer()
	for range b.N {
		if _, err := plainRead(path, buf); err != nil {
			b.Fatal(err)
		}
	}
}

func benchStream(b *testing.B, mode backing.Mode, parallel int) {
	path := benchCheckpoint(b)
	c, err := OpenWith(path, Options{Backing: &backing.Options{Mode: mode}})
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	b.SetBytes(c.TotalSize())
	b.ResetTimer()
	for range b.N {
		if err := c.Stream(context.Background(), &discardSink{}, StreamOptions{Parallel: parallel}); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkStream(b *testing.B) {
	for _, mode := range []backing.Mode{backing.Mmap, backing.Pread} {
		for _, p := range []int{1, 2, 4} {
			b.Run(fmt.Sprintf("%v/parallel%d", mode, p), func(b *testing.B) { benchStream(b, mode, p) })
		}
	}
}

// BenchmarkStreamVsRead measures the plain read and the default Stream
// (client.Open, default options) alternately in each iteration and
// reports the ratio of their throughputs.
func BenchmarkStreamVsRead(b *testing.B) {
	path := benchCheckpoint(b)
	c, err := Open(path)
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	buf := make([]byte, 8<<20)
	var tRead, tStream time.Duration
	var nRead int64
	b.SetBytes(c.TotalSize())
	b.ResetTimer()
	for range b.N {
		t0 := time.Now()
		n, err := plainRead(path, buf)
		if err != nil {
			b.Fatal(err)
		}
		t1 := time.Now()
		if err := c.Stream(context.Background(), &discardSink{}, StreamOptions{}); err != nil {
			b.Fatal(err)
		}
		tRead += t1.Sub(t0)
		tStream += time.Since(t1)
		nRead += n
	}
	readRate := float64(nRead) / tRead.Seconds() / 1e9
	streamRate := float64(c.TotalSize()) * float64(b.N) / tStream.Seconds() / 1e9
	b.ReportMetric(readRate, "read-GB/s")
	b.ReportMetric(streamRate, "stream-GB/s")
	b.ReportMetric(streamRate/readRate, "stream/read")
}
