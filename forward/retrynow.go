package forward

import (
	"fmt"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// A webhook whose next attempt is less than ParkAfter away waits in its
// consumer, nak'd with a delay, not parked: no record in the store says
// where it is. The destination remembers, until each one's due time, the
// ack subject of the messages it nak'd so, by event id, so that RetryNow
// can nak one again without a delay, which has JetStream deliver it at
// once. JetStream does not deliver a nak-delayed message before its delay
// ends, so before then the message is not in flight, and a nak cannot
// make a second attempt run beside one. (It keeps them a little longer,
// past their due time, for the number of the attempt made: made.)

// retryNowMargin is how much of a short wait must be left for RetryNow to
// act: the nak must reach the server before the server's own delay ends,
// or it would redeliver a message already on its way here.
const retryNowMargin = 250 * time.Millisecond

// shortWaits are a destination's messages nak'd with a delay, by event id.
type shortWaits struct {
	mu    sync.Mutex
	byID  map[string]shortWait
	sweep time.Time // when expired entries were last dropped
}

type shortWait struct {
	reply   string // the message's ack subject
	due     time.Time
	attempt int // the number of the attempt made before the wait
}

// shortWaitKept is how long past its due time a short wait is kept, for
// hold to number the next attempt after the one made (made): the attempt
// log may not have read that attempt back yet when the message comes.
const shortWaitKept = 2 * time.Second

// nak naks m with wait as its delay and remembers it under eventID, with
// the number of the attempt made, until shortWaitKept after it is due.
// The nak and the record are one step under the lock, so that a
// RetryNow's nak reaches the server after this one.
func (w *shortWaits) nak(m jetstream.Msg, eventID string, attempt int, wait time.Duration, now time.Time) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if err := m.NakWithDelay(wait); err != nil {
		return err
	}
	if w.byID == nil {
		w.byID = map[string]shortWait{}
	}
	if now.Sub(w.sweep) > time.Second {
		for id, s := range w.byID {
			if now.Sub(s.due) >= shortWaitKept {
				delete(w.byID, id)
			}
		}
		w.sweep = now
	}
	w.byID[eventID] = shortWait{reply: m.Reply(), due: now.Add(wait), attempt: attempt}
	return nil
}

// made returns the number of the attempt made before eventID's short
// wait, if this destination nak'd it for one lately.
func (w *shortWaits) made(eventID string) (int, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	s, ok := w.byID[eventID]
	return s.attempt, ok
}

// RetryNow has route's destination attempt eventID now if it waits in its
// consumer for a short backoff (under ParkAfter), the attempts going on
// from those made. It reports false when this jethook nak'd no such
// message for the event or its wait is all but over: the event is in
// flight, parked (store.RetryNow), or waits at another jethook of a
// cluster.
func (f *Forwarder) RetryNow(route, destination, eventID string) (bool, error) {
	d, err := f.find(route, destination)
	if err != nil {
		return false, err
	}
	// Under the lock, so that no nak of this destination's goes between.
	d.waits.mu.Lock()
	defer d.waits.mu.Unlock()
	s, ok := d.waits.byID[eventID]
	if !ok || s.due.Sub(f.Now()) <= retryNowMargin {
		return false, nil
	}
	s.due = f.Now() // due now: not again, but kept for made
	d.waits.byID[eventID] = s
	if err := f.Store.Redeliver(s.reply); err != nil {
		return false, fmt.Errorf("retry now: %w", err)
	}
	return true, nil
}
