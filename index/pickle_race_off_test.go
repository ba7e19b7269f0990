//go:build !race

package index

const ptRaceEnabled = false
