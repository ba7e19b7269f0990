package bench

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/lazyweights/tensorfs/dtype"
	"golang.org/x/sys/unix"
)

// loadAvg returns the 1-minute load average: other work on the
// machine shows in it (a run with two readers and a server adds about 2).
func loadAvg() float64 {
	data, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return 0
	}
	f := strings.Fields(string(data))
	if len(f) == 0 {
		return 0
	}
	v, _ := strconv.ParseFloat(f[0], 64)
	return v
}

// viewTensors returns the tensors whose .f32 view is measured: the
// BF16 ones, or the F16 ones when there is no BF16.
func viewTensors(ts []tensor) []tensor {
	for _, dt := range []dtype.DType{dtype.BF16, dtype.F16} {
		var out []tensor
		for _, t := range ts {
			if t.dtype == dt {
				t.size = 4 * t.elems
				out = append(out, t)
			}
		}
		if len(out) > 0 {
			return out
		}
	}
	return nil
}

func totalBytes(ts []tensor) int64 {
	var n int64
	for _, t := range ts {
		n += t.size
	}
	return n
}

// readJob does job j with worker w's buffer and returns the bytes it read.
type readJob func(w, j int, buf []byte) (int64, error)

// measure runs jobs 0..n-1 with b.readers workers taking them in order,
// and times the whole. With a server, it also reports the server's CPU.
func (b *harness) measure(s *server, n int, job readJob) (measurement, error) {
	bufs := make([][]byte, b.readers)
	for i := range bufs {
		bufs[i] = make([]byte, b.block)
		for j := 0; j < len(bufs[i]); j += 4096 {
			bufs[i][j] = 1 // fault the buffer in before timing
		}
	}
	var next atomic.Int64
	var total atomic.Int64
	var firstErr error
	var errOnce sync.Once
	var wg sync.WaitGroup
	srvBefore := s.cpu()
	statsBefore := s.stats()
	cpuBefore := selfCPU()
	start := time.Now()
	for w := range b.readers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			for {
				j := int(next.Add(1) - 1)
				if j >= n || b.ctx.Err() != nil {
					return
				}
				got, err := job(w, j, bufs[w])
				total.Add(got)
				if err != nil {
					errOnce.Do(func() { firstErr = err })
					next.Store(int64(n))
					return
				}
			}
		}()
	}
	wg.Wait()
	m := measurement{bytes: total.Load(), wall: time.Since(start), readerCPU: selfCPU() - cpuBefore}
	if s != nil {
		m.serverCPU = s.cpu() - srvBefore
		after := s.stats()
		m.requests = after.Reads - statsBefore.Reads
		m.reqBytes = after.Bytes - statsBefore.Bytes
	}
	if firstErr != nil {
		return m, fmt.Errorf("bench: %v", firstErr)
	}
	if b.ctx.Err() != nil {
		return m, errors.New("bench: interrupted")
	}
	return m, nil
}

// directJob reads tensor j's range of the checkpoint file with pread.
func (b *harness) directJob(fds []int, ts []tensor) readJob {
	return func(w, j int, buf []byte) (int64, error) {
		t := &ts[j]
		var done int64
		for done < t.size {
			k := int(min(int64(len(buf)), t.size-done))
			n, err := unix.Pread(fds[t.src], buf[:k], t.off+done)
			if err != nil {
				return done, fmt.Errorf("reading %s: %v", t.path, err)
			}
			if n == 0 {
				return done, fmt.Errorf("reading %s: unexpected end of file", t.path)
			}
			done += int64(n)
		}
		return done, nil
	}
}

// fileJob opens tensor j's file under mnt/prefix and reads it to the end
// with read(2), as cat or a loader does.
func (b *harness) fileJob(mnt, prefix string, ts []tensor) readJob {
	return func(w, j int, buf []byte) (int64, error) {
		t := &ts[j]
		p := filepath.Join(mnt, prefix, t.path)
		fd, err := unix.Open(p, unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			return 0, fmt.Errorf("%s: %v", p, err)
		}
		defer unix.Close(fd)
		return readAll(fd, buf, p, t.size)
	}
}

