package backing

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"golang.org/x/sys/unix"
)

var modes = []Mode{Mmap, Pread, Direct}

// writeFile writes data to a new temp file and returns its path.
func writeFile(t testing.TB, data []byte) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "f.bin")
	if err := os.WriteFile(p, data, 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// openMode opens path in mode, skipping Direct where the filesystem
// refuses O_DIRECT.
func openMode(t testing.TB, path string, mode Mode) Source {
	t.Helper()
	s, err := Open(path, Options{Mode: mode})
	if errors.Is(err, ErrDirectUnsupported) {
		t.Skipf("direct mode: %v (the temp dir's filesystem refuses O_DIRECT)", err)
	}
	if err != nil {
		t.Fatalf("Open(%s): %v", mode, err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// pattern returns n pseudo-random bytes, none of them zero (so a zero read
// back is always a vanished byte).
func pattern(n int, seed uint64) []byte {
	r := rand.New(rand.NewPCG(seed, 7))
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(1 + r.IntN(255))
	}
	return b
}

// wantRead is io.ReaderAt's answer for a read of n bytes at off of data.
func wantRead(data []byte, off int64, n int) ([]byte, error) {
	size := int64(len(data))
	switch {
	case off < 0:
		return nil, errors.New("negative offset")
	case off >= size:
		return nil, io.EOF
	case off+int64(n) > size:
		return data[off:], io.EOF
	}
	return data[off : off+int64(n)], nil
}

func checkRead(t *testing.T, s Source, data []byte, off int64, n int, buf []byte) {
	t.Helper()
	p := buf[:n]
	for i := range p {
		p[i] = 0xEE
	}
	got, err := s.ReadAt(p, off)
	want, wantErr := wantRead(data, off, n)
	if wantErr != nil && wantErr != io.EOF {
		if err == nil || got != 0 {
			t.Errorf("ReadAt(%d bytes at %d) = %d, %v; want an error", n, off, got, err)
		}
		return
	}
	if err != wantErr || got != len(want) {
		t.Errorf("ReadAt(%d bytes at %d) = %d, %v; want %d, %v", n, off, got, err, len(want), wantErr)
		return
	}
	if !bytes.Equal(p[:got], want) {
		t.Errorf("ReadAt(%d bytes at %d): wrong bytes", n, off)
	}
}

func TestReadAt(t *testing.T) {
	sizes := []int{0, 1, 100, 4095, 4096, 4097, 3*4096 + 123, 1<<20 + 4096*3 + 5}
	for _, mode := range modes {
		for _, size := range sizes {
			t.Run(fmt.Sprintf("%s/%d", mode, size), func(t *testing.T) {
				data := pattern(size, uint64(size))
				s := openMode(t, writeFile(t, data), mode)
				if s.Size() != int64(size) {
					t.Fatalf("Size() = %d, want %d", s.Size(), size)
				}
				if !strings.HasSuffix(s.Name(), "f.bin") {
					t.Errorf("Name() = %q", s.Name())
				}
				// An aligned buffer, to take the Direct fast path too.
				abuf := alignedBuffer(size + 3*directAlign)
				ubuf := abuf[1:]
				sz := int64(size)
				type rd struct {
					off int64
					n   int
				}
				reads := []rd{
					{-1, 1}, {-4096, 10}, {0, 0}, {0, 1}, {0, size}, {0, size + 1}, {0, size + 4096},
					{sz, 0}, {sz, 1}, {sz + 1, 5}, {sz + 5000, 5}, {sz - 1, 1}, {sz - 1, 2},
					{1, size - 1}, {1, size - 2}, {4095, 2}, {4096, 4096}, {4096, 8192}, {4000, 200},
				}
				r := rand.New(rand.NewPCG(uint64(size), 1))
				for range 200 {
					off := r.Int64N(sz + 10)
					reads = append(reads, rd{off, r.IntN(size + 8192)})
				}
				for i := int64(0); i < sz && i < 9000; i += 997 {
					reads = append(reads, rd{i, 4096}, rd{i &^ 4095, 4096 * 2})
				}
				for _, x := range reads {
					x.n = max(0, min(x.n, len(ubuf)))
					checkRead(t, s, data, x.off, x.n, abuf)
					checkRead(t, s, data, x.off, x.n, ubuf)
				}
			})
		}
	}
}

func TestParseMode(t *testing.T) {
	tests := []struct {
		in   string
		want Mode
		err  bool
	}{
		{"mmap", Mmap, false}, {"", Mmap, false}, {"MMAP", Mmap, false},
		{"pread", Pread, false}, {"Direct", Direct, false}, {" direct ", Direct, false},
		{"odirect", 0, true}, {"read", 0, true},
	}
	for _, tt := range tests {
		got, err := ParseMode(tt.in)
		if (err != nil) != tt.err || (!tt.err && got != tt.want) {
			t.Errorf("ParseMode(%q) = %v, %v; want %v, err %v", tt.in, got, err, tt.want, tt.err)
		}
		if err != nil && !strings.Contains(err.Error(), "want mmap, pread or direct") {
			t.Errorf("ParseMode(%q) error %q does not list the modes", tt.in, err)
		}
		if err == nil {
			if back, _ := ParseMode(got.String()); back != got {
				t.Errorf("ParseMode(%v.String()) = %v", got, back)
			}
		}
	}
}

func TestOpenErrors(t *testing.T) {
	dir := t.TempDir()
	for _, mode := range modes {
		_, err := Open(filepath.Join(dir, "missing"), Options{Mode: mode})
		if !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("%s: missing file: %v, want ErrNotExist", mode, err)
		}
		_, err = Open(dir, Options{Mode: mode})
		if err == nil || (!strings.Contains(err.Error(), "a directory") && !errors.Is(err, ErrDirectUnsupported)) {
			t.Errorf("%s: directory: %v", mode, err)
		}
		if mode != Direct {
			_, err = Open("/dev/null", Options{Mode: mode})
			if err == nil || !strings.Contains(err.Error(), "not a regular file") {
				t.Errorf("%s: /dev/null: %v", mode, err)
			}
		}
	}
	if _, err := Open(writeFile(t, []byte("x")), Options{Mode: 99}); err == nil {
		t.Errorf("unknown mode: no error")
	}
}

func TestDirectError(t *testing.T) {
	err := directError("/x/m.bin", &os.PathError{Op: "open", Path: "/x/m.bin", Err: unix.EINVAL})
	if !errors.Is(err, ErrDirectUnsupported) || err.Error() != "backing: the filesystem does not support O_DIRECT: /x/m.bin (use --io pread or mmap)" {
		t.Errorf("EINVAL: %v", err)
	}
	err = directError("/x/m.bin", &os.PathError{Op: "open", Path: "/x/m.bin", Err: unix.EACCES})
	if errors.Is(err, ErrDirectUnsupported) || !errors.Is(err, fs.ErrPermission) {
		t.Errorf("EACCES: %v", err)
	}
}

// TestDirectUnsupported opens a file on tmpfs (/dev/shm), which refuses
// O_DIRECT.
func TestDirectUnsupported(t *testing.T) {
	var st unix.Statfs_t
	if err := unix.Statfs("/dev/shm", &st); err != nil || st.Type != unix.TMPFS_MAGIC {
		t.Skip("no tmpfs at /dev/shm to try O_DIRECT on")
	}
	f, err := os.CreateTemp("/dev/shm", "tensorfs-backing-*")
	if err != nil {
		t.Skipf("cannot create a file on /dev/shm: %v", err)
	}
	defer os.Remove(f.Name())
	f.Write(pattern(10000, 1))
	f.Close()
	s, err := Open(f.Name(), Options{Mode: Direct})
	if err == nil {
		s.Close()
		t.Skip("this kernel's tmpfs accepts O_DIRECT (Linux >= 6.6); TestDirectError covers the mapping")
	}
	if !errors.Is(err, ErrDirectUnsupported) || !strings.Contains(err.Error(), f.Name()) {
		t.Errorf("Open(Direct) on tmpfs: %v; want ErrDirectUnsupported naming the file", err)
	}
	// The other modes work there.
	for _, mode := range []Mode{Mmap, Pread} {
		s := openMode(t, f.Name(), mode)
		checkRead(t, s, pattern(10000, 1), 100, 5000, make([]byte, 5000))
	}
}

// TestTruncateUnderSource shrinks the file under a live source: reads of
// vanished bytes fail with ErrFault (no crash), the rest is still served.
func TestTruncateUnderSource(t *testing.T) {
	const page = 4096
	const size = 6*page + 100
	for _, mode := range modes {
		for _, newSize := range []int64{2*page + 10, 3 * page, 0} {
			t.Run(fmt.Sprintf("%s/to%d", mode, newSize), func(t *testing.T) {
				data := pattern(size, 3)
				path := writeFile(t, data)
				s := openMode(t, path, mode)
				if err := os.Truncate(path, newSize); err != nil {
					t.Fatal(err)
				}
				buf := make([]byte, size)
				ok := func(off int64, n int) {
					t.Helper()
					got, err := s.ReadAt(buf[:n], off)
					if err != nil || got != n || !bytes.Equal(buf[:n], data[off:off+int64(n)]) {
						t.Errorf("ReadAt(%d at %d) of bytes that still exist = %d, %v", n, off, got, err)
					}
				}
				fault := func(off int64, n int) {
					t.Helper()
					got, err := s.ReadAt(buf[:n], off)
					if !errors.Is(err, ErrFault) {
						t.Errorf("ReadAt(%d at %d) of vanished bytes = %d, %v; want ErrFault", n, off, got, err)
						return
					}
					var fe *FaultError
					if !errors.As(err, &fe) || fe.Now != newSize || !strings.Contains(err.Error(), path) ||
						!strings.Contains(err.Error(), "truncated to") {
						t.Errorf("fault error %q (%+v): want the file name and new size %d", err, fe, newSize)
					}
					want := max(0, int(newSize-off))
					if got != want || !bytes.Equal(buf[:got], data[off:off+int64(got)]) {
						t.Errorf("ReadAt(%d at %d) after truncation served %d bytes, want the %d that exist", n, off, got, want)
					}
				}
				if newSize > 0 {
					ok(0, 100)
					ok(0, int(newSize))
					ok(newSize-1, 1)
					fault(newSize-5, 10)
				}
				fault(newSize, 1)
				fault(newSize+3, 7)          // inside the last partial page, if any
				fault(5*page, 100)           // a whole vanished page
				fault(size-10, 10)           // the old end
				fault(0, size)               // everything
				fault(size-page-50, page+50) // across the last old page
				if newSize > 0 {
					ok(10, 50) // still served after the faults
				}
				if s.Size() != size {
					t.Errorf("Size() = %d after truncation, want the size at Open %d", s.Size(), size)
				}
			})
		}
	}
}

// TestZeroTail: a read whose last byte really is zero is not a fault.
func TestZeroTail(t *testing.T) {
	data := pattern(3*4096+7, 4)
	for i := 4000; i < 4200; i++ {
		data[i] = 0
	}
	data[len(data)-1] = 0
	for _, mode := range modes {
		t.Run(mode.String(), func(t *testing.T) {
			s := openMode(t, writeFile(t, data), mode)
			buf := make([]byte, len(data))
			for _, r := range [][2]int{{3990, 100}, {4000, 200}, {0, len(data)}, {len(data) - 1, 1}, {4100, 1}} {
				checkRead(t, s, data, int64(r[0]), r[1], buf)
			}
		})
	}
}

func TestClose(t *testing.T) {
	for _, mode := range modes {
		for _, size := range []int{0, 5000} {
			t.Run(fmt.Sprintf("%s/%d", mode, size), func(t *testing.T) {
				s := openMode(t, writeFile(t, pattern(size, 5)), mode)
				if err := s.Close(); err != nil {
					t.Fatalf("Close: %v", err)
				}
				if err := s.Close(); err != nil {
					t.Errorf("second Close: %v", err)
				}
				n, err := s.ReadAt(make([]byte, 10), 0)
				if n != 0 || !errors.Is(err, os.ErrClosed) {
					t.Errorf("ReadAt after Close = %d, %v; want os.ErrClosed", n, err)
				}
				if a, ok := s.(Adviser); ok && size > 0 {
					if err := a.Advise(0, 10, WillNeed); !errors.Is(err, os.ErrClosed) {
						t.Errorf("Advise after Close = %v", err)
					}
				}
			})
		}
	}
}

func TestAdvise(t *testing.T) {
	data := pattern(5*4096+3, 6)
	for _, mode := range modes {
		t.Run(mode.String(), func(t *testing.T) {
			s := openMode(t, writeFile(t, data), mode)
			a, ok := s.(Adviser)
			if !ok {
				t.Fatalf("%s source does not implement Adviser", mode)
			}
			for adv := Normal; adv <= DontNeed; adv++ {
				for _, r := range [][2]int64{{0, 1}, {100, 5000}, {4096, 4096}, {-10, 100}, {0, 1 << 40}, {1 << 40, 10}, {5, 0}} {
					if err := a.Advise(r[0], r[1], adv); err != nil {
						t.Errorf("Advise(%d, %d, %v): %v", r[0], r[1], adv, err)
					}
				}
				checkRead(t, s, data, 100, 9000, make([]byte, 9000))
			}
			if err := a.Advise(0, 10, Advice(42)); err == nil {
				t.Errorf("Advise with unknown advice: no error")
			}
		})
	}
	// An empty file has nothing to advise on.
	s := openMode(t, writeFile(t, nil), Mmap)
	if err := s.(Adviser).Advise(0, 100, Sequential); err != nil {
		t.Errorf("Advise on empty file: %v", err)
	}
}

func TestFd(t *testing.T) {
	data := pattern(10000, 8)
	for _, mode := range modes {
		t.Run(mode.String(), func(t *testing.T) {
			s := openMode(t, writeFile(t, data), mode)
			f, ok := s.(FdSource)
			if !ok {
				t.Fatalf("%s source does not implement FdSource", mode)
			}
			fd, ok := f.Fd()
			if mode == Direct {
				if ok {
					t.Errorf("Direct source offers its O_DIRECT descriptor")
				}
				return
			}
			if !ok {
				t.Fatalf("no descriptor")
			}
			buf := make([]byte, 300)
			n, err := unix.Pread(int(fd), buf, 1234)
			if err != nil || n != 300 || !bytes.Equal(buf, data[1234:1534]) {
				t.Errorf("pread on Fd() = %d, %v", n, err)
			}
		})
	}
}

// TestConcurrent reads random ranges from many goroutines at once.
func TestConcurrent(t *testing.T) {
	data := pattern(256<<10+77, 9)
	for _, mode := range modes {
		t.Run(mode.String(), func(t *testing.T) {
			s := openMode(t, writeFile(t, data), mode)
			var wg sync.WaitGroup
			errs := make(chan error, 8)
			for g := range 8 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					r := rand.New(rand.NewPCG(uint64(g), 2))
					buf := make([]byte, 70000)
					for range 200 {
						off := r.Int64N(int64(len(data)))
						n := r.IntN(len(buf))
						got, err := s.ReadAt(buf[:n], off)
						want, wantErr := wantRead(data, off, n)
						if err != wantErr || !bytes.Equal(buf[:got], want) {
							errs <- fmt.Errorf("ReadAt(%d at %d) = %d, %v", n, off, got, err)
							return
						}
					}
				}()
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				t.Error(err)
			}
		})
	}
}

