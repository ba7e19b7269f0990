package backing

import (
	"bytes"
	"compress/flate"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"math/rand"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
)

// zipFile is a parent file for members: bytes with a name, and reads
// that can be made to fail.
type zipFile struct {
	*bytes.Reader
	name  string
	fails atomic.Int32 // the next reads that fail
	reads atomic.Int64
}

func (z *zipFile) Name() string { return z.name }
func (z *zipFile) ReadAt(p []byte, off int64) (int, error) {
	z.reads.Add(1)
	if z.fails.Load() > 0 {
		z.fails.Add(-1)
		return 0, fmt.Errorf("injected read error")
	}
	return z.Reader.ReadAt(p, off)
}

// deflate returns b compressed, as a zip's deflated member holds it.
func deflate(t testing.TB, b []byte) []byte {
	var buf bytes.Buffer
	w, err := flate.NewWriter(&buf, flate.DefaultCompression)
	if err != nil {
		t.Fatal(err)
	}
	w.Write(b)
	w.Close()
	return buf.Bytes()
}

// members lays out members' deflated bytes one after another in a file
// (after a 100-byte prefix) and returns the file and each Member.
func members(t testing.TB, contents ...[]byte) (*zipFile, []Member) {
	var file []byte
	file = append(file, make([]byte, 100)...)
	var ms []Member
	for i, c := range contents {
		z := deflate(t, c)
		ms = append(ms, Member{Name: fmt.Sprintf("m%d.npy", i), Size: int64(len(c)), Codec: Deflated{Offset: int64(len(file)), CompressedSize: int64(len(z)), CRC32: crc32.ChecksumIEEE(c)}})
		file = append(file, z...)
	}
	return &zipFile{Reader: bytes.NewReader(file), name: "x.npz"}, ms
}

// editCodec changes m's codec, a C, by edit.
func editCodec[C Codec](m *Member, edit func(k *C)) {
	k := m.Codec.(C)
	edit(&k)
	m.Codec = k
}

func randomBytes(seed int64, n int) []byte {
	r := rand.New(rand.NewSource(seed))
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(r.Intn(16)) // compressible, not trivially
	}
	return b
}

// checkReads reads src at random offsets and lengths, and whole, and
// compares with want; past the end gives io.EOF.
func checkReads(t *testing.T, src Source, want []byte) {
	t.Helper()
	if src.Size() != int64(len(want)) {
		t.Fatalf("%s: size %d, want %d", src.Name(), src.Size(), len(want))
	}
	r := rand.New(rand.NewSource(1))
	for i := 0; i < 50; i++ {
		off := r.Int63n(int64(len(want)) + 10)
		n := r.Intn(len(want)/3 + 2)
		buf := make([]byte, n)
		got, err := src.ReadAt(buf, off)
		wantN := max(0, min(int64(n), int64(len(want))-off))
		if int64(got) != wantN || !bytes.Equal(buf[:got], want[min(off, int64(len(want))):min(off, int64(len(want)))+wantN]) {
			t.Fatalf("%s: read %d at %d: %d bytes (%v), want %d", src.Name(), n, off, got, err, wantN)
		}
		if (off+int64(n) > int64(len(want))) != (err == io.EOF) && n > 0 {
			t.Fatalf("%s: read %d at %d of %d: err %v", src.Name(), n, off, len(want), err)
		}
	}
	all, err := io.ReadAll(io.NewSectionReader(src, 0, src.Size()))
	if err != nil || !bytes.Equal(all, want) {
		t.Fatalf("%s: whole read: %v", src.Name(), err)
	}
}

