package dcp

import (
	"archive/zip"
	"errors"
	"fmt"
	"io"

	"github.com/lazyweights/tensorfs/index"
	"github.com/lazyweights/tensorfs/index/torch"
	"github.com/lazyweights/tensorfs/zstdpool"
)

// A zstd item (torch >= 2.7's ZStandardTransform) is a zstd stream of
// the torch.save zip of a chunk. A chunk over lazyZstdAbove bytes is
// read on first read instead (zstd_lazy.go); what follows is for the
// smaller ones. Its zip writes sizes after each record
// (data descriptors), so the records are found through the central
// directory at the end: the item is decoded once, streaming, keeping its
// first zipHead bytes (the records before the storage: data.pkl first)
// and last zipTail (the central directory); the storage record's bytes
// between are decoded again, on first read, into the inflate cache (a
// member of kind index.Zstd, checked against the zip's CRC-32).
const (
	zipHead = 1 << 20
	zipTail = 64 << 10
	// zipSlack is what a chunk's zip may hold beside its storage: the
	// decoding stops there (a small item that decodes to more is a
	// bomb, refused).
	zipSlack = 2 << 20
	// maxZstdValue caps the decoded bytes of a zstd non-tensor item.
	maxZstdValue = MaxValue + zipSlack
)

// sparse is a decoded zstd item as the zip reader sees it: the bytes
// kept (head and tail), zeros between (the storage, never read here).
type sparse struct {
	name     string
	head     []byte
	tail     []byte // the last len(tail) bytes
	size     int64
	tailFrom int64
}

func (s *sparse) Name() string { return s.name }
func (s *sparse) Size() int64  { return s.size }

func (s *sparse) ReadAt(p []byte, off int64) (int, error) {
	if off < 0 {
		return 0, errors.New("negative offset")
	}
	if off >= s.size {
		return 0, io.EOF
	}
	n := len(p)
	if int64(n) > s.size-off {
		n = int(s.size - off)
	}
	for i := 0; i < n; i++ {
		o := off + int64(i)
		switch {
		case o >= s.tailFrom:
			p[i] = s.tail[o-s.tailFrom]
		case o < int64(len(s.head)):
			p[i] = s.head[o]
		default:
			p[i] = 0
		}
	}
	if n < len(p) {
		return n, io.EOF
	}
	return n, nil
}

// tailWriter keeps the last bytes written.
type tailWriter struct {
	buf  []byte // ring of zipTail bytes
	n    int64  // bytes written in all
	head []byte // the first zipHead bytes
}

func (w *tailWriter) Write(p []byte) (int, error) {
	if room := zipHead - len(w.head); room > 0 {
		w.head = append(w.head, p[:min(room, len(p))]...)
	}
	q := p
	if len(q) > zipTail {
		w.n += int64(len(q) - zipTail)
		q = q[len(q)-zipTail:]
	}
	for len(q) > 0 { // into the ring, in at most two copies
		k := copy(w.buf[w.n%zipTail:], q)
		w.n += int64(k)
		q = q[k:]
	}
	return len(p), nil
}

// decodeZstd decodes the zstd item sec, refusing more than max bytes.
func decodeZstd(sec section, max int64, where string) (*sparse, error) {
	zd, err := zstdpool.NewReader(sec)
	if err != nil {
		return nil, index.ErrorAt(sec.name, where, "cannot start a zstd decoder: %v", err)
	}
	defer zd.Close()
	w := &tailWriter{buf: make([]byte, zipTail)}
	n, err := io.Copy(w, io.LimitReader(zd, max+1))
	if err != nil {
		return nil, index.ErrorAt(sec.name, where, "the zstd item is corrupt or cut short, after %d decoded bytes: %v", n, zstdpool.Cause(err))
	}
	if n > max {
		return nil, index.ErrorAt(sec.name, where, "the zstd item of %d bytes decodes to more than %d bytes, more than its chunk and zip can hold (a zstd bomb?)", sec.Size(), max)
	}
	s := &sparse{name: sec.name + " (zstd)", head: w.head, size: n}
	k := min(n, zipTail)
	s.tailFrom = n - k
	s.tail = make([]byte, k)
	for i := int64(0); i < k; i++ {
		s.tail[i] = w.buf[(s.tailFrom+i)%zipTail]
	}
	return s, nil
}

