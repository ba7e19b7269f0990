//go:build race

package dtype

// raceEnabled: the race detector changes allocation counts and slows the
// big exhaustive loops down.
const raceEnabled = true
