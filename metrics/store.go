package metrics

import (
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
)

// StoreHealth is the store's health as the jethook_store_* metrics report
// it. The store's monitor keeps it; reading it costs no I/O.
type StoreHealth struct {
	// Reason is empty while the store takes writes, else why not.
	Reason string
	// Reasons lists every reason there is, so that each has a series.
	Reasons []string
	// Used is what the store holds, Limit the most it may (0: unknown).
	Used, Limit uint64
	// DiskFree and DiskSize describe the data directory's file system
	// (0: unknown).
	DiskFree, DiskSize uint64
	// Headroom is how much more the store can take before it refuses
	// writes; HeadroomKnown is false when neither limit nor disk is known.
	Headroom      uint64
	HeadroomKnown bool
	// Purged counts the delivered webhooks removed to make room.
	Purged uint64
}

// SetStore sets (or replaces) where the jethook_store_* metrics are read
// from at scrape time. Until it is called they are absent.
func (m *Metrics) SetStore(f func() StoreHealth) {
	if m == nil {
		return
	}
	m.store.source.Store(&f)
}

// storeCollector makes the jethook_store_* metrics at scrape time.
type storeCollector struct {
	source                                   atomic.Pointer[func() StoreHealth]
	ready, refusing, used, limit, free, size *prometheus.Desc
	headroom, purged                         *prometheus.Desc
}

func newStoreCollector() *storeCollector {
	d := func(name, help string, labels ...string) *prometheus.Desc {
		return prometheus.NewDesc(namespace+"_store_"+name, help, labels, nil)
	}
	return &storeCollector{
		ready:    d("ready", "1 while the store takes writes, else 0 (/readyz answers 503 then)."),
		refusing: d("refusing", "1 for the reason the store refuses writes now, 0 for the others.", "reason"),
		used:     d("used_bytes", "What the store holds on disk (JetStream's file storage)."),
		limit:    d("limit_bytes", "The most the store may hold: JETHOOK_STORE_MAX_BYTES or the server's limit."),
		free:     d("disk_free_bytes", "Free space on the data directory's file system."),
		size:     d("disk_size_bytes", "Size of the data directory's file system."),
		headroom: d("headroom_bytes", "How much more the store can take before it refuses writes: the smaller of what its limit leaves and what the disk has above its floor."),
		purged:   d("purged_total", "Delivered webhooks purged, oldest first, to keep the store below its limit."),
	}
}

func (c *storeCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.ready, c.refusing, c.used, c.limit, c.free, c.size, c.headroom, c.purged} {
		ch <- d
	}
}

func (c *storeCollector) Collect(ch chan<- prometheus.Metric) {
	src := c.source.Load()
	if src == nil {
		return
	}
	h := (*src)()
	gauge := func(d *prometheus.Desc, v uint64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, float64(v), labels...)
	}
	ready := uint64(0)
	if h.Reason == "" {
		ready = 1
	}
	gauge(c.ready, ready)
	for _, r := range h.Reasons {
		on := uint64(0)
		if r == h.Reason {
			on = 1
		}
		gauge(c.refusing, on, r)
	}
	gauge(c.used, h.Used)
	if h.Limit > 0 {
		gauge(c.limit, h.Limit)
	}
	if h.DiskSize > 0 {
		gauge(c.free, h.DiskFree)
		gauge(c.size, h.DiskSize)
	}
	if h.HeadroomKnown {
		gauge(c.headroom, h.Headroom)
	}
	ch <- prometheus.MustNewConstMetric(c.purged, prometheus.CounterValue, float64(h.Purged))
}