// readZstdChunk reads the one tensor of a zstd chunk item whose chunk
// holds want bytes: its member (l.zmembers) and the tensor's offset in
// it.
func (l *loader) readZstdChunk(it Item, want int64, where string) chunkItem {
	fi, sec, err := l.itemFile(it, where)
	if err != nil {
		return chunkItem{err: err}
	}
	ci := chunkItem{fi: fi, sec: sec.name}
	if l.dir.MaxDecoded > 0 && want > l.dir.MaxDecoded {
		ci.err = index.ErrorAt(sec.name, where, "the zstd item's chunk is %d bytes, more than the %d the cache of decoded members may hold (tensorfs --inflate-mem, --inflate-disk)", want, l.dir.MaxDecoded)
		return ci
	}
	s, err := decodeZstd(sec, want+zipSlack, where)
	if err != nil {
		ci.err = err
		return ci
	}
	sub, err := torch.Parse(s)
	if err != nil {
		ci.err = err
		return ci
	}
	if sub.Format != "pytorch" || len(sub.Tensors) != 1 || len(sub.Members) != 0 {
		ci.err = index.ErrorAt(s.name, where, "want one tensor stored uncompressed, found %d tensors in %d members", len(sub.Tensors), len(sub.Members))
		return ci
	}
	t := &sub.Tensors[0]
	if t.BigEndian || !rowMajor(t) {
		ci.err = index.ErrorAt(s.name, where, "the chunk is not stored contiguously, row-major, little-endian")
		return ci
	}
	// The storage record holding the tensor: its bytes are the member.
	zr, err := zip.NewReader(s, s.size)
	if err != nil {
		ci.err = index.ErrorAt(s.name, where, "the decoded item is not a zip file: %v", err)
		return ci
	}
	var rec *zip.File
	var recOff int64
	for _, zf := range zr.File {
		off, err := zf.DataOffset()
		if err != nil {
			continue
		}
		size := int64(zf.CompressedSize64)
		if zf.Method == zip.Store && off <= t.Offset && t.Size <= size && t.Offset-off <= size-t.Size && size >= 0 {
			if rec == nil || size < int64(rec.CompressedSize64) {
				rec, recOff = zf, off
			}
		}
	}
	if rec == nil {
		ci.err = index.ErrorAt(s.name, where, "the chunk's bytes lie in no stored record of the zip")
		return ci
	}
	size := int64(rec.CompressedSize64)
	name := fmt.Sprintf("%s (item at byte %d)", rec.Name, it.Offset)
	l.zmembers = append(l.zmembers, index.Member{File: fi, Name: name, Size: size,
		Kind: &index.Zstd{Offset: it.Offset, CompressedSize: it.Length, Skip: recOff, CRC32: rec.CRC32}})
	ci.fi = -len(l.zmembers) // a member: placed after the files (build)
	t.Offset -= recOff
	ci.t = *t
	return ci
}

// zstdValue decodes a zstd non-tensor item, of at most maxZstdValue
// bytes.
func zstdValue(sec section) ([]byte, error) {
	zd, err := zstdpool.NewReader(sec)
	if err != nil {
		return nil, err
	}
	defer zd.Close()
	data, err := io.ReadAll(io.LimitReader(zd, maxZstdValue+1))
	if err != nil {
		return nil, fmt.Errorf("the zstd item is corrupt: %s", zstdpool.Cause(err))
	}
	if len(data) > maxZstdValue {
		return nil, fmt.Errorf("the zstd item decodes to more than %d bytes", maxZstdValue)
	}
	return data, nil
}
