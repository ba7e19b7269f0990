package backing

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"strings"
	"testing"

	"github.com/klauspost/compress/zstd"
)

// TestStreamMember: a Stream member (an OCI .tar+gzip or .tar+zstd
// layer) is all the decoded bytes of the stream at Offset, gzip of
// several members or zstd, with the compressed bytes' sha256 checked
// to their end; a stream that decodes to more or fewer bytes than Size,
// is corrupt or cut, or whose sha256 differs fails its reads (bad data,
// every read) in one line naming the file and layer; a failed read of
// the file is tried again on the next read.
func TestStreamMember(t *testing.T) {
	whole := randomBytes(8, 300_000)
	var gz bytes.Buffer
	for _, part := range [][]byte{whole[:100_000], whole[100_000:]} {
		w := gzip.NewWriter(&gz)
		w.Write(part)
		w.Close()
	}
	e, _ := zstd.NewWriter(nil)
	zs := e.EncodeAll(whole, nil)
	e.Close()
	sum := func(b []byte) string { s := sha256.Sum256(b); return hex.EncodeToString(s[:]) }
	for _, enc := range []struct {
		name string
		data []byte
		zstd bool
	}{{"gzip", gz.Bytes(), false}, {"zstd", zs, true}} {
		file := append(bytes.Repeat([]byte{'x'}, 100), enc.data...)
		base := Member{Name: "sha256:abc", Size: int64(len(whole)), Codec: Stream{Offset: 100, CompressedSize: int64(len(enc.data)), Zstd: enc.zstd, SHA256: sum(enc.data)}}
		for _, c := range []struct {
			name      string
			edit      func(m *Member)
			want      string
			readFails bool
		}{
			{"as stored", func(*Member) {}, "", false},
			{"no sum", func(m *Member) { editCodec(m, func(k *Stream) { k.SHA256 = "" }) }, "", false},
			{"read error", func(*Member) {}, "", true},
			{"sum", func(m *Member) { editCodec(m, func(k *Stream) { k.SHA256 = sum(nil) }) }, "compressed bytes is " + sum(enc.data) + ", not its digest sha256:" + sum(nil), false},
			{"more", func(m *Member) { m.Size-- }, "decodes to more than the 299999 bytes", false},
			{"fewer", func(m *Member) { m.Size++ }, "decodes to 300000 bytes, not the 300001", false},
			{"cut", func(m *Member) { editCodec(m, func(k *Stream) { k.CompressedSize -= 10 }) }, "stream ", false},
		} {
			t.Run(enc.name+"/"+c.name, func(t *testing.T) {
				m := base
				c.edit(&m)
				f := &zipFile{Reader: bytes.NewReader(file), name: "oci://r/m@sha256:def"}
				cache := NewInflateCache(InflateOptions{MemLimit: 4 << 20, Dir: t.TempDir(), Logf: func(string, ...any) {}})
				src, err := cache.OpenMember(f, m)
				if err != nil {
					t.Fatal(err)
				}
				got := make([]byte, m.Size)
				if c.readFails {
					f.fails.Store(1)
					if _, err := src.ReadAt(got, 0); err == nil || !strings.Contains(err.Error(), "injected read error") {
						t.Fatalf("a failed read of the file: %v", err)
					}
				}
				_, err = src.ReadAt(got, 0)
				if err == io.EOF {
					err = nil
				}
				if c.want == "" {
					if err != nil || !bytes.Equal(got, whole) {
						t.Fatalf("%v; bytes equal %v", err, bytes.Equal(got, whole))
					}
					return
				}
				if err == nil || !strings.Contains(err.Error(), c.want) || !strings.HasPrefix(err.Error(), "oci://r/m@sha256:def: layer sha256:abc: ") || strings.Contains(err.Error(), "\n") {
					t.Fatalf("error %v, want one line with %q", err, c.want)
				}
				reads := f.reads.Load()
				if _, again := src.ReadAt(got, 0); again == nil || again.Error() != err.Error() || f.reads.Load() != reads {
					t.Errorf("bad data not remembered: %v, %d more reads of the file", again, f.reads.Load()-reads)
				}
			})
		}
	}
}

