package dcp

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/klauspost/compress/zstd"
	"github.com/lazyweights/tensorfs/index"
	"github.com/lazyweights/tensorfs/index/dcp/internal/dcpwrite"
	"github.com/lazyweights/tensorfs/zstdpool"
)

// zstdItems rewrites the items of fqn as zstd streams appended to their
// files, each made by enc from the item's bytes.
func zstdItems(t *testing.T, md *Metadata, dir, fqn string, enc func([]byte) []byte) {
	t.Helper()
	setItems(md, fqn, func(it *Item) {
		p := filepath.Join(dir, it.RelativePath)
		data, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		z := enc(data[it.Offset : it.Offset+it.Length])
		it.Offset, it.Length, it.Transform = int64(len(data)), int64(len(z)), TransformZstd
		if err := os.WriteFile(p, append(data, z...), 0o644); err != nil {
			t.Fatal(err)
		}
	})
}

func zstdEncode(b []byte) []byte {
	e, _ := zstd.NewWriter(nil)
	defer e.Close()
	return e.EncodeAll(b, nil)
}

// rleBomb is a zstd frame of n RLE blocks of 128 KiB of zeros each: 4
// bytes a block.
func rleBomb(n int) []byte {
	b := []byte{0x28, 0xb5, 0x2f, 0xfd, 0x00, (17 - 10) << 3} // no content size; a 128 KiB window
	for i := 0; i < n; i++ {
		h := uint32(1)<<1 | uint32(128<<10)<<3 // RLE, 128 KiB
		if i == n-1 {
			h |= 1
		}
		var hb [4]byte
		binary.LittleEndian.PutUint32(hb[:], h)
		b = append(b, hb[0], hb[1], hb[2], 0)
	}
	return b
}

