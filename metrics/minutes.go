package metrics

import (
	"sync"
	"time"
)

// Minute is what the attempts to one destination did in one minute.
type Minute struct {
	Start     time.Time // the minute's first instant
	Delivered int       // attempts the destination accepted (2xx)
	Failed    int       // attempts that did not deliver: transient or permanent
}

// HistoryMinutes is how far back LastHour reaches.
const HistoryMinutes = 60

// minutes counts each destination's delivered and failed attempts per
// minute over the last hour, for the dashboard's charts. It holds one ring
// of HistoryMinutes buckets per route × destination that attempted in the
// last hour: its size follows the configuration, not the traffic.
type minutes struct {
	mu    sync.Mutex
	rings map[[2]string]*minuteRing
	// sweep is the next time idle rings are dropped.
	sweep int64
}

type minuteRing struct {
	last    int64 // the latest minute counted (Unix minutes)
	dropped bool  // dropIdle took it out of rings
	buckets [HistoryMinutes]minuteBucket
}

type minuteBucket struct {
	minute            int64 // which minute the counts are of
	delivered, failed int
}

func newMinutes() *minutes {
	return &minutes{rings: map[[2]string]*minuteRing{}}
}

// add counts one attempt to d that ended at t. d keeps its ring, which it
// looks up again only when dropIdle has dropped it.
func (m *minutes) add(d *Destination, delivered bool, t time.Time) {
	minute := t.Unix() / 60
	m.mu.Lock()
	defer m.mu.Unlock()
	if minute >= m.sweep {
		m.dropIdle(minute)
		m.sweep = minute + HistoryMinutes
	}
	r := d.ring
	if r == nil || r.dropped {
		k := [2]string{d.route, d.destination}
		if r = m.rings[k]; r == nil {
			r = &minuteRing{}
			m.rings[k] = r
		}
		d.ring = r
	}
	b := &r.buckets[minute%HistoryMinutes]
	if b.minute != minute {
		*b = minuteBucket{minute: minute}
	}
	if delivered {
		b.delivered++
	} else {
		b.failed++
	}
	r.last = max(r.last, minute)
}

// dropIdle forgets the rings with nothing in the hour before minute: a
// destination a reload removed leaves no ring behind.
func (m *minutes) dropIdle(minute int64) {
	for k, r := range m.rings {
		if r.last <= minute-HistoryMinutes {
			r.dropped = true
			delete(m.rings, k)
		}
	}
}

// lastHour returns the HistoryMinutes minutes up to the one holding now,
// oldest first.
func (m *minutes) lastHour(route, destination string, now time.Time) []Minute {
	current := now.Unix() / 60
	out := make([]Minute, HistoryMinutes)
	m.mu.Lock()
	defer m.mu.Unlock()
	r := m.rings[[2]string{route, destination}]
	for i := range out {
		minute := current - HistoryMinutes + 1 + int64(i)
		out[i].Start = time.Unix(minute*60, 0).UTC()
		if r == nil {
			continue
		}
		if b := r.buckets[minute%HistoryMinutes]; b.minute == minute {
			out[i].Delivered, out[i].Failed = b.delivered, b.failed
		}
	}
	return out
}

// LastHour returns, oldest first, how many attempts to route's destination
// delivered and failed in each of the last HistoryMinutes minutes, the
// current one last. A nil *Metrics returns empty minutes.
func (m *Metrics) LastHour(route, destination string, now time.Time) []Minute {
	if m == nil {
		return newMinutes().lastHour(route, destination, now)
	}
	return m.minutes.lastHour(route, destination, now)
}
