package store

import (
	"context"
	"errors"
	"testing"
	"time"
)

// A search rests for as long as it worked since its last rest while
// webhooks arrive, and not at all when none do.
func TestASearchRestsForItsWorkOnlyWhileIngestIsBusy(t *testing.T) {
	t.Parallel()
	var ingest ingestSeen
	worked := time.Now().Add(-time.Hour) // an hour of work: a rest that long would not end in the test
	p := pace{ingest: &ingest, since: worked}
	if err := p.rest(context.Background()); err != nil {
		t.Fatalf("with no webhook stored, rest = %v", err)
	}
	if !p.since.After(worked) {
		t.Fatal("the rest did not start the search's working time again")
	}

	ingest.stored(time.Now())
	p.since = worked
	ctx, cancel := context.WithCancel(context.Background())
	go cancel()
	if err := p.rest(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("with a webhook just stored, rest = %v; want it to rest until its context ended", err)
	}
}

// What a search worked after its last rest, the next one rests for
// first, less the time between them, and never more than maxSearchDebt.
func TestTheNextSearchRestsForWhatTheLastWorkedAfterItsLastRest(t *testing.T) {
	var d searchDebt
	now := time.Now()
	if got := d.due(now); got != 0 {
		t.Fatalf("before any search, a search rests %s", got)
	}
	d.owe(now, 8*time.Millisecond)
	if got := d.due(now); got != 8*time.Millisecond {
		t.Errorf("right after a search that worked 8ms, the next rests %s", got)
	}
	if got := d.due(now.Add(5 * time.Millisecond)); got != 3*time.Millisecond {
		t.Errorf("5ms after it, the next rests %s, want 3ms", got)
	}
	if got := d.due(now.Add(time.Second)); got != 0 {
		t.Errorf("a second after it, the next rests %s", got)
	}
	// Two searches that end at once (two run at a time) add up.
	d.owe(now, 8*time.Millisecond)
	if got := d.due(now); got != 16*time.Millisecond {
		t.Errorf("after two searches that worked 8ms each, the next rests %s, want 16ms", got)
	}
	d.owe(now, time.Hour)
	if got := d.due(now); got != maxSearchDebt {
		t.Errorf("after a search that worked an hour without a rest, the next rests %s, want %s", got, maxSearchDebt)
	}
}
