package dcp

import (
	"bytes"
	"encoding/binary"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/lazyweights/tensorfs/index"
)

// TestZstdLazy: a zstd chunk item over lazyZstdAbove bytes is not read
// at open (ParseDir reads none of its bytes) and is decoded once, on
// first read, reading its item once: the bytes are those the item
// decoded at open gives. A bad item (cut short, a bomb, not zstd, its
// storage's CRC-32 wrong, another dtype than the metadata's) loads and
// fails its decoding in one line.
func TestZstdLazy(t *testing.T) {
	const wq = "model.layers.0.attention.wq.weight" // [24,16] in two chunks along dim 0
	flipStorage := func(b []byte) []byte {
		b = bytes.Clone(b)
		i := bytes.Index(b, []byte("/data/0"))
		if i < 0 {
			t.Fatal("no storage record in the item")
		}
		p := bytes.LastIndex(b[:i], []byte("PK\x03\x04"))
		nl := int(b[p+26]) | int(b[p+27])<<8
		el := int(b[p+28]) | int(b[p+29])<<8
		b[p+30+nl+el+5] ^= 0x10 // a storage byte: the zip's CRC-32 no longer holds
		return zstdEncode(b)
	}
	cases := []struct {
		name string
		enc  func([]byte) []byte
		err  string
	}{
		{"as torch writes it", zstdEncode, ""},
		{"cut short", func(b []byte) []byte { z := zstdEncode(b); return z[:len(z)-9] }, "corrupt or cut short"},
		{"bomb", func([]byte) []byte { return rleBomb(8192) }, ""}, // see below: zeros, not a zip
		{"not zstd", func(b []byte) []byte { return b }, "corrupt or cut short"},
		{"storage CRC-32", flipStorage, "CRC-32 of its storage record"},
	}
	// Eager: the bytes as the item decoded at open gives them.
	md, dir := baseDCP(t, "dcp_ws2")
	zstdItems(t, md, dir, wq, zstdEncode)
	if err := os.WriteFile(filepath.Join(dir, MetadataName), encode(md, hostile{}), 0o644); err != nil {
		t.Fatal(err)
	}
	want := tensorBytes(t, dir, wq)

	defer func(v int64) { lazyZstdAbove = v }(lazyZstdAbove)
	lazyZstdAbove = 0
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			md, dir := baseDCP(t, "dcp_ws2")
			zstdItems(t, md, dir, wq, c.enc)
			if err := os.WriteFile(filepath.Join(dir, MetadataName), encode(md, hostile{}), 0o644); err != nil {
				t.Fatal(err)
			}
			var items int64
			for _, it := range md.Storage {
				if it.Transform == TransformZstd {
					items += it.Length
				}
			}
			var read atomic.Int64 // bytes of the zstd items read
			open := func(p string) (index.File, error) {
				f, err := openPread(p)
				if err != nil || !strings.HasSuffix(p, ".distcp") {
					return f, err
				}
				var in []Item
				for _, it := range md.Storage {
					if it.Transform == TransformZstd && it.RelativePath == filepath.Base(p) {
						in = append(in, it)
					}
				}
				return itemCounter{f, in, &read}, nil
			}
			names, mp := dirFiles(t, dir)
			meta, err := openPread(mp)
			if err != nil {
				t.Fatal(err)
			}
			defer meta.(io.Closer).Close()
			idx, files, err := ParseDir(Dir{Path: dir, Files: names, Open: open}, meta)
			if err != nil {
				t.Fatalf("open: %v", err)
			}
			defer func() {
				for _, f := range files {
					f.(io.Closer).Close()
				}
			}()
			if read.Load() != 0 {
				t.Errorf("open read %d bytes of the zstd items, want none (they are read on first read)", read.Load())
			}
			var got []byte
			var errs []string
			n := 0
			for _, m := range idx.Members {
				d, ok := m.Kind.(*index.Decoded)
				if !ok {
					continue
				}
				n++
				before := read.Load()
				var b bytes.Buffer
				err := d.Decode(&b, files[m.File])
				if r := read.Load() - before; r > d.Read[0].Size {
					t.Errorf("%s: decoding read %d bytes of its %d-byte item", m.Name, r, d.Read[0].Size)
				}
				if err != nil {
					errs = append(errs, err.Error())
					continue
				}
				if int64(b.Len()) != m.Size {
					t.Errorf("%s: %d bytes decoded, want %d", m.Name, b.Len(), m.Size)
				}
				got = append(got, b.Bytes()...)
			}
			if n != 2 {
				t.Fatalf("%d lazily decoded members, want 2", n)
			}
			if read.Load() > items {
				t.Errorf("%d bytes of the zstd items read in all, more than their %d", read.Load(), items)
			}
			switch {
			case c.name == "bomb":
				if len(errs) != 2 || !strings.Contains(errs[0], "no zip record") {
					t.Errorf("errors %q, want a bomb of zeros refused at its first bytes", errs)
				}
			case c.err == "":
				if len(errs) > 0 || !bytes.Equal(got, want) {
					t.Errorf("errors %q; %d bytes, equal to the eager decoding's %d: %v", errs, len(got), len(want), bytes.Equal(got, want))
				}
			default:
				if len(errs) == 0 {
					t.Fatalf("decoded, want %q", c.err)
				}
				for _, e := range errs {
					if !strings.Contains(e, c.err) || strings.Contains(e, "\n") {
						t.Errorf("error %q, want one line with %q", e, c.err)
					}
				}
			}
		})
	}
}