func TestFaultError(t *testing.T) {
	e := &FaultError{Name: "m.bin", Off: 10, Len: 5, Size: 100, Now: 12}
	if got := e.Error(); got != "m.bin: file changed or unreadable (I/O fault): truncated to 12 bytes (was 100 when opened) (reading 5 bytes at byte 10)" {
		t.Errorf("Error() = %q", got)
	}
	e = &FaultError{Name: "m.bin", Off: 10, Len: 5, Size: 100, Now: 100, Err: unix.EIO}
	if !errors.Is(e, ErrFault) || !errors.Is(e, unix.EIO) {
		t.Errorf("FaultError does not wrap ErrFault and EIO")
	}
	if got := e.Error(); !strings.Contains(got, "input/output error") {
		t.Errorf("Error() = %q, want the cause", got)
	}
}

func TestCopyMappedFault(t *testing.T) {
	// A PROT_NONE page faults on any read: copyMapped must report it.
	m, err := unix.Mmap(-1, 0, 4096, unix.PROT_NONE, unix.MAP_ANON|unix.MAP_PRIVATE)
	if err != nil {
		t.Skipf("mmap: %v", err)
	}
	defer unix.Munmap(m)
	if !copyMapped(make([]byte, 10), m[100:110]) {
		t.Errorf("copyMapped from a PROT_NONE page: no fault reported")
	}
	if copyMapped(make([]byte, 10), make([]byte, 10)) {
		t.Errorf("copyMapped of plain memory reported a fault")
	}
}

