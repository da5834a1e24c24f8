package bench

import (
	"context"
	"fmt"
)

// IngestResult compares, at one client concurrency, the bare handler with
// jethook's ingress, which answers 200 only once the store has acked the
// webhook. The forwarder is not running: this is ingest alone.
type IngestResult struct {
	Bare       Measurement // the ceiling: read the body, answer 200
	Jethook    Measurement // store fsyncs on its interval (the default)
	SyncAlways Measurement // store fsyncs every write before it acks
}

// Ingest runs the three cases one after the other at concurrency, each
// jethook case on a fresh store, so their ratios come from the same minute.
// Requests that fail are counted in each Measurement, not returned as an error.
func Ingest(ctx context.Context, o Options, concurrency int) (IngestResult, error) {
	o.applyDefaults()
	var r IngestResult
	s, err := listen(bare)
	if err != nil {
		return r, err
	}
	r.Bare = run(ctx, s.URL+hookPath, concurrency, o.Requests, o.Duration, o.BodySize)
	s.close()

	// The destination is never called: it stays paused.
	cfg, err := config("http://127.0.0.1:9/unused", o.DestConcurrency)
	if err != nil {
		return r, err
	}
	for _, c := range []struct {
		sync bool
		load *Measurement
	}{{false, &r.Jethook}, {true, &r.SyncAlways}} {
		st, err := startStack(ctx, o, cfg, c.sync, false)
		if err != nil {
			return r, fmt.Errorf("start jethook: %w", err)
		}
		*c.load = run(ctx, st.ingress.URL+hookPath, concurrency, o.Requests, o.Duration, o.BodySize)
		st.close()
	}
	return r, ctx.Err()
}
