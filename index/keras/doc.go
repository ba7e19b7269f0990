// Package keras reads a Keras 3 .keras file (a zip of metadata.json,
// config.json and model.weights.h5) as the tensors of its
// model.weights.h5, through package hdf5: a row of the format table in
// package formats.
//
// A stored model.weights.h5 is an HDF5 file at an offset of the zip
// (hdf5.ParseAt): its datasets are ranges of the zip. A deflated one is
// an index.Member of kind Deflated (source 1) that the parser opens
// through index.Env's Members, decoded whole once within the loader's
// budgets before the HDF5 reader reads any of it; its datasets are
// ranges of that member, and the HDF5 reader's own members follow it
// (Index.Rebase). Like every index room it makes no system calls and
// imports neither formats nor backing.
package keras
