package proxy

import (
	"context"
	"errors"
	"io"
	"math"
	"time"

	"golang.org/x/sync/semaphore"
)

const (
	// firstRead is the buffer a body starts in, or its declared length
	// when that is smaller: a typical webhook, in one allocation. Past it
	// the buffer doubles as bytes arrive, so a request holds at most about
	// twice what it has sent, never what its Content-Length announces.
	firstRead = 16 << 10
	// inFlightWait is how long a request waits for room in the budget
	// before it is answered 503.
	inFlightWait = time.Second
)

// InFlightBytes is the default bound on the request bodies held in memory
// at once, given the Go memory limit (runtime/debug.SetMemoryLimit): a
// quarter of it when one is set, else 256 MiB, and never under 16 MiB.
func InFlightBytes(memoryLimit int64) int64 {
	n := int64(256 << 20)
	if memoryLimit > 0 && memoryLimit < math.MaxInt64 {
		n = memoryLimit / 4
	}
	return max(n, 16<<20)
}

// errOverBudget is a body that found no room in the budget in time.
var errOverBudget = errors.New("request bodies in memory are at their limit")

// budget is the memory request bodies may hold at once, shared by every
// request: a body takes each growth of its buffer from the budget before
// allocating it, and gives all of it back when the request ends.
type budget struct {
	sem *semaphore.Weighted
}

func newBudget(size int64) *budget {
	return &budget{sem: semaphore.NewWeighted(size)}
}

// read reads the whole body from r, which is already bounded by limit;
// length is its declared length, -1 when unknown. The caller gives back
// cap(body) with put once it is done with the body; on an error nothing
// is held. Waiting for room takes at most inFlightWait in all, then read
// fails with errOverBudget.
func (b *budget) read(ctx context.Context, r io.Reader, length, limit int64) (body []byte, err error) {
	var (
		buf     []byte
		waiting context.Context // the wait for room, made when first needed
		cancel  context.CancelFunc
	)
	defer func() {
		if cancel != nil {
			cancel()
		}
		if err != nil {
			b.put(cap(buf))
			body = nil
		}
	}()
	// take takes n bytes from the budget. Only a budget without room
	// costs a context: one per request, so all its waits together last
	// at most inFlightWait.
	take := func(n int64) error {
		if n == 0 || b.sem.TryAcquire(n) {
			return nil
		}
		if waiting == nil {
			waiting, cancel = context.WithTimeout(ctx, inFlightWait)
		}
		if err := b.sem.Acquire(waiting, n); err != nil {
			return errOverBudget
		}
		return nil
	}
	size := min(int64(firstRead), limit)
	if length >= 0 {
		size = min(size, length)
	}
	if err := take(size); err != nil {
		return nil, err
	}
	buf = make([]byte, 0, size)
	for {
		if len(buf) == cap(buf) {
			n := int64(len(buf))
			if n == length || n == limit {
				break
			}
			next := min(max(2*n, firstRead), limit)
			if length >= 0 {
				next = min(next, length)
			}
			if err := take(next - n); err != nil {
				return buf, err
			}
			grown := make([]byte, n, next)
			copy(grown, buf)
			buf = grown
		}
		n, err := r.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		if err == io.EOF {
			if length >= 0 && int64(len(buf)) < length {
				return buf, io.ErrUnexpectedEOF
			}
			return buf, nil
		}
		if err != nil {
			return buf, err
		}
	}
	// Full: the body must end here. A byte more is over the route's
	// limit (r says so) or its declared length.
	var one [1]byte
	if n, err := r.Read(one[:]); n > 0 || (err != nil && err != io.EOF) {
		if err == nil {
			err = errors.New("body longer than its Content-Length")
		}
		return buf, err
	}
	return buf, nil
}

// put gives back n bytes a read took.
func (b *budget) put(n int) {
	if n > 0 {
		b.sem.Release(int64(n))
	}
}
