// Package dcp reads PyTorch Distributed Checkpoints (torch.distributed.
// checkpoint, "DCP"): a directory holding a .metadata file (a pickle of
// DCP's dataclasses) and the __R_K.distcp files each rank wrote. It is
// detected by content: a .metadata pickle naming torch.distributed.
// checkpoint's classes (Sniff).
//
// # What is read
//
// .metadata is read with the restricted unpickler and an allowlist: the
// DCP dataclasses (Metadata, TensorStorageMetadata, BytesStorageMetadata,
// ChunkStorageMetadata, TensorProperties at its current and its torch
// 2.0-2.2 module path, MetadataIndex, StorageMeta, filesystem's
// _StorageInfo), the memory-format enum, torch.Size, torch dtypes,
// torch.serialization._get_layout and pathlib paths. Any other global
// refuses the file in one line, where it appears.
//
// The loader (formats) finds the .metadata among a directory's files
// (MetadataFile, Sniff) and calls ParseDir, then opens each tiled tensor
// as a backing.Tiled over the .distcp files.
//
// Each tensor is whole: its chunks (TensorStorageMetadata.chunks, boxes
// of the tensor) are located through storage_data (relative_path, offset,
// length: an item, a torch.save zip of the chunk whose storage is stored
// uncompressed), so that a chunk is a plain range of a .distcp file. A
// tensor held by one chunk is that range; a tensor tiled from several is
// an index.Member of kind index.Tiles whose bytes backing.Tiled gathers
// per read (one read per contiguous run: per chunk for chunks along dim
// 0, per row piece otherwise), never materialising the tensor.
//
// A torch.float4_e2m1fn_x2 tensor (TensorMeta.X2: its size and chunks
// count bytes of two E2M1 elements, the even one in the low nibble) is
// served as F4 with the last dimension doubled, a 0-d one as F4 [2], as
// safetensors' torch writer stores it; its chunks are tiled in bytes.
// Checked against torch 2.14's dcp.save (testdata/f4, gen.py), chunks
// along the last dimension among them.
//
// Names: a tensor's name is its path in the saved state dict
// (planner_data) joined with '/' (SPEC's rule for nested containers,
// e.g. model/layers.0.attention.wq.weight); where two paths join to one
// name ({"a/b": t1, "a": {"b": t2}}), the later in state_dict_metadata's
// order is NAME#1 (#2, ...: the first suffix not taken), as for any
// container. The dotted DCP key of every name is Index.Keys (index.json's
// "keys"), apart from the metadata, so that no key of the checkpoint can
// take its place. Non-tensor items (BytesStorageMetadata: ints, floats,
// strings, tuples...) are metadata entries under their name: their value
// where the restricted unpickler reads plain data, else {"value": repr
// or why not, "bytes": size}.
//
// Each item is read once, however many chunks or values name it (a cache
// per item within one ParseDir). Values are charged by their bytes (16
// per element, strings and keys by their length) to one budget of
// MetaBytesFloor plus MetaBytesPerByte per byte of the .metadata and of
// each item read (pickle's metadata budget): values that name one item
// each pay for it, and past the budget a value is described as not read
// ("shared items multiply"), never the checkpoint refused.
//
// # Validation
//
// Refused with one line, nothing opened left open: other globals; a
// chunk outside its tensor, overlapping another, or chunks that leave
// holes (tiling.Check: O(n log n) for n chunks along any dim, naming an
// element held twice or by none); a chunk or value with no storage item; an item past its file's
// end, not a torch.save zip, holding another dtype or shape than the
// metadata says, or compressed; a relative_path that is not a file name
// in the directory (../, absolute, a missing .distcp) or, locally, a
// symbolic link to what is not a regular file (Dir.Inside, which formats
// sets: a link to a regular file is followed wherever it leads, as in a
// Hugging Face cache snapshot); more than MaxChunks chunks per tensor; a
// .metadata over MaxMetadata bytes. Results are charged to a budget that
// grows with the .metadata's size (pickle.Budget): a small pickle cannot
// make millions of chunks through shared references.
//
// The layouts torch 2.7-2.14 add are read: items stored through the
// zstd transform (_StorageInfo.transform_descriptors ["stream.zstd/1"]:
// zstd.go: a chunk of at most 1 MiB decoded at open, its storage a member
// of kind index.Zstd; zstd_lazy.go: a larger chunk not read at open, a
// member of kind index.Decoded that decodes its item once, on first
// read, and checks the item then), other
// transforms leaving their tensors in index.Unserved; .distcp files in
// the safetensors format (torch >= 2.8: blob.go, DCP_SHARDING_INFO
// checked). Tensors Megatron's mcore_data says were saved in a
// reformulated shape are served in their original shape where each
// saved chunk holds whole cells (megatron.go), else listed in
// Index.NotRead with why (index.json "not_read", apart from the
// metadata); the rest of such a checkpoint is.
package dcp
