package forward_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"

	"github.com/jethook/jethook/forward"
	"github.com/jethook/jethook/internal/testkit"
	"github.com/jethook/jethook/store"
	"github.com/jethook/jethook/store/storetest"
)

// withTransforms is fastRetry with the shop route's one destination
// replaced by dests.
func withTransforms(t *testing.T, dests string) string {
	return edit(t, fastRetry, `      - {name: app, url: "${BACKEND}/hook"}`, dests)
}

func TestATransformedDestinationGetsTheScriptsRequestAndTheStoredWebhookStaysAsSent(t *testing.T) {
	t.Parallel()
	const secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
	b := newBackend(t, status(http.StatusOK))
	yaml := withTransforms(t, `      - name: billing
        url: "${BACKEND}/billing?from=jethook"
        resign: {secret: `+secret+`}
        transform:
          script: |
            addHandler('transform', (request, context) => {
              request.headers['x-event-type'] = request.body.type;
              request.headers['x-webhook-id'] = 'forged';
              delete request.body.card;
              request.path = '/billing/' + request.body.type;
              request.query += '&attempt=' + context.attempt;
              return request;
            });
      - {name: all, url: "${BACKEND}/all"}`)
	r := newRig(t, parseConfig(t, yaml, b.URL), store.Options{})
	const sent = `{"type":"invoice.paid", "card":"card-4242", "amount":12345678901234567890}`
	id := r.send(http.Header{"Content-Type": {"application/json"}}, sent)
	storetest.Settled(t, r.store)

	hits := b.all()
	i := slices.IndexFunc(hits, func(h hit) bool { return h.path == "/billing/invoice.paid" })
	if i < 0 {
		t.Fatalf("billing received nothing at its transformed path: %+v", hits)
	}
	got := hits[i]
	if want := `{"type":"invoice.paid","amount":12345678901234567890}`; string(got.body) != want {
		t.Errorf("billing received %s, want %s", got.body, want)
	}
	if got.query != "from=jethook&attempt=1" || got.header.Get("X-Event-Type") != "invoice.paid" || got.length != int64(len(got.body)) {
		t.Errorf("billing received query %q, X-Event-Type %q, length %d", got.query, got.header.Get("X-Event-Type"), got.length)
	}
	if got.header.Get("X-Webhook-Id") != id {
		t.Errorf("X-Webhook-Id %q: a script must not change it", got.header.Get("X-Webhook-Id"))
	}
	wh, err := standardwebhooks.NewWebhook(secret)
	if err != nil {
		t.Fatal(err)
	}
	if err := wh.Verify(got.body, got.header); err != nil {
		t.Errorf("the re-signed transformed body does not verify: %v", err)
	}

	j := slices.IndexFunc(hits, func(h hit) bool { return h.path == "/all" })
	if j < 0 || string(hits[j].body) != sent || hits[j].header.Get("X-Event-Type") != "" {
		t.Errorf("the destination without a transform did not get the webhook as sent: %+v", hits)
	}
	e, _, err := r.store.Event(context.Background(), id, "shop")
	if err != nil || string(e.Body) != sent {
		t.Errorf("stored %q, %v; want the body as sent", e.Body, err)
	}

	// The attempt log says what each attempt sent, with no payload and no
	// header value.
	as, err := r.store.Attempts(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(got.body)
	for _, a := range as {
		switch a.Destination {
		case "billing":
			s := a.Sent
			if s == nil || s.BodySHA256 != hex.EncodeToString(sum[:]) || s.BodySize != len(got.body) || !strings.HasPrefix(s.Script, "sha256:") ||
				!slices.Equal(s.Changed, []string{"path", "query", "body"}) || !slices.Equal(s.Headers, []string{"x-event-type"}) {
				t.Errorf("billing's attempt record says it sent %+v; the backend got %d bytes with SHA-256 %x", s, len(got.body), sum)
			}
		case "all":
			if a.Sent != nil {
				t.Errorf("the destination without a transform has a record of what a transform sent: %+v", a.Sent)
			}
		}
	}
}

func TestATransformThatFailsDeadLettersTheEventAndTheOtherDestinationsGoOn(t *testing.T) {
	t.Parallel()
	b := newBackend(t, status(http.StatusOK))
	logs := &testkit.LogBuffer{}
	script := func(body string) string {
		return "\n        transform:\n          timeout: 20ms\n          script: |\n            addHandler('transform', (request, context) => {\n              " + body + "\n              return request;\n            });"
	}
	yaml := withTransforms(t, `      - name: loops
        url: "${BACKEND}/loops"`+script("while (request.body.loop) {}")+`
      - name: throws
        url: "${BACKEND}/throws"`+script("throw new Error('no ' + request.body.card);")+`
      - name: huge
        url: "${BACKEND}/huge"`+script("request.body = 'x'.repeat(1 << 30);")+`
      - name: drops
        url: "${BACKEND}/drops"`+script("if (request.body.loop) return null;")+`
      - name: deep
        url: "${BACKEND}/deep"`+script("let o = {}; for (let i = 0; i < 200; i++) o = {o}; JSON.stringify(o);")+`
      - name: from
        url: "${BACKEND}/from"`+script("Array.from({length: 1e9});")+`
      - name: apply
        url: "${BACKEND}/apply"`+script("Math.max.apply(null, {length: 2 ** 53 - 1});")+`
      - {name: plain, url: "${BACKEND}/plain"}`)
	r := filterRig(t, yaml, b.URL, logs, forward.DefaultParkAfter)
	start := time.Now()
	id := r.send(nil, `{"loop":true,"card":"card-4242"}`)
	second := r.send(nil, `{"loop":true,"card":"card-4243"}`)
	storetest.Settled(t, r.store)
	if took := time.Since(start); took > 10*time.Second {
		t.Errorf("settled after %v", took)
	}

	want := map[string]string{"loops": store.StateDeadLettered, "throws": store.StateDeadLettered,
		"huge": store.StateDeadLettered, "drops": store.StateFiltered, "plain": store.StateDelivered,
		"deep": store.StateDeadLettered, "from": store.StateDeadLettered, "apply": store.StateDeadLettered}
	for dest, w := range want {
		if got := r.state("shop", id, dest); got != w {
			t.Errorf("%s: %s, want %s", dest, got, w)
		}
	}
	if paths := received(b, "/plain", map[string]string{id: "first", second: "second"}); !slices.Equal(paths, []string{"first", "second"}) {
		t.Errorf("plain received %v", paths)
	}
	if n := b.count(); n != 2 {
		t.Errorf("the backend got %d requests, want only plain's 2", n)
	}
	why := map[string]string{}
	for _, dl := range r.deadLetters() {
		if dl.Reason != "transform_error" {
			t.Errorf("dead letter at %s: reason %q", dl.Destination, dl.Reason)
		}
		if dl.Envelope != nil && dl.Envelope.EventID == id {
			why[dl.Destination] = dl.LastError
		}
	}
	for dest, w := range map[string]string{
		"loops":  "transform_error: timeout: the run used more than 20ms of CPU time",
		"throws": "transform_error: threw: Error: no card-4242 (at routes[0].destinations[1].transform.script:2:",
		"huge":   "transform_error: threw: RangeError: Invalid string length",
		"deep":   "transform_error: threw: RangeError: JSON.stringify: the value nests deeper than 128 levels",
		"from":   "transform_error: threw: RangeError: Invalid array length",
		"apply":  "transform_error: threw: RangeError: Maximum call stack size exceeded",
	} {
		if !strings.HasPrefix(why[dest], w) {
			t.Errorf("dead letter at %s: %q, want %q", dest, why[dest], w)
		}
	}
	as, err := r.store.Attempts(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range as {
		if a.Destination == "throws" && (a.Outcome != forward.OutcomeTransformError || !strings.HasPrefix(a.Error, "transform_error: threw")) {
			t.Errorf("attempt log at throws: %+v", a)
		}
	}
	if got := scrape(t, r.metrics, `jethook_transform_errors_total{destination="loops",kind="timeout",route="shop"}`); got != " 2" {
		t.Errorf("loops transform_errors_total%s, want 2", got)
	}
	out := logs.String()
	if n := strings.Count(out, "transform failed"); n != 6 {
		t.Errorf("%d transform failures logged, want one per destination and kind:\n%s", n, out)
	}
	if strings.Contains(out, "card-424") {
		t.Errorf("a payload reached the log:\n%s", out)
	}

	// Fixed, the script delivers what it dead-lettered, on replay.
	fixed := edit(t, yaml, "while (request.body.loop) {}", "request.headers['x-fixed'] = 'yes';")
	if err := r.fwd.Reload(context.Background(), parseConfig(t, fixed, b.URL)); err != nil {
		t.Fatal(err)
	}
	var loops []store.DeadLetter
	for _, dl := range r.deadLetters() {
		if dl.Destination == "loops" {
			loops = append(loops, dl)
		}
	}
	if _, err := r.store.Replay(context.Background(), loops); err != nil {
		t.Fatal(err)
	}
	fixedHits := func() int {
		n := 0
		for _, h := range b.all() {
			if h.path == "/loops" && h.header.Get("X-Fixed") == "yes" {
				n++
			}
		}
		return n
	}
	eventually(t, "both replays delivered by the fixed script", func() bool { return fixedHits() == 2 })
	storetest.Settled(t, r.store)
	if got := r.state("shop", id, "loops"); got != store.StateDelivered {
		t.Errorf("loops after the fix and a replay: %s", got)
	}
}
