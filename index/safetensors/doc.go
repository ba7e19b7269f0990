// Package safetensors reads the structure of safetensors files: one room
// of the format table in package formats. The layout and the decisions
// are described at the top of safetensors.go.
//
// It exports Sniff (a u64 header length <= index.MaxSafetensorsHeader,
// then '{') and Parse.
//
// # Invariants
//
//   - Parse reads one index.File and returns an Index with Sources ==
//     []string{f.Name()}, Source 0 in every tensor and no paths.
//   - The header is read only after N <= index.MaxSafetensorsHeader and
//     8+N <= the file's size, and parsed by the strict JSON reader of
//     package index (index.JSONReader): duplicate keys, invalid UTF-8 and
//     sizes that are not plain non-negative integers are refused. Every
//     tensor's data_offsets lie inside the data section, and tensors do
//     not overlap.
//   - Problems are *index.FormatError. Fuzz target: FuzzSafetensors.
package safetensors
