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
// There is no non-test code here; this file only documents the package.
package integration