func TestInflateMember(t *testing.T) {
	contents := [][]byte{randomBytes(1, 1000), {}, randomBytes(2, 3<<20), bytes.Repeat([]byte{0}, 5<<20)}
	for _, c := range []struct {
		name   string
		opts   InflateOptions
		inFile bool
	}{
		{"memory", InflateOptions{MemLimit: 64 << 20}, false},
		{"file", InflateOptions{MemLimit: -1}, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			c.opts.Dir = t.TempDir()
			cache := NewInflateCache(c.opts)
			f, ms := members(t, contents...)
			for i, m := range ms {
				src, err := cache.OpenMember(f, m)
				if err != nil {
					t.Fatal(err)
				}
				if src.Name() != "x.npz:"+m.Name {
					t.Errorf("name %q", src.Name())
				}
				checkReads(t, src, contents[i])
				defer src.Close()
			}
			st := cache.Stats()
			total := int64(0)
			for _, b := range contents {
				total += int64(len(b))
			}
			if st.Inflations != int64(len(contents))-1 { // the empty one has nothing to inflate
				t.Errorf("%d inflations of %d members", st.Inflations, len(contents))
			}
			if c.inFile && (st.MemBytes != 0 || st.DiskBytes != total) || !c.inFile && (st.MemBytes != total || st.DiskBytes != 0) {
				t.Errorf("stats %+v, members of %d bytes", st, total)
			}
		})
	}
}

// TestInflateOnce: many readers at the member's first use inflate it once.
func TestInflateOnce(t *testing.T) {
	want := randomBytes(3, 4<<20)
	f, ms := members(t, want)
	for _, memLimit := range []int64{64 << 20, -1} {
		cache := NewInflateCache(InflateOptions{MemLimit: memLimit, Dir: t.TempDir()})
		src, err := cache.OpenMember(f, ms[0])
		if err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		errs := make(chan error, 32)
		for g := 0; g < 32; g++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				off := int64(g) * 100_000
				buf := make([]byte, 70_000)
				if n, err := src.ReadAt(buf, off); n != len(buf) || !bytes.Equal(buf, want[off:off+int64(n)]) {
					errs <- fmt.Errorf("reader %d: %d bytes, %v", g, n, err)
				}
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Error(err)
		}
		if n := cache.Stats().Inflations; n != 1 {
			t.Errorf("mem limit %d: inflated %d times", memLimit, n)
		}
		src.Close()
		if st := cache.Stats(); st.MemBytes != 0 || st.DiskBytes != 0 {
			t.Errorf("after Close: %+v", st)
		}
		if _, err := src.ReadAt(make([]byte, 1), 0); !errors.Is(err, os.ErrClosed) {
			t.Errorf("read after Close: %v", err)
		}
	}
}

// TestInflateLimits: memory stays within its limit (the least recently
// read members move to files), files within theirs (the least recently
// read are dropped and inflated again when read), and a member larger
// than the disk limit is refused.
func TestInflateLimits(t *testing.T) {
	const size = 1 << 20
	var contents [][]byte
	for i := 0; i < 6; i++ {
		contents = append(contents, randomBytes(int64(10+i), size))
	}
	f, ms := members(t, contents...)
	open := func(cache *InflateCache) []Source {
		var srcs []Source
		for _, m := range ms {
			src, err := cache.OpenMember(f, m)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { src.Close() })
			srcs = append(srcs, src)
		}
		return srcs
	}

	// Memory for 4 members: reading 6 spills 2, which are then read
	// from their files without inflating again.
	cache := NewInflateCache(InflateOptions{MemLimit: 4 * size, Dir: t.TempDir()})
	srcs := open(cache)
	for round := 0; round < 2; round++ {
		for i, src := range srcs {
			checkReads(t, src, contents[i])
			if st := cache.Stats(); st.MemBytes > 4*size {
				t.Fatalf("%d bytes in memory, limit %d", st.MemBytes, 4*size)
			}
		}
	}
	st := cache.Stats()
	if st.Inflations != 6 || st.Spills < 2 || st.MemBytes+st.DiskBytes != 6*size {
		t.Errorf("memory limit: %+v", st)
	}

	// Files for 2 members: reading 6 drops 4; read again, they inflate
	// again.
	cache = NewInflateCache(InflateOptions{MemLimit: -1, DiskLimit: 2 * size, Dir: t.TempDir()})
	srcs = open(cache)
	for round := 0; round < 2; round++ {
		for i, src := range srcs {
			checkReads(t, src, contents[i])
			if st := cache.Stats(); st.DiskBytes > 2*size {
				t.Fatalf("%d bytes in files, limit %d", st.DiskBytes, 2*size)
			}
		}
	}
	if st := cache.Stats(); st.Inflations != 12 || st.Drops != 10 {
		t.Errorf("disk limit: %+v", st)
	}

	// A member over the disk limit cannot be served.
	_, err := cache.OpenMember(f, Member{Name: "big.npy", Size: 2*size + 1, Codec: Deflated{CompressedSize: 10}})
	if err == nil || err.Error() != "x.npz: member big.npy: inflates to 2097153 bytes, more than the 2097152 bytes of disk the cache of inflated members may use (tensorfs --inflate-disk)" {
		t.Errorf("over the limit: %v", err)
	}
}

