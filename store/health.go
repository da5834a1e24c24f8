package store

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Reasons the store refuses writes, as Health.Reason, /readyz and the
// jethook_store_refusing metric name them.
const (
	// ReasonDisconnected: no connection to NATS.
	ReasonDisconnected = "disconnected"
	// ReasonStalled: NATS has not answered a ping for stallAfter, or the
	// connection cannot send one: a frozen server, a full socket.
	ReasonStalled = "stalled"
	// ReasonUnavailable: NATS answers but JetStream does not (disabled,
	// restarting, no meta leader).
	ReasonUnavailable = "unavailable"
	// ReasonDiskFull: the data directory's file system has less free
	// space than Options.DiskFloor.
	ReasonDiskFull = "disk_full"
	// ReasonWriteError: the store failed to write (nats-server reported
	// it, or a publish got no ack while NATS answered), and no write has
	// succeeded since.
	ReasonWriteError = "write_error"
	// ReasonQuota: the store holds as much as its limit allows, or the
	// server refused a write for its limits.
	ReasonQuota = "quota"
)

// Reasons lists every reason, in the order Health picks one when several
// hold.
var Reasons = []string{ReasonDisconnected, ReasonStalled, ReasonUnavailable, ReasonDiskFull, ReasonWriteError, ReasonQuota}

// Health is what the store can do now, as its monitor last saw it. The
// monitor checks the connection twice a second and the disk, the usage
// and any write error every second; reading Health costs no I/O.
type Health struct {
	// Reason is empty while the store takes writes, else why it does
	// not: one of Reasons.
	Reason string
	// Detail says more, for people.
	Detail string
	// DiskFree is what may still be written to the data directory's file
	// system, DiskSize its size; both zero when unknown (no data
	// directory, or a platform without statfs).
	DiskFree, DiskSize uint64
	// DiskFloor is the free space below which the store refuses writes.
	DiskFloor uint64
	// Used is what JetStream stores (the account's file storage, in
	// bytes); Limit the most it may store, zero when unknown.
	Used, Limit uint64
	// Purged counts the delivered webhooks removed to keep the store
	// below its limit since Open.
	Purged uint64
}

// Ready reports whether the store takes writes.
func (h Health) Ready() bool { return h.Reason == "" }

// Headroom is how many more bytes the store can take before it refuses
// writes: the smaller of what its limit leaves and what the disk has above
// its floor. ok is false when neither is known.
func (h Health) Headroom() (n uint64, ok bool) {
	n = math.MaxUint64
	if h.Limit > 0 {
		n, ok = h.Limit-min(h.Used, h.Limit), true
	}
	if h.DiskSize > 0 {
		n, ok = min(n, h.DiskFree-min(h.DiskFree, h.DiskFloor)), true
	}
	if !ok {
		return 0, false
	}
	return n, true
}

// NotReadyError is why the store refuses writes. It wraps ErrUnavailable.
type NotReadyError struct {
	Reason, Detail string
}

func (e *NotReadyError) Error() string {
	return ErrUnavailable.Error() + ": " + e.Reason + ": " + e.Detail
}

func (e *NotReadyError) Unwrap() error { return ErrUnavailable }

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

// failure is one recorded write failure.
type failure struct {
	what string
	at   time.Time
}

func (f failure) set() bool { return f.what != "" }

