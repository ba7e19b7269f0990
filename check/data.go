package check

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"

	"github.com/lazyweights/tensorfs/backing"
	"github.com/lazyweights/tensorfs/dtype"
	"github.com/lazyweights/tensorfs/index"
	"github.com/lazyweights/tensorfs/view"
)

// DataOptions configure Data.
type DataOptions struct {
	// Values counts the NaN and Inf values of every tensor that has a
	// float32 view (floating point and quantized dtypes), on the values
	// as that view converts them (DataReport.Tensors).
	Values bool
}

// TensorValues is what Data found in one tensor's values.
type TensorValues struct {
	Name     string `json:"name"`
	DType    string `json:"dtype"`
	Elements int64  `json:"elements"`
	NaN      int64  `json:"nan"`
	Inf      int64  `json:"inf"`
}

// FileDigest is a file whose source states the sha256 of its whole
// bytes (an hf:// file in Git LFS: the Hub's X-Linked-Etag), and what
// Data found hashing it.
type FileDigest struct {
	File   string `json:"file"`
	SHA256 string `json:"sha256"`           // as the source states it
	Status string `json:"status"`           // "sha256 ok", "sha256 mismatch" or "read error"
	Got    string `json:"actual,omitempty"` // the bytes' sha256 when it differs
}

// DataReport is what Data read.
type DataReport struct {
	// Bytes are the bytes of the checkpoint read: every stored tensor's
	// (a stored zip member's whole, header included, for its CRC-32; a
	// file hashed whole, from byte 0 to its end), never the values a
	// quantized weight dequantizes to, which Dequantized counts.
	Bytes int64
	// Dequantized are the quantized weights read as their values
	// (index.RoleLogical: their parts dequantized), and DequantizedBytes
	// the float32 values they made, over and above Bytes.
	Dequantized      int
	DequantizedBytes int64
	CRCs             int            // stored members whose CRC-32 was checked
	SHA1s            int            // ONNX tensors whose external data SHA-1 was checked
	Tensors          []TensorValues // with DataOptions.Values, in index order
	// Files are the files hashed whole against the sha256 their source
	// states, in source order; Verified counts those that matched.
	Files    []FileDigest
	Verified int
}

// Digested is a source that states the sha256 of its whole bytes
// (remote.Source: what its store, a remote.Digester, gives); ok is
// false when it states none.
type Digested interface {
	SHA256() (hex string, ok bool)
}

// hashWhole reads src whole and checks its sha256 against want, adding
// what it found to rep and a difference to ps.
func hashWhole(file string, src backing.Source, want string, buf []byte, rep *DataReport, ps *[]Problem) {
	fd := FileDigest{File: file, SHA256: want}
	h := sha256.New()
	prefetch(src, 0, src.Size())
	err := readAll(src, src.Size(), buf, func(p []byte) { h.Write(p) })
	rep.Bytes += src.Size()
	switch got := hex.EncodeToString(h.Sum(nil)); {
	case err != nil:
		fd.Status = "read error"
		*ps = append(*ps, Problem{File: file, What: "hashing the whole file: " + err.Error()})
	case got != strings.ToLower(want):
		fd.Status, fd.Got = "sha256 mismatch", got
		*ps = append(*ps, Problem{File: file, What: fmt.Sprintf("sha256 of the file's %d bytes is %s, its source states %s", src.Size(), got, want)})
	default:
		fd.Status = "sha256 ok"
		rep.Verified++
	}
	rep.Files = append(rep.Files, fd)
}

// prefetcher is a source that fetches ahead on request
// (remote.Source): told a range about to be read whole, from start to
// end, it streams it (one GET, not one per part).
type prefetcher interface {
	Prefetch(off, n int64)
}

// prefetch tells src, when it fetches ahead, that [off, off+n) is about
// to be read whole.
func prefetch(src backing.Source, off, n int64) {
	if p, ok := src.(prefetcher); ok {
		p.Prefetch(off, n)
	}
}

// plans returns, for each source whose every tensor Data reads whole as
// one range of it (no CRC-32, no values counted, the file not hashed
// whole), in index order, their bytes in increasing order, and that
// fetches ahead (backing.Planner: a remote one), its tensors' ranges:
// announced to it as one plan as Data reaches the first, they cost its
// store one GET rather than one per tensor. nil for the others, whose
// tensors are announced one at a time.
func plans(c *Checkpoint, o DataOptions, hashed []bool) [][]backing.Range {
	plans := make([][]backing.Range, len(c.Sources))
	ok := make([]bool, len(c.Sources))
	for i, src := range c.Sources {
		_, isP := src.(backing.Planner)
		ok[i] = isP && !hashed[i]
	}
	for i := range c.Index.Tensors {
		t := &c.Index.Tensors[i]
		if t.Source < 0 || t.Source >= len(c.Sources) || !ok[t.Source] {
			continue
		}
		p := plans[t.Source]
		if t.Check != nil || o.Values && view.Convertible(t, dtype.F32) || !t.Contiguous() ||
			len(p) > 0 && t.Offset < p[len(p)-1].Off+p[len(p)-1].Len {
			ok[t.Source], plans[t.Source] = false, nil
			continue
		}
		plans[t.Source] = append(p, backing.Range{Off: t.Offset, Len: t.Size})
	}
	for i, p := range plans {
		if len(p) < 2 {
			plans[i] = nil // one tensor: Prefetch says as much
		}
	}
	return plans
}

// chunk is how much Data reads at a time: its memory.
const chunk = 1 << 20

