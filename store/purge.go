package store

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/nats-io/nats.go/jetstream"
)

// When the store holds more than purgeAbove of its limit, the monitor
// purges delivered webhooks, oldest first, until it holds purgeTo or
// nothing delivered is left; likewise when its disk has less than twice
// its floor free (but not less than the floor). Retained webhooks are history (lookups, dedup by the
// index, which outlives them); a webhook some destination has not settled,
// and every dead letter, are never purged.
const (
	purgeAbove = 0.90
	purgeTo    = 0.80
)

// purgeTarget is what the store should hold after a purge, and whether it
// needs one.
func purgeTarget(h Health) (target uint64, ok bool) {
	target = h.Used
	if h.Limit > 0 && float64(h.Used) > purgeAbove*float64(h.Limit) {
		target, ok = min(target, uint64(purgeTo*float64(h.Limit))), true
	}
	// Below the floor even a purge fails for want of space: the store
	// waits for room (monitor.go).
	if h.DiskSize > 0 && h.DiskFree >= h.DiskFloor && h.DiskFree < 2*h.DiskFloor {
		target, ok = min(target, h.Used-min(h.Used, 2*h.DiskFloor-h.DiskFree)), true
	}
	return target, ok
}

// maxPurgeRounds bounds the purges of one check: each round reaches from
// the oldest delivered webhook as far as should free what is left to free.
const maxPurgeRounds = 16

// consumerState is what the purge rule reads of one consumer of WEBHOOKS.
type consumerState struct {
	filters    []string // its filter subjects; none means every subject
	pending    uint64   // stored, not yet delivered to it
	ackPending uint64   // delivered, not yet settled (in flight or in backoff)
	ackFloor   uint64   // every message of its subjects up to this stream sequence is settled
}

// keepFrom is the first stream sequence c may still need. Past its ack
// floor a message may be unsettled; with nothing pending or in flight, every
// message of its subjects up to last is settled and it needs none of them.
func (c consumerState) keepFrom(last uint64) uint64 {
	if c.pending == 0 && c.ackPending == 0 {
		return last + 1
	}
	return min(c.ackFloor+1, last+1)
}

// keep is how far delivered webhooks may be purged: per route, below the
// first sequence any consumer reading that route's subject may need, and,
// for routes no consumer reads (removed ones), below the first any
// consumer at all may need.
type keep struct {
	routes map[string]uint64
	all    uint64
}

// planKeep works out keep for consumers read after the stream's last
// sequence was: a message stored later is past last, and never purged.
func planKeep(cs []consumerState, last uint64) keep {
	k := keep{routes: map[string]uint64{}, all: last + 1}
	for _, c := range cs {
		for _, f := range c.filters {
			if p := strings.Split(f, "."); len(p) == 3 && p[0] == "webhooks" && p[1] != "*" && p[1] != ">" {
				k.routes[p[1]] = last + 1
			}
		}
	}
	for _, c := range cs {
		from := c.keepFrom(last)
		if reads(c, "webhooks.>") {
			k.all = min(k.all, from)
		}
		for r, at := range k.routes {
			if reads(c, "webhooks."+r+".*") {
				k.routes[r] = min(at, from)
			}
		}
	}
	return k
}

// reads reports whether c's filters take any subject subject matches.
func reads(c consumerState, subject string) bool {
	if len(c.filters) == 0 {
		return true
	}
	for _, f := range c.filters {
		if f == "" || subjectsOverlap(f, subject) {
			return true
		}
	}
	return false
}

// subjectsOverlap reports whether some subject matches both a and b, each
// of which may hold the wildcards '*' (one token) and '>' (the rest).
func subjectsOverlap(a, b string) bool {
	at, bt := strings.Split(a, "."), strings.Split(b, ".")
	for i := 0; ; i++ {
		switch {
		case i < len(at) && at[i] == ">", i < len(bt) && bt[i] == ">":
			return i < len(at) && i < len(bt)
		case i == len(at) || i == len(bt):
			return len(at) == len(bt)
		case at[i] != bt[i] && at[i] != "*" && bt[i] != "*":
			return false
		}
	}
}

// makeRoom purges delivered webhooks, oldest first, until the store holds
// target or nothing delivered is left; h.Used follows.
func (s *Store) makeRoom(h *Health, target uint64) {
	ctx, cancel := context.WithTimeout(context.Background(), 4*checkTimeout)
	defer cancel()
	before, err := s.main.Info(ctx)
	if err != nil {
		s.opts.Logger.Warn("store near its limit; cannot read WEBHOOKS", "err", err)
		return
	}
	if before.State.Msgs == 0 {
		return
	}
	k, err := s.purgePlan(ctx, before.State.LastSeq)
	if err != nil {
		s.opts.Logger.Warn("store near its limit; cannot plan a purge", "err", err)
		return
	}
	if err := s.purgeOldest(ctx, h, target, k, max(before.State.Bytes/before.State.Msgs, 1)); err != nil {
		s.opts.Logger.Warn("purge failed", "err", err)
		return
	}
	after, err := s.main.Info(ctx)
	if err != nil {
		return
	}
	// What the stream held, plus what was stored meanwhile, less what it
	// holds now (MaxAge expiry meanwhile counts too; it is rare).
	had := before.State.Msgs + (after.State.LastSeq - before.State.LastSeq)
	purged := had - min(had, after.State.Msgs)
	if purged == 0 {
		s.opts.Logger.Debug("store near its limit and nothing delivered is left to purge",
			"used", h.Used, "limit", h.Limit, "disk_free", h.DiskFree)
		return
	}
	s.mon.mu.Lock()
	s.mon.purged += purged
	s.mon.mu.Unlock()
	s.opts.Logger.Info("store near its limit: purged the oldest delivered webhooks",
		"purged", purged, "used", h.Used, "limit", h.Limit, "disk_free", h.DiskFree)
}

