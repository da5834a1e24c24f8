// Package catchup recovers the webhooks a provider could not deliver while
// jethook was down or refusing them. For each route with a `catch_up:`
// block it asks the provider's API, at start and then every interval, what
// it sent: GitHub is asked to redeliver the failed deliveries jethook has
// not stored (github.go), and Stripe's missed events are fetched and
// stored directly (stripe.go). It owns no state on disk: the store's dedup
// index says what jethook has.
package catchup

import (
	"context"
	"log/slog"
	"net/http"
	"reflect"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/jethook/jethook/egress"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/jethook/jethook/metrics"
	"github.com/jethook/jethook/policy"
	"github.com/jethook/jethook/store"
	"github.com/jethook/jethook/telemetry"
)

// Runner runs the catch-up of every route that has one. Set its fields,
// then Start it; Reload applies a new configuration.
type Runner struct {
	Store *store.Store
	// Logger gets one line per pass that recovered something or failed;
	// never a payload or a credential.
	Logger  *slog.Logger
	Metrics *metrics.Metrics
	// Transport makes the API requests; nil is http.DefaultTransport's
	// settings with a 30 s limit on the wait for each answer, dialing by
	// Egress.
	Transport http.RoundTripper
	// Egress are the rules on the addresses API requests connect to (an
	// api_url comes from the policies file); nil allows any.
	Egress *egress.Rules
	// Tracer, when not nil, makes a span of each pass, and the events a
	// pass stores carry its trace context, so their attempts join it
	// (package telemetry). Nil traces nothing.
	Tracer trace.Tracer

	mu      sync.Mutex
	ctx     context.Context
	started time.Time
	jobs    map[string]*job // by route name; nil before Start and after Stop
	wg      sync.WaitGroup
}

// pass is one provider's catch-up of one route: it asks the provider
// once and returns what it recovered (events now stored that were not)
// and the redeliveries it requested.
type pass interface {
	run(ctx context.Context) (recovered, requested int, err error)
}

// job is one route's catch-up loop.
type job struct {
	route  policy.Route
	pass   pass
	cancel context.CancelFunc
	tracer trace.Tracer // nil: passes are not traced

	mu     sync.Mutex
	status Status
}

// Status is what one route's catch-up has done, for GET /v1/status.
type Status struct {
	Route    string `json:"route"`
	Provider string `json:"provider"`
	// Recovered counts the events this process brought into the store
	// since it started (or since the route's catch_up block changed).
	Recovered int `json:"recovered"`
	// Requested counts the redeliveries asked of the provider (GitHub).
	Requested     int        `json:"redeliveries_requested,omitempty"`
	LastPassAt    *time.Time `json:"last_pass_at,omitempty"`
	LastSuccessAt *time.Time `json:"last_success_at,omitempty"`
	// LastError is why the last pass failed; empty after a success.
	LastError  string     `json:"last_error,omitempty"`
	NextPassAt *time.Time `json:"next_pass_at,omitempty"`
}

// Start starts a loop for every route of cfg with a catch_up block. They
// run until ctx ends or Stop.
func (r *Runner) Start(ctx context.Context, cfg *policy.Config) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.Logger == nil {
		r.Logger = slog.New(slog.DiscardHandler)
	}
	r.ctx, r.started, r.jobs = ctx, time.Now(), map[string]*job{}
	r.apply(cfg)
}

// Reload starts, stops and restarts loops to match cfg. A route whose
// catch_up block, provider and secrets are unchanged keeps its loop and
// what it knows. A stopped loop abandons its pass; what the pass stored
// stays stored, and a new loop finds it there.
func (r *Runner) Reload(cfg *policy.Config) {
	if r == nil {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.jobs == nil {
		return // not started
	}
	r.apply(cfg)
}

// Stop stops every loop and waits for them; a later Reload does nothing.
func (r *Runner) Stop() {
	r.mu.Lock()
	for _, j := range r.jobs {
		j.cancel()
	}
	r.jobs = nil
	r.mu.Unlock()
	r.wg.Wait()
}

// Status lists each route's catch-up, by route name.
func (r *Runner) Status() []Status {
	if r == nil {
		return nil
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]Status, 0, len(r.jobs))
	for _, j := range r.jobs {
		j.mu.Lock()
		out = append(out, j.status)
		j.mu.Unlock()
	}
	slices.SortFunc(out, func(a, b Status) int { return strings.Compare(a.Route, b.Route) })
	return out
}

