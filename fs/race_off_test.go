//go:build !race

package fs

// raceEnabled: the race detector is on (it changes allocation and slows
// everything down), so cost bounds are relaxed or sizes cut.
const raceEnabled = false
