//go:build race

package torch

// ptRaceEnabled: the race detector slows tests that move tens of MiB
// (TestPickleLargeValues inflates 64 MiB: 15 s under -race); those skip
// under it, the normal pass covers them.
const ptRaceEnabled = true
