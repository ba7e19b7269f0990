package formats

import (
	"archive/zip"
	"bytes"
	"compress/flate"
	"encoding/binary"
	"errors"
	"io"
	"math"

	"github.com/lazyweights/tensorfs/backing"
	"github.com/lazyweights/tensorfs/index"
	"github.com/lazyweights/tensorfs/index/hdf5"
	"github.com/lazyweights/tensorfs/index/numpy"
)

// kerasWeights is the member of a Keras 3 .keras zip that holds the
// weights (keras/src/saving/saving_lib.py, _VARS_FNAME + ".h5").
const kerasWeights = "model.weights.h5"

// sniffKeras reports whether head is a zip whose first member is one a
// Keras 3 .keras file starts with: metadata.json, config.json or
// model.weights.h5 (saving_lib writes them in that order).
func sniffKeras(head []byte) bool {
	if len(head) < 30 || !bytes.HasPrefix(head, []byte("PK\x03\x04")) {
		return false
	}
	n := int(binary.LittleEndian.Uint16(head[26:]))
	if 30+n > len(head) {
		return false
	}
	switch string(head[30 : 30+n]) {
	case "metadata.json", "config.json", kerasWeights:
		return true
	}
	return false
}

// parseKeras reads the model.weights.h5 of a .keras zip. A stored
// member is an HDF5 file at an offset of the zip, whose datasets are
// ranges of the zip (or, chunked, decoded from it). A deflated member is
// source 1, an index.Member of kind Deflated that the HDF5 parser reads
// through members (decoded once, within the budgets of the cache of
// decoded members, its size and CRC-32 checked before any byte is
// parsed); its datasets are ranges of that member, its chunked ones
// members decoded from it.
func parseKeras(f index.File, members index.MemberOpener) (*index.Index, error) {
	zr, _, err := index.OpenZip(f)
	if err != nil {
		return nil, err
	}
	var zf *zip.File
	for _, m := range zr.File {
		if m.Name == kerasWeights {
			if zf != nil {
				return nil, index.ErrorAt(f.Name(), "member "+kerasWeights, "a Keras .keras zip with two members named %s", kerasWeights)
			}
			zf = m
		}
	}
	if zf == nil {
		return nil, index.ErrorAt(f.Name(), "", "a ZIP archive like a Keras .keras file (first member %q) without a %s member: tensorfs reads a .keras file's weights from it", zr.File[0].Name, kerasWeights)
	}
	where := "member " + kerasWeights
	if zf.Method != zip.Store && zf.Method != zip.Deflate {
		return nil, index.ErrorAt(f.Name(), where, "compressed with zip method %d; tensorfs reads the weights of a .keras file stored or deflated: unzip the file and mount %s", zf.Method, kerasWeights)
	}
	off, err := zf.DataOffset()
	if err != nil {
		return nil, index.ErrorAt(f.Name(), where, "%v", err)
	}
	if zf.Method == zip.Deflate {
		return parseKerasDeflated(f, zf, off, members)
	}
	size := int64(zf.UncompressedSize64)
	if zf.UncompressedSize64 > uint64(f.Size()) || off < 0 || off > f.Size()-size {
		return nil, index.ErrorAt(f.Name(), where, "%d bytes at byte %d run past the end of the file", size, off)
	}
	idx, err := hdf5.ParseAt(f, f.Name()+":"+kerasWeights, off, size)
	if err != nil {
		return nil, err
	}
	idx.Format = "keras"
	return idx, nil
}

// parseKerasDeflated reads the deflated model.weights.h5 zf, whose
// compressed data is at byte off of f, through members.
func parseKerasDeflated(f index.File, zf *zip.File, off int64, members index.MemberOpener) (*index.Index, error) {
	where := "member " + kerasWeights
	csize := int64(zf.CompressedSize64)
	if zf.CompressedSize64 > uint64(f.Size()) || off < 0 || off > f.Size()-csize {
		return nil, index.ErrorAt(f.Name(), where, "%d compressed bytes at byte %d run past the end of the file", csize, off)
	}
	if zf.Flags&1 != 0 {
		return nil, index.ErrorAt(f.Name(), where, "encrypted; tensorfs cannot read it")
	}
	size := zf.UncompressedSize64
	if size > math.MaxInt64 || size > uint64(csize)*numpy.DeflateMaxRatio+258 {
		return nil, index.ErrorAt(f.Name(), where, "declares %d bytes inflated from %d compressed bytes, more than deflate can produce (at most %d to 1): a zip bomb or a broken directory", size, csize, numpy.DeflateMaxRatio)
	}
	// Its first bytes, inflated alone, must be an HDF5 superblock before
	// the whole member is inflated into the cache (a member of zeros
	// declared at 1 GiB costs 256 bytes of inflating, not 1 GiB).
	head := make([]byte, min(size, 256))
	fr := flate.NewReader(io.NewSectionReader(f, off, csize))
	n, _ := io.ReadFull(fr, head)
	fr.Close()
	if n == len(head) {
		if err := hdf5.CheckSuperblock(head, f.Name()+":"+kerasWeights, int64(size)); err != nil {
			return nil, err
		}
	} // else cut short: inflating it says where
	if members == nil {
		return nil, index.ErrorAt(f.Name(), where, "internal error: a deflated member and no cache of decoded members to read it through")
	}
	m := index.Member{Source: 1, File: 0, Name: kerasWeights, Size: int64(zf.UncompressedSize64),
		Kind: &index.Deflated{Offset: off, CompressedSize: csize, CRC32: zf.CRC32}}
	h5, err := members(f, &m)
	if err != nil {
		return nil, err
	}
	// Decode it whole now: a bad member (corrupt, a size or CRC-32
	// mismatch, a bomb stopped at its declared size) is the load's one
	// line, before the HDF5 parser reads any of it.
	if src, ok := h5.(backing.Source); ok {
		if err := backing.InflateNow(src); err != nil {
			var me *backing.MemberError
			if errors.As(err, &me) {
				return nil, index.ErrorAt(f.Name(), where, "%s", me.Msg)
			}
			return nil, index.ErrorAt(f.Name(), where, "%v", err)
		}
	}
	sub, err := hdf5.Parse(h5)
	if err != nil {
		return nil, err
	}
	// Sources: the zip, the member, then the HDF5 parser's own members
	// (chunked datasets decoded from the member), one further on.
	idx := &index.Index{Format: "keras", Sources: append([]string{f.Name()}, sub.Sources...), Metadata: sub.Metadata, Notes: sub.Notes}
	idx.Sources[1] = ""
	idx.Members = append(idx.Members, m)
	for _, sm := range sub.Members {
		idx.Members = append(idx.Members, sm.Shifted(1))
	}
	idx.Tensors = sub.Tensors
	for i := range idx.Tensors {
		idx.Tensors[i].Source++
	}
	idx.Unserved = sub.Unserved
	for i := range idx.Unserved {
		idx.Unserved[i].Source++
	}
	return idx, nil
}
