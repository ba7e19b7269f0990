// Package formats is where a checkpoint's format is told and its files
// are found: the one detection table (Table, Detect, ParseFile), the
// refused-formats table (refused.go), and the loader of whole checkpoints
// (Load, LoadTree): weight maps, directories of shards, split GGUF parts,
// merging. It sits above the format packages (index/*) and backing.
//
// # Formats
//
// Table is an explicit table, detected by content (the first SniffLen
// bytes), never by file name, and with no init() registration:
//
//	format       recognised by                           parser
//	gguf         "GGUF" magic                            index/gguf
//	numpy        "\x93NUMPY" magic                       index/numpy
//	pytorch      zip whose first member is torch's       index/torch
//	             (archive/data.pkl...), or the legacy
//	             pickle with torch's magic number
//	npz          zip whose first member is an .npy       index/numpy
//	safetensors  u64 header length <= 100 MB, then '{'   index/safetensors
//	paddle       a pickle of a dict (protocol 2+) whose  index/paddle
//	             values are NumPy arrays (PaddlePaddle
//	             .pdparams/.pdopt); last: other pickles
//	             are not claimed
//	hdf5         "\x89HDF\r\n\x1a\n" at byte 0 (Keras 3  index/hdf5
//	             .weights.h5, as h5py writes it)
//	keras        zip whose first member is               index/keras, over
//	             metadata.json, config.json or           index/hdf5 (in place;
//	             model.weights.h5 (Keras 3 .keras)       deflated: env.Members)
//	onnx         ir_version (field 1), then a            index/onnx
//	             ModelProto field (no magic: after the   (env.Siblings,
//	             rows with magic bytes)                  OpensSiblings)
//
// Directories are read by the table of layouts (Layouts, layout.go),
// each row a Claim and a Load over a Dir: PyTorch Distributed
// Checkpoints (a .metadata and its *.distcp, index/dcp), then sharded
// Hugging Face checkpoints of any row's format: a weight map
// (*.index.json) and its shards, or the files of the directory that are
// checkpoints by content (shards, joined by their row's Join where it
// has one: GGUF split parts, safetensors storage-writer pieces).
//
// Families (families.go) names the formats as users know them (NumPy is
// the numpy and npz rows; a distributed checkpoint and a sharded Hugging
// Face checkpoint are directories): every row is in one family
// (TestFamilies), the CLI's help lists them from it, and
// cmd/tensorfs's TestFormatListsAgree holds the README and
// docs/FORMATS.md to it.
//
// A row has one parser, Parse(file, env): it reads one index.File
// (io.ReaderAt, Size, Name), validates all of it and returns an Index
// with Sources == []string{f.Name()}, Source 0 in every tensor and no
// paths. env (index.Env) hands it what it may open besides: a file that
// names others beside it (ONNX external data, a row with OpensSiblings)
// opens them through env.Siblings, confined to the file's directory
// (siblings.go: "..", absolute paths and symbolic links out refused, one
// line), and its Index's Sources are the file, then the files it
// opened, then members; a file whose structure lies in a compressed
// member (a .keras zip's deflated model.weights.h5) opens it through
// env.Members (member.go: parseMember), decoded whole within the inflate
// cache's budgets, and the loader serves the member from that same
// source (openMember takes it from loader.prepared), so it is decoded
// once. What the loader needs to know of a row is a field of it, never
// its name: OpensSiblings (parsed as soon as sniffed in a directory),
// NoFallback (not retried on a file another row sniffed too).
//
// A file no row accepts is named as what it is when the refused table
// knows it (a GGML file, a tar of torch's old
// format, ONNX, HDF5, a Git LFS pointer...), else by its first bytes.
//
// # Loading
//
// Load (load.go) finds the files of a sharded checkpoint (a *.index.json
// weight map, weightmap.go; a directory of shards, dir.go; split GGUF
// parts, split.go), merges their indexes (merge.go), sorts tensors by
// name, checks every tensor against its file (index.CheckTensor) and
// assigns paths (index.AssignPaths). It returns backing.Sources: the
// files the Opener opened (a file that is not a backing.Source is served
// as one, asSource) and the members made of them (member.go), so that no
// caller asserts types; a quantized weight's member (Quantize) is a
// backing.Computed source. LoadTree is the same over a Tree (a
// bucket prefix, an HTTP server; remote.go).
//
// # Invariants
//
//   - No system calls except Load's os.Stat and os.ReadDir, and the
//     symbolic-link checks (os.Lstat, filepath.EvalSymlinks) that confine
//     the files a checkpoint names beside it to its directory (dcp.go,
//     siblings.go); every byte is read through index.File. Files are opened through the caller's
//     Opener and all of them are closed again when loading fails.
//   - No state between packages: compressed members (Index.Members) are
//     opened through the inflate cache the caller passes in
//     Options.Inflate.
//   - At most index.MaxShards shards and index.MaxTensors tensors; a
//     tensor name found twice is refused. Fuzz targets: FuzzWeightMap,
//     FuzzRefused.
//
// # Errors
//
// Problems in a file are *index.FormatError. Errors from the Opener and
// the directory listing are returned as they are (*fs.PathError).
package formats
