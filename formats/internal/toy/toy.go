// Package toy is a test-only directory format: a manifest, toy.manifest,
// that names a raw data file beside it and the tensors in it. It exists
// to show (formats' TestToyLayout) what a new directory layout takes: a
// room that parses (this package, which imports only index, as every
// room under index/ does) and one row of formats.Layouts; no edit to the
// loader, the format table or backing.
//
// The manifest is lines of text: "data FILE" (a file name beside the
// manifest, once, first), then "tensor NAME DTYPE SHAPE OFFSET" per
// tensor, SHAPE dims joined by "x" ("-" for a scalar), the bytes
// contiguous row-major little-endian at OFFSET of FILE.
package toy

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/lazyweights/tensorfs/dtype"
	"github.com/lazyweights/tensorfs/index"
)

// ManifestName is the manifest's file name in its directory.
const ManifestName = "toy.manifest"

// maxManifest bounds the manifest's bytes.
const maxManifest = 1 << 20

// Parse reads the manifest f: an Index of format "toy" whose one source
// is the data file's name as the manifest gives it (the layout opens it
// and renames the source), every tensor's Source 0; the loader checks
// the ranges against the file.
func Parse(f index.File) (*index.Index, error) {
	if f.Size() > maxManifest {
		return nil, index.ErrorAt(f.Name(), "", "a manifest of %d bytes (at most %d)", f.Size(), maxManifest)
	}
	b := make([]byte, f.Size())
	if n, err := f.ReadAt(b, 0); n != len(b) {
		return nil, index.ErrorAt(f.Name(), "", "cannot read: %v", err)
	}
	idx := &index.Index{Format: "toy", Metadata: map[string]any{}}
	for i, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		where := "line " + strconv.Itoa(i+1)
		w := strings.Fields(line)
		switch {
		case i == 0 && len(w) == 2 && w[0] == "data":
			idx.Sources = []string{w[1]}
		case i == 0:
			return nil, index.ErrorAt(f.Name(), where, "want \"data FILE\"")
		case len(w) == 5 && w[0] == "tensor":
			t, err := tensor(w[1:])
			if err != nil {
				return nil, index.ErrorAt(f.Name(), where, "%v", err)
			}
			idx.Tensors = append(idx.Tensors, t)
		default:
			return nil, index.ErrorAt(f.Name(), where, "want \"tensor NAME DTYPE SHAPE OFFSET\"")
		}
	}
	if len(idx.Sources) == 0 {
		return nil, index.ErrorAt(f.Name(), "", "an empty manifest")
	}
	return idx, nil
}

// tensor is one "tensor" line's NAME DTYPE SHAPE OFFSET.
func tensor(w []string) (index.Tensor, error) {
	t := index.Tensor{Name: w[0], Shape: []int64{}}
	dt, err := dtype.Parse(w[1])
	if err != nil {
		return t, err
	}
	t.DType = dt
	if w[2] != "-" {
		for _, s := range strings.Split(w[2], "x") {
			d, err := strconv.ParseInt(s, 10, 64)
			if err != nil || d < 0 {
				return t, fmt.Errorf("dim %q", s)
			}
			t.Shape = append(t.Shape, d)
		}
	}
	if t.Offset, err = strconv.ParseInt(w[3], 10, 64); err != nil || t.Offset < 0 {
		return t, fmt.Errorf("offset %q", w[3])
	}
	n, ok := index.Elements(t.Shape)
	if !ok {
		return t, fmt.Errorf("shape %v overflows", t.Shape)
	}
	if t.Size, ok = dt.ByteSize(n); !ok {
		return t, fmt.Errorf("shape %v overflows", t.Shape)
	}
	return t, nil
}
