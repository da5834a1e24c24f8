package forward_test

import (
	"context"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/jethook/jethook/forward"
	"github.com/jethook/jethook/internal/app"
	"github.com/jethook/jethook/internal/testkit"
	"github.com/jethook/jethook/store"
	"github.com/jethook/jethook/store/storetest"
)

// A webhook whose filter evaluation was under way each of the last
// MaxCrashes times jethook died is dead-lettered with reason "crashed"
// when it comes back; one that died fewer times is evaluated, delivered,
// and its count cleared.
func TestAWebhookThatKeepsKillingJethookIsDeadLettered(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	be := newBackend(t, status(http.StatusOK))
	cfg := parseConfig(t, edit(t, fastRetry, `{name: app, url: "${BACKEND}/hook"}`,
		`{name: app, url: "${BACKEND}/hook", filter: 'body.type == "x"'}`), be.URL)
	logs := &testkit.LogBuffer{}
	tune := func(o *app.Options) {
		o.FetchWait = 100 * time.Millisecond
		o.Logger = slog.New(slog.NewTextHandler(logs, nil))
	}
	r := newRig(t, cfg, store.Options{}, tune)
	st := r.store
	r.stop()
	// Stored while jethook was down, with what MaxCrashes processes that
	// died during the evaluation, and one fewer, left behind: begun,
	// never ended.
	seqs := storeCrashedOn(t, ctx, st)
	r.start(tune)
	defer func() {
		if t.Failed() {
			t.Log(logs.String())
		}
	}()
	eventually(t, "the other event delivered", func() bool { return be.count() == 1 })
	storetest.Settled(t, st)
	dl := r.deadLetters()[0]
	if dl.Envelope.EventID != "evt-poison" || dl.Reason != "crashed" || !strings.Contains(dl.LastError, "died 3 times while filtering") {
		t.Errorf("dead letter %s, reason %q, error %q", dl.Envelope.EventID, dl.Reason, dl.LastError)
	}
	if got := be.all()[0].header.Get("X-Webhook-Id"); got != "evt-unlucky" {
		t.Errorf("the backend got %s", got)
	}
	if l := logs.String(); !strings.Contains(l, "reason=crashed") || strings.Contains(l, `"type"`) {
		t.Errorf("the log does not say why, or quotes the payload:\n%s", l)
	}
	if n, err := st.BeginWork("shop", "app", seqs["evt-unlucky"], time.Now()); err != nil || n != 0 {
		t.Errorf("after its evaluation ended, the delivered event counts %d crashes (%v)", n, err)
	}
}

// The same guard covers a destination's transform: a webhook that jethook
// died on MaxCrashes times while its transform ran is not run again but
// dead-lettered as a transform_error of kind crashed, replayable once the
// script is fixed; one that died fewer times is transformed and delivered.
func TestAWebhookWhoseTransformKeepsKillingJethookIsDeadLettered(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	be := newBackend(t, status(http.StatusOK))
	cfg := parseConfig(t, edit(t, fastRetry, `{name: app, url: "${BACKEND}/hook"}`,
		`{name: app, url: "${BACKEND}/hook", transform: {script: "addHandler('transform', (request) => { request.headers['x-ran'] = 'yes'; return request; })"}}`), be.URL)
	tune := func(o *app.Options) { o.FetchWait = 100 * time.Millisecond }
	r := newRig(t, cfg, store.Options{}, tune)
	st := r.store
	r.stop()
	seqs := storeCrashedOn(t, ctx, st)
	r.start(tune)
	eventually(t, "the other event delivered", func() bool { return be.count() == 1 })
	storetest.Settled(t, st)
	dls := r.deadLetters()
	if len(dls) != 1 {
		t.Fatalf("%d dead letters, want 1", len(dls))
	}
	dl := dls[0]
	if dl.Envelope.EventID != "evt-poison" || dl.Reason != forward.OutcomeTransformError ||
		dl.LastError != "transform_error: crashed: jethook died 3 times while transforming this event" {
		t.Errorf("dead letter %s, reason %q, error %q", dl.Envelope.EventID, dl.Reason, dl.LastError)
	}
	if got := be.all()[0]; got.header.Get("X-Webhook-Id") != "evt-unlucky" || got.header.Get("X-Ran") != "yes" {
		t.Errorf("the backend got %s, X-Ran %q", got.header.Get("X-Webhook-Id"), got.header.Get("X-Ran"))
	}
	if n, err := st.BeginWork("shop", "app", seqs["evt-unlucky"], time.Now()); err != nil || n != 0 {
		t.Errorf("after its transform ended, the delivered event counts %d crashes (%v)", n, err)
	}
}

// storeCrashedOn stores two webhooks of route shop as if processes had
// died working on them for destination app: evt-poison MaxCrashes times,
// evt-unlucky one fewer (begun, never ended). It returns their sequences.
func storeCrashedOn(t *testing.T, ctx context.Context, st *store.Store) map[string]uint64 {
	t.Helper()
	seqs := map[string]uint64{}
	for id, crashes := range map[string]int{"evt-poison": forward.MaxCrashes, "evt-unlucky": forward.MaxCrashes - 1} {
		s, err := st.Publish(ctx, &store.Envelope{Route: "shop", EventID: id, Method: http.MethodPost,
			ReceivedAt: time.Now(), Body: []byte(`{"type":"x"}`)})
		if err != nil {
			t.Fatal(err)
		}
		seqs[id] = s.Seq
		for range crashes {
			if _, err := st.BeginWork("shop", "app", s.Seq, time.Now()); err != nil {
				t.Fatal(err)
			}
		}
	}
	return seqs
}
