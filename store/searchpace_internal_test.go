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
