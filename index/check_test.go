package index

import (
	"bytes"
	"hash/crc32"
	"strings"
	"testing"
)

// Verify and CheckStream agree with the CRC-32 of the member's span,
// header included; a changed byte anywhere in it is a mismatch naming
// the member, whether the tensor's bytes pass in order or not.
func TestCheck(t *testing.T) {
	file := bytes.Repeat([]byte("0123456789abcdef"), 300)
	span := file[100:4000]
	tn := Tensor{Name: "w", Offset: 228, Size: 3700, Check: &Check{Member: "w.npy", Offset: 100, Size: 3900, CRC32: crc32.ChecksumIEEE(span)}}
	for _, c := range []struct {
		name  string
		flip  int // byte of the file changed; -1 none
		order []int64
	}{
		{"intact in order", -1, []int64{0, 1000, 2000, 3000}},
		{"intact out of order", -1, []int64{1000, 0, 2000, 3000}},
		{"header", 150, []int64{0, 1000, 2000, 3000}},
		{"data", 2500, []int64{0, 1000, 2000, 3000}},
		{"trailer", 3990, []int64{0, 1000, 2000, 3000}},
		{"data out of order", 2500, []int64{3000, 2000, 1000, 0}},
	} {
		f := bytes.Clone(file)
		if c.flip >= 0 {
			f[c.flip] ^= 1
		}
		r := bytes.NewReader(f)
		check := func(how string, err error) {
			if c.flip < 0 && err != nil {
				t.Errorf("%s: %s: %v", c.name, how, err)
			}
			if c.flip >= 0 && (err == nil || !strings.Contains(err.Error(), "member w.npy: Bad CRC-32")) {
				t.Errorf("%s: %s: got %v, want a Bad CRC-32 of w.npy", c.name, how, err)
			}
		}
		check("Verify", tn.Verify(r))
		s := NewCheckStream(&tn, r)
		for _, off := range c.order {
			end := min(off+1000, tn.Size)
			s.Write(f[tn.Offset+off:tn.Offset+end], off)
		}
		check("CheckStream", s.Done())
	}
	if (&Tensor{}).Verify(bytes.NewReader(nil)) != nil || NewCheckStream(&Tensor{}, nil) != nil {
		t.Error("a tensor without Check: want nothing checked")
	}
}
