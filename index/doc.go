// Package index reads the structure of ML checkpoints: which tensors a file
// (or a sharded directory) holds, with dtype, shape and where each tensor's
// bytes are. It never reads tensor data and never serves it; backing and
// view do that from what index says.
//
// # Formats
//
// Formats is an explicit table, detected by content (the first SniffLen
// bytes), never by file name, and with no init() registration:
//
//	format       recognised by                           parser
//	gguf         "GGUF" magic                            gguf.go
//	numpy        "\x93NUMPY" magic                       numpy.go
//	pytorch      zip whose first member is torch's       torch*.go, pickle.go
//	             (archive/data.pkl...), or the legacy
//	             pickle with torch's magic number
//	npz          zip whose first member is an .npy       numpy.go
//	safetensors  u64 header length <= 100 MB, then '{'   safetensors.go
//
// A parser reads one File (io.ReaderAt, Size, Name), validates all of it
// and returns an Index with Sources == []string{f.Name()}, Source 0 in
// every tensor and no paths. Load (load.go) finds the files of a sharded
// checkpoint (a *.index.json weight map, a directory of shards, split GGUF
// parts), merges their indexes, sorts tensors by name, checks every tensor
// against its file and assigns paths (names.go). Document (json.go) is the
// .tensorfs/index.json form of an Index, and ParseDocument reads it back.
// Metadata values are held in memory up to MaxInlineMetadata bytes each
// (GGUF: larger ones stay in the file as *FileValue) and rendered within
// MetadataJSONBudget, larger ones as elision objects (metadata.go).
//
// # Invariants
//
//   - No system calls except Load's os.Stat and os.ReadDir; every byte is
//     read through File. Files are opened through the caller's Opener and
//     all of them are closed again when Load fails.
//   - Nothing read from a file is trusted: every length, count, dimension
//     and offset is checked against the caps in limits.go and against the
//     bytes the file really has before anything is allocated from it (the
//     safetensors header is read only after N <= MaxSafetensorsHeader and
//     8+N <= file size). Element and byte counts use checked arithmetic
//     (Elements, dtype.DType.ByteSize); overflow is an error.
//   - Every tensor of a returned Index has a valid dtype, a shape of at most
//     MaxDims non-negative dimensions, Size equal to the bytes of its
//     row-major native representation, and (when contiguous) its bytes
//     inside its source file; Tensors are sorted by Name, names are
//     distinct, and paths are distinct, never empty, ".", ".." or starting
//     with '.', and no path is both a file and a directory.
//   - JSON (safetensors headers, weight maps) is read by a small strict
//     reader (jsonReader in json.go, checked against encoding/json by
//     FuzzJSON): duplicate keys are refused, as are invalid UTF-8, unpaired
//     UTF-16 surrogates, nesting deeper than MaxNesting, and numbers that
//     are not plain non-negative integers where sizes are expected.
//   - A malformed checkpoint never panics and never makes a huge allocation.
//     Fuzz targets: FuzzSafetensors, FuzzWeightMap, FuzzJSON, FuzzPaths, and
//     one per parser.
//
// # What is not served
//
// One thing a parser cannot read never costs the readable rest of a file.
// Index.Unserved lists, in name order, the entries a checkpoint holds that
// are not served, each an Unserved{Name, Type, Shape, Source, Offset, Why}:
// Type is the stored type as the format names it ("ggml type 43"), Shape
// and Offset are given where known (nil, -1 otherwise), Why is one line
// without the file name. Today a GGUF tensor of a type code this build does
// not know goes there (its size cannot be computed); a parser for another
// format puts there what it lists but cannot serve (a torch dtype it cannot
// size, an .npz member that is not an array of numbers) in the same way.
// Load keeps every part's entries (Source renumbered); the Document lists
// them under "unserved" (DocUnserved: name, type, shape, source, offset,
// why; absent when there are none); each command that opens the checkpoint
// logs one line per entry, convert refuses to write an incomplete OUT and
// load fails after the rest. A file with nothing to serve but such entries
// is still refused, in one line.
//
// # Errors
//
// Problems in a file are *FormatError (errors.Is(err, ErrFormat)): one line,
// "FILE: what is wrong (where)", where is a byte offset ("at byte 1234"), a
// tensor or key name, or both. Errors from the Opener and the directory
// listing are returned as they are (*fs.PathError).
package index
