// Package app assembles jethook from its parts: the store, the metrics, the
// alerts, the forwarder, the ingress, the pull endpoints, the catch-up
// runner, the admin API and its dashboard, wired as `jethook serve` runs them. Serve, `jethook bench` and the test rigs all build it
// with New, so each runs the stack that ships. Listeners, signals and the
// process settings stay with the caller.
package app

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/netip"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/trace"

	"github.com/jethook/jethook/admin"
	"github.com/jethook/jethook/alert"
	"github.com/jethook/jethook/catchup"
	"github.com/jethook/jethook/dashboard"
	"github.com/jethook/jethook/egress"
	"github.com/jethook/jethook/filter"
	"github.com/jethook/jethook/forward"
	"github.com/jethook/jethook/metrics"
	"github.com/jethook/jethook/policy"
	"github.com/jethook/jethook/proxy"
	"github.com/jethook/jethook/pull"
	"github.com/jethook/jethook/store"
)

// Options configure New. The zero value plus a Store, or plus
// StoreOptions.DataDir, runs jethook on its defaults.
type Options struct {
	// Store is an open store to run on; its opener closes it. Nil opens
	// one with StoreOptions, and Close closes that one.
	Store        *store.Store
	StoreOptions store.Options
	// Logger gets what every part logs; nil discards it.
	Logger *slog.Logger
	// Load reads a new configuration for Reload (policy.Load), which
	// runs Check on it; nil makes Reload refuse, and the admin API answer
	// 501.
	Load func() (*policy.Config, error)
	// AdminToken is the bearer token the admin API's /v1/ requires, and
	// what an operator logs in to the dashboard with.
	AdminToken string
	// AdminHosts are the names the admin listener answers to besides IP
	// addresses and localhost (admin.Handler.Hosts).
	AdminHosts []string
	// Ready adds the caller's own readiness to the admin API's /readyz.
	Ready func(context.Context) error
	// MaxInFlightBytes, TrustedProxies and PublicHost are the ingress's
	// (proxy.Handler).
	MaxInFlightBytes int64
	TrustedProxies   []netip.Prefix
	PublicHost       string
	// FetchWait and ParkAfter are the forwarder's (forward.Forwarder);
	// zero takes its defaults.
	FetchWait time.Duration
	ParkAfter time.Duration
	// Egress are the rules on the addresses deliveries connect to
	// (forward.Forwarder.Egress); nil is egress.Default().
	Egress *egress.Rules
	// Tracer, when not nil, traces each webhook from its ingress request
	// through every delivery attempt (telemetry.Setup builds one from the
	// OTEL_* variables); nil traces nothing.
	Tracer trace.Tracer
}

// App is jethook assembled: each part, ready to serve. Public serves the
// public listener (the Ingress, and Pull under /v1/pull/), Admin the
// admin listener. A new part is a field
// here, built in New and stopped in Close.
type App struct {
	Store   *store.Store
	Metrics *metrics.Metrics
	// Registry holds the metrics, with the Go runtime's and the
	// process's; Metrics.Handler serves it.
	Registry  *prometheus.Registry
	Alerts    *alert.Notifier
	Forwarder *forward.Forwarder
	Ingress   *proxy.Handler
	// Pull serves pull destinations to their clients (docs/pull.md).
	Pull *pull.Handler
	// Public is the public listener's handler: Pull for paths under
	// policy.PullPrefix, which no route may take, the Ingress for the rest.
	Public http.Handler
	// CatchUp asks providers for what they could not deliver (a route's
	// catch_up block).
	CatchUp *catchup.Runner
	// Service is what an operator asks and does (status, events, dead
	// letters, replay, purge, pause, reload): Admin and Dashboard are its
	// two faces.
	Service *admin.Service
	// Admin is the admin API, the admin listener's handler.
	Admin *admin.Handler
	// Dashboard is the web UI the admin listener serves at /.
	Dashboard *dashboard.Handler

	log      *slog.Logger
	load     func() (*policy.Config, error)
	limits   Limits // what New and Reload check a configuration against
	ownStore bool
	stopRun  context.CancelFunc // ends watchStore and the catch-up loops
	reload   sync.Mutex         // one reload at a time
}

