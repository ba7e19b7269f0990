package dcp

import (
	"archive/zip"
	"bufio"
	"bytes"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"io"
	"path"
	"slices"
	"sync/atomic"

	"github.com/lazyweights/tensorfs/zstdpool"

	"github.com/lazyweights/tensorfs/dtype"
	"github.com/lazyweights/tensorfs/index"
	"github.com/lazyweights/tensorfs/index/torch"
)

// A zstd chunk item whose chunk is over lazyZstdAbove bytes is not
// decoded at open: its storage is a member of kind index.Decoded whose
// Decode, on first read, decodes the item once, straight into the
// inflate cache. Decoding it at open too (to find the storage record
// through the zip's central directory at the end of the stream) would
// decode every byte twice for a whole read (`load`), and nothing but the
// central directory would be kept of it. Until the first read, only what
// the .metadata says is known of the item (its chunk's dtype, shape and
// byte size, the item's place in its .distcp); Decode checks the rest
// before the member is served: the torch.save zip's records, its pickle
// (one tensor of that dtype and shape, contiguous, at the start of its
// storage), the storage record's place, size and CRC-32. A bad item
// fails its reads with EIO and one log line (backing's inflate cache),
// not the open; `tensorfs check --data` reads it. Smaller chunks are
// decoded at open (readZstdChunk): checked at open, twice decoded at a
// cost of at most this many bytes each.
var lazyZstdAbove int64 = zipHead

// lazyZstdChunk places a zstd chunk item of want bytes (the chunk's, as
// the metadata says: dt, shape) as a member decoded on first read.
func (l *loader) lazyZstdChunk(it Item, want int64, dt dtype.DType, shape []int64, name, where string) chunkItem {
	fi, sec, err := l.itemRange(it, where) // nothing read
	if err != nil {
		return chunkItem{err: err}
	}
	ci := chunkItem{fi: fi, sec: sec}
	if l.dir.MaxDecoded > 0 && want > l.dir.MaxDecoded {
		ci.err = index.ErrorAt(sec, where, "the zstd item's chunk is %d bytes, more than the %d the cache of decoded members may hold (tensorfs --inflate-mem, --inflate-disk)", want, l.dir.MaxDecoded)
		return ci
	}
	z := &zstdChunk{off: it.Offset, length: it.Length, want: want, dt: dt, shape: slices.Clone(shape)}
	l.zmembers = append(l.zmembers, index.Member{File: fi, Name: name, Size: want,
		Kind: &index.Decoded{Decode: z.decode, Read: []index.Part{{Source: fi, Offset: it.Offset, Size: it.Length}}}})
	ci.fi = -len(l.zmembers)
	ci.t = index.Tensor{DType: dt, Shape: slices.Clone(shape), Size: want}
	return ci
}

// zstdChunk is a zstd chunk item read on first read.
type zstdChunk struct {
	off, length int64 // the item in its .distcp
	want        int64 // the chunk's bytes
	dt          dtype.DType
	shape       []int64
}

