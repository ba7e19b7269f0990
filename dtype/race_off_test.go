//go:build !race

package dtype

const raceEnabled = false
