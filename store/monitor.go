package store

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/jethook/jethook/internal/size"
)

// Health timing.
const (
	// pingEvery is how often the monitor pings NATS.
	pingEvery = 500 * time.Millisecond
	// stallAfter is how long a ping may go unanswered before the
	// connection counts as stalled (and, to an external server, is
	// closed so that it reconnects).
	stallAfter = 2 * time.Second
	// checkEvery is how often the monitor reads the disk and the usage.
	checkEvery = time.Second
	// checkTimeout bounds each request of one check.
	checkTimeout = 2 * time.Second
	// resetWait is the first wait between two restarts of the embedded
	// JetStream to clear a write error; it doubles up to maxResetWait.
	resetWait    = 5 * time.Second
	maxResetWait = time.Minute
)

// monitor keeps the store's health. A ping loop watches the connection and
// a check loop the rest; Health merges what they last saw.
type monitor struct {
	pingSince    atomic.Int64 // when the ping in flight began (Unix ns), 0 when none
	disconnected atomic.Bool
	conn         atomic.Pointer[NotReadyError] // the last ping's verdict; nil when it answered
	last         atomic.Pointer[Health]        // the last check's verdict
	flagged      atomic.Bool                   // some failure below is recorded

	kick chan struct{}
	done chan struct{}
	wg   sync.WaitGroup

	mu sync.Mutex
	// Failures a write reported, each kept until a write started after
	// it is acked. server is a write error nats-server logged (embedded):
	// the file store refuses writes until it is reopened.
	server, noAck, refused failure
	nextReset              time.Time
	resetWait              time.Duration
	purged                 uint64
}

// connection is the connection's verdict: nil while it answers.
func (m *monitor) connection() *NotReadyError {
	if m.disconnected.Load() {
		return &NotReadyError{ReasonDisconnected, "no connection to NATS; reconnecting"}
	}
	if t := m.pingSince.Load(); t != 0 {
		if d := time.Since(time.Unix(0, t)); d > stallAfter {
			return &NotReadyError{ReasonStalled, fmt.Sprintf("NATS has not answered a ping for %s", d.Truncate(100*time.Millisecond))}
		}
	}
	return m.conn.Load()
}

// init readies m for the server's log, which may report a write error
// before the loops start.
func (m *monitor) init() {
	m.kick = make(chan struct{}, 1)
	m.done = make(chan struct{})
	m.resetWait = resetWait
}

// startMonitor runs the first check, so that Health is known when Open
// returns, then the ping and check loops until Close.
func (s *Store) startMonitor() {
	m := &s.mon
	s.check()
	h := s.Health()
	log := s.opts.Logger.With("used", h.Used, "limit", h.Limit, "disk_free", h.DiskFree, "disk_size", h.DiskSize)
	log.Info("store opened", "ready", h.Ready(), "reason", h.Reason)
	if s.srv != nil && s.opts.MaxBytes > 0 && h.DiskSize > 0 && uint64(s.opts.MaxBytes) > h.Used+h.DiskFree {
		log.Warn("the store's limit is larger than its disk: the disk fills first", "max_bytes", s.opts.MaxBytes)
	}
	m.wg.Add(2)
	go s.watchConnection()
	go s.watchStore()
}

// stop ends the loops; Health says the store is closed.
func (m *monitor) stop() {
	close(m.done)
	m.wg.Wait()
	m.last.Store(&Health{Reason: ReasonUnavailable, Detail: "the store is closed"})
}

// connected and disconnectedNow follow the NATS connection's callbacks.
func (m *monitor) connected()       { m.disconnected.Store(false) }
func (m *monitor) disconnectedNow() { m.disconnected.Store(true) }

