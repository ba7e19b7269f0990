//go:build !race

package numpy

const raceEnabled = false