// purgePlan reads what every consumer still owes and what the parked
// records point at, and plans what a purge must keep of WEBHOOKS, whose
// last sequence is last.
func (s *Store) purgePlan(ctx context.Context, last uint64) (keep, error) {
	var cs []consumerState
	l := s.main.ListConsumers(ctx)
	for ci := range l.Info() {
		if ci.Config.AckPolicy == jetstream.AckNonePolicy {
			continue // a reader, such as the index's or a scan: it owes no delivery
		}
		filters := ci.Config.FilterSubjects
		if ci.Config.FilterSubject != "" {
			filters = append(filters, ci.Config.FilterSubject)
		}
		cs = append(cs, consumerState{filters: filters, pending: ci.NumPending,
			ackPending: uint64(ci.NumAckPending), ackFloor: ci.AckFloor.Stream})
	}
	if err := l.Err(); err != nil {
		return keep{}, fmt.Errorf("read the consumers: %w", err)
	}
	k := planKeep(cs, last)
	// A parked webhook's message is acked, so the consumers' floors have
	// passed it: keep what parked and due records point at, too. Read
	// after the consumers: a webhook is parked before it is acked.
	floor := last + 1
	for _, c := range cs {
		floor = min(floor, c.ackFloor+1)
	}
	refs, err := s.parkedRefs(ctx, floor)
	if err != nil {
		return keep{}, fmt.Errorf("read the parked webhooks: %w", err)
	}
	for r, seq := range refs {
		k.all = min(k.all, seq)
		if at, ok := k.routes[r]; ok {
			k.routes[r] = min(at, seq)
		}
	}
	return k, nil
}

// purgeOldest purges the oldest webhooks k does not keep, in rounds, until
// h says the store uses target or less (avg: the stream's bytes per
// message) or nothing purgeable is left.
func (s *Store) purgeOldest(ctx context.Context, h *Health, target uint64, k keep, avg uint64) error {
	for round := 0; round < maxPurgeRounds && h.Used > target; round++ {
		from, ok, err := s.oldestPurgeable(ctx, k)
		if err != nil {
			return fmt.Errorf("read WEBHOOKS: %w", err)
		}
		if !ok {
			return nil
		}
		// Past the oldest delivered webhook the stream is mostly live
		// messages: reach as many as make up what is to free. Webhooks
		// of destinations behind are not purged, so a round may free
		// less, and the next reaches on from there.
		cut := from + (h.Used-target)/avg + 1
		for r, at := range k.routes {
			if err := s.purgeBelow(ctx, "webhooks."+r+".*", min(cut, at), from); err != nil {
				return fmt.Errorf("route %s: %w", r, err)
			}
		}
		if err := s.purgeBelow(ctx, "webhooks.>", min(cut, k.all), from); err != nil {
			return err
		}
		if err := s.usage(ctx, h); err != nil {
			return nil
		}
	}
	return nil
}

// oldestPurgeable finds the first sequence k lets go: the oldest webhook
// every consumer that reads it has settled.
func (s *Store) oldestPurgeable(ctx context.Context, k keep) (uint64, bool, error) {
	var oldest uint64
	first := func(subject string, below uint64) error {
		m, err := s.main.GetMsg(ctx, 1, jetstream.WithGetMsgSubject(subject))
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			return nil
		}
		if err != nil {
			return err
		}
		if m.Sequence < below && (oldest == 0 || m.Sequence < oldest) {
			oldest = m.Sequence
		}
		return nil
	}
	for r, at := range k.routes {
		if err := first("webhooks."+r+".*", at); err != nil {
			return 0, false, err
		}
	}
	if err := first("webhooks.>", k.all); err != nil {
		return 0, false, err
	}
	return oldest, oldest != 0, nil
}

// purgeBelow purges subject's messages below sequence cut, if any can be.
func (s *Store) purgeBelow(ctx context.Context, subject string, cut, from uint64) error {
	if cut <= from {
		return nil
	}
	if err := s.main.Purge(ctx, jetstream.WithPurgeSubject(subject), jetstream.WithPurgeSequence(cut)); err != nil {
		return fmt.Errorf("purge %s below %d: %w", subject, cut, err)
	}
	return nil
}
