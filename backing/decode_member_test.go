package backing

import (
	"bytes"
	"io"
	"strings"
	"testing"
)

type namedBytes struct {
	*bytes.Reader
	name string
}

func (n namedBytes) Name() string { return n.name }

// TestDecodeMember: a member whose bytes its format's decoder writes
// (Member.Decode, index.Decoded) is served from memory and from a
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
			src, err := cache.OpenMember(file, Member{Name: "d/vars/0", Size: int64(len(want)), Decode: write(c.n)})
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
