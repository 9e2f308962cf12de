//go:build !unix

package roundtime

import "time"

// CPU is not measured here: ok is false.
func CPU() (d time.Duration, ok bool) { return 0, false }