// New opens the store (unless o.Store is given), checks cfg against it,
// and starts the alerts and the forwarder. The forwarder's consumers exist
// before New returns, so nothing the ingress stores goes unread. On an
// error everything started is stopped again.
func New(ctx context.Context, cfg *policy.Config, o Options) (_ *App, err error) {
	a := &App{Store: o.Store, log: o.Logger, load: o.Load}
	if a.log == nil {
		a.log = slog.New(slog.DiscardHandler)
	}
	defer func() {
		if err != nil {
			a.Close(time.Second)
		}
	}()
	if a.Store == nil {
		so := o.StoreOptions
		if so.Logger == nil {
			so.Logger = a.log
		}
		if so.BodyValues == nil {
			so.BodyValues = filter.BodyValues // what a search looks for
		}
		if a.Store, err = store.Open(ctx, so); err != nil {
			return nil, err
		}
		a.ownStore = true
	}
	// Deliveries, alert notices and catch-up's API calls all go where the
	// policies file says: by the same egress rules.
	rules := cmp.Or(o.Egress, egress.Default())
	a.limits = Limits{Retention: a.Store.Retention(), MaxInFlightBytes: o.MaxInFlightBytes,
		MaxPayload: a.Store.MaxPayload(), Egress: rules}
	if err := Check(cfg, a.limits); err != nil {
		return nil, err
	}

	a.Metrics, a.Registry = newMetrics(a.Store, func(route, destination string) bool {
		return a.Forwarder != nil && a.Forwarder.Runs(route, destination)
	})
	a.Alerts = alert.New(alertConfig(cfg.Alerts), a.log)
	alerts := http.DefaultTransport.(*http.Transport).Clone()
	alerts.DialContext = rules.Dialer().DialContext
	a.Alerts.Client = &http.Client{Transport: alerts}
	a.Alerts.Start()
	runCtx, stop := context.WithCancel(context.Background())
	a.stopRun = stop
	go watchStore(runCtx, a.Store, a.Alerts)

	fwd := &forward.Forwarder{Store: a.Store, Logger: a.log, Metrics: a.Metrics, Alerts: a.Alerts,
		FetchWait: o.FetchWait, ParkAfter: o.ParkAfter, Egress: rules, Tracer: o.Tracer}
	if err := fwd.Start(ctx, cfg); err != nil {
		return nil, err
	}
	a.Forwarder = fwd

	if a.Ingress, err = proxy.New(cfg, a.Store, a.log); err != nil {
		return nil, fmt.Errorf("%s: %w", cfg.File, err)
	}
	a.Ingress.Metrics = a.Metrics
	a.Ingress.MaxInFlightBytes = o.MaxInFlightBytes
	a.Ingress.TrustedProxies = o.TrustedProxies
	a.Ingress.PublicHost = o.PublicHost
	a.Pull = pull.New(cfg, a.Forwarder, a.log)
	a.Public = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasPrefix(r.URL.Path, policy.PullPrefix) {
			a.Pull.ServeHTTP(w, r)
			return
		}
		a.Ingress.ServeHTTP(w, r)
	})

	a.Ingress.Tracer = o.Tracer

	a.CatchUp = &catchup.Runner{Store: a.Store, Logger: a.log, Metrics: a.Metrics, Egress: rules, Tracer: o.Tracer}
	a.CatchUp.Start(runCtx, cfg)

	// One service for the API and the dashboard, and one budget of wrong
	// bearer tokens for both.
	a.Service = &admin.Service{Store: a.Store, Forwarder: a.Forwarder, CatchUp: a.CatchUp, Logger: a.log, Tracer: o.Tracer}
	if a.load != nil {
		a.Service.ReloadConfig = a.Reload
	}
	bearers := &admin.Throttle{}
	a.Dashboard = &dashboard.Handler{Service: a.Service, Metrics: a.Metrics,
		Token: o.AdminToken, Logger: a.log, Throttle: bearers}
	a.Admin = &admin.Handler{Service: a.Service, Token: o.AdminToken, Metrics: a.Metrics.Handler(),
		Ready: o.Ready, Dashboard: a.Dashboard, Hosts: o.AdminHosts, Throttle: bearers}
	return a, nil
}

// Reload loads a new configuration with Options.Load, checks it, and
// applies it to the running parts: the forwarder starts, stops and
// restarts destination loops, then the ingress swaps its routes, then the
// alerts and the catch-up runner take theirs. Consumers for new routes exist before the
// ingress accepts them, so nothing is stored that no consumer will read.
// A configuration that fails a check changes nothing.
func (a *App) Reload(ctx context.Context) error {
	if a.load == nil {
		return errors.New("reload: no configuration to load")
	}
	a.reload.Lock()
	defer a.reload.Unlock()
	cfg, err := a.checked()
	if err != nil {
		a.log.Error("reload rejected; the running configuration stays", "err", err)
		return err
	}
	if err := a.Forwarder.Reload(ctx, cfg); err != nil {
		a.log.Error("reload failed; the running configuration stays", "config", cfg.File, "err", err)
		return err
	}
	if err := a.Ingress.Reload(cfg); err != nil {
		// policy.Load built every route's provider: only a bug gets here.
		a.log.Error("ingress reload failed after the forwarder took the new configuration", "err", err)
		return err
	}
	a.Pull.Reload(cfg)
	a.Alerts.Reload(alertConfig(cfg.Alerts))
	a.CatchUp.Reload(cfg)
	for _, w := range cfg.Warnings() {
		a.log.Warn(w)
	}
	a.log.Info("configuration reloaded", "config", cfg.File, "routes", len(cfg.Routes))
	return nil
}

// checked loads the new configuration and runs the Check New runs.
func (a *App) checked() (*policy.Config, error) {
	cfg, err := a.load()
	if err != nil {
		return nil, err
	}
	if err := Check(cfg, a.limits); err != nil {
		return nil, err
	}
	return cfg, nil
}

// Close stops catching up, then delivering (attempts in flight get up to
// grace), then the alerts, so the last dead letters are told, and closes
// the store if New opened it. The caller stops its listeners first.
func (a *App) Close(grace time.Duration) {
	if a.CatchUp != nil {
		a.CatchUp.Stop()
	}
	if a.Forwarder != nil {
		a.Forwarder.Stop(grace)
	}
	if a.stopRun != nil {
		a.stopRun()
	}
	a.Alerts.Stop() // a nil Notifier ignores it
	if a.ownStore && a.Store != nil {
		a.Store.Close()
	}
}

// alertConfig is the `alerts:` block as package alert takes it; nil for
// none.
func alertConfig(a *policy.Alerts) *alert.Config {
	if a == nil {
		return nil
	}
	c := alert.Config(*a)
	return &c
}
