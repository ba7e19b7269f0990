//go:build race

package dcp

// raceEnabled: the race detector is on (ten times slower): tests cut
// their sizes, keeping their shape.
const raceEnabled = true
