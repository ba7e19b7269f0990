package oci

import (
	"archive/tar"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/lazyweights/tensorfs/backing"
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

// member is a file of a tar layer: size bytes of its blob at off, or
// of its decoded bytes (dec: a compressed layer's).
type member struct {
	layer     Descriptor
	off, size int64
	dec       backing.Source
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

// openTarBlob opens tar layer l's blob and checks its size against the
// manifest's.
func (s *Store) openTarBlob(ctx context.Context, where string, l Descriptor) (remote.Object, error) {
	obj, _, err := s.blobs.Open(ctx, s.blobKey(l), nil)
	if err != nil && s.auth.retry(ctx, err) {
		obj, _, err = s.blobs.Open(ctx, s.blobKey(l), nil)
	}
	if err != nil {
		return remote.Object{}, fmt.Errorf("%s: %v", where, err)
	}
	if obj.Size != l.Size {
		return remote.Object{}, fmt.Errorf("%s: the registry's blob %s is %d bytes, the manifest says %d", where, l.Digest, obj.Size, l.Size)
	}
	return obj, nil
}

// readTar lists the regular files of tar layer l, checked as layer
// paths are: an entry that escapes the tree, a link, a sparse file or a
// device is refused, and so is a name taken twice.
func (s *Store) readTar(ctx context.Context, where string, l Descriptor) (map[string]member, error) {
	obj, err := s.openTarBlob(ctx, where, l)
	if err != nil {
		return nil, err
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
		name, err := s.tarEntry(where, h, out)
		if err != nil {
			return nil, err
		}
		if name == "" {
			continue
		}
		off := r.off
		if h.Size < 0 || off+h.Size > obj.Size {
			return nil, fmt.Errorf("%s: tar entry %q of %d bytes at %d runs past the blob's %d", where, index.Printable(name), h.Size, off, obj.Size)
		}
		out[name] = member{layer: l, off: off, size: h.Size}
	}
	return out, nil
}

// tarEntry is the path of tar entry h, checked as layer paths are, or
// "" for a directory: an entry that escapes the tree, a link, a sparse
// file or a device is refused, and so is a name taken twice (in out).
func (s *Store) tarEntry(where string, h *tar.Header, out map[string]member) (string, error) {
	name := strings.TrimPrefix(h.Name, "./")
	switch h.Typeflag {
	case tar.TypeDir:
		return "", nil
	case tar.TypeReg, tar.TypeRegA:
	default:
		return "", fmt.Errorf("%s: tar entry %q is not a regular file or directory (type %q): refused", where, index.Printable(h.Name), h.Typeflag)
	}
	for k := range h.PAXRecords {
		if strings.HasPrefix(k, "GNU.sparse.") {
			return "", fmt.Errorf("%s: tar entry %q is a sparse file: refused", where, index.Printable(h.Name))
		}
	}
	if err := checkPath(name); err != nil {
		return "", fmt.Errorf("%s: tar entry %q %v", where, index.Printable(h.Name), err)
	}
	if _, dup := out[name]; dup {
		return "", fmt.Errorf("%s: tar entry %q is there twice", where, index.Printable(name))
	}
	return name, nil
}

// Compressed tar layers (ModelPack's .tar+gzip and .tar+zstd media
// types).
//
// Listing the files of one takes a pass over its decoded bytes (a tar
// header precedes each file's data), and the decoded size is not known
// before it (gzip's ISIZE is mod 2^32, a zstd frame's content size is
// optional). Open decodes the layer once, streamed, through the inflate
// cache (backing.InflateCache.DecodeStream): the tar's headers are read
// from the decoded bytes as the cache keeps them, within its disk
// budget (a layer that decodes past --inflate-disk is refused as it
// passes it), and the digest is checked over the compressed bytes as
// they are read. Each file is then a range of the decoded layer, a
// member of the cache (backing.Stream) like a deflated .npz member:
// read from memory or its file, and decoded again, checked again, only
// when the cache dropped it for room.
const (
	MediaWeightTarGzip = "application/vnd.cncf.model.weight.v1.tar+gzip"
	MediaWeightTarZstd = "application/vnd.cncf.model.weight.v1.tar+zstd"
	MediaConfigTarGzip = "application/vnd.cncf.model.weight.config.v1.tar+gzip"
	MediaConfigTarZstd = "application/vnd.cncf.model.weight.config.v1.tar+zstd"
)

// tarMedia are the tar layers read.
var tarMedia = map[string]bool{
	MediaWeightTar: true, MediaConfigTar: true,
	MediaWeightTarGzip: true, MediaWeightTarZstd: true,
	MediaConfigTarGzip: true, MediaConfigTarZstd: true,
}

// blobFile is a blob as a backing.MemberFile: what the inflate cache
// decodes a compressed tar layer from, with ranged GETs.
type blobFile struct {
	ctx  context.Context
	s    *Store
	obj  remote.Object // the blob's
	name string
	// readErr is set once a read failed: the bytes' fault is not known.
	readErr bool
}

func (f *blobFile) Name() string { return f.name }

func (f *blobFile) ReadAt(p []byte, off int64) (int, error) {
	if off < 0 {
		return 0, errors.New("read at a negative offset")
	}
	if off >= f.obj.Size {
		return 0, io.EOF
	}
	n := int(min(int64(len(p)), f.obj.Size-off))
	if n == 0 {
		return 0, nil
	}
	err := f.s.blobs.Get(f.ctx, f.obj, off, [][]byte{p[:n]}, nil)
	if err != nil && f.s.auth.retry(f.ctx, err) {
		err = f.s.blobs.Get(f.ctx, f.obj, off, [][]byte{p[:n]}, nil)
	}
	if err != nil {
		f.readErr = true
		return 0, err
	}
	if n < len(p) {
		return n, io.EOF
	}
	return n, nil
}

// readCompressedTar lists the regular files of compressed tar layer l
// as readTar does, in the one decode of the layer (streamed), which
// keeps the decoded bytes in the inflate cache.
func (s *Store) readCompressedTar(ctx context.Context, where string, l Descriptor) (map[string]member, error) {
	obj, err := s.openTarBlob(ctx, where, l)
	if err != nil {
		return nil, err
	}
	k := backing.Stream{CompressedSize: l.Size, Zstd: strings.HasSuffix(l.MediaType, "+zstd"), SHA256: l.Digest[len("sha256:"):]}
	// The decode at Open reads under ctx; a later one (the cache
	// dropped the layer) under none: the reads' own timeouts hold.
	file := &blobFile{ctx: ctx, s: s, obj: obj, name: s.pinned}
	out := map[string]member{}
	var entryErr error
	src, err := s.inflate.DecodeStream(file, l.Digest, k, func(r io.Reader) error {
		cr := &countReader{r: r}
		tr := tar.NewReader(cr)
		for n := 0; ; n++ {
			if n > maxLayers {
				entryErr = fmt.Errorf("%s: over %d tar entries", where, maxLayers)
				return entryErr
			}
			h, err := tr.Next()
			if err == io.EOF {
				return nil
			}
			if errors.Is(err, io.ErrUnexpectedEOF) {
				return fmt.Errorf("the tar ends early, inside an entry or its header (%d decoded bytes)", cr.n)
			}
			if err != nil {
				return err
			}
			name, err := s.tarEntry(where, h, out)
			if err != nil {
				entryErr = err
				return err
			}
			if name != "" {
				out[name] = member{layer: l, off: cr.n, size: h.Size}
			}
		}
	})
	if entryErr != nil || err != nil {
		// Bytes that do not decode, or decode to a tar refused, may be
		// other bytes than the digest's: that is what is said then.
		if bad := s.digestMismatch(file, l); bad != "" {
			err, entryErr = errors.New(bad), nil
		}
	}
	file.ctx = context.Background()
	if entryErr != nil {
		return nil, entryErr
	}
	if err != nil {
		return nil, fmt.Errorf("%s: layer %s: %v", where, l.Digest, err)
	}
	s.decoded = append(s.decoded, src)
	for name, m := range out {
		if m.size < 0 || m.off+m.size > src.Size() {
			return nil, fmt.Errorf("%s: tar entry %q of %d bytes at %d runs past the layer's %d decoded bytes", where, index.Printable(name), m.size, m.off, src.Size())
		}
		m.dec = src
		out[name] = m
	}
	return out, nil
}

// digestMismatch reads the blob of compressed layer l whole (file) and
// hashes it: when its sha256 is not l's digest, what a decode that
// stopped before the end of the compressed bytes could not say (the
// phrase DecodeStream says when it reaches the end), else "" (a read
// that fails too; none is made after a read of the decode failed). It
// costs a read of the compressed bytes, on failure only.
func (s *Store) digestMismatch(file *blobFile, l Descriptor) string {
	if file.readErr {
		return ""
	}
	h := sha256.New()
	n, err := io.CopyBuffer(h, io.NewSectionReader(file, 0, file.obj.Size), make([]byte, 1<<20))
	if err != nil {
		return ""
	}
	got := hex.EncodeToString(h.Sum(nil))
	if "sha256:"+got == l.Digest {
		return ""
	}
	return fmt.Sprintf("the sha256 of its %d compressed bytes is %s, not its digest %s", n, got, l.Digest)
}

// countReader counts the bytes read through it.
type countReader struct {
	r io.Reader
	n int64
}

func (c *countReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}

// openDecoded opens a compressed tar layer's file: named by its layer's
// digest (its ETag: the path, the size and the layer name its bytes),
// with its first bytes (which decode the layer again when the cache
// dropped it).
func (s *Store) openDecoded(key string, m member, head []byte) (remote.Object, int, error) {
	obj := remote.Object{Key: key, Size: m.size, ETag: `"` + m.layer.Digest + `"`}
	n := int(min(int64(len(head)), m.size))
	if n > 0 {
		if err := s.getDecoded(key, m, 0, [][]byte{head[:n]}, nil); err != nil {
			return remote.Object{}, 0, err
		}
	}
	return obj, n, nil
}

// getDecoded reads a compressed tar layer's file from the decoded layer.
func (s *Store) getDecoded(key string, m member, off int64, bufs [][]byte, filled func(i int)) error {
	if off < 0 {
		return &remote.Error{URL: s.URL(key), Kind: remote.Invalid, Msg: fmt.Sprintf("read at negative offset %d", off)}
	}
	for i, b := range bufs {
		if int64(len(b)) > m.size-off {
			return &remote.Error{URL: s.URL(key), Kind: remote.Invalid, Msg: fmt.Sprintf("read of %d bytes at %d past the file's %d", len(b), off, m.size)}
		}
		n, err := m.dec.ReadAt(b, m.off+off)
		if n < len(b) {
			if err == nil || err == io.EOF {
				err = io.ErrUnexpectedEOF
			}
			return &remote.Error{URL: s.URL(key), Kind: remote.KindOf(err), Msg: strings.TrimPrefix(err.Error(), s.pinned+": "), Err: err}
		}
		off += int64(n)
		if filled != nil {
			filled(i)
		}
	}
	return nil
}

// Close frees the decoded tar layers' memory and files.
func (s *Store) Close() error {
	for _, src := range s.decoded {
		src.Close()
	}
	s.decoded = nil
	return nil
}
