package app

import (
	"context"
	"slices"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/jethook/jethook/alert"
	"github.com/jethook/jethook/metrics"
	"github.com/jethook/jethook/store"
)

// newMetrics creates jethook's metrics in a registry of their own, with the
// Go runtime and process collectors, the backlog gauges read from st's
// consumers and the store's health read from its monitor, at scrape time.
// The backlog gauges cover the destinations runs reports running (all of
// them when runs is nil): a removed destination's consumer is kept, with
// its messages, but nothing waits for them to be delivered, and a backlog
// gauge of it would rise, and alert, for ever. Serve m.Handler() at
// /metrics.
func newMetrics(st *store.Store, runs func(route, destination string) bool) (*metrics.Metrics, *prometheus.Registry) {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	m := metrics.New(reg)
	m.SetBacklog(func(ctx context.Context) ([]metrics.BacklogRow, error) {
		bs, err := st.Backlogs(ctx)
		if err != nil {
			return nil, err
		}
		// Where something waits, the age of the oldest costs a few
		// requests to the store: they stop after oldestBudget, and the
		// destinations not read by then have no age in this scrape.
		octx, cancel := context.WithTimeout(ctx, oldestBudget)
		defer cancel()
		if runs != nil {
			bs = slices.DeleteFunc(bs, func(b store.Backlog) bool { return !runs(b.Route, b.Destination) })
		}
		rows := make([]metrics.BacklogRow, len(bs))
		for i, b := range bs {
			rows[i] = metrics.BacklogRow{Route: b.Route, Destination: b.Destination, Pending: b.Pending, AckPending: b.AckPending, Parked: b.Parked,
				BlockedKeys: uint64(b.Blocked.Keys), BlockedSince: b.Blocked.Oldest, WaitingBehindKeys: uint64(b.Blocked.Waiting)}
			if octx.Err() == nil {
				if oldest, err := st.Oldest(octx, b); err == nil {
					rows[i].Oldest, rows[i].OldestKnown = oldest, true
				}
			}
		}
		return rows, nil
	})
	m.SetStore(func() metrics.StoreHealth {
		h := st.Health()
		room, known := h.Headroom()
		return metrics.StoreHealth{Reason: h.Reason, Reasons: store.Reasons, Used: h.Used, Limit: h.Limit,
			DiskFree: h.DiskFree, DiskSize: h.DiskSize, Headroom: room, HeadroomKnown: known, Purged: h.Purged}
	})
	return m, reg
}

// oldestBudget bounds the reads of the destinations' oldest waiting
// webhooks in one scrape.
const oldestBudget = time.Second

// watchStore hands the store's health to the alerts every second until ctx
// ends: the Notifier turns a store that starts or stops refusing writes,
// or runs short of room, into notice lines. Capacity is the store's limit,
// else its disk.
func watchStore(ctx context.Context, st *store.Store, alerts *alert.Notifier) {
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for {
		select {
		case <-t.C:
		case <-ctx.Done():
			return
		}
		h := st.Health()
		room, _ := h.Headroom()
		capacity := h.Limit
		if capacity == 0 {
			capacity = h.DiskSize
		}
		alerts.Store(h.Reason, h.Detail, room, capacity)
	}
}
