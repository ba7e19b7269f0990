//go:build race

package integration

// raceEnabled builds the tensorfs binary with -race too.
const raceEnabled = true
