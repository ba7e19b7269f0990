// Package index is the shared core of the checkpoint readers: what a
// checkpoint holds (Index, Tensor, Member), the File parsers read, the
// errors they return (FormatError, Errorf, ErrorAt), the caps on what a
// file may declare (limits.go), tensor names and paths (names.go,
// AssignPaths), the .tensorfs/index.json document (json.go), metadata
// rendering (metadata.go), the strict JSON reader (JSONReader,
// jsonreader.go) and small helpers the format rooms share (shared.go).
// It never reads tensor data and never serves it; backing and view do
// that from what an Index says.
//
// The formats themselves live one per package below it (index/gguf,
// index/safetensors, index/numpy, index/torch, with the restricted
// unpickler in index/pickle); package formats holds the detection table
// and the loader of sharded checkpoints. index imports none of them, nor
// backing.
//
// # Invariants
//
//   - No system calls: every byte is read through File.
//   - Nothing read from a file is trusted: every length, count, dimension
//     and offset is checked against the caps in limits.go and against the
//     bytes the file really has before anything is allocated from it.
//     Element and byte counts use checked arithmetic (Elements,
//     dtype.DType.ByteSize); overflow is an error.
//   - Every tensor of an Index that formats.Load returns has a valid
//     dtype, a shape of at most MaxDims non-negative dimensions, Size equal
//     to the bytes of its row-major native representation, and (when
//     contiguous) its bytes inside its source file (CheckTensor); Tensors
//     are sorted by Name, names are distinct, and paths are distinct,
//     never empty, ".", ".." or starting with '.', and no path is both a
//     file and a directory (AssignPaths).
//   - JSON (safetensors headers, weight maps, index.json) is read by a
//     small strict reader (JSONReader, checked against encoding/json by
//     FuzzJSON): duplicate keys are refused, as are invalid UTF-8,
//     unpaired UTF-16 surrogates, nesting deeper than MaxNesting, and
//     numbers that are not plain non-negative integers where sizes are
//     expected.
//   - Document (json.go) is the .tensorfs/index.json form of an Index
//     (DocFields, and DocTensorOf for each tensor: its role included),
//     and ParseDocument reads it back. WriteIndexJSON is the one writer
//     of index.json's text: `tensorfs ls --json` prints it, and a mount
//     serves the same bytes from its pieces (Frame, WriteDocLine).
//     Metadata values are held in memory up
//     to MaxInlineMetadata bytes each (GGUF: larger ones stay in the file
//     as *FileValue) and rendered within MetadataJSONBudget, larger ones
//     as elision objects (metadata.go).
//   - A malformed checkpoint never panics and never makes a huge
//     allocation. Fuzz targets here: FuzzJSON, FuzzPaths,
//     FuzzRenderMetadata; one per parser in the format packages.
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
// formats.Load keeps every part's entries (Source renumbered); the
// Document lists them under "unserved" (DocUnserved: name, type, shape,
// source, offset, why; absent when there are none); each command that
// opens the checkpoint logs one line per entry, convert refuses to write an incomplete OUT and
// load fails after the rest. A file with nothing to serve but such entries
// is still refused, in one line.
//
// # Errors
//
// Problems in a file are *FormatError (errors.Is(err, ErrFormat)): one line,
// "FILE: what is wrong (where)", where is a byte offset ("at byte 1234"), a
// tensor or key name, or both.
package index
