package transform

import (
	"runtime"
	"sync"
	"time"
)

// Runs are made on workers: goroutines of this package, at most one per
// CPU, that run one script after another and whose stacks stay grown from
// run to run. A caller's goroutine (the forwarder starts one per attempt)
// begins with a small stack, which the engine's deep calls would grow,
// a doubling at a time, on every run; handing the run to a worker and
// waiting for it costs two goroutine switches instead.

// workerIdle is how long a worker waits for a run before it ends: a
// jethook with no transform running, or one whose scripts a reload
// dropped, keeps none.
const workerIdle = time.Second

// job is one run handed to a worker.
type job struct {
	s    *Script
	req  *Request
	c    Context
	out  *Request
	err  error
	done chan struct{} // gets a value when out and err are set
}

var (
	// jobs is where an idle worker waits for a run.
	jobs = make(chan *job)
	// workers holds a slot per worker: there are never more workers
	// than CPUs, so a run waits for one before its time starts (runs are
	// CPU work, and more at once than there are CPUs only share them,
	// each taking longer by the wall clock its time limit reads).
	workers = make(chan struct{}, runtime.GOMAXPROCS(0))
	// spareJobs keeps jobs for reuse: a run allocates none.
	spareJobs = sync.Pool{New: func() any { return &job{done: make(chan struct{}, 1)} }}
)

// onWorker runs s on req and c on a worker, starting one if none is idle
// and there are fewer than CPUs, else waiting for one.
func (s *Script) onWorker(req *Request, c Context) (*Request, error) {
	j := spareJobs.Get().(*job)
	j.s, j.req, j.c = s, req, c
	select {
	case jobs <- j:
	default:
		select {
		case jobs <- j:
		case workers <- struct{}{}:
			go work(j)
		}
	}
	<-j.done
	out, err := j.out, j.err
	*j = job{done: j.done}
	spareJobs.Put(j)
	return out, err
}

// work runs j, then the runs handed to it, until it has waited workerIdle
// for one.
func work(j *job) {
	growStack()
	idle := time.NewTimer(workerIdle)
	defer idle.Stop()
	for {
		j.out, j.err = j.s.run(j.req, j.c)
		j.done <- struct{}{}
		idle.Reset(workerIdle)
		select {
		case j = <-jobs:
		case <-idle.C:
			<-workers
			return
		}
	}
}
