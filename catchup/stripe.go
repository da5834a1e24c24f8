package catchup

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"time"

	stripeapi "github.com/stripe/stripe-go/v82"

	"github.com/jethook/jethook/filter"
	"github.com/jethook/jethook/policy"
	"github.com/jethook/jethook/provider"
	"github.com/jethook/jethook/store"
	"github.com/jethook/jethook/telemetry"
)

// HeaderCaughtUp tells the backend that catch-up stored the event rather
// than ingress: its value names the provider whose API it came from. It is
// informational, since a sender may set any header; the store's own mark
// is Envelope.CaughtUp.
const HeaderCaughtUp = "Jethook-Caught-Up"

// maxEventID is the longest event id catch-up stores, as ingress.
const maxEventID = 200

// maxPerPass and maxPassBytes bound the events a Stripe pass stores (and
// holds the bodies of); more wait for the next pass.
const (
	maxPerPass   = 10_000
	maxPassBytes = 64 << 20
)

// listed is a missing event as the list showed it: its body is the list
// element's bytes, exactly as the API sent them.
type listed struct {
	id      string
	created int64
	body    []byte
}

// stripe lists a Stripe account's events created since the last pass
// (at first, since the newest one the route has stored) and stores those
// the store lacks. They are authentic: they come from Stripe's API over
// TLS, listed with the key. The list holds each event whole, so none is
// fetched again: a pass costs one call per 100 events. Each is stored with
// the bytes of its list element, a Jethook-Caught-Up header and, when the
// route has a secret, a Stripe-Signature made with it, so the backend
// verifies it as it verifies a live one.
type stripe struct {
	route   policy.Route
	window  time.Duration
	client  *stripeapi.Client
	store   *store.Store
	signer  provider.Provider // nil without a secret
	started time.Time         // when the runner started
	log     *slog.Logger

	// cursor is the creation time (Unix seconds) of the newest event the
	// last complete pass saw; 0 before the first. It is saved in the
	// store's checkpoints, so a restart resumes there.
	cursor int64
}

func newStripe(rt policy.Route, client *http.Client, st *store.Store, started time.Time, log *slog.Logger) *stripe {
	c := rt.CatchUp.Stripe
	backend := stripeapi.GetBackendWithConfig(stripeapi.APIBackend, &stripeapi.BackendConfig{
		HTTPClient: client,
		URL:        stripeapi.String(c.APIURL),
		// transport obeys Retry-After; stripe-go's own retries would not.
		MaxNetworkRetries: stripeapi.Int64(0),
		LeveledLogger:     &stripeapi.LeveledLogger{Level: stripeapi.LevelNull},
	})
	s := &stripe{route: rt, window: rt.CatchUp.Window, store: st, started: started, log: log,
		client: stripeapi.NewClient(c.APIKey, stripeapi.WithBackends(&stripeapi.Backends{
			API: backend, Connect: backend, Uploads: backend, MeterEvents: backend}))}
	if len(rt.Secrets) > 0 {
		s.signer, _ = provider.New(provider.Config{Name: provider.NameStripe, Secrets: rt.Secrets})
	}
	return s
}