// Health returns the store's health as the monitor last saw it.
func (s *Store) Health() Health {
	h := Health{Reason: ReasonUnavailable, Detail: "the store is not open"}
	if p := s.mon.last.Load(); p != nil {
		h = *p
	}
	if e := s.mon.connection(); e != nil {
		h.Reason, h.Detail = e.Reason, e.Detail
	}
	return h
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

// refusing is why a publish must not be tried now: the connection is down
// or stalled, the disk is below its floor, or the store has failed to write
// and not written since. A full quota is left to the server, which answers
// at once and may have room again after a purge.
func (s *Store) refusing() error {
	h := s.Health()
	switch h.Reason {
	case "", ReasonQuota, ReasonUnavailable:
		return nil
	}
	return &NotReadyError{h.Reason, h.Detail}
}

// Ready reports whether the store takes writes now; the error is a
// *NotReadyError with the reason. It reads the monitor's last verdict and
// never waits for the store.
func (s *Store) Ready(context.Context) error {
	if h := s.Health(); !h.Ready() {
		return &NotReadyError{h.Reason, h.Detail}
	}
	return nil
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
		h.Reason, h.Detail = ReasonDiskFull, fmt.Sprintf("%s free on %s, below the %s floor", bytesIEC(h.DiskFree), s.opts.DataDir, bytesIEC(h.DiskFloor))
	case server.set():
		h.Reason, h.Detail = ReasonWriteError, "the store failed to write: "+server.what
	case noAck.set():
		h.Reason, h.Detail = ReasonWriteError, noAck.what
	case h.Limit > 0 && h.Used >= h.Limit:
		h.Reason, h.Detail = ReasonQuota, fmt.Sprintf("the store holds %s, its limit", bytesIEC(h.Used))
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

// recover clears a recorded write failure once the store takes writes
// again. After a write error nats-server logged, the embedded JetStream is
// restarted first (at most once per resetWait, doubling): that reopens the
// file stores, the only way to clear their error. Then a probe is written;
// its ack clears what was recorded before it was sent.
func (s *Store) recover() {
	m := &s.mon
	m.mu.Lock()
	server, pending, next := m.server, m.server.set() || m.noAck.set() || m.refused.set(), m.nextReset
	m.mu.Unlock()
	if !pending {
		return
	}
	start := time.Now()
	if server.set() && s.srv != nil {
		if start.Before(next) {
			return
		}
		m.mu.Lock()
		m.nextReset, m.resetWait = start.Add(m.resetWait), min(2*m.resetWait, maxResetWait)
		m.mu.Unlock()
		s.opts.Logger.Warn("restarting the embedded JetStream to clear a write error", "err", server.what)
		if err := s.restartJetStream(); err != nil {
			s.opts.Logger.Error("restarting the embedded JetStream failed", "err", err)
			return
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), checkTimeout)
	defer cancel()
	if _, err := s.js.Publish(ctx, probeSubject, nil, jetstream.WithExpectStream(StreamName)); err != nil {
		s.opts.Logger.Debug("store probe not acked", "err", err)
		return
	}
	if m.acked(start) {
		s.opts.Logger.Info("store takes writes again")
	}
}

// probeSubject is where the monitor writes to learn whether the store
// takes writes again: a WEBHOOKS subject no route can have ('~' is not
// allowed in names), so no consumer delivers it, and without an event id
// the index skips it.
const probeSubject = "webhooks.~probe." + layoutToken

// acked clears the failures recorded before a write that started at
// start was acked; it reports whether it cleared any.
func (m *monitor) acked(start time.Time) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	cleared := false
	for _, f := range []*failure{&m.server, &m.noAck, &m.refused} {
		if f.set() && f.at.Before(start) {
			*f, cleared = failure{}, true
		}
	}
	if !m.server.set() {
		m.resetWait, m.nextReset = resetWait, time.Time{}
	}
	m.flagged.Store(m.server.set() || m.noAck.set() || m.refused.set())
	return cleared
}

// record keeps a write failure and has the check loop look at once.
func (m *monitor) record(f *failure, what string) {
	m.mu.Lock()
	*f = failure{what: what, at: time.Now()}
	m.mu.Unlock()
	m.flagged.Store(true)
	select {
	case m.kick <- struct{}{}:
	default:
	}
}

// serverWriteError records a write error the embedded server logged.
func (m *monitor) serverWriteError(msg string) { m.record(&m.server, msg) }

// JetStream API error codes a publish can fail with (nats-server's
// jetstream_errors_generated.go).
const (
	codeInsufficientResources = 10023 // the server's or account's storage limit
	codeStoreFailed           = 10077 // the stream refused the message: its limits, or a write error
)

// published records what a publish started at start came to: an ack
// clears earlier failures; no ack while NATS answers, or a refusal for
// the store's limits, is recorded until a later write is acked.
func (m *monitor) published(start time.Time, err error) {
	if err == nil {
		if m.flagged.Load() {
			m.acked(start)
		}
		return
	}
	var api *jetstream.APIError
	switch {
	case errors.As(err, &api) && api.ErrorCode == codeInsufficientResources:
		m.record(&m.refused, "the server refused a write: "+api.Description)
	case errors.As(err, &api) && api.ErrorCode == codeStoreFailed && strings.HasPrefix(api.Description, "maximum"):
		m.record(&m.refused, "the stream refused a write: "+api.Description) // a stream limit
	case errors.As(err, &api) && api.ErrorCode == codeStoreFailed:
		m.record(&m.noAck, "the stream failed to store a write: "+api.Description)
	case errors.Is(err, errNoAck) && m.connection() == nil:
		m.record(&m.noAck, err.Error())
	}
}

// errNoAck is a publish the stream did not answer in time.
var errNoAck = errors.New("no ack from the stream")

// bytesIEC formats n as people read sizes: "3.1 MiB".
func bytesIEC(n uint64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := uint64(unit), 0
	for m := n / unit; m >= unit; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMGTPE"[exp])
}
