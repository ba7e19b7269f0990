// Package numpy reads the structure of NumPy .npy files and .npz archives
// (zips of .npy members): two rows of the format table in package
// formats. The decisions are described at the top of numpy.go.
//
// It exports SniffNPY, ParseNPY, SniffNPZ, ParseNPZ, and DType (a numpy
// descr as a dtype), which the PyTorch reader uses for numpy arrays inside
// pickles. Package torch imports numpy, never the other way: a zip that
// has no arrays but a data.pkl makes ParseNPZ return ErrTorchZip, and the
// caller (formats) hands it to torch.ParseZip.
//
// # Invariants
//
//   - Parsers read one index.File and return an Index with Sources ==
//     []string{f.Name()} (then one source per deflated member, described
//     in Index.Members) and no paths.
//   - A .npy header is a Python dict literal read by a literal-only parser
//     (numpy_header.go): nothing is evaluated. Declared member sizes are
//     checked against what deflate can produce (DeflateMaxRatio) and the
//     compressed range against the file before anything is allocated.
//   - Problems are *index.FormatError. Fuzz targets: FuzzNPY, FuzzNPZ.
package numpy
