// Package bench is the harness behind `tensorfs bench`: it measures reads
// of a checkpoint through a fresh tensorfs mount beside direct reads of
// the same bytes and beside a zero-work FUSE server (fs.MountNull) in the
// same run, and the page cache that reading through a mount adds.
//
// # Invariants
//
//   - A process never reads its own mount: every server (tensorfs mount,
//     and the zero-work server, "tensorfs bench --serve-null") is a
//     subprocess of the program in Config.Exe, in its own process group,
//     and every mount is taken down before Reads or Tree returns.
//   - Figures are compared only within one run: each ratio's two sides
//     are measured one after the other, on the same machine state (the
//     checkpoint read back into the page cache before each direct read).
//   - Page cache growth is counted in a private memory cgroup where the
//     process can make one (root, cgroup v1 or v2 memory controller), so
//     that other work on the machine does not count; the report names
//     what counted it. The process returns to its own cgroup afterwards.
//   - Reports are plain data (Report, TreeReport), printed as tables or
//     JSON by the caller.
//
// Files: bench.go (configuration and runs), jobs.go (the read patterns),
// cache.go and cachemeter.go (page cache growth), server.go and null.go
// (the servers), system.go (machine facts), report.go (tables),
// generate.go (checkpoints), tree.go (the --tree measurement).
package bench