// randomRead is one random read: bytes [off, off+n) of tensor t.
type randomRead struct {
	t   int
	off int64
	n   int
}

// randomReads returns random reads totalling about total bytes:
// lengths log-uniform in [4 KiB, 1 MiB] (capped by the tensor), offsets
// uniform, tensors chosen in proportion to their size. The seed is fixed,
// so every run and both sides read the same ranges.
func randomReads(ts []tensor, total int64) []randomRead {
	rng := rand.New(rand.NewPCG(7, 7))
	cum := make([]int64, len(ts))
	var sum int64
	for i, t := range ts {
		sum += t.size
		cum[i] = sum
	}
	var reads []randomRead
	var got int64
	for got < total {
		x := rng.Int64N(sum)
		i := sort.Search(len(cum), func(i int) bool { return cum[i] > x })
		n := int64(math.Exp(math.Log(4096) + rng.Float64()*(math.Log(1<<20)-math.Log(4096))))
		n = min(n, ts[i].size)
		off := rng.Int64N(ts[i].size - n + 1)
		reads = append(reads, randomRead{t: i, off: off, n: int(n)})
		got += n
	}
	return reads
}

// directRandomJob makes read j on the checkpoint file.
func (b *harness) directRandomJob(fds []int, ts []tensor, reads []randomRead) readJob {
	return func(w, j int, buf []byte) (int64, error) {
		r := reads[j]
		t := &ts[r.t]
		return preadFull(fds[t.src], bufFor(buf, r.n), t.off+r.off, t.path)
	}
}

// randomJob makes read j on the mount's tensor files, opened once
// beforehand (at most benchMaxOpen of them; reads of others open them).
func (b *harness) randomJob(mnt string, ts []tensor, reads []randomRead) (readJob, func(), error) {
	const benchMaxOpen = 4096
	fds := make([]int, len(ts))
	for i := range fds {
		fds[i] = -1
	}
	closeAll := func() {
		for _, fd := range fds {
			if fd >= 0 {
				unix.Close(fd)
			}
		}
	}
	opened := 0
	for _, r := range reads {
		if fds[r.t] >= 0 || opened >= benchMaxOpen {
			continue
		}
		p := filepath.Join(mnt, ts[r.t].path)
		fd, err := unix.Open(p, unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			closeAll()
			return nil, nil, fmt.Errorf("bench: %s: %v", p, err)
		}
		fds[r.t] = fd
		opened++
	}
	job := func(w, j int, buf []byte) (int64, error) {
		r := reads[j]
		t := &ts[r.t]
		fd := fds[r.t]
		if fd < 0 {
			p := filepath.Join(mnt, t.path)
			var err error
			if fd, err = unix.Open(p, unix.O_RDONLY|unix.O_CLOEXEC, 0); err != nil {
				return 0, fmt.Errorf("%s: %v", p, err)
			}
			defer unix.Close(fd)
		}
		return preadFull(fd, bufFor(buf, r.n), r.off, t.path)
	}
	return job, closeAll, nil
}

// bufFor returns buf[:n], or a fresh buffer when buf is shorter.
func bufFor(buf []byte, n int) []byte {
	if n <= len(buf) {
		return buf[:n]
	}
	return make([]byte, n)
}

func preadFull(fd int, buf []byte, off int64, name string) (int64, error) {
	var done int
	for done < len(buf) {
		n, err := unix.Pread(fd, buf[done:], off+int64(done))
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return int64(done), fmt.Errorf("reading %s: %v", name, err)
		}
		if n == 0 {
			return int64(done), fmt.Errorf("reading %s: unexpected end of file at %d", name, off+int64(done))
		}
		done += n
	}
	return int64(done), nil
}

// directMmapJob maps every checkpoint file and copies tensor j's range
// out of the mapping; done unmaps them.
func (b *harness) directMmapJob(fds []int, ts []tensor) (readJob, func(), error) {
	maps, err := mapAll(fds)
	if err != nil {
		return nil, nil, err
	}
	job := func(w, j int, buf []byte) (int64, error) {
		t := &ts[j]
		return copyOut(buf, maps[t.src][t.off:t.off+t.size]), nil
	}
	return job, func() { unmapAll(maps) }, nil
}

