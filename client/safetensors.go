package client

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync/atomic"

	"golang.org/x/sys/unix"

	"github.com/lazyweights/tensorfs/backing"
	"github.com/lazyweights/tensorfs/dtype"
	"github.com/lazyweights/tensorfs/view"
)

// SafetensorsFile is a checkpoint as one safetensors file (see
// Checkpoint.Safetensors): exactly the bytes of a mount's
// .safetensors/model.safetensors.
type SafetensorsFile interface {
	io.ReaderAt
	Size() int64
	Close() error
}

// ExportPath is where a mount serves its safetensors export, relative to
// the tree it exports (the mount point, .native/ or a view's directory).
const ExportPath = ".safetensors/model.safetensors"

// Safetensors returns the checkpoint as one safetensors file, in view
// dtype to (F64, F32, F16, BF16: every tensor with a view in it
// converted, the others as stored) or, with AsStored, as stored
// (quantized GGUF tensors as F32). For a checkpoint opened directly it is
// computed from the index (view.Export) and read by range, holding no
// more memory than its header; for a mount it is the mount's
// .safetensors/model.safetensors file. Either way the bytes are the same.
func (c *Checkpoint) Safetensors(to dtype.DType) (SafetensorsFile, error) {
	if to != AsStored && !to.IsFloatView() {
		return nil, fmt.Errorf("%s: %w: %s is not a view dtype (want F64, F32, F16 or BF16)", c.path, ErrNotConvertible, to)
	}
	if c.closed {
		return nil, fmt.Errorf("%s: %w", c.path, os.ErrClosed)
	}
	if c.mount != "" {
		dir := filepath.Join(c.mount, c.nativeDir)
		if to != AsStored {
			dir = filepath.Join(c.mount, "."+strings.ToLower(to.Name()))
		}
		f, err := backing.OpenRegular(filepath.Join(dir, filepath.FromSlash(ExportPath)), 0)
		if err != nil {
			return nil, err
		}
		st, err := f.Stat()
		if err != nil {
			f.Close()
			return nil, err
		}
		return &mountExport{File: f, size: st.Size()}, nil
	}
	x, err := view.NewExport(c.idx, c.files, to)
	if err != nil {
		return nil, fmt.Errorf("%s: %v", c.path, err)
	}
	return directExport{x}, nil
}

type mountExport struct {
	*os.File
	size int64
}

func (m *mountExport) Size() int64 { return m.size }

type directExport struct{ *view.Export }

func (directExport) Close() error { return nil }

// SafetensorsOptions tune WriteSafetensors. The zero value is usable.
type SafetensorsOptions struct {
	// DType is the view dtype of the export (see Safetensors);
	// dtype.Invalid writes the tensors as stored.
	DType dtype.DType
	// Parallel is the number of chunks read at once (default: GOMAXPROCS,
	// at most 4). The memory held is 2×Parallel chunks (one more where
	// the kernel cannot copy_file_range to the output).
	Parallel int
	// ChunkSize is the size of each read (default 4 MiB).
	ChunkSize int
	// Progress, when set, is called from the writing goroutine after
	// each chunk with the bytes written so far and the total.
	Progress func(done, total int64)
}

// WriteSafetensors writes the checkpoint as one safetensors file to w:
// exactly the bytes of Safetensors(opts.DType), in order, with bounded
// memory (2×Parallel+1 chunks of ChunkSize, whatever the checkpoint's
// size).
// Chunks are read Parallel at a time and written in order. When w is an
// *os.File and a tensor is stored contiguously in a source file with a
// descriptor, its bytes are copied by the kernel (copy_file_range), not
// through memory. A tensor stored contiguously in a source that fetches
// ahead (a remote one) is announced to it (Prefetch) and its chunks are
// read in order, one at a time: one GET for the tensor, not one per
// part; the tensors around it are read in parallel still. It returns the
// bytes written; cancelling ctx stops it between chunks with the
// context's cause.
func (c *Checkpoint) WriteSafetensors(ctx context.Context, w io.Writer, opts SafetensorsOptions) (int64, error) {
	sf, err := c.Safetensors(opts.DType)
	if err != nil {
		return 0, err
	}
	defer sf.Close()
	if opts.Parallel <= 0 {
		opts.Parallel = min(4, runtime.GOMAXPROCS(0))
	}
	if opts.ChunkSize <= 0 {
		opts.ChunkSize = 4 << 20
	}
	var x *view.Export
	if d, ok := sf.(directExport); ok {
		x = d.Export
	}
	out, _ := w.(*os.File)
	n, err := writeExport(ctx, w, out, sf, x, opts)
	if err == nil && x != nil {
		err = c.verifyAll() // stored .npz members, read whole: their CRC-32s
	}
	return n, err
}

