package backing

import (
	"bytes"
	"hash/crc32"
	"strings"
	"testing"

	"github.com/klauspost/compress/zstd"
)

// TestZstdMember: a zstd member (a DCP zstd item's storage record) is
// the Size decoded bytes after Skip, CRC-32 checked; a stream cut
// short, a wrong CRC or a member past the stream's end fail its reads
// with one line naming the file and member.
func TestZstdMember(t *testing.T) {
	whole := randomBytes(7, 300_000)
	e, _ := zstd.NewWriter(nil)
	z := e.EncodeAll(whole, nil)
	e.Close()
	file := append(bytes.Repeat([]byte{'x'}, 100), z...)
	const skip, size = 1000, 200_000
	base := Member{Name: "archive/data/0 (item at byte 100)", Size: size, Codec: Zstd{Offset: 100, CompressedSize: int64(len(z)), CRC32: crc32.ChecksumIEEE(whole[skip : skip+size]), Skip: skip}}
	for _, c := range []struct {
		name string
		edit func(m *Member)
		want string
	}{
		{"as stored", func(*Member) {}, ""},
		{"crc", func(m *Member) { editCodec(m, func(k *Zstd) { k.CRC32 ^= 1 }) }, "CRC-32 of the decoded bytes is"},
		{"cut", func(m *Member) { editCodec(m, func(k *Zstd) { k.CompressedSize /= 2 }) }, "is corrupt or ends early"},
		{"past the end", func(m *Member) { editCodec(m, func(k *Zstd) { k.Skip = 200_000 }) }, "ends after 100000 of the member's 200000 bytes"},
		{"skip past the end", func(m *Member) { editCodec(m, func(k *Zstd) { k.Skip = 400_000 }) }, "short of the 600000 before the member"},
	} {
		t.Run(c.name, func(t *testing.T) {
			m := base
			c.edit(&m)
			f := &zipFile{Reader: bytes.NewReader(file), name: "d/__0_0.distcp"}
			cache := NewInflateCache(InflateOptions{MemLimit: 4 << 20, Dir: t.TempDir(), Logf: func(string, ...any) {}})
			src, err := cache.OpenMember(f, m)
			if err != nil {
				t.Fatal(err)
			}
			got := make([]byte, size)
			_, err = src.ReadAt(got, 0)
			if c.want == "" {
				if err != nil || !bytes.Equal(got, whole[skip:skip+size]) {
					t.Fatalf("%v; bytes equal %v", err, bytes.Equal(got, whole[skip:skip+size]))
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), "d/__0_0.distcp") || strings.Contains(err.Error(), "\n") {
				t.Fatalf("error %v, want one line with %q", err, c.want)
			}
		})
	}
}
