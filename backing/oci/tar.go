package oci

import (
	"archive/tar"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/lazyweights/tensorfs/backing/remote"
	"github.com/lazyweights/tensorfs/index"
)

// Uncompressed tar layers (ModelPack's .tar media types), read in place:
// their headers read once, with ranged GETs, and each regular file a
// range of the blob.
const (
	MediaWeightTar = "application/vnd.cncf.model.weight.v1.tar"
	MediaConfigTar = "application/vnd.cncf.model.weight.config.v1.tar"
)

// member is a file of a tar layer: size bytes of its blob at off.
type member struct {
	layer     Descriptor
	off, size int64
}

// blobReader reads a blob sequentially (and seeks), in GETs of up to
// readAhead bytes: what archive/tar reads headers from, skipping file
// data by Seek.
type blobReader struct {
	ctx    context.Context
	s      *Store
	obj    remote.Object // the blob's
	off    int64
	buf    []byte
	bufOff int64
}

const readAhead = 64 << 10

func (r *blobReader) Read(p []byte) (int, error) {
	if r.off >= r.obj.Size {
		return 0, io.EOF
	}
	if r.off < r.bufOff || r.off >= r.bufOff+int64(len(r.buf)) {
		n := min(int64(readAhead), r.obj.Size-r.off)
		b := make([]byte, n)
		if err := r.s.blobs.Get(r.ctx, r.obj, r.off, [][]byte{b}, nil); err != nil {
			return 0, err
		}
		r.buf, r.bufOff = b, r.off
	}
	n := copy(p, r.buf[r.off-r.bufOff:])
	r.off += int64(n)
	return n, nil
}

func (r *blobReader) Seek(off int64, whence int) (int64, error) {
	switch whence {
	case io.SeekCurrent:
		off += r.off
	case io.SeekEnd:
		off += r.obj.Size
	}
	if off < 0 {
		return 0, errors.New("seek before the start")
	}
	r.off = off
	return off, nil
}

// readTar lists the regular files of tar layer l, checked as layer
// paths are: an entry that escapes the tree, a link, a sparse file or a
// device is refused, and so is a name taken twice.
func (s *Store) readTar(ctx context.Context, where string, l Descriptor) (map[string]member, error) {
	obj, _, err := s.blobs.Open(ctx, s.blobKey(l), nil)
	if err != nil && s.auth.retry(ctx, err) {
		obj, _, err = s.blobs.Open(ctx, s.blobKey(l), nil)
	}
	if err != nil {
		return nil, fmt.Errorf("%s: %v", where, err)
	}
	if obj.Size != l.Size {
		return nil, fmt.Errorf("%s: the registry's blob %s is %d bytes, the manifest says %d", where, l.Digest, obj.Size, l.Size)
	}
	r := &blobReader{ctx: ctx, s: s, obj: obj}
	tr := tar.NewReader(r)
	out := map[string]member{}
	for n := 0; ; n++ {
		if n > maxLayers {
			return nil, fmt.Errorf("%s: over %d tar entries", where, maxLayers)
		}
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("%s: reading the tar: %v", where, err)
		}
		name := strings.TrimPrefix(h.Name, "./")
		switch h.Typeflag {
		case tar.TypeDir:
			continue
		case tar.TypeReg, tar.TypeRegA:
		default:
			return nil, fmt.Errorf("%s: tar entry %q is not a regular file or directory (type %q): refused", where, index.Printable(h.Name), h.Typeflag)
		}
		for k := range h.PAXRecords {
			if strings.HasPrefix(k, "GNU.sparse.") {
				return nil, fmt.Errorf("%s: tar entry %q is a sparse file: refused", where, index.Printable(h.Name))
			}
		}
		if err := checkPath(name); err != nil {
			return nil, fmt.Errorf("%s: tar entry %q %v", where, index.Printable(h.Name), err)
		}
		if _, dup := out[name]; dup {
			return nil, fmt.Errorf("%s: tar entry %q is there twice", where, index.Printable(name))
		}
		off := r.off
		if h.Size < 0 || off+h.Size > obj.Size {
			return nil, fmt.Errorf("%s: tar entry %q of %d bytes at %d runs past the blob's %d", where, index.Printable(name), h.Size, off, obj.Size)
		}
		out[name] = member{layer: l, off: off, size: h.Size}
	}
	return out, nil
}
