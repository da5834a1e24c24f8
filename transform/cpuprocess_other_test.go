//go:build !unix

package transform

import "time"

// processCPU is unknown here; the cpu-ns/op figures read zero.
func processCPU() time.Duration { return 0 }
