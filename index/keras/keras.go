package keras

import (
	"archive/zip"
	"bytes"
	"compress/flate"
	"encoding/binary"
	"io"
	"math"

	"github.com/lazyweights/tensorfs/index"
	"github.com/lazyweights/tensorfs/index/hdf5"
	"github.com/lazyweights/tensorfs/index/numpy"
)

// Weights is the member of a Keras 3 .keras zip that holds the
// weights (keras/src/saving/saving_lib.py, _VARS_FNAME + ".h5").
const Weights = "model.weights.h5"

// Sniff reports whether head is a zip whose first member is one a
// Keras 3 .keras file starts with: metadata.json, config.json or
// model.weights.h5 (saving_lib writes them in that order).
func Sniff(head []byte) bool {
	if len(head) < 30 || !bytes.HasPrefix(head, []byte("PK\x03\x04")) {
		return false
	}
	n := int(binary.LittleEndian.Uint16(head[26:]))
	if 30+n > len(head) {
		return false
	}
	switch string(head[30 : 30+n]) {
	case "metadata.json", "config.json", Weights:
		return true
	}
	return false
}

// Parse reads the model.weights.h5 of a .keras zip. A stored member is
// an HDF5 file at an offset of the zip, whose datasets are ranges of the
// zip (or, chunked, decoded from it). A deflated member is source 1, an
// index.Member of kind Deflated that the HDF5 parser reads through
// env.Members (decoded once, within the budgets of the cache of decoded
// members, its size and CRC-32 checked before any byte is parsed); its
// datasets are ranges of that member, its chunked ones members decoded
// from it.
func Parse(f index.File, env index.Env) (*index.Index, error) {
	zr, _, err := index.OpenZip(f)
	if err != nil {
		return nil, err
	}
	var zf *zip.File
	for _, m := range zr.File {
		if m.Name == Weights {
			if zf != nil {
				return nil, index.ErrorAt(f.Name(), "member "+Weights, "a Keras .keras zip with two members named %s", Weights)
			}
			zf = m
		}
	}
	if zf == nil {
		return nil, index.ErrorAt(f.Name(), "", "a ZIP archive like a Keras .keras file (first member %q) without a %s member: tensorfs reads a .keras file's weights from it", zr.File[0].Name, Weights)
	}
	where := "member " + Weights
	if zf.Method != zip.Store && zf.Method != zip.Deflate {
		return nil, index.ErrorAt(f.Name(), where, "compressed with zip method %d; tensorfs reads the weights of a .keras file stored or deflated: unzip the file and mount %s", zf.Method, Weights)
	}
	off, err := zf.DataOffset()
	if err != nil {
		return nil, index.ErrorAt(f.Name(), where, "%v", err)
	}
	if zf.Method == zip.Deflate {
		return parseDeflated(f, zf, off, env.Members)
	}
	size := int64(zf.UncompressedSize64)
	if zf.UncompressedSize64 > uint64(f.Size()) || off < 0 || off > f.Size()-size {
		return nil, index.ErrorAt(f.Name(), where, "%d bytes at byte %d run past the end of the file", size, off)
	}
	idx, err := hdf5.ParseAt(f, f.Name()+":"+Weights, off, size)
	if err != nil {
		return nil, err
	}
	idx.Format = "keras"
	return idx, nil
}

// parseDeflated reads the deflated model.weights.h5 zf, whose
// compressed data is at byte off of f, through members.
func parseDeflated(f index.File, zf *zip.File, off int64, members index.MemberOpener) (*index.Index, error) {
	where := "member " + Weights
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
		if err := hdf5.CheckSuperblock(head, f.Name()+":"+Weights, int64(size)); err != nil {
			return nil, err
		}
	} // else cut short: inflating it says where
	if members == nil {
		return nil, index.ErrorAt(f.Name(), where, "internal error: a deflated member and no cache of decoded members to read it through")
	}
	m := index.Member{Source: 1, File: 0, Name: Weights, Size: int64(zf.UncompressedSize64),
		Kind: &index.Deflated{Offset: off, CompressedSize: csize, CRC32: zf.CRC32}}
	// Decoded whole by members before it returns: a bad member
	// (corrupt, a size or CRC-32 mismatch, a bomb stopped at its
	// declared size) is the load's one line, before the HDF5 parser
	// reads any of it.
	h5, err := members(f, &m)
	if err != nil {
		return nil, err
	}
	sub, err := hdf5.Parse(h5)
	if err != nil {
		return nil, err
	}
	// Sources: the zip, the member, then the HDF5 parser's own members
	// (chunked datasets decoded from the member), one further on.
	sub.Rebase(1)
	idx := &index.Index{Format: "keras", Sources: append([]string{f.Name()}, sub.Sources...), Metadata: sub.Metadata, Notes: sub.Notes}
	idx.Sources[1] = ""
	idx.Members = append([]index.Member{m}, sub.Members...)
	idx.Tensors = sub.Tensors
	idx.Unserved = sub.Unserved
	return idx, nil
}
