//go:build !unix

package procs

import "time"

// CPUTime is unknown here: it is always zero, and Run does nothing.
func CPUTime() time.Duration { return 0 }
