package backing

import (
	"bufio"
	"errors"
	"fmt"
	"io"
)

// A stream whose decoded size is not known before it is decoded (an OCI
// .tar+gzip or .tar+zstd layer: gzip's ISIZE is mod 2^32, a zstd frame's
// content size is optional), decoded once for its caller and the cache
// together.

// streamChunk is how much disk a stream being decoded reserves at a
// time.
const streamChunk = 8 << 20

// DecodeStream decodes stream k of file once, now: use reads the decoded
// bytes in order (a tar's headers), and they are kept in an unlinked
// file of the cache's directory, disk reserved within DiskLimit as they
// come (streamChunk at a time, waiting for room as a member's
// inflation does); the rest of the stream, past what use read, is
// decoded too, and the compressed bytes' sha256 checked at the end
// (Stream). It returns the member of those bytes, decoded: named name,
// its Size the decoded size, in memory when that is at most a quarter
// of MemLimit, else in its file; when the cache drops it, a read decodes
// it again from file by k, checked again. Its errors are one phrase:
// use's own as use returned them, a stream that decodes to more than
// DiskLimit, bad data (Stream.Reader's), file's errors as file gave
// them.
func (c *InflateCache) DecodeStream(file MemberFile, name string, k Stream, use func(r io.Reader) error) (Source, error) {
	if msg := k.check(); msg != "" {
		return nil, errors.New(msg)
	}
	f, err := c.newFile()
	if err != nil {
		return nil, fmt.Errorf("cannot make a file to decode it into in %s: %v", c.opts.Dir, err)
	}
	t := &teeSpool{c: c, w: bufio.NewWriterSize(&fileWriter{f}, 1<<20)}
	size, err := t.run(file, k, use)
	if err == nil {
		err = t.w.Flush()
	}
	if err != nil {
		c.release(false, t.reserved)
		f.Close()
		return nil, unmark(err)
	}
	c.release(false, t.reserved-size)
	s := &memberSource{c: c, file: file, m: Member{Name: name, Size: size, Codec: k}}
	if c.inMemory(size) {
		mem := make([]byte, size)
		_, err := f.ReadAt(mem, 0)
		if err == io.EOF && size == 0 {
			err = nil
		}
		f.Close()
		c.release(false, size)
		if err != nil {
			return nil, fmt.Errorf("cannot read back its decoded bytes from their file in %s: %v", c.opts.Dir, err)
		}
		c.reserveMem(size)
		s.mem = mem
	} else {
		s.cached = f
	}
	c.inflations.Add(1)
	s.lastUse.Store(monoNow())
	c.place(s, s.mem != nil)
	return s, nil
}

// teeSpool passes a stream's decoded bytes to a reader and writes them
// to w, reserving disk ahead of them.
type teeSpool struct {
	c        *InflateCache
	r        io.Reader
	w        *bufio.Writer
	n        int64 // bytes written
	reserved int64 // bytes of disk reserved
}

// run decodes the stream, giving it to use, then to its end; it returns
// the decoded size.
func (t *teeSpool) run(file MemberFile, k Stream, use func(r io.Reader) error) (int64, error) {
	r, err := k.open(file)
	if err != nil {
		return 0, err
	}
	defer r.Close()
	t.r = r
	if err := use(t); err != nil {
		return 0, err
	}
	if _, err := io.Copy(io.Discard, t); err != nil {
		return 0, err
	}
	return t.n, nil
}

func (t *teeSpool) Read(p []byte) (int, error) {
	if room := t.reserved - t.n; int64(len(p)) > room {
		want := max(int64(len(p))-room, streamChunk)
		limit := t.c.opts.DiskLimit
		if t.reserved+want > limit {
			want = limit - t.reserved
		}
		if want <= 0 {
			// One byte more says whether the stream goes on.
			if room == 0 {
				var one [1]byte
				n, err := io.ReadFull(t.r, one[:])
				if n > 0 {
					return 0, fmt.Errorf("decodes to more than the %d bytes of disk the cache of inflated members may use (tensorfs --inflate-disk)", limit)
				}
				return 0, err
			}
		} else {
			if err := t.c.reserveDisk(want, true, t.reserved); err != nil {
				return 0, fmt.Errorf("cannot make room to decode it: %v", err)
			}
			t.reserved += want
		}
		if room := t.reserved - t.n; int64(len(p)) > room {
			p = p[:room]
		}
	}
	n, err := t.r.Read(p)
	if n > 0 {
		if _, werr := t.w.Write(p[:n]); werr != nil {
			return 0, fmt.Errorf("cannot write the decoded bytes to their file in %s: %v", t.c.opts.Dir, unmark(werr))
		}
		t.n += int64(n)
	}
	return n, err
}