// chunk is one step of writeExport: a range read into buf by a worker
// (buf != nil), or a range of a source file the writer copies itself.
type chunk struct {
	off, n int64
	buf    []byte
	src    backing.Source // copy [srcOff, srcOff+n) of src (buf == nil)
	srcOff int64
	err    error
	done   chan struct{}
	// after, when set, is closed once the chunk before this one in the
	// same streamed tensor has been read, and read once this one has:
	// the reads of a tensor announced to its source (Prefetch) reach
	// it in order, as one stream.
	after, read chan struct{}
}

func writeExport(ctx context.Context, w io.Writer, out *os.File, ra SafetensorsFile, x *view.Export, opts SafetensorsOptions) (int64, error) {
	size := ra.Size()
	nbuf := 2 * opts.Parallel
	q := &exportQueue{free: make(chan []byte, nbuf), order: make(chan *chunk, nbuf), work: make(chan *chunk, nbuf), stop: make(chan struct{})}
	for range nbuf {
		q.free <- make([]byte, opts.ChunkSize)
	}
	free, order, stop := q.free, q.order, q.stop
	// The producer cuts the file into chunks, in order.
	go q.produce(x, out, size, opts.ChunkSize)
	for range opts.Parallel {
		go q.read(ra)
	}
	var written int64
	var err error
	var spare []byte // copyByReading's buffer, once copy_file_range fails
	for ch := range order {
		if err == nil {
			err = context.Cause(ctx)
		}
		if err != nil {
			break
		}
		<-ch.done
		switch {
		case ch.err != nil:
			err = fmt.Errorf("reading the export at byte %d: %w", ch.off, ch.err)
		case ch.buf == nil:
			progress := func(k int64) {
				written += k
				if opts.Progress != nil {
					opts.Progress(written, size)
				}
			}
			var done int64
			done, err = copyRange(ctx, out, ch.src, ch.srcOff, ch.n, progress)
			if errors.Is(err, errNoCopy) {
				// The pool's buffers may all be in chunks queued behind
				// this one: the fallback has a buffer of its own.
				q.noCopy.Store(true)
				if spare == nil {
					spare = make([]byte, opts.ChunkSize)
				}
				err = copyByReading(ctx, w, spare, ch.src, ch.srcOff+done, ch.n-done, progress)
			}
		default:
			var k int
			k, err = w.Write(ch.buf[:ch.n])
			written += int64(k)
			free <- ch.buf
			if opts.Progress != nil {
				opts.Progress(written, size)
			}
		}
	}
	close(stop)
	for ch := range order { // let the producer and workers finish
		<-ch.done
	}
	return written, err
}

// exportQueue is writeExport's pipeline: the producer cuts the file into
// chunks, in order (order), those to read go to the readers (work) with
// a buffer from free; stop ends the producer early.
type exportQueue struct {
	free        chan []byte
	order, work chan *chunk
	stop        chan struct{}
	// noCopy: the kernel cannot copy_file_range to out (another
	// filesystem on an old kernel...); every range is read from then on.
	noCopy atomic.Bool
}

// produce cuts [0, size) into chunks of at most chunkSize bytes, in
// order: a segment of x that out can copy from its source is one chunk
// to copy, the rest chunks to read.
func (q *exportQueue) produce(x *view.Export, out *os.File, size int64, chunkSize int) {
	free, order, work, stop := q.free, q.order, q.work, q.stop
	defer close(order)
	defer close(work)
	var tensorEnd int64 = -1 // the end of the streamed tensor's data in the export
	var prev chan struct{}   // closed once its last chunk so far is read
	for off := int64(0); off < size; {
		ch := &chunk{off: off, done: make(chan struct{})}
		end := min(size, off+int64(chunkSize))
		if x != nil {
			if off >= tensorEnd {
				tensorEnd, prev = -1, nil
				_, tEnd, src, at, n, ok := x.Stored(off)
				if p := streamed(src, ok, out); p != nil {
					p.Prefetch(at, n)
					tensorEnd, prev = tEnd, make(chan struct{})
					close(prev)
				} else {
					// The chunk ends where a streamed tensor starts.
					for t := tEnd; t < end; {
						_, nEnd, nsrc, _, _, nok := x.Stored(t)
						if streamed(nsrc, nok, out) != nil {
							end = t
						}
						t = nEnd
					}
				}
			}
			if tensorEnd >= 0 {
				end = min(end, tensorEnd) // a chunk never straddles a streamed tensor
				ch.after, ch.read = prev, make(chan struct{})
				prev = ch.read
			}
		}
		if x != nil && out != nil {
			if segEnd, src, at, ok := x.Segment(off); ok && canCopy(src) && !q.noCopy.Load() {
				ch.src, ch.srcOff, ch.n = src, at, segEnd-off
				close(ch.done)
				select {
				case order <- ch:
				case <-stop:
					return
				}
				off = segEnd
				continue
			} else {
				end = min(end, segEnd) // a chunk never straddles a copied range
			}
		}
		ch.n = end - off
		select {
		case ch.buf = <-free:
		case <-stop:
			return
		}
		select {
		case order <- ch:
		case <-stop:
			return
		}
		work <- ch
		off = end
	}
}

