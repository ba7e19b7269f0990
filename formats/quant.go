package formats

import (
	"cmp"
	"errors"
	"fmt"
	"io"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"unsafe"

	"github.com/lazyweights/tensorfs/backing"
	"github.com/lazyweights/tensorfs/dtype"
	"github.com/lazyweights/tensorfs/index"
	"github.com/lazyweights/tensorfs/quant"
)

// Quantize reads a loaded checkpoint as the model it encodes: it joins
// its stored tensors into logical weights by the scheme cfg names (nil:
// only the unambiguous pairs, quant.Plan) and adds to idx, for each
// weight, a member of kind *index.Dequantized (a source of its float32
// values) and a tensor of Role RoleLogical (F32, its logical shape) read
// from it; the weights' parts and the tensors the scheme hides become
// RolePart. A weight left out (quant.Problem) is one line of idx.Notes,
// "FILE: weight X left out of the converted views: why", and its stored
// tensors are parts too, so that no converted view shows its raw codes.
// idx.Quantization records it all. files[i] reads idx.Sources[i]; the
// result is files with the added members' sources after them. Nothing is
// added to a checkpoint with nothing quantized.
//
// Plan reads only small tensors (at most quant.MaxSmall bytes: a
// bitsandbytes quant_state, a weight_shape), through files.
func Quantize(idx *index.Index, files []backing.Source, cfg *quant.Config) ([]backing.Source, error) {
	if len(files) != len(idx.Sources) {
		return files, fmt.Errorf("internal error: %d files for %d sources", len(files), len(idx.Sources))
	}
	cfg = quant.WithTorchAO(cfg, idx.Metadata, idx.Tensors) // torchao: the header's __metadata__ names the parts
	if cfg == nil && !quant.MayPair(idx.Tensors) {
		return files, nil // nothing to join: no cost for the other checkpoints
	}
	byName, err := tensorsByName(idx)
	if err != nil {
		return files, err
	}
	z := &quantizer{idx: idx, files: files, byName: byName}
	r := quant.Plan(cfg, idx.Tensors, z.small)
	q := &index.Quantization{Scheme: r.Scheme}
	if cfg != nil {
		q.Config, q.Method = cfg.File, cfg.Method
	}
	if r.Scheme == "" && len(r.Weights) == 0 && len(r.Problems) == 0 {
		if cfg != nil {
			idx.Quantization = q // named, not found: tensorfs check says so
		}
		return files, nil
	}
	z.q = q
	logical, probs, err := z.addWeights(r.Weights)
	if err != nil {
		return z.files, err
	}
	for _, h := range r.Hidden {
		z.part(h)
		q.Hidden = append(q.Hidden, h)
	}
	probs = append(probs, r.Problems...)
	slices.SortStableFunc(probs, func(a, b quant.Problem) int { return cmp.Compare(a.Name, b.Name) })
	z.leftOut(probs)
	if err := z.addLogical(logical); err != nil {
		return z.files, err
	}
	return z.files, nil
}

// quantizer is Quantize's state: the checkpoint it adds the
// dequantized weights to.
type quantizer struct {
	idx    *index.Index
	files  []backing.Source // files[i] reads idx.Sources[i]
	byName map[string]int   // a stored tensor's index in idx.Tensors
	q      *index.Quantization
}

// tensorsByName maps each tensor's name to its index in idx.Tensors; a
// checkpoint already quantized is an internal error.
func tensorsByName(idx *index.Index) (map[string]int, error) {
	byName := make(map[string]int, len(idx.Tensors))
	for i := range idx.Tensors {
		if idx.Tensors[i].Role == index.RoleLogical {
			return nil, index.ErrorAt(idx.SourceName(idx.Tensors[i].Source), "tensor "+strconv.Quote(idx.Tensors[i].Name), "internal error: quantized twice")
		}
		byName[idx.Tensors[i].Name] = i
	}
	return byName, nil
}