func (s *stripe) run(ctx context.Context) (recovered, requested int, err error) {
	now := time.Now()
	since := s.cursor
	if since == 0 {
		if since, err = s.resume(ctx); err != nil {
			return 0, 0, err
		}
	}
	from := max(now.Add(-min(s.window, s.store.DedupWindow())).Unix(), since-int64(overlap/time.Second))
	params := &stripeapi.EventListParams{CreatedRange: &stripeapi.RangeQueryParams{GreaterThanOrEqual: from}}
	params.Limit = stripeapi.Int64(perPage)
	// The missing events, newest first as the API lists them, at most
	// maxPerPass of them and maxPassBytes of bodies: the oldest are kept,
	// and the next pass goes on from the newest of them.
	var missing []listed
	held := 0
	truncated := false
	newest := since
	for ev, err := range s.client.V1Events.List(ctx, params) {
		if err != nil {
			return 0, 0, fmt.Errorf("list events: %w", err)
		}
		newest = max(newest, ev.Created)
		if ev.ID == "" || len(ev.ID) > maxEventID || !s.wanted(string(ev.Type)) {
			continue
		}
		if ev.LastResponse == nil || len(ev.LastResponse.RawJSON) == 0 {
			return 0, 0, fmt.Errorf("list events: event %s has no body", ev.ID)
		}
		body := ev.LastResponse.RawJSON
		if int64(len(body)) > s.route.MaxBody {
			s.log.Warn("missed event is larger than the route's max_body; not stored", "event_id", ev.ID, "size", len(body))
			continue
		}
		has, err := s.store.Has(ctx, s.route.Name, ev.ID)
		if err != nil {
			return 0, 0, err
		}
		if has {
			continue
		}
		missing = append(missing, listed{ev.ID, ev.Created, body})
		held += len(body)
		for len(missing) > maxPerPass || len(missing) > 1 && held > maxPassBytes {
			held -= len(missing[0].body)
			missing, truncated = missing[1:], true
		}
	}
	if truncated {
		newest = missing[0].created
	}
	for i := len(missing) - 1; i >= 0; i-- {
		stored, err := s.publish(ctx, missing[i])
		if err != nil {
			return recovered, 0, err
		}
		if stored {
			recovered++
		}
	}
	s.cursor = newest
	if err := s.store.SetCheckpoint(ctx, s.checkpoint(), strconv.FormatInt(newest, 10)); err != nil {
		return recovered, 0, err
	}
	return recovered, 0, nil
}

// wanted reports whether the endpoint is subscribed to events of type t.
func (s *stripe) wanted(t string) bool {
	types := s.route.CatchUp.Stripe.Events
	if len(types) == 0 {
		return true
	}
	for _, w := range types {
		if w == "*" || w == t || strings.HasSuffix(w, ".*") && strings.HasPrefix(t, w[:len(w)-1]) {
			return true
		}
	}
	return false
}

// checkpoint is the key of the route's cursor in the store's checkpoints.
func (s *stripe) checkpoint() string { return "catch-up.stripe." + s.route.Name }

// resume is where the first pass of this process begins: the cursor the
// last complete pass saved (by this process before a restart, or by
// another replica), else the newest event the route stored.
func (s *stripe) resume(ctx context.Context) (int64, error) {
	v, ok, err := s.store.Checkpoint(ctx, s.checkpoint())
	if err != nil {
		return 0, err
	}
	if c, perr := strconv.ParseInt(v, 10, 64); ok && perr == nil && c > 0 {
		return c, nil
	}
	return s.newestStored(ctx)
}

// newestStored is the creation time of the newest event the route stored
// before the runner started, or the start if it has none: a pass after a
// restart begins where the store's events end.
func (s *stripe) newestStored(ctx context.Context) (int64, error) {
	e, err := s.store.Newest(ctx, s.route.Name, s.started)
	if err != nil || e == nil {
		return s.started.Unix(), err
	}
	var ev struct {
		Created int64 `json:"created"`
	}
	if json.Unmarshal(e.Body, &ev) == nil && ev.Created > 0 {
		return ev.Created, nil
	}
	return e.ReceivedAt.Unix(), nil
}

// publish stores ev, signed; stored is false when the store already had
// it (from another replica, or ingress a moment ago).
func (s *stripe) publish(ctx context.Context, ev listed) (stored bool, err error) {
	id, body := ev.id, ev.body
	now := time.Now()
	h := http.Header{"Content-Type": {"application/json; charset=utf-8"}, HeaderCaughtUp: {provider.NameStripe}}
	if s.signer != nil {
		if err := s.signer.Sign(&provider.Request{Method: http.MethodPost, Header: h, Body: body}, s.route.Secrets[0], now); err != nil {
			return false, fmt.Errorf("sign event %s: %w", id, err)
		}
	}
	tc := telemetry.Store(ctx) // the pass's span, when tracing is on
	res, err := s.store.Publish(ctx, &store.Envelope{
		Route:       s.route.Name,
		EventID:     id,
		Method:      http.MethodPost,
		Proto:       "https",
		ReceivedAt:  now,
		Header:      h,
		Body:        body,
		JSON:        filter.IsJSON(body), // recorded as the ingress does
		CaughtUp:    provider.NameStripe,
		Traceparent: tc.Traceparent,
		Tracestate:  tc.Tracestate,
	})
	if err != nil {
		return false, err
	}
	return !res.Duplicate, nil
}
