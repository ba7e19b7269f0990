package client

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"
	"sort"
	"sync"
	"sync/atomic"

	"github.com/lazyweights/tensorfs/backing"
	"github.com/lazyweights/tensorfs/dtype"
)

// Fill is Stream without order: it copies every selected tensor's bytes
// into buffers that the sink supplies, from many goroutines at once, and
// tells the sink where each chunk belongs. It is the engine of an upload
// whose destination is addressed by (tensor, offset), such as GPU memory
// reserved for the whole checkpoint up front.
//
//   - Chunks of one tensor are read concurrently and arrive in any order,
//     so one huge tensor is copied by every worker, not by one.
//   - Tensors whose delivered bytes are one contiguous range of a local or
//     remote file are read by file range: a chunk may hold the tail of
//     one tensor and several small ones after it (Segments say which), so
//     a checkpoint of many small tensors costs few large reads.
//   - A local file that is not in the page cache (FillOptions.Read) is
//     read with O_DIRECT straight into the sink's buffers, at aligned
//     offsets, so that loading it does not fill the page cache with bytes
//     that now live elsewhere.
//   - Converted, strided and quantized tensors, and every tensor of a
//     mount, are read through their TensorReader, one chunk per job, the
//     conversion done by the worker that reads the chunk.

// FillSink receives the chunks of a Fill. Buffers and Reclaim are as for
// Stream (the buffers should all have one length, a multiple of 4 KiB for
// O_DIRECT reads straight into them; page-aligned memory too).
type FillSink interface {
	BufferProvider
	// Fill is called once buffer i holds a chunk: buf is Buffers()[i]
	// cut to the bytes read, and each Segment says which of them belong
	// to which tensor at which offset. The sink owns buffer i until
	// Reclaim(i). Calls for different buffers run concurrently.
	Fill(i int, buf []byte, segs []Segment) error
}

// Segment is a run of bytes in a Fill buffer: buf[BufOff:BufOff+N] are
// the delivered bytes [Off, Off+N) of FillTensors[Tensor].
type Segment struct {
	Tensor int
	Off    int64
	BufOff int
	N      int
}

// FillTensor is a tensor a Fill delivers: Size bytes of DType; with
// Split set, only that part of it (Size is the part's; its shape is
// Split.SliceShape(Info.Shape)).
type FillTensor struct {
	Info  TensorInfo
	DType dtype.DType
	Size  int64
	Split *Split
}

// ReadPath says how Fill reads a checkpoint file.
type ReadPath uint8

const (
	// ReadAuto reads a file through the page cache when most of it is
	// there (backing.Residency ≥ ColdResidency) and with O_DIRECT when it
	// is not.
	ReadAuto ReadPath = iota
	// ReadCached always reads through the checkpoint's own source.
	ReadCached
	// ReadDirect reads local files with O_DIRECT (falling back to the page
	// cache, and saying so, where the filesystem refuses it).
	ReadDirect
)

func (p ReadPath) String() string {
	switch p {
	case ReadAuto:
		return "auto"
	case ReadCached:
		return "page cache"
	case ReadDirect:
		return "O_DIRECT"
	}
	return fmt.Sprintf("ReadPath(%d)", uint8(p))
}

// ColdResidency is the fraction of a file's sampled pages in the page
// cache under which ReadAuto reads it with O_DIRECT.
const ColdResidency = 0.5

// FillOptions tune Fill. The zero value is usable.
type FillOptions struct {
	// DType converts tensors as StreamOptions.DType does.
	DType dtype.DType
	// Filter, when set, selects the tensors (as for Stream).
	Filter func(TensorInfo) bool
	// Workers is the number of goroutines reading chunks (default
	// GOMAXPROCS, at least 2, at most 64).
	Workers int
	// Read chooses the page cache or O_DIRECT per file (default ReadAuto).
	Read ReadPath
	// Progress, when set, is called after every chunk with its bytes,
	// from the workers, concurrently.
	Progress func(n int64)
	// Split, when set, gives each tensor the part of it to deliver, or
	// nil to deliver it whole, as StreamOptions.Split does: PlanFill
	// sizes each tensor's part (and fails with ErrNoPart for a part that
	// does not exist), and Fill reads only the part's bytes. A part of
	// dim 0 of a tensor stored as one range is read by file range like
	// a whole tensor; other parts through their readers.
	Split func(TensorInfo) *Split
}

