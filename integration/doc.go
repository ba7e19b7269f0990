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
// The reliability tests are described in docs/RELIABILITY.md:
// hostile_test.go runs the CLI on a generated corpus of malformed files
// under an address-space limit; faults_test.go truncates and replaces the
// checkpoint under a live mount; concurrent_test.go reads three mounts
// with 16 and 64 concurrent readers, served by a race-enabled binary
// (mountWith); access_test.go checks read-only views and allow_other.
//
// There is no non-test code here; this file only documents the package.
package integration
