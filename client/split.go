package client

import (
	"errors"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/lazyweights/tensorfs/dtype"
	"github.com/lazyweights/tensorfs/index"
	"github.com/lazyweights/tensorfs/view"
)

// Split is part Part (0-based) of Parts of a tensor along dimension Dim
// (0 = outermost), with the bounds of numpy.array_split: what one rank of
// a tensor-parallel engine holds of a weight. A column-parallel layer
// (its output features split: q/k/v, gate and up projections, the
// embedding and lm_head by vocabulary) is split along dim 0 of its
// [out, in] weight (and of its bias); a row-parallel layer (its input
// features split: the attention output and down projections) along dim
// 1; norms and other small tensors are replicated (no Split).
type Split = view.Split

// ErrNoPart is the error of a part that does not exist: a dimension the
// tensor lacks, parts < 1, part ≥ parts, or bounds that do not fall on
// whole blocks of a quantized type read as stored.
var ErrNoPart = errors.New("no such part")

// OpenSlice returns a reader of part s of the tensor called name,
// converted to to (AsStored: the stored dtype): the bytes of
// numpy.array_split(x, s.Parts, axis=s.Dim)[s.Part] of the tensor as
// OpenTensor would read it, row-major. Through a mount it reads
// M/<view>/.split/<dim>/<parts>/<part>/<path>.
func (c *Checkpoint) OpenSlice(name string, to dtype.DType, s Split) (*TensorReader, error) {
	i, ok := c.lookup(name, to)
	if !ok {
		return nil, &TensorError{Source: c.path, Name: name, Op: "open", Off: -1, Err: ErrNoTensor}
	}
	return c.openPart(c.tensors[i], to, &s)
}

// Split returns the part of its tensor r reads, and false when it reads
// all of it.
func (r *TensorReader) Split() (Split, bool) {
	if r.part == nil {
		return Split{}, false
	}
	return *r.part, true
}

// checkPart checks part s of t in dtype to (the stored dtype when
// native) and says where its bytes lie in the tensor's: at first, size
// bytes, one range or not.
func checkPart(t TensorInfo, to dtype.DType, s Split) (first, size int64, oneRange bool, err error) {
	if !s.Valid(t.Shape) {
		return 0, 0, false, fmt.Errorf("%w: part %s of shape %v (want dim < %d, parts ≥ 1, part < parts)", ErrNoPart, s, t.Shape, len(t.Shape))
	}
	first, size, oneRange, err = view.SliceExtent(t.Name, t.Shape, to, s)
	if err != nil {
		return 0, 0, false, fmt.Errorf("%w: %v", ErrNoPart, err)
	}
	return first, size, oneRange, nil
}

// mountPartPath is mountPath under the view's .split/<dim>/<parts>/<part>/
// for a part.
func (c *Checkpoint) mountPartPath(t TensorInfo, to dtype.DType, part *Split) string {
	if part == nil {
		return c.mountPath(t, to)
	}
	dir := c.nativeDir
	if t.Role == index.RoleLogical && native(t, to) {
		to = t.DType // in the converted views only
	}
	if !native(t, to) || t.Role == index.RoleLogical {
		dir = "." + strings.ToLower(to.Name())
	}
	return filepath.Join(c.mount, dir, ".split", strconv.Itoa(part.Dim), strconv.Itoa(part.Parts), strconv.Itoa(part.Part), filepath.FromSlash(t.Path))
}