func (o FillOptions) workers() int {
	if o.Workers > 0 {
		return min(o.Workers, 64)
	}
	return min(max(runtime.GOMAXPROCS(0), 2), 64)
}

// FileRead reports how Fill read one checkpoint file.
type FileRead struct {
	Source   string
	Path     ReadPath // ReadCached or ReadDirect: what ran
	Resident float64  // sampled page-cache residency before reading; -1 when unknown
	Note     string   // why, when it is not what was asked
	Bytes    int64    // bytes read from it by file range

	index int // in c.files
}

// FillStats says what a Fill did.
type FillStats struct {
	Bytes     int64 // tensor bytes delivered
	ReadBytes int64 // bytes read by file range (delivered plus gaps and alignment)
	Chunks    int64
	Workers   int
	Files     []FileRead // local or remote files read by range, in source order
}

// PlanFill returns the tensors a Fill with opts delivers, in index
// order, with their delivered dtype and size: what a sink must make room
// for before the Fill starts.
func (c *Checkpoint) PlanFill(opts FillOptions) ([]FillTensor, error) {
	if opts.DType != dtype.Invalid && !opts.DType.IsFloatView() {
		return nil, fmt.Errorf("%s: %w: %s is not a view dtype (want F64, F32, F16 or BF16)", c.path, ErrNotConvertible, opts.DType)
	}
	var out []FillTensor
	for _, t := range c.tensors {
		if !t.Listed(opts.DType) || (opts.Filter != nil && !opts.Filter(t)) {
			continue
		}
		to := opts.DType
		if to == AsStored || !c.convertible(t, to) {
			to = t.DType
		}
		size := t.Size
		if to != t.DType {
			n, ok := to.ByteSize(t.NumElements())
			if !ok {
				return nil, fmt.Errorf("%s: tensor %q: %s size overflows", c.path, t.Name, to)
			}
			size = n
		}
		var part *Split
		if opts.Split != nil {
			if sp := opts.Split(t); sp != nil {
				s := *sp
				_, n, _, err := checkPart(t, to, s)
				if err != nil {
					return nil, &TensorError{Source: c.path, Name: t.Name, Op: "plan", Off: -1, Err: err}
				}
				part, size = &s, n
			}
		}
		out = append(out, FillTensor{Info: t, DType: to, Size: size, Split: part})
	}
	return out, nil
}

// fillJob is one chunk: a file range holding segs (file >= 0), or
// [off, off+n) of tensor tensor read through its reader (file < 0).
type fillJob struct {
	file   int
	start  int64 // file offset of the range
	length int   // bytes of the range the segments need
	segs   []Segment

	tensor int
	off    int64
	n      int
}

const (
	fillAlign  = 4096    // O_DIRECT alignment of file offsets and buffers
	fillMaxGap = 1 << 20 // a gap between tensors above this starts a new chunk
)

