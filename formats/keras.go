package formats

import (
	"archive/zip"
	"bytes"
	"encoding/binary"

	"github.com/lazyweights/tensorfs/index"
	"github.com/lazyweights/tensorfs/index/hdf5"
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

// parseKeras reads the model.weights.h5 of a .keras zip in place: a
// stored member is an HDF5 file at an offset of the zip, whose
// datasets are ranges of the zip (or, chunked, decoded from it).
func parseKeras(f index.File) (*index.Index, error) {
	zr, err := index.OpenZip(f)
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
	if zf.Method != zip.Store {
		return nil, index.ErrorAt(f.Name(), where, "compressed with zip method %d; tensorfs reads the weights of a .keras file stored (as Keras writes them): unzip the file and mount %s", zf.Method, kerasWeights)
	}
	off, err := zf.DataOffset()
	if err != nil {
		return nil, index.ErrorAt(f.Name(), where, "%v", err)
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