// TestZstdItems: a chunk's item as a zstd stream (torch >= 2.7's
// stream.zstd/1) is read as a member of kind index.Zstd holding its
// storage; a stream cut short, or one that decodes past what the chunk
// and its zip can hold (a bomb: 32 KiB decoding to 1 GiB), is one line
// naming the checkpoint.
func TestZstdItems(t *testing.T) {
	const wq = "model.layers.0.attention.wq.weight" // [24,16] in two chunks along dim 0
	cases := []struct {
		name string
		enc  func([]byte) []byte
		err  string
	}{
		{"as torch writes it", zstdEncode, ""},
		{"cut short", func(b []byte) []byte { z := zstdEncode(b); return z[:len(z)-9] }, "corrupt or cut short"},
		{"bomb", func([]byte) []byte { return rleBomb(8192) }, "zstd bomb"},
		{"not zstd", func(b []byte) []byte { return b }, "corrupt or cut short"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			md, dir := baseDCP(t, "dcp_ws2")
			zstdItems(t, md, dir, wq, c.enc)
			if err := os.WriteFile(filepath.Join(dir, MetadataName), encode(md, hostile{}), 0o644); err != nil {
				t.Fatal(err)
			}
			idx, files, err := load(dir)
			for _, f := range files {
				f.(interface{ Close() error }).Close()
			}
			if c.err != "" {
				if err == nil || !strings.Contains(err.Error(), c.err) || strings.Contains(err.Error(), "\n") || !errors.Is(err, index.ErrFormat) || !strings.Contains(err.Error(), dir) {
					t.Fatalf("error %v, want one line naming the checkpoint with %q", err, c.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			zs := 0
			for _, m := range idx.Members {
				if k, ok := m.Kind.(*Zstd); ok {
					zs++
					if m.File < 0 || m.File >= len(files) || k.Skip <= 0 || m.Size != 12*16*2 {
						t.Fatalf("member %+v %+v", m, k)
					}
				}
			}
			if zs != 2 {
				t.Fatalf("%d zstd members, want 2: %+v", zs, idx.Members)
			}
		})
	}
}

type Zstd = index.Zstd

type closingMem struct{ memFile }

func (closingMem) Close() error { return nil }

// zstdMember decodes a Zstd member whole, apart from backing: its size
// and CRC-32 checked.
func zstdMember(f index.File, m index.Member, k *index.Zstd) (index.File, error) {
	d, err := zstd.NewReader(io.NewSectionReader(f, k.Offset, k.CompressedSize))
	if err != nil {
		return nil, err
	}
	defer d.Close()
	b, err := io.ReadAll(d)
	if err != nil {
		return nil, err
	}
	if int64(len(b)) < k.Skip+m.Size {
		return nil, fmt.Errorf("member %s: %d bytes decoded, want %d+%d", m.Name, len(b), k.Skip, m.Size)
	}
	b = b[k.Skip : k.Skip+m.Size]
	if crc32.ChecksumIEEE(b) != k.CRC32 {
		return nil, fmt.Errorf("member %s: CRC-32 %08x, want %08x", m.Name, crc32.ChecksumIEEE(b), k.CRC32)
	}
	return closingMem{memFile{bytes.NewReader(b), m.Name}}, nil
}

// FuzzZstdItem: a zstd chunk item of any bytes is read or refused with
// one line, never a panic; a chunk read lies inside its member.
func FuzzZstdItem(f *testing.F) {
	f.Add(rleBomb(3))
	f.Add(zstdEncode([]byte("PK\x03\x04 not a zip")))
	if dir := os.Getenv("TENSORFS_TESTDATA"); dir != "" {
		p := filepath.Join(dir, "formats2", "dcp_zstd")
		if mf, err := openPread(filepath.Join(p, MetadataName)); err == nil {
			md, err := ReadMetadata(mf)
			mf.(io.Closer).Close()
			data, _ := os.ReadFile(filepath.Join(p, "__0_0.distcp"))
			if err == nil {
				for _, it := range md.Storage {
					if it.Transform == TransformZstd && it.Offset+it.Length <= int64(len(data)) && len(md.Storage) > 0 {
						f.Add(data[it.Offset : it.Offset+it.Length])
					}
				}
			}
		}
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		file := memFile{bytes.NewReader(data), "x.distcp"}
		l := &loader{dir: Dir{Path: "d", Files: []string{"d/x.distcp"}, Open: func(string) (index.File, error) { return file, nil }},
			meta: "d/.metadata", byName: map[string]string{"x.distcp": "d/x.distcp"}, fileIdx: map[string]int{},
			chunks: map[Item]chunkItem{}, values: map[Item]valueItem{}}
		ci := l.readZstdChunk(Item{RelativePath: "x.distcp", Length: int64(len(data)), Transform: TransformZstd}, 4096, "fuzz")
		if ci.err != nil {
			if strings.Contains(ci.err.Error(), "\n") {
				t.Fatalf("two lines: %v", ci.err)
			}
			return
		}
		m := l.zmembers[len(l.zmembers)-1]
		k := m.Kind.(*index.Zstd)
		if ci.fi != -len(l.zmembers) || k.Skip < 0 || m.Size < 0 || ci.t.Offset < 0 || ci.t.Size > m.Size || ci.t.Offset > m.Size-ci.t.Size {
			t.Fatalf("chunk %+v in member %+v %+v", ci.t, m, k)
		}
	})
}

// TestChunksInDocument: index.json lists a tiled tensor's chunks (box,
// file, byte offset); a tensor of one chunk has none.
func TestChunksInDocument(t *testing.T) {
	md, dir := baseDCP(t, "dcp_ws2")
	if err := os.WriteFile(filepath.Join(dir, MetadataName), encode(md, hostile{}), 0o644); err != nil {
		t.Fatal(err)
	}
	idx, files, err := load(dir)
	for _, f := range files {
		f.(interface{ Close() error }).Close()
	}
	if err != nil {
		t.Fatal(err)
	}
	d := idx.Document()
	tiled := 0
	for _, dt := range d.Tensors {
		if dt.Name != "model/layers.0.attention.wq.weight" {
			continue
		}
		tiled++
		if len(dt.Chunks) != 2 || dt.Chunks[0].Offsets[0] != 0 || dt.Chunks[1].Offsets[0] != 12 || dt.Chunks[1].Shape[0] != 12 || dt.Chunks[1].Shape[1] != 16 ||
			!strings.HasSuffix(dt.Chunks[0].Source, "__0_0.distcp") || !strings.HasSuffix(dt.Chunks[1].Source, "__1_0.distcp") || dt.Chunks[0].Offset <= 0 {
			t.Fatalf("chunks %+v", dt.Chunks)
		}
	}
	if tiled != 1 {
		t.Fatalf("no tensor model/layers.0.attention.wq.weight")
	}
	js, err := d.JSON()
	if err != nil || !strings.Contains(string(js), `"chunks":[{"offsets":[0,0],"shape":[12,16],"source":"`) {
		t.Fatalf("%v: %.400s", err, js)
	}
}

// TestZstdDecodersReused: a checkpoint of many small zstd items (a
// tensor in 300 chunks, each its own zstd item declaring an 8 MiB
// window, dcpwrite's zstd-items) is parsed by decoders
// taken from one pool, not one built per item (2.3 ms each, issue 41:
// 5,000 items took 18-29 s to list); its values are those the items
// hold.
func TestZstdDecodersReused(t *testing.T) {
	n := 300
	if raceEnabled {
		n = 60 // still far more items than decoders kept (22 s under -race at 300)
	}
	dir := t.TempDir()
	if err := dcpwrite.Hostile(dir, "zstd-items", n); err != nil {
		t.Fatal(err)
	}
	before := zstdpool.Built()
	idx, files, err := load(dir)
	if err != nil {
		t.Fatal(err)
	}
	built := zstdpool.Built() - before
	zs := 0
	for _, m := range idx.Members {
		if _, ok := m.Kind.(*Zstd); ok {
			zs++
		}
	}
	if zs != n {
		t.Fatalf("%d zstd members, want %d", zs, n)
	}
	// One for the parse; a test of the package running beside this one
	// may take a few more.
	if built > zstdpool.MaxIdle {
		t.Fatalf("%d zstd decoders built for %d items, want at most %d", built, n, zstdpool.MaxIdle)
	}
	var w []byte
	for _, tn := range idx.Tensors {
		if tn.Name == "w" {
			w = make([]byte, tn.Size)
			if _, err := files[tn.Source].ReadAt(w, tn.Offset); err != nil && err != io.EOF {
				t.Fatal(err)
			}
		}
	}
	if len(w) != 4*n {
		t.Fatalf("w is %d bytes, want %d", len(w), 4*n)
	}
	for i := 0; i < n; i++ {
		if v := math.Float32frombits(binary.LittleEndian.Uint32(w[4*i:])); v != float32(i) {
			t.Fatalf("element %d is %v, want %d", i, v, i)
		}
	}
	for _, f := range files {
		f.(io.Closer).Close()
	}
}