// TestNoAllocs: reads do not allocate, in any mode.
func TestNoAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector allocates")
	}
	data := pattern(1<<20, 12)
	path := writeFile(t, data)
	for _, mode := range modes {
		t.Run(mode.String(), func(t *testing.T) {
			s := openMode(t, path, mode)
			buf := alignedBuffer(200000)
			for _, r := range [][2]int{{0, 100000}, {4096, 8192}, {3, 100000}, {1<<20 - 10, 100}} {
				allocs := testing.AllocsPerRun(20, func() {
					if _, err := s.ReadAt(buf[:r[1]], int64(r[0])); err != nil && err != io.EOF {
						t.Fatal(err)
					}
				})
				if allocs != 0 {
					t.Errorf("ReadAt(%d at %d): %v allocations per read", r[1], r[0], allocs)
				}
			}
		})
	}
}

// TestMappedLargeRead: a read of a mapped file of mmapPreadMin bytes or
// more (a pread) serves the file's bytes, and after a truncation the bytes
// that still exist and a *FaultError with the new size, as a copy from the
// mapping does.
func TestMappedLargeRead(t *testing.T) {
	const size = 4*mmapPreadMin + 300
	data := pattern(size, 6)
	path := writeFile(t, data)
	s := openMode(t, path, Mmap)
	buf := make([]byte, size)
	for _, r := range [][2]int{{0, mmapPreadMin}, {17, 2 * mmapPreadMin}, {0, size}, {size - mmapPreadMin, mmapPreadMin}} {
		n, err := s.ReadAt(buf[:r[1]], int64(r[0]))
		if err != nil || n != r[1] || !bytes.Equal(buf[:n], data[r[0]:r[0]+r[1]]) {
			t.Errorf("ReadAt(%d at %d) = %d, %v; want the file's bytes", r[1], r[0], n, err)
		}
	}
	n, err := s.ReadAt(buf[:2*mmapPreadMin], size-mmapPreadMin)
	if err != io.EOF || n != mmapPreadMin || !bytes.Equal(buf[:n], data[size-mmapPreadMin:]) {
		t.Errorf("ReadAt past the end = %d, %v; want %d bytes and io.EOF", n, err, mmapPreadMin)
	}
	const newSize = mmapPreadMin + 1000
	if err := os.Truncate(path, newSize); err != nil {
		t.Fatal(err)
	}
	n, err = s.ReadAt(buf[:2*mmapPreadMin], 10)
	var fe *FaultError
	if !errors.As(err, &fe) || fe.Now != newSize || n != newSize-10 || !bytes.Equal(buf[:n], data[10:newSize]) {
		t.Errorf("ReadAt across the truncation = %d, %v (%+v); want the %d bytes that exist and a FaultError with size %d", n, err, fe, newSize-10, newSize)
	}
}