// itemCounter counts the bytes of items read through it.
type itemCounter struct {
	index.File
	items []Item
	n     *atomic.Int64
}

func (c itemCounter) ReadAt(p []byte, off int64) (int, error) {
	k, err := c.File.ReadAt(p, off)
	for _, it := range c.items {
		if lo, hi := max(off, it.Offset), min(off+int64(k), it.Offset+it.Length); hi > lo {
			c.n.Add(hi - lo)
		}
	}
	return k, err
}

func (c itemCounter) Close() error { return c.File.(io.Closer).Close() }

// dirFiles lists dir and its .metadata.
func dirFiles(t *testing.T, dir string) ([]string, string) {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range ents {
		names = append(names, filepath.Join(dir, e.Name()))
	}
	mp, ok := MetadataFile(names)
	if !ok {
		t.Fatal("no .metadata")
	}
	return names, mp
}

// tensorBytes loads dir and returns the bytes of tensor name.
func tensorBytes(t *testing.T, dir, name string) []byte {
	t.Helper()
	idx, files, err := load(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		for _, f := range files {
			f.(io.Closer).Close()
		}
	}()
	for _, tn := range idx.Tensors {
		if tn.Name == name || idx.Keys[tn.Name] == name {
			b := make([]byte, tn.Size)
			if _, err := files[tn.Source].ReadAt(b, tn.Offset); err != nil && err != io.EOF {
				t.Fatal(err)
			}
			return b
		}
	}
	t.Fatalf("no tensor %s", name)
	return nil
}

// limitWriter is what the inflate cache gives a decoder: at most n
// bytes.
type limitWriter struct {
	b bytes.Buffer
	n int64
}

func (w *limitWriter) Write(p []byte) (int, error) {
	if int64(len(p)) > w.n-int64(w.b.Len()) {
		return 0, io.ErrShortWrite
	}
	return w.b.Write(p)
}

// FuzzZstdLazy: a zstd chunk item of any bytes, decoded on first read,
// writes the chunk's bytes or fails in one line, never a panic, never
// more than the chunk.
func FuzzZstdLazy(f *testing.F) {
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
					if it.Transform == TransformZstd && it.Offset+it.Length <= int64(len(data)) {
						f.Add(data[it.Offset : it.Offset+it.Length])
					}
				}
			}
		}
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		for _, want := range []int64{4, 768, 4096} {
			z := &zstdChunk{off: 0, length: int64(len(data)), want: want, dt: index.Tensor{}.DType, shape: []int64{want}}
			w := &limitWriter{n: want}
			err := z.decode(w, bytes.NewReader(data))
			if err != nil {
				if strings.Contains(err.Error(), "\n") {
					t.Fatalf("two lines: %v", err)
				}
				continue
			}
			if int64(w.b.Len()) != want {
				t.Fatalf("decoded %d bytes, want %d", w.b.Len(), want)
			}
		}
	})
}

// TestDescriptorScanLinear: a record's end is looked for in a head full
// of descriptor signatures (64 KiB of "PK\x07\x08") in linear time: the
// CRC-32 is carried from candidate to candidate, not recomputed (which
// was 2^14 candidates of up to 64 KiB each).
func TestDescriptorScanLinear(t *testing.T) {
	head := bytes.Repeat([]byte("PK\x07\x08"), 64<<10/4)
	before := descriptorHashed.Load()
	if got := descriptorEnd(head, 0); got != -1 {
		t.Fatalf("end %d in a head of signatures", got)
	}
	if n := descriptorHashed.Load() - before; n > int64(len(head)) {
		t.Errorf("%d bytes hashed to scan %d", n, len(head))
	}
	// A real one after them is still found.
	data := bytes.Repeat([]byte("PK\x07\x08"), 1000)
	d := binary.LittleEndian.AppendUint32([]byte("PK\x07\x08"), crc32.ChecksumIEEE(data))
	d = binary.LittleEndian.AppendUint32(d, uint32(len(data)))
	d = binary.LittleEndian.AppendUint32(d, uint32(len(data)))
	if got := descriptorEnd(append(data, d...), 0); got != len(data)+16 {
		t.Fatalf("end %d, want %d", got, len(data)+16)
	}
}
