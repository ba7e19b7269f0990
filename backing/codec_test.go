package backing

import (
	"bytes"
	"errors"
	"io"
	"testing"
)

// TestCodecCheck: OpenMember refuses a member whose size, or whose
// codec's offset or length, is negative, with the one message it always
// had, naming the member as its codec does; a decoded member without
// its decoder, or a member without a codec, is an internal error.
func TestCodecCheck(t *testing.T) {
	decode := func(io.Writer, io.ReaderAt) error { return nil }
	for _, c := range []struct {
		m    Member
		want string
	}{
		{Member{Name: "a.npy", Size: 1, Codec: Deflated{Offset: -1}}, `m.pt: member a.npy: negative offset or size`},
		{Member{Name: "a.npy", Size: 1, Codec: Deflated{CompressedSize: -1}}, `m.pt: member a.npy: negative offset or size`},
		{Member{Name: "a.npy", Size: -1, Codec: Deflated{}}, `m.pt: member a.npy: negative offset or size`},
		{Member{Name: "data/0", Size: 1, Codec: Zstd{Offset: -1}}, `m.pt: member data/0: negative offset or size`},
		{Member{Name: "data/0", Size: 1, Codec: Zstd{CompressedSize: -1}}, `m.pt: member data/0: negative offset or size`},
		{Member{Name: "data/0", Size: 1, Codec: Zstd{Skip: -1}}, `m.pt: member data/0: negative offset or size`},
		{Member{Name: "data/0", Size: -1, Codec: Zstd{}}, `m.pt: member data/0: negative offset or size`},
		{Member{Name: "np/a", Size: 1, Codec: Latin1{Offset: -1}}, `m.pt: tensor "np/a": negative offset or size`},
		{Member{Name: "np/a", Size: 1, Codec: Latin1{Len: -1}}, `m.pt: tensor "np/a": negative offset or size`},
		{Member{Name: "np/a", Size: -1, Codec: Latin1{}}, `m.pt: tensor "np/a": negative offset or size`},
		{Member{Name: "d/vars/0", Size: -1, Codec: Decoded{Decode: decode}}, `m.pt: tensor "d/vars/0": negative offset or size`},
		{Member{Name: "d/vars/0", Size: 1, Codec: Decoded{}}, `m.pt: tensor "d/vars/0": internal error: a decoded member without its decoder`},
		{Member{Name: "a.npy", Size: 1}, `m.pt: member a.npy: internal error: a member without its codec`},
	} {
		cache := NewInflateCache(InflateOptions{Dir: t.TempDir()})
		src, err := cache.OpenMember(&zipFile{Reader: bytes.NewReader(make([]byte, 10)), name: "m.pt"}, c.m)
		var me *MemberError
		if src != nil || err == nil || err.Error() != c.want || !errors.As(err, &me) || !errors.Is(err, ErrFault) {
			t.Errorf("%+v: %v, %v; want %q", c.m, src, err, c.want)
		}
	}
}
