//go:build unix

package store_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jethook/jethook/internal/procs"
	"github.com/jethook/jethook/store"
	"github.com/jethook/jethook/store/storetest"
)

// BenchmarkSearch measures what a search costs per webhook it reads, on
// 20,000 stored webhooks of 1 KiB, reading them all (the scan alone: what
// an expression costs is filter's BenchmarkMatch), reading their
// headers only, as a search does whose expression reads no body, and
// their bodies only, as one does whose expression reads no header. Besides the wall time
// it reports cpu-ns/webhook, the process's CPU time per webhook read (the
// embedded server's included), which other processes on the machine
// disturb less.
//
//	go test -run '^$' -bench Search -benchtime 5x ./store/
func BenchmarkSearch(b *testing.B) {
	const n = 20_000
	st := searched(b, n)
	ctx := context.Background()
	for _, bc := range []struct {
		name                      string
		oldest, noBody, noHeaders bool
	}{{"oldest first", true, false, false}, {"newest first", false, false, false}, {"headers only", true, true, false},
		{"body only", true, false, true}} {
		b.Run(bc.name, func(b *testing.B) {
			cpu0, read := procs.CPUTime(), 0
			for b.Loop() {
				end, err := st.Search(ctx, store.Scan{Route: "github", Oldest: bc.oldest, NoBody: bc.noBody, NoHeaders: bc.noHeaders, Limit: 1,
					Match: func(*store.Envelope, uint64) bool { return false }}, func(store.Hit) bool { return true }, nil)
				if err != nil || end.Scanned != n {
					b.Fatalf("scanned %d of %d: %v", end.Scanned, n, err)
				}
				read += end.Scanned
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(read), "ns/webhook")
			b.ReportMetric(float64((procs.CPUTime()-cpu0).Nanoseconds())/float64(read), "cpu-ns/webhook")
		})
	}
}

// BenchmarkSearchForAValue measures what a search for a value costs
// beyond what it reads: on 20,000 stored webhooks of 1 KiB, a search
// of the last hour for a value none holds reads (nearly) nothing, and
// what it costs is its own fixed work: a connection, the stream's
// state, its window's start, the value filters, a consumer per stretch
// it reads. It reports cpu-ns/search, the process's CPU time per search
// (the embedded server's included).
//
//	go test -run '^$' -bench SearchForAValue -benchtime 2000x ./store/
func BenchmarkSearchForAValue(b *testing.B) {
	const n = 20_000
	st := searched(b, n)
	ctx := context.Background()
	q := store.Scan{Route: "github", Since: time.Now().Add(-time.Hour), Values: [][]string{{"evt_none"}}, Limit: 50,
		Match: func(*store.Envelope, uint64) bool { return false }}
	cpu0, read := procs.CPUTime(), 0
	for b.Loop() {
		end, err := st.Search(ctx, q, func(store.Hit) bool { return true }, nil)
		if err != nil {
			b.Fatal(err)
		}
		read += end.Scanned
	}
	b.ReportMetric(float64(read)/float64(b.N), "read/search")
	b.ReportMetric(float64((procs.CPUTime()-cpu0).Nanoseconds())/float64(b.N), "cpu-ns/search")
}

// searched is a store holding n webhooks of 1 KiB on route github, the
// i-th with the body {"id":"evt_<i>","pad":"xx…"}.
func searched(b *testing.B, n int) *store.Store {
	b.Helper()
	st := storetest.Open(b, store.Options{})
	pad := strings.Repeat("x", 1024-40)
	for i := range n {
		e := envelope(fmt.Sprintf("evt_%06d", i), fmt.Sprintf(`{"id":"evt_%06d","pad":"%s"}`, i, pad))
		e.ReceivedAt = time.Now()
		if _, err := st.Publish(context.Background(), e); err != nil {
			b.Fatal(err)
		}
	}
	return st
}
