package transform

import (
	"runtime/metrics"
	"sync"
	"time"

	"github.com/dop251/goja"
)

// tick is how often the watchdog looks at the runs in progress: a run
// stops at most about a tick after it passed a limit.
const tick = time.Millisecond

// limitError is what the watchdog interrupts a run with: the kind of
// limit it went past.
type limitError string

func (l limitError) Error() string { return string(l) }

// guard is one run the watchdog keeps to its limits. start and cpu0 are
// the process's allocation count and the run's thread's CPU time when the
// watchdog first saw the run, at most a tick after it began: reading them
// there keeps a system call off every run.
type guard struct {
	rt       *goja.Runtime
	unpinned bool // its thread's CPU clock is not read: see watch
	timeout  time.Duration
	deadline time.Time // past it, the run's CPU time is read
	last     time.Time // past it, the run stops whatever its CPU time
	clock    int32     // the run's thread's CPU-time clock
	cpu0     time.Duration
	hasCPU   bool
	release  func()
	budget   uint64
	start    uint64
	seen     bool
	tripped  string
}

// wallFactor bounds a run by the wall clock too: at this many times its
// time limit it stops, however little CPU time it had.
const wallFactor = 10

// dog holds the runs in progress. Its goroutine runs only while there are
// some.
var dog = struct {
	mu      sync.Mutex
	runs    map[*guard]struct{}
	running bool
}{runs: map[*guard]struct{}{}}

// kindUnpinned is how an unpinned run (watch) ends that took longer than
// a share of its time limit by the wall clock: it may only have waited
// for a CPU, so it is run again, pinned (Script.Run).
const kindUnpinned = "unpinned"

// unpinnedShare is that share: an unpinned run is run again pinned once
// it has taken a quarter of its time limit by the wall clock. A run that
// does take its time is stopped after at most 1.25 times its limit of CPU
// time, its first attempt included.
const unpinnedShare = 4

// watch puts a run on rt, on the calling goroutine, under the watchdog: it
// is interrupted once it has used more than timeout of CPU time (or, where
// that cannot be read, of wall time), or run for wallFactor times timeout,
// or the process allocated more than memory bytes since it began. Call end
// when the run is over.
//
// Reading the CPU time pins the goroutine to its thread and asks the
// kernel which thread that is, which costs a tenth of a typical run: a run
// not pinned instead ends as kindUnpinned once it has taken
// timeout/unpinnedShare by the wall clock.
//
// g is the machine's own guard, reused run after run: once end returned,
// the watchdog holds it no more.
func (g *guard) watch(rt *goja.Runtime, timeout time.Duration, memory int64, pin bool) {
	now := time.Now()
	*g = guard{rt: rt, timeout: timeout, deadline: now.Add(timeout), last: now.Add(wallFactor * timeout), budget: uint64(memory)}
	if pin {
		g.clock, g.release = cpuClock()
	} else {
		g.unpinned, g.deadline, g.release = true, now.Add(timeout/unpinnedShare), func() {}
	}
	dog.mu.Lock()
	dog.runs[g] = struct{}{}
	if !dog.running {
		dog.running = true
		go patrol()
	}
	dog.mu.Unlock()
}

// end takes the run off the watchdog; it returns the kind of limit the run
// went past, or "". Once end returns, the watchdog no longer interrupts
// the runtime.
func (g *guard) end() string {
	now := time.Now()
	dog.mu.Lock()
	defer dog.mu.Unlock()
	if _, ok := dog.runs[g]; ok {
		delete(dog.runs, g)
		g.release()
	}
	if now.After(g.last) {
		// Past its wall limit inside one step, which the watchdog's
		// interrupt waited for: such as a regular expression match
		// regexp2 cut short (regexp.go), whose result cannot be trusted.
		// Unpinned, it may only have waited for a CPU: it is run again.
		if g.tripped == "" {
			g.tripped = g.timedOut()
		}
	}
	return g.tripped
}

// timedOut is the kind of error of a run that has had its time.
func (g *guard) timedOut() string {
	if g.unpinned {
		return kindUnpinned
	}
	return KindTimeout
}

// overtime reports whether the run has had its time by now.
func (g *guard) overtime(now time.Time) bool {
	if !now.After(g.deadline) {
		return false
	}
	if !g.hasCPU || now.After(g.last) {
		return true
	}
	cpu, ok := cpuTime(g.clock)
	return !ok || cpu-g.cpu0 > g.timeout
}

// patrol interrupts the runs past a limit, every tick, until none is left.
func patrol() {
	sample := []metrics.Sample{{Name: "/gc/heap/allocs:bytes"}}
	for {
		time.Sleep(tick)
		metrics.Read(sample)
		allocated := sample[0].Value.Uint64()
		now := time.Now()
		dog.mu.Lock()
		if len(dog.runs) == 0 {
			dog.running = false
			dog.mu.Unlock()
			return
		}
		for g := range dog.runs {
			if !g.seen {
				g.seen, g.start = true, allocated
				if !g.unpinned {
					g.cpu0, g.hasCPU = cpuTime(g.clock)
				}
			}
			if g.tripped != "" {
				continue
			}
			switch {
			case g.overtime(now):
				g.tripped = g.timedOut()
			case allocated-g.start > g.budget:
				g.tripped = KindMemory
			default:
				continue
			}
			g.rt.Interrupt(limitError(g.tripped))
		}
		dog.mu.Unlock()
	}
}