// Fill delivers tensors (from PlanFill) into sink. It returns when every
// chunk read has been handed to the sink (the sink may still be copying:
// waiting for that is the sink's business), with the first error, a
// *TensorError naming a tensor for read and sink errors, or the context's
// cause.
func (c *Checkpoint) Fill(ctx context.Context, tensors []FillTensor, sink FillSink, opts FillOptions) (FillStats, error) {
	stats := FillStats{Workers: opts.workers()}
	if sink == nil {
		return stats, errors.New("client: Fill: nil sink")
	}
	bufs, chunk, err := sinkBuffers(sink)
	if err != nil {
		return stats, err
	}
	if err := context.Cause(ctx); err != nil {
		return stats, err
	}
	if c.closed {
		return stats, fmt.Errorf("%s: %w", c.path, os.ErrClosed)
	}

	jobs, ranged := c.fillJobs(tensors, chunk)
	readers, files, closeAll, err := c.fillReaders(ranged, opts.Read)
	if err != nil {
		return stats, err
	}
	defer closeAll()
	stats.Files = files
	aligned := chunk >= fillAlign && chunk%fillAlign == 0

	// Tensors read through their readers: opened on first use, shared by
	// the jobs of that tensor, closed with the Fill.
	open := &fillTensorReaders{c: c, tensors: tensors, open: map[int]*TensorReader{}}
	defer open.closeAll()
	reader := open.get

	pool := sinkPool(sink, bufs)
	var (
		delivered, readBytes, count atomic.Int64
		perFile                     = make([]atomic.Int64, len(c.files))
	)
	run := func(ctx context.Context, j *fillJob) error {
		b, err := pool.get(ctx)
		if err != nil {
			if ctx.Err() == nil {
				name := tensors[j.tensor].Info.Name
				if j.file >= 0 {
					name = tensors[j.segs[0].Tensor].Info.Name
				}
				err = &TensorError{Source: c.path, Name: name, Op: "sink reclaim", Off: -1, Err: err}
			}
			return err
		}
		defer pool.put(b)
		var buf []byte
		segs := j.segs
		var n int64
		if j.file >= 0 {
			if err := c.fillRange(readers[j.file], aligned, b.buf, j, tensors); err != nil {
				return err
			}
			buf = b.buf[:j.length]
			readBytes.Add(int64(j.length))
			perFile[j.file].Add(int64(j.length))
			for _, s := range segs {
				n += int64(s.N)
			}
		} else {
			r, err := reader(j.tensor)
			if err != nil {
				return err
			}
			if _, err := r.ReadAt(b.buf[:j.n], j.off); err != nil {
				return err
			}
			buf = b.buf[:j.n]
			segs = []Segment{{Tensor: j.tensor, Off: j.off, N: j.n}}
			n = int64(j.n)
		}
		if err := sink.Fill(b.i, buf, segs); err != nil {
			s := segs[0]
			return &TensorError{Source: c.path, Name: tensors[s.Tensor].Info.Name, Op: "sink write", Off: s.Off, Err: err}
		}
		delivered.Add(n)
		count.Add(1)
		if opts.Progress != nil {
			opts.Progress(n)
		}
		return nil
	}
	err = forEach(ctx, len(jobs), stats.Workers, func(ctx context.Context, i int) error {
		return run(ctx, &jobs[i])
	})
	if err == nil {
		err = c.verifyFilled(tensors)
	}
	stats.Bytes, stats.ReadBytes, stats.Chunks = delivered.Load(), readBytes.Load(), count.Load()
	for i := range stats.Files {
		stats.Files[i].Bytes = perFile[stats.Files[i].index].Load()
	}
	return stats, err
}

// sinkBuffers are the sink's buffers, each non-empty, and the chunk size
// (the smallest).
func sinkBuffers(sink FillSink) ([][]byte, int, error) {
	bufs := sink.Buffers()
	if len(bufs) == 0 {
		return nil, 0, errors.New("client: sink supplied no buffers")
	}
	chunk := len(bufs[0])
	for i, b := range bufs {
		if len(b) == 0 {
			return nil, 0, fmt.Errorf("client: sink buffer %d is empty", i)
		}
		chunk = min(chunk, len(b))
	}
	return bufs, chunk, nil
}

// sinkPool is the pool of the sink's buffers, all free.
func sinkPool(sink FillSink, bufs [][]byte) *pool {
	pool := &pool{provider: sink, free: make(chan chunkBuf, len(bufs))}
	for i, b := range bufs {
		pool.free <- chunkBuf{i, b}
	}
	return pool
}