// TestDecodeStream: a stream is decoded once for its caller and the
// cache: the caller reads what it wants, the rest is decoded too, and
// the member of the decoded bytes is served without decoding again (in
// memory when small, else from its file); a stream that decodes past
// DiskLimit, bad data, and the caller's own error are returned, and
// leave nothing reserved.
func TestDecodeStream(t *testing.T) {
	whole := randomBytes(9, 300_000)
	var gz bytes.Buffer
	w := gzip.NewWriter(&gz)
	w.Write(whole)
	w.Close()
	sum := func(b []byte) string { s := sha256.Sum256(b); return hex.EncodeToString(s[:]) }
	k := Stream{CompressedSize: int64(gz.Len()), SHA256: sum(gz.Bytes())}
	for _, c := range []struct {
		name       string
		mem, disk  int64
		k          Stream
		useErr     error
		want       string
		wantMemory bool
	}{
		{"file", 1 << 20, 1 << 20, k, nil, "", false},
		{"memory", 4 << 20, 1 << 20, k, nil, "", true},
		{"over the disk limit", 4 << 20, 200_000, k, nil, "decodes to more than the 200000 bytes of disk the cache of inflated members may use (tensorfs --inflate-disk)", false},
		{"digest", 1 << 20, 1 << 20, Stream{CompressedSize: k.CompressedSize, SHA256: sum(nil)}, nil, "not its digest sha256:" + sum(nil), false},
		{"cut", 1 << 20, 1 << 20, Stream{CompressedSize: k.CompressedSize - 10}, nil, "the gzip stream ends early", false},
		{"use fails", 1 << 20, 1 << 20, k, io.ErrShortBuffer, io.ErrShortBuffer.Error(), false},
	} {
		t.Run(c.name, func(t *testing.T) {
			f := &zipFile{Reader: bytes.NewReader(gz.Bytes()), name: "oci://r/m@sha256:def"}
			cache := NewInflateCache(InflateOptions{MemLimit: c.mem, DiskLimit: c.disk, Dir: t.TempDir(), Logf: func(string, ...any) {}})
			var first []byte
			src, err := cache.DecodeStream(f, "sha256:abc", c.k, func(r io.Reader) error {
				first = make([]byte, 1000)
				if _, err := io.ReadFull(r, first); err != nil {
					return err
				}
				return c.useErr
			})
			st := cache.Stats()
			if c.want != "" {
				if err == nil || !strings.Contains(err.Error(), c.want) || strings.Contains(err.Error(), "\n") {
					t.Fatalf("%v, want one phrase holding %q", err, c.want)
				}
				if st.DiskBytes != 0 || st.MemBytes != 0 {
					t.Errorf("left reserved: %+v", st)
				}
				return
			}
			if err != nil || !bytes.Equal(first, whole[:1000]) || src.Size() != int64(len(whole)) {
				t.Fatalf("%v; size %v", err, src)
			}
			if inMem := st.MemBytes == int64(len(whole)) && st.DiskBytes == 0; inMem != c.wantMemory || (!inMem && st.DiskBytes != int64(len(whole))) {
				t.Errorf("placed %+v, want in memory %v", st, c.wantMemory)
			}
			reads := f.reads.Load()
			got := make([]byte, len(whole))
			if n, err := src.ReadAt(got, 0); n != len(got) || (err != nil && err != io.EOF) || !bytes.Equal(got, whole) {
				t.Fatalf("ReadAt: %d %v", n, err)
			}
			if f.reads.Load() != reads || cache.Stats().Inflations != 1 {
				t.Errorf("decoded again: %d reads of the file, %+v", f.reads.Load()-reads, cache.Stats())
			}
			src.Close()
			if st := cache.Stats(); st.DiskBytes != 0 || st.MemBytes != 0 {
				t.Errorf("Close left %+v", st)
			}
		})
	}
}

// FuzzDecodeStream: any bytes, as gzip or zstd, read as a tar: no
// panic, a decoded size within DiskLimit, the member's bytes those
// decoded, and nothing left reserved once it is closed or refused.
func FuzzDecodeStream(f *testing.F) {
	var gz bytes.Buffer
	w := gzip.NewWriter(&gz)
	w.Write([]byte("a tar it is not"))
	w.Close()
	e, _ := zstd.NewWriter(nil)
	f.Add(gz.Bytes(), false)
	f.Add(e.EncodeAll(bytes.Repeat([]byte{0}, 5000), nil), true)
	e.Close()
	dir := f.TempDir()
	f.Fuzz(func(t *testing.T, data []byte, isZstd bool) {
		cache := NewInflateCache(InflateOptions{MemLimit: 64 << 10, DiskLimit: 1 << 20, Dir: dir, Logf: func(string, ...any) {}})
		file := &zipFile{Reader: bytes.NewReader(data), name: "fuzz"}
		src, err := cache.DecodeStream(file, "x", Stream{CompressedSize: int64(len(data)), Zstd: isZstd}, func(r io.Reader) error {
			tr := tar.NewReader(r)
			for {
				if _, err := tr.Next(); err != nil {
					if err == io.EOF {
						return nil
					}
					return err
				}
			}
		})
		if err == nil {
			if src.Size() > 1<<20 {
				t.Fatalf("decoded %d bytes, past the disk limit", src.Size())
			}
			b := make([]byte, src.Size())
			if n, err := src.ReadAt(b, 0); n != len(b) && err != io.EOF {
				t.Fatalf("ReadAt: %d %v", n, err)
			}
			src.Close()
		}
		if st := cache.Stats(); st.MemBytes != 0 || st.DiskBytes != 0 {
			t.Fatalf("left reserved: %+v (err %v)", st, err)
		}
	})
}
