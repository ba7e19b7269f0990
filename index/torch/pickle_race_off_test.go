//go:build !race

package torch

const ptRaceEnabled = false
