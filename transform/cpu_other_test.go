//go:build !unix

package transform

import "time"

// cpuTime is unknown here; the cpu-ns/op figures read zero.
func cpuTime() time.Duration { return 0 }