// Data reads every byte of every tensor of c: a tensor in a stored zip
// member (an .npz array) is checked against the member's CRC-32
// (index.Tensor.Verify), every other one is read whole (a read error, a
// compressed member that does not inflate, an object changed under a
// remote SOURCE is a problem). With o.Values, each tensor that has a
// float32 view is read through it and its NaN and Inf values counted.
// A file whose source states the sha256 of its bytes (Digested, or
// Checkpoint.SHA256) is
// read whole, from byte 0 to its size whatever part of it the tensors
// cover, and hashed: a digest that differs is a problem naming both;
// its tensors' bytes are not read a second time unless o.Values or a
// CRC-32 or a strided view needs them. The tensors of a remote file,
// read whole in index order with their bytes in the same order, are
// announced to it as one plan (one GET for all of them: plans).
// Memory: one buffer of 1 MiB.
func Data(c *Checkpoint, o DataOptions) (DataReport, []Problem) {
	var rep DataReport
	var ps []Problem
	buf := make([]byte, chunk)
	hashed := hashFiles(c, buf, &rep, &ps)
	plans := plans(c, o, hashed)
	told := make([]bool, len(plans))
	for i := range c.Index.Tensors {
		t := &c.Index.Tensors[i]
		if t.Source < 0 || t.Source >= len(c.Sources) {
			continue // ranges reports it
		}
		src := c.Sources[t.Source]
		file, where := c.Index.SourceName(t.Source), "tensor "+strconv.Quote(t.Name)
		count := func(n int64) { // what reading t whole read
			if t.Role == index.RoleLogical {
				rep.Dequantized++
				rep.DequantizedBytes += n
				return
			}
			rep.Bytes += n
		}
		fail := func(err error) {
			msg := strings.TrimPrefix(err.Error(), "view: "+t.Name+": ")
			ps = append(ps, Problem{File: file, Where: where, What: msg})
		}
		if t.Check != nil {
			rep.Bytes += t.Check.Size
			if t.Check.IsSHA1() {
				rep.SHA1s++
			} else {
				rep.CRCs++
			}
			if err := t.Verify(src); err != nil {
				fail(err)
				continue
			}
		}
		if o.Values && view.Convertible(t, dtype.F32) {
			r, err := view.New(t, src, dtype.F32)
			if err != nil {
				fail(err)
				continue
			}
			if t.Contiguous() && t.Role != index.RoleLogical {
				prefetch(src, t.Offset, t.Size) // read in order by the view
			}
			v, err := countValues(t, r, buf)
			if t.Check == nil {
				count(t.Size)
			}
			if err != nil {
				fail(err)
				continue
			}
			rep.Tensors = append(rep.Tensors, v)
			continue
		}
		if t.Check != nil {
			continue // read whole by Verify
		}
		if hashed[t.Source] && t.Contiguous() {
			continue // read whole by the hash
		}
		var r io.ReaderAt = io.NewSectionReader(src, t.Offset, t.Size)
		if plan := plans[t.Source]; plan != nil {
			if !told[t.Source] {
				src.(backing.Planner).PrefetchPlan(plan, chunk) // at its first tensor
				told[t.Source] = true
			}
		} else if t.Contiguous() {
			prefetch(src, t.Offset, t.Size)
		} else {
			v, err := view.New(t, src, dtype.Invalid)
			if err != nil {
				fail(err)
				continue
			}
			r = v
		}
		count(t.Size)
		if err := readAll(r, t.Size, buf, nil); err != nil {
			fail(err)
		}
	}
	return rep, ps
}

// hashFiles hashes whole each file whose source states its sha256, and
// the files beside the checkpoint; hashed[i] says that source i was.
func hashFiles(c *Checkpoint, buf []byte, rep *DataReport, ps *[]Problem) (hashed []bool) {
	hashed = make([]bool, len(c.Sources))
	for i, src := range c.Sources {
		if c.Index.Member(i) != nil {
			continue
		}
		var want string
		var ok bool
		if d, isD := src.(Digested); isD {
			want, ok = d.SHA256()
		}
		if !ok && c.SHA256 != nil {
			want, ok = c.SHA256(i)
		}
		if !ok {
			continue
		}
		hashWhole(c.Index.SourceName(i), src, want, buf, rep, ps)
		hashed[i] = true // its problem, if any, is said once, for the file
	}
	for _, f := range c.Beside {
		hashWhole(f.Src.Name(), f.Src, f.SHA256, buf, rep, ps)
	}
	return hashed
}

// countValues reads t's float32 view r whole and counts its NaN and Inf
// values.
func countValues(t *index.Tensor, r view.Reader, buf []byte) (TensorValues, error) {
	v := TensorValues{Name: t.Name, DType: t.DType.String(), Elements: r.Size() / 4}
	err := readAll(r, r.Size(), buf, func(p []byte) {
		for j := 0; j+4 <= len(p); j += 4 {
			f := float64(math.Float32frombits(binary.LittleEndian.Uint32(p[j:])))
			switch {
			case math.IsNaN(f):
				v.NaN++
			case math.IsInf(f, 0):
				v.Inf++
			}
		}
	})
	return v, err
}

// readAll reads the size bytes of r in len(buf) pieces, giving each to
// each (when set).
func readAll(r io.ReaderAt, size int64, buf []byte, each func([]byte)) error {
	for off := int64(0); off < size; {
		n := int(min(int64(len(buf)), size-off))
		got, err := r.ReadAt(buf[:n], off)
		if got < n {
			if err == nil || err == io.EOF {
				err = io.ErrUnexpectedEOF
			}
			return fmt.Errorf("reading at byte %d: %v", off+int64(got), err)
		}
		if each != nil {
			each(buf[:n])
		}
		off += int64(n)
	}
	return nil
}