// decode writes the chunk's bytes to w, decoding the item at z.off of
// file once: the records before the storage lie in the first zipHead
// decoded bytes (walked by their local headers), the storage's bytes are
// written as they are decoded, the rest of the zip is kept at its end
// (zipTail bytes) and checked once the stream ends: the zip and its
// pickle, as at open, and the storage's CRC-32. Errors are one line on
// the item, without the file's name (backing adds it).
func (z *zstdChunk) decode(w io.Writer, file io.ReaderAt) error {
	at := fmt.Sprintf("the zstd item at byte %d", z.off)
	zd, err := zstdpool.NewReader(bufio.NewReaderSize(io.NewSectionReader(file, z.off, z.length), 1<<20))
	if err != nil {
		return fmt.Errorf("%s: cannot start a zstd decoder: %v", at, err)
	}
	defer zd.Close()
	limit := z.want + zipSlack // all the item may decode to
	head := make([]byte, min(zipHead, limit+1))
	n, err := readFull(zd, head)
	ended := err == io.EOF // the stream ended, whole, within head
	if err != nil && !ended {
		return fmt.Errorf("%s is corrupt or cut short, after %d decoded bytes: %s", at, n, zstdpool.Cause(err))
	}
	head = head[:n]
	start, err := storageStart(head)
	if err != nil {
		return fmt.Errorf("%s: %v", at, err)
	}
	tw := &tailWriter{buf: make([]byte, zipTail)}
	tw.Write(head)
	crc := crc32.NewIEEE()
	out := io.MultiWriter(markWriter{w}, crc)
	got := min(int64(len(head))-start, z.want)
	if _, err := out.Write(head[start : start+got]); err != nil {
		return unmark(err)
	}
	if got < z.want {
		if ended {
			return fmt.Errorf("%s ends %d bytes into the chunk's %d (at %d decoded bytes)", at, got, z.want, len(head))
		}
		k, err := io.CopyN(io.MultiWriter(out, tw), zd, z.want-got)
		if err != nil {
			if we, ok := err.(*writeFailed); ok {
				return we.err
			}
			return fmt.Errorf("%s is corrupt or cut short, %d bytes into the chunk's %d: %s", at, got+k, z.want, zstdpool.Cause(err))
		}
	}
	if !ended {
		if _, err := io.Copy(tw, io.LimitReader(zd, limit+1-tw.n)); err != nil {
			return fmt.Errorf("%s is corrupt or cut short, after %d decoded bytes: %s", at, tw.n, zstdpool.Cause(err))
		}
		if tw.n > limit {
			return fmt.Errorf("%s decodes to more than %d bytes, more than its chunk and zip can hold (a zstd bomb?)", at, limit)
		}
	}
	s := tw.sparse(fmt.Sprintf("(zstd item at byte %d)", z.off))
	sub, err := torch.Parse(s)
	if err != nil {
		return fmt.Errorf("%s: %v", at, err)
	}
	if sub.Format != "pytorch" || len(sub.Tensors) != 1 || len(sub.Members) != 0 {
		return fmt.Errorf("%s: want one tensor stored uncompressed, found %d tensors in %d members", at, len(sub.Tensors), len(sub.Members))
	}
	t := &sub.Tensors[0]
	if t.DType != z.dt || !slices.Equal(t.Shape, z.shape) && !(len(t.Shape) == 0 && len(z.shape) == 0) {
		return fmt.Errorf("%s holds a %s tensor of shape %v; the metadata says %s %v", at, t.DType, t.Shape, z.dt, z.shape)
	}
	if t.BigEndian || !rowMajor(t) || t.Offset != start || t.Size != z.want {
		return fmt.Errorf("%s: the chunk is not its storage record's bytes, contiguous, row-major, little-endian", at)
	}
	zr, err := zip.NewReader(s, s.size)
	if err != nil {
		return fmt.Errorf("%s: the decoded item is not a zip file: %v", at, err)
	}
	for _, zf := range zr.File {
		if off, err := zf.DataOffset(); err == nil && off == start {
			if zf.Method != zip.Store || int64(zf.CompressedSize64) != z.want {
				return fmt.Errorf("%s: its storage record %s is not the chunk's %d bytes stored", at, zf.Name, z.want)
			}
			if sum := crc.Sum32(); sum != zf.CRC32 {
				return fmt.Errorf("%s: CRC-32 of its storage record %s is %08x, the zip says %08x", at, zf.Name, sum, zf.CRC32)
			}
			return nil
		}
	}
	return fmt.Errorf("%s: the zip's directory has no record at byte %d, where the storage's local header puts it", at, start)
}

// readFull reads len(b) bytes from r, or up to its end: io.EOF then
// means the stream ended there, whole; any other error is the stream's
// (a cut stream is io.ErrUnexpectedEOF from the decoder itself).
func readFull(r io.Reader, b []byte) (int, error) {
	n := 0
	for n < len(b) {
		k, err := r.Read(b[n:])
		n += k
		if err != nil {
			return n, err
		}
	}
	return n, nil
}

// writeFailed marks an error of the decoded bytes' writer (the cache):
// passed on as it is.
type writeFailed struct{ err error }

func (e *writeFailed) Error() string { return e.err.Error() }

