// Package gguf reads the structure of GGUF files (llama.cpp / ggml),
// versions 2 and 3, little-endian: one room of the format table in
// package formats. The layout and the decisions are described at the top
// of gguf.go.
//
// It exports Sniff (the "GGUF" magic), Parse, and what the sharded loader
// needs to merge the parts of a split model: SplitInfo (split.no and
// split.count) and Int (an integer metadata value).
//
// # Invariants
//
//   - Parse reads one index.File through its io.ReaderAt, nothing else, and
//     returns an Index with Sources == []string{f.Name()}, Source 0 in
//     every tensor and no paths (formats.Load assigns them).
//   - Every count, length and offset read from the file is checked against
//     the caps of index/limits.go and the bytes the file has before
//     anything is allocated from it; metadata values larger than
//     index.MaxInlineMetadata stay in the file as *index.FileValue.
//   - Problems are *index.FormatError: one line naming the file, the
//     problem and where. Fuzz target: FuzzGGUF.
package gguf
