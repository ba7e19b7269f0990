// Package check finds what is wrong with a checkpoint as a whole, for
// `tensorfs check`: every problem, one line each, rather than the first
// one that loading stops at.
//
// A Checkpoint is what source.Load returns when its Options.Report
// collects the problems of a weight map and its shards instead of
// failing (a missing shard, a tensor the map lacks or misplaces): those
// are Checkpoint.Loading. Checkers is the table of checks run on it
// without reading tensor data (the loader's problems, entries not
// served, tensor ranges against the sources as they are now); a new
// check is one more row. Data reads every byte: CRC-32s of stored zip
// members, read errors, and with DataOptions.Values the NaN and Inf
// counts of every tensor with a float32 view, on its converted values;
// a file whose source states the sha256 of its whole bytes (Digested: an
// hf:// file in Git LFS) is read whole and hashed against it.
//
// # Invariants
//
//   - Nothing is written; Data holds one 1 MiB buffer.
//   - A Problem is one line: file, place, what (Problem.String gives the
//     form of every tensorfs error).
//   - Checkers read only sizes and what loading already read.
package check
