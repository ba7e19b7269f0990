package torch

import (
	"strconv"
	"strings"
	"testing"

	"github.com/lazyweights/tensorfs/index/pickle"
)

// ptLatin1Array is a protocol-2 numpy array of descr and shape whose
// data is _codecs.encode(utf8 as a BINUNICODE str, "latin1").
func ptLatin1Array(descr string, shape []int64, utf8 []byte) []byte {
	str := append([]byte{pickle.OpBINUNICODE, 0, 0, 0, 0}, utf8...)
	n := len(utf8)
	str[1], str[2], str[3], str[4] = byte(n), byte(n>>8), byte(n>>16), byte(n>>24)
	enc := ptCat(ptPkGlobal("_codecs", "encode"), ptPkTuple(str, ptPkStr("latin1")), []byte{'R'})
	return ptPkArray(descr, "<", shape, enc)
}

// TestTorchNumpyLatin1Bad: a protocol-2 array whose str is not Latin-1
// as UTF-8 (a code point above U+00FF, invalid UTF-8, a character cut
// off by the str's end) or decodes to a length other than the array's
// is refused in one line naming its key and the byte, both for a str
// the unpickler keeps and for one past pickle.MaxValue that it skips
// over. Python's unpickler fails on the first three too; the old main
// served wrong bytes (a code point above U+00FF truncated) or nothing.
func TestTorchNumpyLatin1Bad(t *testing.T) {
	big := (pickle.MaxValue + 8) / 4 * 4
	for _, c := range []struct {
		name  string
		shape []int64
		utf8  []byte
		bad   int // index in utf8 of the offending byte, -1 for a length error
		want  string
	}{
		{"code point U+0100", []int64{2}, []byte{'a', 0xc4, 0x80, 'b', 'c', 'd', 'e', 'f'}, 1, `_codecs.encode(str, "latin1") of a str with code point U+0100, which is not Latin-1`},
		{"invalid UTF-8", []int64{2}, []byte{'a', 'b', 0xff, 'c', 'd', 'e', 'f', 'g'}, 2, `_codecs.encode(str, "latin1") of a str with invalid UTF-8`},
		{"cut off", []int64{2}, []byte{'a', 'b', 'c', 'd', 'e', 'f', 'g', 0xc3}, 7, `_codecs.encode(str, "latin1") of a str with invalid UTF-8`},
		{"short", []int64{3}, []byte{'a', 0xc3, 0xa9, 'b', 'c', 'd', 'e', 'f', 'g'}, -1, `numpy array: f4[3] needs 12 bytes, its data has 8`},
		{"big code point", []int64{int64(big / 4)}, append(make([]byte, big-1), 0xe2, 0x82, 0xac), big - 1, `_codecs.encode(str, "latin1") of a str that is not Latin-1 as UTF-8`},
		{"big cut off", []int64{int64(big / 4)}, append(make([]byte, big-1), 0xc2), big - 1, `_codecs.encode(str, "latin1") of a str that is not Latin-1 as UTF-8`},
		{"big short", []int64{int64(big/4) + 1}, append(make([]byte, big-2), 0xc2, 0xa0), -1, `needs`},
	} {
		head := ptCat([]byte{pickle.OpPROTO, 2, '}'}, ptPkStr("np"), []byte{'}'}, ptPkStr("a"))
		arr := ptLatin1Array("f4", c.shape, c.utf8)
		p := ptCat(head, arr, []byte{'s', 's', '.'})
		b := ptZip(t, ptMember{Name: "r/data.pkl", Data: p})
		_, err := ptParse("m.pt", b)
		ptErrContains(t, err, "m.pt: ", c.want, `"np/a"`)
		if c.bad >= 0 {
			// The offset names the byte in the file.
			off := int64(strings.Index(string(b), string(c.utf8))) + int64(c.bad)
			ptErrContains(t, err, "at byte "+strconv.FormatInt(off, 10))
		}
	}
}
