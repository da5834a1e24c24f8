package cli

import (
	"context"
	"fmt"
	"log/slog"
	"math"
	"os"
	"runtime/debug"
	"runtime/metrics"
	"time"

	"github.com/KimMachineGun/automemlimit/memlimit"

	"github.com/jethook/jethook/internal/size"
)

// defaultMemoryLimit is the Go memory limit where neither
// JETHOOK_MEMORY_LIMIT, GOMEMLIMIT nor a cgroup sets one. Under a steady
// 10,000 webhooks a second and more, nats-server's caches of recently
// written blocks alone hold a hundred MiB or more; a lower limit makes the
// collector run all the time (ingest CPU per webhook went from 81 to 142 µs
// at 224 MiB in bench/wrk.sh).
const defaultMemoryLimit = 512 << 20

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
		n, err := size.Parse(setting)
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

// idleCheck is how often releaseWhenIdle looks, and idleAllocs what the
// process may allocate meanwhile and still count as idle (the store's own
// timers allocate a little all the time).
const (
	idleCheck  = 15 * time.Second
	idleAllocs = 8 << 20
)

// releaseWhenIdle returns the heap's free memory to the operating system
// once each time the process goes quiet, until ctx ends. The runtime
// returns it only slowly by itself, and with GOGC's headroom a burst of
// webhooks leaves hundreds of MiB resident long after it ended; a quiet
// jethook should not hold them. idleCheck is longer than nats-server keeps
// a block's cache after its last use (10 s), so those go too.
func releaseWhenIdle(ctx context.Context, log *slog.Logger) {
	sample := []metrics.Sample{{Name: "/gc/heap/allocs:bytes"}}
	t := time.NewTicker(idleCheck)
	defer t.Stop()
	var last uint64
	released := false
	for {
		select {
		case <-t.C:
		case <-ctx.Done():
			return
		}
		metrics.Read(sample)
		allocs := sample[0].Value.Uint64()
		busy := allocs-last > idleAllocs
		switch {
		case busy:
			released = false
		case !released:
			debug.FreeOSMemory()
			released = true
			log.Debug("quiet: free heap returned to the OS", "allocated_since_last_look", allocs-last)
		}
		last = allocs
	}
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