// small reads the bytes of a small stored tensor, for quant.Plan.
func (z *quantizer) small(name string) ([]byte, error) {
	i, ok := z.byName[name]
	if !ok {
		return nil, errors.New("no such tensor")
	}
	t := &z.idx.Tensors[i]
	if !t.Contiguous() || t.Size > quant.MaxSmall {
		return nil, errors.New("not one small range of its file")
	}
	b := make([]byte, t.Size)
	if err := readFull(z.files[t.Source], b, t.Offset); err != nil {
		return nil, err
	}
	return b, nil
}

// part makes the stored tensor name, if there is one, a part.
func (z *quantizer) part(name string) {
	if i, ok := z.byName[name]; ok {
		z.idx.Tensors[i].Role = index.RolePart
	}
}

// addWeights adds a Dequantized member for each weight whose parts are
// ranges of the checkpoint's files, and returns the logical tensors
// read from them; the others are problems. Every weight's parts become
// parts.
func (z *quantizer) addWeights(ws []quant.Weight) ([]index.Tensor, []quant.Problem, error) {
	idx, q := z.idx, z.q
	var probs []quant.Problem
	var logical []index.Tensor
	for wi := range ws {
		w := &ws[wi]
		k := &index.Dequantized{Scheme: w.Scheme, Shape: w.Shape, Names: w.Parts}
		why := ""
		for _, pn := range w.Parts {
			i, ok := z.byName[pn]
			if !ok {
				why = fmt.Sprintf("its part %s is not in the checkpoint", strconv.Quote(pn))
				break
			}
			t := &idx.Tensors[i]
			if !t.Contiguous() || idx.Member(t.Source) != nil {
				why = fmt.Sprintf("its part %s is not one range of its file", strconv.Quote(pn))
				break
			}
			k.Parts = append(k.Parts, index.Part{Source: t.Source, Offset: t.Offset, Size: t.Size})
		}
		n := w.NumElements()
		if why == "" && n > (1<<62)/4 {
			why = fmt.Sprintf("its %d elements are too many", n)
		}
		for _, pn := range w.Parts {
			z.part(pn)
		}
		if why != "" {
			probs = append(probs, quant.Problem{Name: w.Name, Why: why})
			continue
		}
		k.Values = w.Dequantize
		m := index.Member{Source: len(idx.Sources), File: k.Parts[0].Source, Name: w.Name, Size: 4 * n, Kind: k}
		src, err := (&loader{}).openMember(idx.SourceName(m.File)+":"+w.Name, z.files, &m)
		if err != nil {
			return nil, nil, err
		}
		idx.Sources = append(idx.Sources, "")
		idx.Members = append(idx.Members, m)
		z.files = append(z.files, src)
		logical = append(logical, index.Tensor{Name: w.Name, DType: dtype.F32, Shape: w.Shape, Source: m.Source, Size: m.Size, Role: index.RoleLogical})
		q.Weights = append(q.Weights, index.QuantWeight{Name: w.Name, Shape: w.Shape, Parts: w.Parts})
	}
	return logical, probs, nil
}

