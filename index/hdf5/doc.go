// Package hdf5 reads the datasets of an HDF5 file as h5py writes it
// (Keras 3's model.weights.h5, alone or inside a .keras zip) as tensors
// named by their path ("layers/dense/vars/0"): a row of the format table
// in package formats.
//
// It is a focused reader of the subset h5py and the HDF5 library write
// by default (libver "earliest"), written for tensorfs rather than taken
// from a library: the one pure-Go HDF5 reader (github.com/scigolib/hdf5,
// v0.10 beta when this was written) reads values into memory and gives
// no file offsets, and tensorfs serves contiguous datasets as ranges of
// the file and decodes chunked ones lazily within its own budgets.
//
// What is read:
//
//   - superblock versions 0 to 3 at byte 0 (ParseAt: at any offset, for
//     a stored .keras member); addresses are relative to it;
//   - object headers version 1 and 2, continuation blocks followed;
//   - groups: symbol tables (a v1 B-tree of type 0 whose leaves are
//     symbol table nodes, names in a local heap) and compact link
//     messages (hard links);
//   - datasets: dataspace (simple or scalar), datatype (integers of 1,
//     2, 4 or 8 bytes; IEEE floats of 16 (half and bfloat16), 32 and 64
//     bits; either byte order: big-endian ones are served swapped),
//     layout version 3 or 4: compact and contiguous datasets are ranges
//     of the file; chunked ones (layout 3, a v1 B-tree of type 1) with
//     the gzip (deflate) and shuffle filters are a MethodDecode member:
//     on first read, one row of chunks along the first dimension at a
//     time (at most MaxSlabBytes), each chunk inflated to exactly its
//     size (a chunk that inflates to more is refused at the first byte
//     over), unshuffled, and copied into place (edge chunks clipped).
//
// Listed as Unserved, one line each, the rest of the file served: dense
// groups (links in a fractal heap, libver "latest" with many links),
// soft and external links, chunked layout version 4 (HDF5 1.10's chunk
// indexes), other filters (fletcher32, szip, lzf...), datasets with
// chunks missing (the fill value), never-written contiguous storage,
// strings, compounds, enums (h5py's bool), references, virtual datasets,
// shared (committed) datatypes.
//
// # Invariants
//
//   - Every structure is read at an address checked against the file;
//     every B-tree node, symbol table node and header continuation block
//     once (a loop is one line, "reached twice"), B-tree levels must
//     descend by one, a group reached twice (a cycle) is refused. At most
//     MaxObjects objects, MaxBTreeNodes nodes, MaxDepth nested groups,
//     MaxHeaderBytes per header, MaxChunks chunks of at most
//     MaxChunkBytes per dataset; a stored chunk larger than twice its
//     data is refused at load.
//   - Element counts and sizes use checked arithmetic; chunks must lie on
//     the chunk grid, inside the dataset, once each, and cover it.
//   - Checksums of v2 headers are not verified (the structure is
//     checked instead).
//   - Problems are one line (*index.FormatError, "HDF5: ...") naming the
//     file and the byte offset or dataset. Fuzz target: FuzzHDF5.
package hdf5