// mapAll maps each file whole, read-only and shared (nil for an
// empty one).
func mapAll(fds []int) ([][]byte, error) {
	maps := make([][]byte, len(fds))
	for i, fd := range fds {
		var st unix.Stat_t
		if err := unix.Fstat(fd, &st); err != nil {
			unmapAll(maps)
			return nil, fmt.Errorf("bench: %v", err)
		}
		if st.Size == 0 {
			continue
		}
		m, err := unix.Mmap(fd, 0, int(st.Size), unix.PROT_READ, unix.MAP_SHARED)
		if err != nil {
			unmapAll(maps)
			return nil, fmt.Errorf("bench: mmap: %v", err)
		}
		maps[i] = m
	}
	return maps, nil
}

func unmapAll(maps [][]byte) {
	for i, m := range maps {
		if m != nil {
			unix.Munmap(m)
			maps[i] = nil
		}
	}
}

// directMmapRandomJob copies read j out of a mapping of the checkpoint
// file; done unmaps.
func (b *harness) directMmapRandomJob(fds []int, ts []tensor, reads []randomRead) (readJob, func(), error) {
	maps, err := mapAll(fds)
	if err != nil {
		return nil, nil, err
	}
	job := func(w, j int, buf []byte) (int64, error) {
		r := reads[j]
		t := &ts[r.t]
		return copyOut(buf, maps[t.src][t.off+r.off:t.off+r.off+int64(r.n)]), nil
	}
	return job, func() { unmapAll(maps) }, nil
}

// mmapRandomJob copies read j out of mappings of the mount's tensor files,
// made beforehand (for the files the reads touch); done unmaps them.
func (b *harness) mmapRandomJob(mnt string, ts []tensor, reads []randomRead) (readJob, func(), error) {
	maps := make([][]byte, len(ts))
	done := func() { unmapAll(maps) }
	for _, r := range reads {
		if maps[r.t] != nil {
			continue
		}
		p := filepath.Join(mnt, ts[r.t].path)
		fd, err := unix.Open(p, unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			done()
			return nil, nil, fmt.Errorf("bench: %s: %v", p, err)
		}
		m, err := unix.Mmap(fd, 0, int(ts[r.t].size), unix.PROT_READ, unix.MAP_SHARED)
		unix.Close(fd)
		if err != nil {
			done()
			return nil, nil, fmt.Errorf("bench: mmap %s: %v", p, err)
		}
		maps[r.t] = m
	}
	job := func(w, j int, buf []byte) (int64, error) {
		r := reads[j]
		return copyOut(buf, maps[r.t][r.off:r.off+int64(r.n)]), nil
	}
	return job, done, nil
}

// mmapJob maps tensor j's file of the mount and copies it out.
func (b *harness) mmapJob(mnt string, ts []tensor) readJob {
	return func(w, j int, buf []byte) (int64, error) {
		t := &ts[j]
		p := filepath.Join(mnt, t.path)
		fd, err := unix.Open(p, unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			return 0, fmt.Errorf("%s: %v", p, err)
		}
		defer unix.Close(fd)
		m, err := unix.Mmap(fd, 0, int(t.size), unix.PROT_READ, unix.MAP_SHARED)
		if err != nil {
			return 0, fmt.Errorf("mmap %s: %v", p, err)
		}
		defer unix.Munmap(m)
		return copyOut(buf, m), nil
	}
}

// copyOut copies src through buf, a chunk at a time.
func copyOut(buf, src []byte) int64 {
	var n int64
	for len(src) > 0 {
		k := copy(buf, src)
		src = src[k:]
		n += int64(k)
	}
	return n
}

// readAll reads fd to its end with read(2) into buf, over and over, and
// checks that it held want bytes; p names it in errors.
func readAll(fd int, buf []byte, p string, want int64) (int64, error) {
	var done int64
	for {
		n, err := unix.Read(fd, buf)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return done, fmt.Errorf("reading %s: %v", p, err)
		}
		if n == 0 {
			break
		}
		done += int64(n)
	}
	if done != want {
		return done, fmt.Errorf("%s: read %d bytes, want %d", p, done, want)
	}
	return done, nil
}