// leftOut records the weights left out (probs, sorted by name): in
// the quantization, as parts, and as notes, a line each or, past
// maxNotesAlike for one reason, one line for them all.
func (z *quantizer) leftOut(probs []quant.Problem) {
	idx, q := z.idx, z.q
	alone := loneShard(idx)
	sharing := map[string][]string{} // why → the weights left out for it
	for i := range probs {
		p := &probs[i]
		if alone != "" && strings.Contains(p.Why, " missing") {
			p.Why += "; " + alone
		}
		z.part(p.Name) // its raw codes, when the weight keeps a stored name
		q.Problems = append(q.Problems, index.QuantProblem{Name: p.Name, Why: p.Why})
		sharing[p.Why] = append(sharing[p.Why], p.Name)
	}
	fileOf := func(name string) string {
		if i, ok := z.byName[name]; ok {
			return idx.SourceName(idx.FileOf(idx.Tensors[i].Source))
		} else if fs := idx.Files(); len(fs) > 0 {
			return fs[0]
		}
		return ""
	}
	for _, p := range probs {
		names := sharing[p.Why]
		switch {
		case len(names) <= maxNotesAlike:
			idx.Notes = append(idx.Notes, index.Printable(fmt.Sprintf("%s: weight %s left out of the converted views: %s", fileOf(p.Name), strconv.Quote(p.Name), p.Why)))
		case names[0] == p.Name:
			// many weights for one reason (a scheme that cannot be
			// applied at all): one line for them all
			idx.Notes = append(idx.Notes, index.Printable(fmt.Sprintf("%s: %d weights left out of the converted views (%s, %s, %s and %d more): %s",
				fileOf(p.Name), len(names), strconv.Quote(names[0]), strconv.Quote(names[1]), strconv.Quote(names[2]), len(names)-3, p.Why)))
		}
	}
}

// addLogical checks the logical tensors and adds them to the index,
// sorted among the stored ones, with their paths (recorded in the
// quantization's weights too).
func (z *quantizer) addLogical(logical []index.Tensor) error {
	idx, q := z.idx, z.q
	for i := range logical {
		t := &logical[i]
		if err := index.CheckTensor(t, idx.SourceName(t.Source), z.files[t.Source].Size()); err != nil {
			return err
		}
	}
	idx.Tensors = append(idx.Tensors, logical...)
	slices.SortStableFunc(idx.Tensors, func(a, b index.Tensor) int { return cmp.Compare(a.Name, b.Name) })
	for i := 1; i < len(idx.Tensors); i++ {
		a, b := &idx.Tensors[i-1], &idx.Tensors[i]
		if a.Name == b.Name && !index.Twins(a, b) {
			return index.ErrorAt(idx.SourceName(b.Source), "tensor "+strconv.Quote(b.Name), "internal error: a logical weight has the name of a tensor that is not its part")
		}
	}
	idx.Quantization = q
	if err := index.AssignPaths(idx); err != nil {
		return err
	}
	for i := range idx.Tensors {
		if t := &idx.Tensors[i]; t.Role == index.RoleLogical {
			if w, ok := slices.BinarySearchFunc(q.Weights, t.Name, func(w index.QuantWeight, n string) int { return cmp.Compare(w.Name, n) }); ok {
				q.Weights[w].Path = t.Path
			}
		}
	}
	return nil
}

// maxNotesAlike is how many weights left out for the same reason get a
// line each; more are one line.
const maxNotesAlike = 4

// readFull reads len(p) bytes at off of f.
func readFull(f io.ReaderAt, p []byte, off int64) error {
	n, err := f.ReadAt(p, off)
	if n == len(p) {
		return nil
	}
	if err == nil || err == io.EOF {
		err = io.ErrUnexpectedEOF
	}
	return err
}

// dequantized is what computes a Dequantized member's bytes (a
// backing.Computed source): its float32 values, row-major, computed on
// each read from the parts' bytes (never held whole: a read holds at
// most its own bytes plus the kernel's bounded scratch, and a
// dequantChunk for an unaligned head or tail).
type dequantized struct {
	size   int64
	parts  []dequantPart
	values func(read func(part int, off int64, p []byte) error, first int64, dst []float32) error
}

type dequantPart struct {
	f         index.File
	off, size int64
}

