// Package hdf5 reads the datasets of an HDF5 file as h5py writes it
// (Keras 3's model.weights.h5, alone or inside a .keras zip) as tensors
// named by their path ("layers/dense/vars/0"): a row of the format table
// in package formats.
//
// It is a focused reader of the subset h5py and the HDF5 library write
// (libver "earliest", the default, and "latest"), written for tensorfs
// rather than taken from a library: the one pure-Go HDF5 reader
// (github.com/scigolib/hdf5, v0.10 beta when this was written) reads
// values into memory and gives no file offsets, and tensorfs serves
// contiguous datasets as ranges of the file and decodes chunked ones
// lazily within its own budgets.
//
// What is read:
//
//   - superblock versions 0 to 3 at byte 0 (ParseAt: at any offset, for
//     a stored .keras member); addresses are relative to it;
//   - object headers version 1 and 2, continuation blocks followed;
//   - groups: symbol tables (a v1 B-tree of type 0 whose leaves are
//     symbol table nodes, names in a local heap), compact link messages
//     (hard links), and dense groups (HDF5 1.8 storage: h5py's
//     libver='latest' beyond 8 links, track_order groups): the link info
//     message's fractal heap (direct and indirect blocks, nested to any
//     depth; managed, huge and tiny objects) read through its v2 B-tree
//     name index (type 5), each record's hash checked against its
//     name's; links listed by name, as everywhere (the index sorts);
//   - datasets: dataspace (simple or scalar), datatype (integers of 1,
//     2, 4 or 8 bytes; IEEE floats of 16 (half and bfloat16), 32 and 64
//     bits; either byte order: big-endian ones are served swapped),
//     layout version 3, 4 or 5: compact and contiguous datasets are
//     ranges of the file; chunked ones are found through their chunk
//     index: a v1 B-tree of type 1 (layout 3), or (layout 4, HDF5 1.10
//     to 1.14; 5, HDF5 2) a single chunk, an implicit index, a fixed
//     array (paged too), an extensible array (index, super and data
//     blocks) or a v2 B-tree (records of type 10 or 11). An unfiltered
//     single chunk of the dataset's shape is a range of the file; other
//     chunked datasets with the gzip (deflate) and shuffle filters are a
//     MethodDecode member: on first read, one row of chunks along the
//     first dimension at a time (at most MaxSlabBytes), each chunk
//     inflated to exactly its size (a chunk that inflates to more is
//     refused at the first byte over), unshuffled, and copied into place
//     (edge chunks clipped).
//
// Listed as Unserved, one line each, the rest of the file served: soft
// and external links, other filters (fletcher32, szip, lzf...),
// datasets with chunks missing (the fill value), partial edge chunks
// stored unfiltered (H5D_CHUNK_DONT_FILTER_PARTIAL_CHUNKS), never-written
// contiguous storage, strings, compounds, enums (h5py's bool),
// references, virtual datasets, shared (committed) datatypes. Fractal
// heaps with I/O filters (HDF5 never writes them for groups) refuse the
// file.
//
// # Invariants
//
//   - Every structure is read at an address checked against the file;
//     every B-tree node, symbol table node, header continuation block,
//     fractal heap block and chunk index block once (a loop is one line,
//     "reached twice"), B-tree levels must descend by one, heap and
//     extensible array blocks must say the offset their parent gives
//     them, a group reached twice (a cycle) is refused. At most
//     MaxObjects objects, MaxBTreeNodes nodes and blocks,
//     MaxMetadataBytes of structures read, MaxDepth nested groups,
//     MaxHeaderBytes per header, MaxHeapBytes of one heap's direct
//     blocks, MaxChunks chunks of at most MaxChunkBytes per dataset; a
//     stored chunk larger than twice its data is refused at load.
//   - Element counts and sizes use checked arithmetic; chunks must lie on
//     the chunk grid, inside the dataset, once each, and cover it.
//   - Checksums (Jenkins lookup3) of superblocks v2 and v3, v2 object
//     headers and their continuation blocks, fractal heap headers,
//     direct and indirect blocks, v2 B-tree headers and nodes, and fixed
//     and extensible array blocks are verified: a mismatch is one line
//     naming the structure and its offset.
//   - Problems are one line (*index.FormatError, "HDF5: ...") naming the
//     file and the byte offset or dataset. Fuzz target: FuzzHDF5.
//
// testdata/gen.py writes the fixtures (h5py 3.16, HDF5 2.2: dense
// groups, every chunk index, layout versions 4 and 5) and EXPECTED.json
// (h5py's listing and each dataset's sha256), which the tests compare
// byte for byte.
package hdf5
