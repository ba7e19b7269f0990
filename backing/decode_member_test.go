package backing

import (
	"bytes"
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/lazyweights/tensorfs/index"
)

type namedBytes struct {
	*bytes.Reader
	name string
}

func (n namedBytes) Name() string { return n.name }

// TestDecodeMember: a member whose bytes its format's decoder writes
// (Decoded, index.Decoded) is served from memory and from a
// cache file; a decoder that writes more than the member's size is
// stopped at the first byte over, one that writes fewer is refused, each
// one line naming the member, and nothing is served.
func TestDecodeMember(t *testing.T) {
	file := namedBytes{bytes.NewReader([]byte("abc")), "f.h5"}
	want := bytes.Repeat([]byte("0123456789"), 1000)
	write := func(n int) func(io.Writer, io.ReaderAt) error {
		return func(w io.Writer, r io.ReaderAt) error {
			b := make([]byte, 3)
			if _, err := r.ReadAt(b, 0); err != nil || string(b) != "abc" {
				t.Errorf("the decoder reads %q, %v", b, err)
			}
			for i := 0; i < n; i += 1000 {
				if _, err := w.Write(bytes.Repeat([]byte("0123456789"), 100)[:min(1000, n-i)]); err != nil {
					return err
				}
			}
			return nil
		}
	}
	for _, mem := range []int64{1 << 20, -1} { // in memory; in a cache file
		cache := NewInflateCache(InflateOptions{MemLimit: mem, DiskLimit: 1 << 20, Dir: t.TempDir(), Logf: func(string, ...any) {}})
		for _, c := range []struct {
			n    int
			want string
		}{{len(want), ""}, {len(want) + 1000, "decodes to more than its"}, {len(want) - 1000, "decodes to 9000 bytes, not 10000"}} {
			src, err := cache.OpenMember(file, Member{Name: "d/vars/0", Size: int64(len(want)), Codec: Decoded{Decode: write(c.n)}})
			if err != nil {
				t.Fatal(err)
			}
			got := make([]byte, len(want))
			n, err := src.ReadAt(got, 0)
			switch {
			case c.want == "" && (err != nil || n != len(want) || !bytes.Equal(got, want)):
				t.Errorf("mem %d: read %d bytes, %v", mem, n, err)
			case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), "f.h5") || strings.Contains(err.Error(), "\n")):
				t.Errorf("mem %d, decoder writing %d: %v, want one line with %q", mem, c.n, err, c.want)
			}
			src.Close()
		}
	}
}

// TestDecodeTarget: a decoder given the cache's writer (an
// index.DecodeTarget) writes its bytes at their offsets, in memory and
// in a cache file, and takes its working memory from the memory budget
// (counted, given back when it returns); asking for more than the budget
// holds, or writing past the member, is one line and nothing is served.
func TestDecodeTarget(t *testing.T) {
	file := namedBytes{bytes.NewReader([]byte("abc")), "f.h5"}
	want := bytes.Repeat([]byte("0123456789"), 1000)
	decode := func(scratch int64, past bool) func(io.Writer, io.ReaderAt) error {
		return func(w io.Writer, _ io.ReaderAt) error {
			tg, ok := w.(index.DecodeTarget)
			if !ok {
				return errors.New("not an index.DecodeTarget")
			}
			if _, err := tg.Scratch(scratch); err != nil {
				return err
			}
			for off := len(want) - 1000; off >= 0; off -= 1000 { // last piece first
				if _, err := tg.WriteAt(want[off:off+1000], int64(off)); err != nil {
					return err
				}
			}
			if past {
				_, err := tg.WriteAt([]byte("x"), int64(len(want)))
				return err
			}
			return nil
		}
	}
	for _, mem := range []int64{64 << 10, -1} { // the member in memory; in a cache file
		for _, c := range []struct {
			scratch int64
			past    bool
			want    string
		}{{20 << 10, false, ""}, {1 << 20, false, "more than the"}, {0, true, "decodes past its 10000 bytes"}} {
			cache := NewInflateCache(InflateOptions{MemLimit: mem, DiskLimit: 1 << 20, Dir: t.TempDir(), Logf: func(string, ...any) {}})
			src, err := cache.OpenMember(file, Member{Name: "d/vars/0", Size: int64(len(want)), Codec: Decoded{Decode: decode(c.scratch, c.past)}})
			if err != nil {
				t.Fatal(err)
			}
			got := make([]byte, len(want))
			n, err := src.ReadAt(got, 0)
			st := cache.Stats()
			switch {
			case c.want == "" && mem < 0:
				// No memory budget: no scratch either.
				if err == nil || !strings.Contains(err.Error(), "--inflate-mem") {
					t.Errorf("mem %d: %v, want the scratch refused", mem, err)
				}
			case c.want == "" && (err != nil || n != len(want) || !bytes.Equal(got, want) || st.ScratchBytes != c.scratch || st.MemBytes != int64(len(want))):
				t.Errorf("mem %d: read %d bytes, %v; %+v", mem, n, err, st)
			case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), "f.h5") || strings.Contains(err.Error(), "\n")):
				t.Errorf("mem %d, %+v: %v, want one line with %q", mem, c, err, c.want)
			}
			src.Close()
			if st := cache.Stats(); st.MemBytes != 0 || st.DiskBytes != 0 {
				t.Errorf("mem %d: %+v after Close", mem, st)
			}
		}
	}
}