// openDequantized opens a Dequantized member m: its parts are ranges of
// files (not members).
func openDequantized(name string, files []backing.Source, m *index.Member, k *index.Dequantized) (backing.Source, error) {
	where := "tensor " + strconv.Quote(m.Name)
	if k.Values == nil || len(k.Parts) == 0 || len(k.Names) != len(k.Parts) {
		return nil, index.ErrorAt(name, where, "internal error: a dequantized member without its scheme's kernel or parts")
	}
	d := &dequantized{size: m.Size, values: k.Values}
	for i, p := range k.Parts {
		if p.Source < 0 || p.Source >= len(files) || p.Offset < 0 || p.Size < 0 || p.Offset > files[p.Source].Size()-p.Size {
			return nil, index.ErrorAt(name, where, "internal error: part %d [%d, +%d) of source %d", i, p.Offset, p.Size, p.Source)
		}
		d.parts = append(d.parts, dequantPart{f: files[p.Source], off: p.Offset, size: p.Size})
	}
	if n, ok := index.Elements(k.Shape); !ok || n > (1<<62)/4 || 4*n != m.Size {
		return nil, index.ErrorAt(name, where, "internal error: shape %v for a member of %d bytes", k.Shape, m.Size)
	}
	return backing.NewComputed(name, m.Size, d.fill), nil
}

// read is the kernel's reader: bytes [off, off+len(p)) of part k.
func (d *dequantized) read(k int, off int64, p []byte) error {
	if k < 0 || k >= len(d.parts) {
		return fmt.Errorf("part %d of %d", k, len(d.parts))
	}
	pt := &d.parts[k]
	if off < 0 || int64(len(p)) > pt.size || off > pt.size-int64(len(p)) {
		return fmt.Errorf("bytes [%d, +%d) outside part %d's %d", off, len(p), k, pt.size)
	}
	return readFull(pt.f, p, pt.off+off)
}

// dequantChunk is the float32 values a read that is not whole aligned
// elements computes at a time.
const dequantChunk = 1 << 14

var chunkPool = sync.Pool{New: func() any { return new([dequantChunk]float32) }}

// fill computes bytes [off, off+len(p)) of the values, all inside them
// (backing.Computed clamps): whole aligned elements straight into p, a
// partial element at either end through a pooled chunk.
func (d *dequantized) fill(p []byte, off int64) (int, error) {
	n := len(p)
	done := 0
	for done < n {
		at := off + int64(done)
		rest := p[done:n]
		if at%4 == 0 && len(rest) >= 4 && uintptr(unsafe.Pointer(&rest[0]))%4 == 0 {
			m := len(rest) / 4
			dst := unsafe.Slice((*float32)(unsafe.Pointer(&rest[0])), m)
			if err := d.values(d.read, at/4, dst); err != nil {
				return done, err
			}
			done += 4 * m
			continue
		}
		buf := chunkPool.Get().(*[dequantChunk]float32)
		skip := int(at % 4)
		m := min(dequantChunk, (skip+len(rest)+3)/4)
		m = int(min(int64(m), d.size/4-at/4))
		if err := d.values(d.read, at/4, buf[:m]); err != nil {
			chunkPool.Put(buf)
			return done, err
		}
		b := unsafe.Slice((*byte)(unsafe.Pointer(&buf[0])), 4*m)
		c := copy(rest, b[skip:])
		chunkPool.Put(buf)
		done += c
	}
	return n, nil
}

// shardName is a shard's file name in a set of several:
// model-00001-of-00002.safetensors.
var shardName = regexp.MustCompile(`-([0-9]{5,})-of-([0-9]{5,})\.[A-Za-z0-9]+$`)

// loneShard says, of a checkpoint that is one shard of several opened
// alone, that its other shards were not opened, so that a weight whose
// part is missing is not taken for a broken file; "" for any other
// checkpoint.
func loneShard(idx *index.Index) string {
	fs := idx.Files()
	if len(fs) != 1 {
		return ""
	}
	base := path.Base(filepath.ToSlash(fs[0]))
	m := shardName.FindStringSubmatch(base)
	if m == nil {
		return ""
	}
	i, err1 := strconv.Atoi(m[1])
	n, err2 := strconv.Atoi(m[2])
	if err1 != nil || err2 != nil || n < 2 {
		return ""
	}
	return fmt.Sprintf("%s is shard %d of %d, opened alone: the missing part is likely in another shard (open the directory, or its *.index.json weight map)", base, i, n)
}
