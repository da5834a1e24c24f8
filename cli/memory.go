package cli

import (
	"fmt"
	"log/slog"
	"math"
	"os"
	"runtime/debug"

	"github.com/KimMachineGun/automemlimit/memlimit"

	"github.com/jethook/jethook/policy"
)

// defaultMemoryLimit is the Go memory limit where neither
// JETHOOK_MEMORY_LIMIT, GOMEMLIMIT nor a cgroup sets one.
const defaultMemoryLimit = 224 << 20

// cgroupShare is the share of a container's memory limit jethook's Go
// memory limit takes: the rest is for what the Go runtime does not count
// (thread stacks, the binary, page tables) and for headroom.
const cgroupShare = 0.9

// memoryLimit works out the Go memory limit jethook runs with, and where
// it comes from: JETHOOK_MEMORY_LIMIT, else GOMEMLIMIT (the runtime has
// read it already), else 90 % of the container's cgroup limit, else
// defaultMemoryLimit. cgroup reads the cgroup limit (0: none).
func memoryLimit(setting string, cgroup func() (uint64, error)) (int64, string, error) {
	if setting != "" {
		n, err := policy.ParseSize(setting)
		if err != nil {
			return 0, "", fmt.Errorf("environment: JETHOOK_MEMORY_LIMIT: %v", err)
		}
		return n, "JETHOOK_MEMORY_LIMIT", nil
	}
	if os.Getenv("GOMEMLIMIT") != "" {
		return debug.SetMemoryLimit(-1), "GOMEMLIMIT", nil
	}
	if n, err := cgroup(); err == nil && n > 0 && n < math.MaxInt64 {
		return int64(float64(n) * cgroupShare), "cgroup", nil
	}
	return defaultMemoryLimit, "default", nil
}

// applyMemoryLimit sets the Go memory limit from s and logs it. With it
// the garbage collector runs harder as the heap nears the limit instead of
// letting GOGC's headroom (gcPercent) take the process past it.
func applyMemoryLimit(s Settings, log *slog.Logger) error {
	n, from, err := memoryLimit(s.MemoryLimit, memlimit.FromCgroup)
	if err != nil {
		return err
	}
	debug.SetMemoryLimit(n)
	log.Info("memory limit", "bytes", n, "from", from)
	return nil
}