// watchConnection pings NATS every pingEvery. A ping that has no answer
// after stallAfter, or cannot even be sent (a writer is stuck on a full
// socket and holds the connection's lock), marks the connection stalled;
// to an external server the connection is then closed under nats.go, so
// every write stuck on it fails at once and the client reconnects.
func (s *Store) watchConnection() {
	m := &s.mon
	defer m.wg.Done()
	t := time.NewTicker(pingEvery)
	defer t.Stop()
	for {
		select {
		case <-t.C:
		case <-m.done:
			return
		}
		if m.disconnected.Load() {
			m.conn.Store(nil)
			continue
		}
		m.pingSince.Store(time.Now().UnixNano())
		answer := make(chan error, 1)
		go func() { answer <- s.nc.FlushTimeout(stallAfter) }()
		var err error
		stall := time.NewTimer(stallAfter + 100*time.Millisecond)
		select {
		case err = <-answer:
		case <-stall.C:
			err = errors.New("the connection could not send a ping")
		case <-m.done:
			stall.Stop()
			return
		}
		stall.Stop()
		m.pingSince.Store(0)
		switch {
		case err == nil:
			m.conn.Store(nil)
		case errors.Is(err, nats.ErrConnectionClosed), m.disconnected.Load():
			m.conn.Store(nil) // the callbacks tell
		default:
			m.conn.Store(&NotReadyError{ReasonStalled, fmt.Sprintf("NATS did not answer a ping within %s: %v", stallAfter, err)})
			if s.dialer.breakConn() {
				s.opts.Logger.Warn("nats connection stalled; closed it to reconnect", "err", err)
			}
		}
	}
}

// watchStore checks the disk, the usage and any write error every
// checkEvery, or at once when a publish failed.
func (s *Store) watchStore() {
	m := &s.mon
	defer m.wg.Done()
	t := time.NewTicker(checkEvery)
	defer t.Stop()
	for {
		select {
		case <-t.C:
		case <-m.kick:
		case <-m.done:
			return
		}
		s.check()
	}
}

// check reads the disk and the store's usage, makes room if the store
// nears its limit, tries to recover from a write error, and records the
// verdict.
func (s *Store) check() {
	m := &s.mon
	h := Health{DiskFloor: uint64(s.opts.DiskFloor)}
	diskOK := true
	if s.opts.DataDir != "" {
		if free, size, ok := diskSpace(s.opts.DataDir); ok {
			h.DiskFree, h.DiskSize = free, size
			diskOK = free >= h.DiskFloor
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), checkTimeout)
	defer cancel()
	usageErr := s.usage(ctx, &h)
	if prev := m.last.Load(); usageErr != nil && prev != nil {
		h.Used, h.Limit = prev.Used, prev.Limit // the last known, not zero
	}
	if target, ok := purgeTarget(h); ok && usageErr == nil {
		s.makeRoom(&h, target)
	}
	if diskOK && s.mon.connection() == nil {
		s.recover()
	}
	m.mu.Lock()
	server, noAck, refused := m.server, m.noAck, m.refused
	h.Purged = m.purged
	m.mu.Unlock()
	switch {
	case usageErr != nil:
		h.Reason, h.Detail = ReasonUnavailable, fmt.Sprintf("JetStream does not answer: %v", usageErr)
	case !diskOK:
		h.Reason, h.Detail = ReasonDiskFull, fmt.Sprintf("%s free on %s, below the %s floor", size.Format(h.DiskFree), s.opts.DataDir, size.Format(h.DiskFloor))
	case server.set():
		h.Reason, h.Detail = ReasonWriteError, "the store failed to write: "+server.what
	case noAck.set():
		h.Reason, h.Detail = ReasonWriteError, noAck.what
	case h.Limit > 0 && h.Used >= h.Limit:
		h.Reason, h.Detail = ReasonQuota, fmt.Sprintf("the store holds %s, its limit", size.Format(h.Used))
	case refused.set():
		h.Reason, h.Detail = ReasonQuota, refused.what
	}
	m.last.Store(&h)
}

// usage reads what JetStream stores and the most it may store: the
// smallest of Options.MaxBytes, the embedded server's limit (nats-server's
// default is 75 % of the disk that was free at start) and the account's.
func (s *Store) usage(ctx context.Context, h *Health) error {
	ai, err := s.js.AccountInfo(ctx)
	if err != nil {
		return err
	}
	h.Used = ai.Store
	if h.Used == 0 {
		for _, t := range ai.Tiers {
			h.Used += t.Store
		}
	}
	limits := []int64{s.opts.MaxBytes, ai.Limits.MaxStore}
	if s.srv != nil {
		if c := s.srv.JetStreamConfig(); c != nil {
			limits = append(limits, c.MaxStore)
		}
	}
	for _, l := range limits {
		if l > 0 && (h.Limit == 0 || uint64(l) < h.Limit) {
			h.Limit = uint64(l)
		}
	}
	return nil
}