// fillTensorReaders are the readers of the tensors a Fill reads through
// a reader, opened on first use and shared by that tensor's jobs.
type fillTensorReaders struct {
	c       *Checkpoint
	tensors []FillTensor
	mu      sync.Mutex
	open    map[int]*TensorReader // GUARDED_BY(mu)
}

// get returns tensor k's reader, opening it on first use.
func (o *fillTensorReaders) get(k int) (*TensorReader, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if r, ok := o.open[k]; ok {
		return r, nil
	}
	r, err := o.c.openPart(o.tensors[k].Info, o.tensors[k].DType, o.tensors[k].Split)
	if err != nil {
		return nil, err
	}
	o.open[k] = r
	return r, nil
}

// closeAll closes the readers opened.
func (o *fillTensorReaders) closeAll() {
	for _, r := range o.open {
		r.Close()
	}
}

// fillRange reads file-range job j into buf through r (with O_DIRECT,
// whole aligned blocks straight into the buffer).
func (c *Checkpoint) fillRange(r fillReader, aligned bool, buf []byte, j *fillJob, tensors []FillTensor) error {
	want := j.length
	if aligned && r.direct {
		// Whole aligned blocks straight into the buffer.
		want = min((want+fillAlign-1)&^(fillAlign-1), len(buf))
	}
	got, err := r.src.ReadAt(buf[:want], j.start)
	if got < j.length {
		if err == nil || err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		s := j.segs[0]
		return &TensorError{Source: c.path, Name: tensors[s.Tensor].Info.Name, Op: "read", Off: s.Off, Err: err}
	}
	return nil
}

// verifyFilled checks the CRC-32s of the stored .npz members read whole.
func (c *Checkpoint) verifyFilled(tensors []FillTensor) error {
	for _, t := range tensors {
		if t.Split == nil {
			if err := c.verify(t.Info); err != nil {
				return err
			}
		}
	}
	return nil
}

// fillJobs cuts the tensors into chunk jobs: file-range jobs for the
// tensors whose delivered bytes are one range of a checkpoint file, in
// file order, then one job per chunk of each other tensor. ranged[f]
// reports that file f is read by range.
func (c *Checkpoint) fillJobs(tensors []FillTensor, chunk int) (jobs []fillJob, ranged map[int]bool) {
	type span struct {
		k        int // index in tensors
		off, end int64
	}
	byFile := map[int][]span{}
	var other []int
	for k, ft := range tensors {
		if ft.Size == 0 {
			continue
		}
		if c.mount == "" && ft.DType == ft.Info.DType {
			it := &c.idx.Tensors[ft.Info.Index]
			first, size, one := int64(0), it.Size, true
			if ft.Split != nil {
				var err error
				if first, size, one, err = checkPart(ft.Info, ft.DType, *ft.Split); err != nil || size != ft.Size {
					one = false // its reader says why
				}
			}
			if it.Contiguous() && one {
				off := it.Offset + first
				byFile[it.Source] = append(byFile[it.Source], span{k, off, off + size})
				continue
			}
		}
		other = append(other, k)
	}
	align := int64(1)
	if chunk >= fillAlign && chunk%fillAlign == 0 {
		align = fillAlign
	}
	ranged = map[int]bool{}
	fileIDs := make([]int, 0, len(byFile))
	for f := range byFile {
		fileIDs = append(fileIDs, f)
	}
	sort.Ints(fileIDs)
	for _, f := range fileIDs {
		spans := byFile[f]
		sort.SliceStable(spans, func(a, b int) bool { return spans[a].off < spans[b].off })
		// Tensors that share bytes with an earlier one (shared storage)
		// are read through their readers: segments never overlap.
		kept := spans[:0]
		var reach int64 = -1
		for _, s := range spans {
			if s.off < reach {
				other = append(other, s.k)
				continue
			}
			kept = append(kept, s)
			reach = s.end
		}
		spans = kept
		if len(spans) == 0 {
			continue
		}
		ranged[f] = true
		j, pos := 0, spans[0].off
		for j < len(spans) {
			start := pos &^ (align - 1)
			end := start + int64(chunk)
			job := fillJob{file: f, start: start, tensor: -1}
			var covered int64
			for j < len(spans) && pos < end {
				s := spans[j]
				if len(job.segs) > 0 && pos == s.off && s.off-covered > fillMaxGap {
					break
				}
				segEnd := min(s.end, end)
				job.segs = append(job.segs, Segment{Tensor: s.k, Off: pos - s.off, BufOff: int(pos - start), N: int(segEnd - pos)})
				covered = segEnd
				if segEnd < s.end {
					pos = segEnd
					break
				}
				j++
				if j < len(spans) {
					pos = spans[j].off
				}
			}
			job.length = int(covered - start)
			jobs = append(jobs, job)
		}
	}
	sort.Ints(other)
	for _, k := range other {
		size := tensors[k].Size
		for off := int64(0); off < size; off += int64(chunk) {
			jobs = append(jobs, fillJob{file: -1, tensor: k, off: off, n: int(min(int64(chunk), size-off))})
		}
	}
	return jobs, ranged
}