// markWriter marks its writer's errors as writeFailed.
type markWriter struct{ w io.Writer }

func (m markWriter) Write(p []byte) (int, error) {
	n, err := m.w.Write(p)
	if err != nil {
		err = &writeFailed{err}
	}
	return n, err
}

func unmark(err error) error {
	if we, ok := err.(*writeFailed); ok {
		return we.err
	}
	return err
}

// storageStart walks the local headers of a torch.save zip in head (its
// first decoded bytes) to the first storage record (NAME/data/KEY) and
// returns where its data starts. A record written with a data
// descriptor (torch's, flag bit 3: sizes after the data) ends at the
// first descriptor whose CRC-32 and size are those of the bytes before
// it; the walk is checked against the central directory once the stream
// ends.
func storageStart(head []byte) (int64, error) {
	p := 0
	for {
		if p+30 > len(head) || string(head[p:p+4]) != "PK\x03\x04" {
			return 0, fmt.Errorf("no zip record at byte %d of the decoded item (a storage record must start within its first %d bytes)", p, zipHead)
		}
		flags := binary.LittleEndian.Uint16(head[p+6:])
		method := binary.LittleEndian.Uint16(head[p+8:])
		csize := int64(binary.LittleEndian.Uint32(head[p+18:]))
		nl := int(binary.LittleEndian.Uint16(head[p+26:]))
		el := int(binary.LittleEndian.Uint16(head[p+28:]))
		data := p + 30 + nl + el
		if data > len(head) {
			return 0, fmt.Errorf("the zip record at byte %d runs past the first %d decoded bytes", p, len(head))
		}
		name := string(head[p+30 : p+30+nl])
		if dir, base := path.Split(name); path.Base(dir) == "data" && base != "" {
			if method != zip.Store {
				return 0, fmt.Errorf("its storage record %s is compressed (method %d)", index.Printable(name), method)
			}
			return int64(data), nil
		}
		if flags&8 == 0 {
			if csize > int64(len(head)-data) {
				return 0, fmt.Errorf("the zip record %s at byte %d runs past the first %d decoded bytes", index.Printable(name), p, len(head))
			}
			p = data + int(csize)
			continue
		}
		q := descriptorEnd(head, data)
		if q < 0 {
			return 0, fmt.Errorf("the zip record %s at byte %d does not end within the first %d decoded bytes", index.Printable(name), p, len(head))
		}
		p = q
	}
}

// descriptorEnd returns the end of the data descriptor that closes the
// record whose data starts at data (signature, CRC-32, then 32- or
// 64-bit sizes), or -1. The CRC-32 of the bytes before each candidate
// is carried from one to the next: linear in len(head) however many
// candidates it holds.
func descriptorEnd(head []byte, data int) int {
	sum, upto := uint32(0), data // the CRC-32 of head[data:upto]
	for from := data; ; {
		i := bytes.Index(head[from:], []byte("PK\x07\x08"))
		if i < 0 {
			return -1
		}
		c := from + i
		descriptorHashed.Add(int64(c - upto))
		sum, upto = crc32.Update(sum, crc32.IEEETable, head[upto:c]), c
		n := uint64(c - data)
		if c+16 <= len(head) && binary.LittleEndian.Uint32(head[c+4:]) == sum {
			switch {
			case uint64(binary.LittleEndian.Uint32(head[c+8:])) == n:
				return c + 16
			case c+24 <= len(head) && binary.LittleEndian.Uint64(head[c+8:]) == n:
				return c + 24
			}
		}
		from = c + 1
	}
}

// descriptorHashed counts the bytes descriptorEnd hashed (its tests
// check that it is linear).
var descriptorHashed atomic.Int64

// sparse returns the bytes written to w as the zip reader sees them:
// its head and tail kept, zeros between.
func (w *tailWriter) sparse(name string) *sparse {
	s := &sparse{name: name, head: w.head, size: w.n}
	k := min(w.n, zipTail)
	s.tailFrom = w.n - k
	s.tail = make([]byte, k)
	for i := int64(0); i < k; i++ {
		s.tail[i] = w.buf[(s.tailFrom+i)%zipTail]
	}
	return s
}
