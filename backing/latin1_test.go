package backing

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"unicode/utf8"
)

// latin1UTF8 is b as the UTF-8 of the str whose code points are b's
// bytes: what pickle protocol 2 writes for _codecs.encode(str, "latin1").
func latin1UTF8(b []byte) []byte {
	out := make([]byte, 0, 2*len(b))
	for _, c := range b {
		out = utf8.AppendRune(out, rune(c))
	}
	return out
}

// latin1File puts the UTF-8 of b after a 100-byte prefix and returns the
// file and its Latin-1 member.
func latin1File(b []byte) (*zipFile, Member) {
	u := latin1UTF8(b)
	file := append(make([]byte, 100), u...)
	file = append(file, "tail"...)
	return &zipFile{Reader: bytes.NewReader(file), name: "m.pt"}, Member{Name: "np/a", Size: int64(len(b)), Codec: Latin1{Offset: 100, Len: int64(len(u))}}
}

// TestLatin1Member: a Latin-1 member (a numpy array's bytes that a pickle
// holds as a str in UTF-8) reads as the array's bytes at any offset and
// length, decoded once, in memory or in a cache file; a member of a
// member (the str inside a deflated data.pkl) too.
func TestLatin1Member(t *testing.T) {
	all := make([]byte, 3<<20) // every byte value, bytes >= 0x80 two of UTF-8
	for i := range all {
		all[i] = byte(i*7 + i>>9)
	}
	for _, memLimit := range []int64{64 << 20, -1} {
		cache := NewInflateCache(InflateOptions{MemLimit: memLimit, Dir: t.TempDir()})
		f, m := latin1File(all)
		src, err := cache.OpenMember(f, m)
		if err != nil {
			t.Fatal(err)
		}
		if src.Name() != "m.pt:np/a" {
			t.Errorf("name %q", src.Name())
		}
		checkReads(t, src, all)
		if st := cache.Stats(); st.Inflations != 1 || (memLimit > 0) != (st.MemBytes == int64(len(all))) || (memLimit < 0) != (st.DiskBytes == int64(len(all))) {
			t.Errorf("memLimit %d: stats %+v", memLimit, st)
		}
		src.Close()
	}

	// The str inside a deflated pickle: a Latin-1 member of a deflated one.
	small := all[:70_000]
	u := latin1UTF8(small)
	pkl := append(append([]byte("pickle head "), u...), " tail"...)
	f, ms := members(t, pkl)
	cache := NewInflateCache(InflateOptions{Dir: t.TempDir()})
	outer, err := cache.OpenMember(f, ms[0])
	if err != nil {
		t.Fatal(err)
	}
	inner, err := cache.OpenMember(outer, Member{Name: "np/a", Size: int64(len(small)), Codec: Latin1{Offset: 12, Len: int64(len(u))}})
	if err != nil {
		t.Fatal(err)
	}
	if inner.Name() != "x.npz:m0.npy:np/a" {
		t.Errorf("name %q", inner.Name())
	}
	checkReads(t, inner, small)
	inner.Close()
	outer.Close()
}

// TestLatin1Errors: a Latin-1 member whose bytes are not what the index
// checked (the file changed since: a code point above U+00FF, invalid
// UTF-8, a character cut off, another length, a shorter file) fails
// every read with one error naming the file, the tensor and the byte,
// logged once; a read error of the file is tried again.
func TestLatin1Errors(t *testing.T) {
	good := make([]byte, 50_000)
	for i := range good {
		good[i] = byte(i * 31)
	}
	for _, c := range []struct {
		name   string
		edit   func(m *Member, k *Latin1, file []byte) []byte
		want   string
		sticky bool
	}{
		{"above U+00FF", func(m *Member, k *Latin1, file []byte) []byte { file[k.Offset+10] = 0xc4; return file },
			`m.pt: tensor "np/a": its Latin-1 str (UTF-8, `, true},
		{"not a continuation", func(m *Member, k *Latin1, file []byte) []byte {
			i := bytes.IndexByte(file[k.Offset:], 0xc3)
			file[k.Offset+int64(i)+1] = 'x'
			return file
		}, `has invalid UTF-8 at byte`, true},
		{"cut off", func(m *Member, k *Latin1, file []byte) []byte {
			i := bytes.LastIndexByte(file[k.Offset:k.Offset+k.Len], 0xc3)
			k.Len = int64(i) + 1
			return file
		}, "ends inside a character at byte", true},
		{"longer", func(m *Member, _ *Latin1, file []byte) []byte { m.Size--; return file }, "decodes to more than the array's 49999 bytes", true},
		{"shorter", func(m *Member, _ *Latin1, file []byte) []byte { m.Size++; return file }, "decodes to 50000 bytes, not the array's 50001", true},
		{"file shrank", func(m *Member, k *Latin1, file []byte) []byte { return file[:k.Offset+100] }, "ends early, after 100 bytes (the file is shorter)", true},
		{"read error", func(*Member, *Latin1, []byte) []byte { return nil }, `m.pt: tensor "np/a": cannot read its Latin-1 str`, false},
	} {
		for _, memLimit := range []int64{64 << 20, -1} {
			t.Run(fmt.Sprintf("%s/%d", c.name, memLimit), func(t *testing.T) {
				f, m := latin1File(good)
				file := make([]byte, f.Size())
				f.Reader.ReadAt(file, 0)
				k := m.Codec.(Latin1)
				nf := c.edit(&m, &k, file)
				m.Codec = k
				if nf != nil {
					f.Reader = bytes.NewReader(nf)
				}
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
				src, err := cache.OpenMember(f, m)
				if err != nil {
					t.Fatal(err)
				}
				defer src.Close()
				buf := make([]byte, 10)
				for i := 0; i < 3; i++ {
					_, err := src.ReadAt(buf, 0)
					if c.sticky || i == 0 {
						if err == nil || !strings.Contains(err.Error(), c.want) || !strings.HasPrefix(err.Error(), `m.pt: tensor "np/a": `) || !errors.Is(err, ErrFault) || strings.Contains(err.Error(), "\n") {
							t.Fatalf("read %d: %v, want %q", i, err, c.want)
						}
					} else if err != nil || !bytes.Equal(buf, good[:10]) {
						t.Fatalf("read %d after a read error: %v", i, err)
					}
				}
				if len(logged) != 1 || !strings.Contains(logged[0], c.want) {
					t.Errorf("logged %q", logged)
				}
				if st := cache.Stats(); st.MemBytes+st.DiskBytes != int64(len(good))*int64(b2i(!c.sticky)) {
					t.Errorf("stats after the error: %+v", st)
				}
			})
		}
	}
}