// streamed returns the source of a tensor of the export (ok: view.Export.Stored)
// that fetches ahead, which writeExport tells the tensor's range and
// reads it in order, one chunk at a time (a remote source: one GET for
// the tensor, not one per part); nil for any other, and for one the
// writer copies from its file.
func streamed(src backing.Source, ok bool, out *os.File) prefetcher {
	if !ok || out != nil && canCopy(src) {
		return nil
	}
	p, _ := src.(prefetcher)
	return p
}

// read reads the chunks of work from ra into their buffers.
func (q *exportQueue) read(ra SafetensorsFile) {
	for ch := range q.work {
		if ch.after != nil {
			<-ch.after
		}
		n, err := ra.ReadAt(ch.buf[:ch.n], ch.off)
		if ch.read != nil {
			close(ch.read)
		}
		if int64(n) < ch.n {
			if err == nil || err == io.EOF {
				err = io.ErrUnexpectedEOF
			}
			ch.err = err
		}
		close(ch.done)
	}
}

// canCopy reports whether src can be copied from with copy_file_range.
func canCopy(src backing.Source) bool {
	if s, ok := src.(backing.FdSource); ok {
		_, ok := s.Fd()
		return ok
	}
	return false
}

// copyStep bounds one copy_file_range call, so that progress and
// cancellation are seen often.
const copyStep = 64 << 20

// errNoCopy is copyRange's error when the kernel cannot copy_file_range
// between the two files.
var errNoCopy = errors.New("copy_file_range not supported here")

// copyRange copies [off, off+n) of src to out at its current offset with
// copy_file_range and returns the bytes copied; errNoCopy when the kernel
// cannot (different filesystems on old kernels, ...).
func copyRange(ctx context.Context, out *os.File, src backing.Source, off, n int64, progress func(int64)) (int64, error) {
	fd, _ := src.(backing.FdSource).Fd()
	var done int64
	for n > done {
		if err := context.Cause(ctx); err != nil {
			return done, err
		}
		at := off + done
		k, err := unix.CopyFileRange(int(fd), &at, int(out.Fd()), nil, int(min(n-done, copyStep)), 0)
		if err != nil || k == 0 {
			if k == 0 && err == nil {
				return done, fmt.Errorf("copying from %s at byte %d: %w", src.Name(), off+done, io.ErrUnexpectedEOF)
			}
			if errors.Is(err, unix.EXDEV) || errors.Is(err, unix.ENOSYS) || errors.Is(err, unix.EINVAL) || errors.Is(err, unix.EOPNOTSUPP) {
				return done, errNoCopy
			}
			return done, fmt.Errorf("copying from %s at byte %d: %w", src.Name(), off+done, err)
		}
		done += int64(k)
		progress(int64(k))
	}
	return done, nil
}

// copyByReading copies [off, off+n) of src to w through buf.
func copyByReading(ctx context.Context, w io.Writer, buf []byte, src backing.Source, off, n int64, progress func(int64)) error {
	for n > 0 {
		if err := context.Cause(ctx); err != nil {
			return err
		}
		b := buf[:min(n, int64(len(buf)))]
		k, err := src.ReadAt(b, off)
		if k < len(b) {
			if err == nil || err == io.EOF {
				err = io.ErrUnexpectedEOF
			}
			return fmt.Errorf("reading %s at byte %d: %w", src.Name(), off+int64(k), err)
		}
		if _, err := w.Write(b); err != nil {
			return err
		}
		off += int64(k)
		n -= int64(k)
		progress(int64(k))
	}
	return nil
}
