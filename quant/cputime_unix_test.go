//go:build unix

package quant

import (
	"syscall"
	"time"
)

// cpuTime is the process's user+system CPU time, for a benchmark figure
// that a loaded machine's waiting does not dilute.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