type fillReader struct {
	src    io.ReaderAt
	direct bool
}

// fillReaders chooses, for each file read by range, the page cache or
// O_DIRECT, and opens the O_DIRECT sources.
func (c *Checkpoint) fillReaders(ranged map[int]bool, path ReadPath) ([]fillReader, []FileRead, func(), error) {
	readers := make([]fillReader, len(c.files))
	var reports []FileRead
	var opened []backing.Source
	closeAll := func() {
		for _, s := range opened {
			s.Close()
		}
	}
	for f, src := range c.files {
		readers[f] = fillReader{src: src}
		if !ranged[f] {
			continue
		}
		rep := FileRead{Source: c.idx.SourceName(f), Path: ReadCached, Resident: -1, index: f}
		frac, known := backing.Residency(src)
		if known {
			rep.Resident = frac
		}
		direct := false
		switch path {
		case ReadDirect:
			direct = true
			if _, isFd := src.(backing.FdSource); !isFd {
				direct = false
				rep.Note = "not a local file"
			}
		case ReadAuto:
			direct = known && frac < ColdResidency
		}
		if direct {
			d, err := backing.Open(c.idx.SourceName(f), backing.Options{Mode: backing.Direct})
			switch {
			case err == nil && d.Size() != src.Size():
				d.Close()
				rep.Note = "the file changed size since it was opened"
			case err == nil:
				opened = append(opened, d)
				readers[f] = fillReader{src: d, direct: true}
				rep.Path = ReadDirect
			case errors.Is(err, backing.ErrDirectUnsupported):
				rep.Note = "the filesystem refuses O_DIRECT"
			default:
				closeAll()
				return nil, nil, nil, err
			}
		}
		reports = append(reports, rep)
	}
	return readers, reports, closeAll, nil
}

// Mapping returns the mapping of the checkpoint file that holds t's
// native bytes, and their offset in it, when that file is mapped
// (opened with backing.Mmap) and t is one contiguous range of it: for a
// caller that reads the bytes in place, such as a GPU upload that
// registers the mapping for DMA. ok is false otherwise (a mount, a remote
// or pread source, a strided tensor). The mapping is valid until Close.
func (c *Checkpoint) Mapping(t TensorInfo) (file []byte, off int64, ok bool) {
	if c.mount != "" || c.files == nil || c.idx == nil || t.Index < 0 || t.Index >= len(c.idx.Tensors) {
		return nil, 0, false
	}
	it := &c.idx.Tensors[t.Index]
	if !it.Contiguous() {
		return nil, 0, false
	}
	m, isMapped := c.files[it.Source].(backing.Mapper)
	if !isMapped {
		return nil, 0, false
	}
	data := m.Mapping()
	if data == nil || it.Offset+it.Size > int64(len(data)) {
		return nil, 0, false
	}
	return data, it.Offset, true
}
