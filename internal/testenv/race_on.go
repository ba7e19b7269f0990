//go:build race

package testenv

// Race is true in a binary built with the race detector.
const Race = true
