package store

import (
	"context"
	"math"
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
