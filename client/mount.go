package client

import (
	"errors"
	"io"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/lazyweights/tensorfs/backing"
	"github.com/lazyweights/tensorfs/dtype"
	"github.com/lazyweights/tensorfs/index"
)

// openMount opens a tensorfs mount point: the index comes from
// MOUNT/.tensorfs/index.json (index.ParseDocument), the bytes from the
// tensor files. Each tensor's role is its "role"; "quantization" adds
// the logical weights. A quantized mount served by a tensorfs from
// before "role" (issue 42), whose parts say no role, is refused in one
// line rather than read with its parts as stored tensors.
func openMount(mount string) (*Checkpoint, error) {
	ipath := filepath.Join(mount, MountIndexPath)
	// Not os.ReadFile: a directory that only looks like a mount may hold
	// a named pipe there, which must not hang Open.
	f, err := backing.OpenRegular(ipath, 0)
	if err != nil {
		return nil, err
	}
	data, err := io.ReadAll(f)
	f.Close()
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
		path:    mount,
		format:  doc.Format,
		sources: doc.Sources,
		mount:   mount,
		byKey:   index.NamesByKey(doc.Keys),
		keys:    doc.Keys,
	}
	c.metadata = doc.Metadata // JSON values already (ParseDocument)
	for _, u := range doc.Unserved {
		c.unserved = append(c.unserved, Unserved{Name: u.Name, Type: u.Type, Shape: u.Shape, Source: u.Source, Why: u.Why, More: u.More})
	}
	// A mount made with --dtype has a converted top level: the tensors as
	// stored are under .native/, which "native" describes.
	list := doc.Tensors
	if doc.View != "" {
		list = doc.Native
		c.nativeDir = nativeDir
	}
	infos := make([]TensorInfo, len(list))
	for i, dt := range list {
		d, _ := dtype.ByName(dt.DType) // ParseDocument checked it
		p := dt.Path
		if c.nativeDir != "" {
			rest, ok := strings.CutPrefix(p, c.nativeDir+"/")
			if !ok {
				return nil, index.ErrorAt(ipath, "native tensor "+strconv.Quote(dt.Name), "path %q is not under %s/", dt.Path, c.nativeDir)
			}
			p = rest
		}
		if !filepath.IsLocal(p) {
			return nil, index.ErrorAt(ipath, "tensor "+strconv.Quote(dt.Name), "path %q is not inside the mount", dt.Path)
		}
		role, _ := index.ParseRole(dt.Role) // ParseDocument checked it
		info := TensorInfo{Name: dt.Name, Path: p, DType: d, Shape: dt.Shape, Size: dt.Size, Offset: -1, Role: role}
		if dt.Offset != nil {
			info.Source, info.Offset = dt.Source, *dt.Offset
		}
		infos[i] = info
	}
	if q := doc.Quantization; q != nil {
		if len(q.Weights) > 0 && !slices.ContainsFunc(infos, func(t TensorInfo) bool { return t.Role == index.RolePart }) {
			return nil, index.ErrorAt(ipath, "quantization", "no tensor is a part of its weights: a mount served by a tensorfs older than this client (mount it again with this version)")
		}
		infos = logicalInfos(infos, q)
	}
	if err := c.setTensors(infos); err != nil {
		return nil, err
	}
	return c, nil
}

// nativeDir is where a mount made with --dtype keeps the stored tree.
const nativeDir = ".native"

// mountPath returns the file of t in dtype to inside the mount: the stored
// tree for native bytes (the top level, or .native/ in a mount made with
// --dtype), the .f32/.f16/.bf16/.f64 view otherwise.
func (c *Checkpoint) mountPath(t TensorInfo, to dtype.DType) string {
	if t.Role == index.RoleLogical && native(t, to) {
		to = t.DType // a logical weight's file is in the converted views only
	}
	if native(t, to) && t.Role != index.RoleLogical {
		return filepath.Join(c.mount, c.nativeDir, filepath.FromSlash(t.Path))
	}
	return filepath.Join(c.mount, "."+strings.ToLower(to.Name()), filepath.FromSlash(t.Path))
}

// logicalInfos adds a mount's logical weights (index.json's
// "quantization"), whose files are in the converted views only (.f32/
// holds them as computed); the stored tree's parts say their role
// themselves.
func logicalInfos(infos []TensorInfo, q *index.Quantization) []TensorInfo {
	for _, w := range q.Weights {
		n, ok := index.Elements(w.Shape)
		if !ok || !filepath.IsLocal(w.Path) {
			continue
		}
		infos = append(infos, TensorInfo{Name: w.Name, Path: w.Path, DType: dtype.F32, Shape: w.Shape, Size: 4 * n, Offset: -1, Role: index.RoleLogical})
	}
	return infos
}