func (r *Runner) apply(cfg *policy.Config) {
	want := map[string]policy.Route{}
	for _, rt := range cfg.Routes {
		if rt.CatchUp != nil {
			want[rt.Name] = rt
		}
	}
	for name, j := range r.jobs {
		if rt, ok := want[name]; ok && same(j.route, rt) {
			delete(want, name)
			continue
		}
		j.cancel()
		delete(r.jobs, name)
		if rt, kept := want[name]; !kept || rt.CatchUp.Provider() != j.status.Provider {
			r.Metrics.CatchUpRemoved(name, j.status.Provider)
		}
	}
	for name, rt := range want {
		r.jobs[name] = r.start(rt)
	}
}

// same reports whether a route's catch-up may keep running as it is.
func same(a, b policy.Route) bool {
	return reflect.DeepEqual(a.CatchUp, b.CatchUp) && a.Provider == b.Provider && slices.Equal(a.Secrets, b.Secrets) &&
		a.MaxBody == b.MaxBody
}

func (r *Runner) start(rt policy.Route) *job {
	ctx, cancel := context.WithCancel(r.ctx)
	provider := rt.CatchUp.Provider()
	base := r.Transport
	if base == nil {
		t := http.DefaultTransport.(*http.Transport).Clone()
		t.ResponseHeaderTimeout = requestTimeout
		t.DialContext = r.Egress.Dialer().DialContext
		base = t
	}
	client := &http.Client{
		// Room for the waits rate limits ask for.
		Timeout: requestTimeout + maxRateTries*maxRateWait,
		Transport: &transport{
			base:    base,
			counted: func() { r.Metrics.CatchUpCall(rt.Name, provider) },
		},
	}
	j := &job{route: rt, cancel: cancel, status: Status{Route: rt.Name, Provider: provider}, tracer: r.Tracer}
	log := r.Logger.With("route", rt.Name, "provider", provider)
	if rt.CatchUp.GitHub != nil {
		j.pass = newGitHub(rt, client, r.Store, log)
	} else {
		j.pass = newStripe(rt, client, r.Store, r.started, log)
	}
	r.wg.Add(1)
	go func() {
		defer r.wg.Done()
		defer client.CloseIdleConnections()
		j.loop(ctx, r.Store, r.Metrics, log)
	}()
	return j
}

// requestTimeout bounds the wait for an API answer's headers.
const requestTimeout = 30 * time.Second

// loop runs a pass at once and then every interval until ctx ends.
func (j *job) loop(ctx context.Context, st *store.Store, m *metrics.Metrics, log *slog.Logger) {
	interval := j.route.CatchUp.Interval
	t := time.NewTimer(0)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		var recovered, requested int
		var err error
		if h := st.Health(); !h.Ready() {
			// Anything asked for now would be refused: wait for the store.
			err = &store.NotReadyError{Reason: h.Reason, Detail: h.Detail}
		} else {
			recovered, requested, err = j.run(ctx)
		}
		if ctx.Err() != nil {
			return
		}
		now := time.Now()
		m.CatchUpPass(j.route.Name, j.status.Provider, recovered, requested, err, now)
		switch {
		case err != nil:
			log.Warn("catch-up pass failed; next pass at the interval", "err", err, "recovered", recovered, "redeliveries_requested", requested)
		case recovered > 0 || requested > 0:
			log.Info("catch-up recovered missed events", "recovered", recovered, "redeliveries_requested", requested)
		}
		next := now.Add(interval)
		j.mu.Lock()
		j.status.Recovered += recovered
		j.status.Requested += requested
		j.status.LastPassAt, j.status.NextPassAt = &now, &next
		j.status.LastError = ""
		if err != nil {
			j.status.LastError = err.Error()
		} else {
			j.status.LastSuccessAt = &now
		}
		j.mu.Unlock()
		t.Reset(interval)
	}
}

// run runs one pass, as a span of its own when tracing is on.
func (j *job) run(ctx context.Context) (recovered, requested int, err error) {
	if j.tracer == nil {
		return j.pass.run(ctx)
	}
	ctx, span := j.tracer.Start(ctx, "catch-up "+j.status.Provider, trace.WithAttributes(
		telemetry.AttrRoute.String(j.route.Name),
		attribute.String("jethook.provider", j.status.Provider)))
	defer span.End()
	recovered, requested, err = j.pass.run(ctx)
	span.SetAttributes(attribute.Int("jethook.catch_up.recovered", recovered),
		attribute.Int("jethook.catch_up.redeliveries_requested", requested))
	if err != nil {
		span.SetStatus(codes.Error, err.Error())
	}
	return recovered, requested, err
}
