package alert

import (
	"fmt"
	"time"

	"github.com/jethook/jethook/internal/size"
)

// storeState is what the Notifier knows of the store.
type storeState struct {
	reason string    // why it refuses writes; empty while it takes them
	since  time.Time // it began refusing
	told   time.Time // last said so
	low    bool      // short of room, said so
}

// Store reports the store's health, as its monitor sees it every second:
// reason is empty while it takes writes, else why not (detail says more);
// headroom is how much more it can take and capacity the most it can hold
// (0: unknown). Starting and stopping to refuse writes each make a notice
// line, and refusing is reported again every Remind; so does headroom
// falling below Headroom of capacity, and coming back above twice that.
func (n *Notifier) Store(reason, detail string, headroom, capacity uint64) {
	if n == nil || n.wake == nil {
		return
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.URL == "" {
		return
	}
	now, s := n.Now(), &n.store
	switch {
	case reason != "" && s.reason == "":
		s.reason, s.since, s.told = reason, now, now
		n.storeNote(fmt.Sprintf("store refusing writes (%s): %s; webhooks get 503 until it takes them again", reason, detail))
	case reason == "" && s.reason != "":
		n.storeNote(fmt.Sprintf("store takes writes again after %s (was %s)", round(now.Sub(s.since)), s.reason))
		s.reason = ""
	case reason != "":
		s.reason = reason
		if now.Sub(s.told) >= n.Remind {
			s.told = now
			n.storeNote(fmt.Sprintf("store still refusing writes after %s (%s): %s", round(now.Sub(s.since)), reason, detail))
		}
	}
	if capacity == 0 {
		return
	}
	share := float64(headroom) / float64(capacity)
	switch {
	case !s.low && share < n.Headroom:
		s.low = true
		n.storeNote(fmt.Sprintf("store short of room: %s left of %s (%.0f %%); delivered webhooks are purged first, "+
			"undelivered ones and dead letters are not: raise JETHOOK_STORE_MAX_BYTES or the disk, or shorten JETHOOK_RETENTION",
			size.Format(headroom), size.Format(capacity), 100*share))
	case s.low && share >= 2*n.Headroom:
		s.low = false
		n.storeNote(fmt.Sprintf("store has room again: %s left of %s (%.0f %%)", size.Format(headroom), size.Format(capacity), 100*share))
	}
}

// storeNote adds a store line to the pending notice. Call with n.mu held.
func (n *Notifier) storeNote(line string) {
	had := len(n.pending.notes)
	n.note(line)
	if len(n.pending.notes) > had {
		n.pending.store++
	}
}
