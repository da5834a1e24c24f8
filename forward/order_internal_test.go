package forward

import (
	"testing"

	"github.com/jethook/jethook/store"
)

// An attempt's hold on its key ends once: the worker that made it ends it
// again after the attempt (in case no settle did), by which time the same
// head may be in a later attempt, come back from its parked record. That
// attempt keeps its hold, so another copy of the head waits for it.
func TestAnAttemptsHoldOnItsKeyEndsOnceAndSparesTheNextAttempt(t *testing.T) {
	o := &destOrder{inflight: map[store.OrderKey]uint64{}}
	d := &destination{order: o}
	k := store.KeyOf("k")
	if !o.take(k, 7) {
		t.Fatal("the first attempt cannot take the key")
	}
	first := &orderedMsg{d: d, key: k, seq: 7}
	first.end() // its settle: parked, acked
	if !o.take(k, 7) {
		t.Fatal("the head's next attempt cannot take the key after the first ended")
	}
	first.end() // its worker returns
	if !o.attempting(k, 7) {
		t.Error("the first attempt's worker ended the next attempt's hold on the key")
	}
	if o.take(k, 7) {
		t.Error("a copy of the head took the key during the next attempt")
	}
}
