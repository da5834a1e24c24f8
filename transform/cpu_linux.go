package transform

import (
	"runtime"
	"time"

	"golang.org/x/sys/unix"
)

// threadClocks says whether cpuClock gives a clock that cpuTime reads.
const threadClocks = true

// cpuClock pins the calling goroutine to its thread and returns a clock of
// the CPU time that thread uses, which any thread may read (Linux's
// per-thread CPU-time clocks, MAKE_THREAD_CPUCLOCK in
// include/linux/posix-timers.h), and a func to unpin it. A run's CPU time
// is what its time limit counts: the time a busy machine keeps it waiting
// is not its doing.
func cpuClock() (clock int32, release func()) {
	runtime.LockOSThread()
	const perThreadSched = 2 | 4 // CPUCLOCK_SCHED | CPUCLOCK_PERTHREAD_MASK
	clock = ^int32(unix.Gettid())<<3 | perThreadSched
	return clock, runtime.UnlockOSThread
}

// cpuTime reads clock; ok is false when it cannot.
func cpuTime(clock int32) (time.Duration, bool) {
	var ts unix.Timespec
	if unix.ClockGettime(clock, &ts) != nil {
		return 0, false
	}
	return time.Duration(ts.Nano()), true
}
