//go:build !race

package dcp

const raceEnabled = false
