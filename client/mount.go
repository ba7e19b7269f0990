package client

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/lazyweights/tensorfs/dtype"
	"github.com/lazyweights/tensorfs/index"
)

// openMount opens a tensorfs mount point: the index comes from
// MOUNT/.tensorfs/index.json (index.ParseDocument), the bytes from the
// tensor files.
func openMount(mount string) (*Checkpoint, error) {
	ipath := filepath.Join(mount, MountIndexPath)
	data, err := os.ReadFile(ipath)
	if err != nil {
		return nil, err
	}
	doc, err := index.ParseDocument(data)
	if err != nil {
		var fe *index.FormatError
		if errors.As(err, &fe) {
			fe.File = ipath
			return nil, fe
		}
		return nil, err
	}
	c := &Checkpoint{
		path:     mount,
		format:   doc.Format,
		metadata: doc.Metadata,
		sources:  doc.Sources,
		mount:    mount,
	}
	infos := make([]TensorInfo, len(doc.Tensors))
	for i, dt := range doc.Tensors {
		d, _ := dtype.ByName(dt.DType) // ParseDocument checked it
		if !filepath.IsLocal(dt.Path) {
			return nil, index.ErrorAt(ipath, "tensor "+strconv.Quote(dt.Name), "path %q is not inside the mount", dt.Path)
		}
		info := TensorInfo{Name: dt.Name, Path: dt.Path, DType: d, Shape: dt.Shape, Size: dt.Size, Offset: -1}
		if dt.Offset != nil {
			info.Source, info.Offset = dt.Source, *dt.Offset
		}
		infos[i] = info
	}
	if err := c.setTensors(infos); err != nil {
		return nil, err
	}
	return c, nil
}

// mountPath returns the file of t in dtype to inside the mount: the tree
// itself for native bytes, the .f32/.f16/.bf16/.f64 view otherwise.
func (c *Checkpoint) mountPath(t TensorInfo, to dtype.DType) string {
	if native(t, to) {
		return filepath.Join(c.mount, filepath.FromSlash(t.Path))
	}
	return filepath.Join(c.mount, "."+strings.ToLower(to.Name()), filepath.FromSlash(t.Path))
}
