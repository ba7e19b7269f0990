// Package integration holds the end-to-end tests of tensorfs: they build
// the tensorfs binary once (TestMain), mount checkpoints for real by
// running it as a subprocess, wait for MOUNTPOINT/.tensorfs/index.json,
// read the mount only from other subprocesses (cat, cmp, stat, getfattr,
// /usr/bin/python3 scripts with their own safetensors reader), and
// unmount with `tensorfs umount`, checking the server exits 0. Every
// subprocess runs under a timeout, so a hung mount fails a test instead
// of hanging CI.
//
// The harness (harness_test.go) is meant to be reused by tests of other
// formats and the views: mount(t, src, flags...) returns a *Mount with
// Dir and Unmount; runPy(t, script, args...) runs a Python script;
// runTensorfs runs the CLI; writeSafetensors generates fixtures;
// needFUSE(t) skips where FUSE is unavailable (and fails under CI=true).
//
// Every format is read by one table-driven test, TestFormats
// (formats_table_test.go): a format is a row (fmtRows; the builders are
// in formats_rows_test.go) saying where its fixtures are in the shared
// test data, the digests its writer's own reader gives (EXPECTED.json,
// ggml's .f32ref, or a reference script run with torch or numpy), and
// which paths to exercise; the body runs ls, load --sha256 on each read
// path, convert and cat against them, and mounts a row's checkpoints a
// batch at a time, each batch read by the row's checker script (every
// view of every tensor) in one process. What only one format has (a
// malicious pickle, every ggml type, the Go client over protocol-2
// arrays) is that row's extra. Run one format alone with
// `go test ./integration -run 'TestFormats$/^gguf$'`.
//
// The reliability tests are described in docs/RELIABILITY.md:
// hostile_test.go runs the CLI on a generated corpus of malformed files
// under an address-space limit; faults_test.go truncates and replaces the
// checkpoint under a live mount; concurrent_test.go reads three mounts
// with 16 and 64 concurrent readers, served by a race-enabled binary
// (mountWith); access_test.go checks read-only views and allow_other.
//
// There is no non-test code here; this file only documents the package.
package integration