// TestInflateErrors: a member whose data is bad fails every read with
// one clear error, logged once; a failure to read the zip file fails
// that read only.
func TestInflateErrors(t *testing.T) {
	good := randomBytes(4, 100_000)
	for _, c := range []struct {
		name   string
		edit   func(m *Member, file []byte)
		want   string
		sticky bool
	}{
		{"crc", func(m *Member, _ []byte) { editCodec(m, func(k *Deflated) { k.CRC32 ^= 1 }) }, "x.npz: member m0.npy: CRC-32 of the inflated bytes is", true},
		{"longer", func(m *Member, _ []byte) { m.Size-- }, "x.npz: member m0.npy: inflates to more than the 99999 bytes the zip directory declares", true},
		{"shorter", func(m *Member, _ []byte) { m.Size++ }, "x.npz: member m0.npy: inflates to 100000 bytes, not the 100001 the zip directory declares", true},
		{"cut", func(m *Member, _ []byte) { editCodec(m, func(k *Deflated) { k.CompressedSize /= 2 }) }, "x.npz: member m0.npy: the deflate data ends early, after", true},
		{"corrupt", func(m *Member, file []byte) {
			k := m.Codec.(Deflated)
			for i := k.Offset; i < k.Offset+k.CompressedSize; i++ {
				file[i] = 0xff
			}
		}, "x.npz: member m0.npy: the deflate data is corrupt at byte", true},
		{"read error", func(*Member, []byte) {}, "x.npz: member m0.npy: cannot read its compressed data", false},
	} {
		for _, memLimit := range []int64{64 << 20, -1} {
			t.Run(fmt.Sprintf("%s/%d", c.name, memLimit), func(t *testing.T) {
				f, ms := members(t, good)
				file := make([]byte, f.Size())
				f.Reader.ReadAt(file, 0)
				c.edit(&ms[0], file)
				f.Reader = bytes.NewReader(file)
				if !c.sticky {
					f.fails.Store(1)
				}
				var logged []string
				var mu sync.Mutex
				cache := NewInflateCache(InflateOptions{MemLimit: memLimit, Dir: t.TempDir(), Logf: func(format string, args ...any) {
					mu.Lock()
					logged = append(logged, fmt.Sprintf(format, args...))
					mu.Unlock()
				}})
				src, err := cache.OpenMember(f, ms[0])
				if err != nil {
					t.Fatal(err)
				}
				defer src.Close()
				buf := make([]byte, 10)
				for i := 0; i < 3; i++ {
					_, err := src.ReadAt(buf, 0)
					if c.sticky || i == 0 {
						if err == nil || !strings.HasPrefix(err.Error(), c.want) || !errors.Is(err, ErrFault) {
							t.Fatalf("read %d: %v, want %q", i, err, c.want)
						}
					} else if err != nil || !bytes.Equal(buf, good[:10]) {
						t.Fatalf("read %d after a read error: %v", i, err)
					}
				}
				if len(logged) != 1 || !strings.HasPrefix(logged[0], "tensorfs: "+c.want) {
					t.Errorf("logged %q", logged)
				}
				if st := cache.Stats(); st.MemBytes+st.DiskBytes != int64(len(good))*int64(b2i(!c.sticky)) {
					t.Errorf("stats after the error: %+v", st)
				}
			})
		}
	}
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}
