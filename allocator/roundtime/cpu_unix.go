//go:build unix

package roundtime

import (
	"syscall"
	"time"
)

// CPU is the CPU time (user and system) the process has used so far, every thread included;
// ok is false where it cannot be read.
func CPU() (d time.Duration, ok bool) {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0, false
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()), true
}
