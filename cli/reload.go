package cli

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"sync"
	"syscall"

	"github.com/jethook/jethook/alert"
	"github.com/jethook/jethook/catchup"
	"github.com/jethook/jethook/forward"
	"github.com/jethook/jethook/policy"
	"github.com/jethook/jethook/proxy"
	"github.com/jethook/jethook/store"
)

// reloader re-reads policies.yaml on SIGHUP or POST /v1/reload and applies
// it to the running forwarder and ingress. An invalid file changes nothing.
type reloader struct {
	settings Settings
	store    *store.Store
	fwd      *forward.Forwarder
	ingress  *proxy.Handler
	alerts   *alert.Notifier
	catchUp  *catchup.Runner
	log      *slog.Logger

	mu sync.Mutex // one reload at a time
}

// reload loads and checks the file, then starts, stops and restarts
// destination loops and swaps the ingress routes. Consumers for new routes
// exist before the ingress accepts them, so no message is stored that no
// consumer will read.
func (r *reloader) reload(ctx context.Context) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	cfg, err := r.load()
	if err != nil {
		r.log.Error("reload rejected; the running configuration stays", "config", r.settings.Config, "err", err)
		return err
	}
	if err := r.fwd.Reload(ctx, cfg); err != nil {
		r.log.Error("reload failed; the running configuration stays", "config", r.settings.Config, "err", err)
		return err
	}
	if err := r.ingress.Load(cfg); err != nil {
		// Checked in load: only a bug gets here.
		r.log.Error("ingress reload failed after the forwarder took the new configuration", "err", err)
		return err
	}
	r.alerts.Configure(cfg.Alerts)
	r.catchUp.Reload(cfg)
	for _, w := range cfg.Warnings() {
		r.log.Warn(w)
	}
	r.log.Info("configuration reloaded", "config", r.settings.Config, "routes", len(cfg.Routes))
	return nil
}

// load reads the file and runs every check Serve runs at start.
func (r *reloader) load() (*policy.Config, error) {
	cfg, err := policy.Load(r.settings.Config)
	if err != nil {
		return nil, err
	}
	if err := checkConfig(r.settings, cfg, r.store.MaxPayload()); err != nil {
		return nil, err
	}
	// A throwaway ingress checks the provider settings without a swap.
	if _, err := proxy.New(cfg, r.store, nil); err != nil {
		return nil, fmt.Errorf("%s: %w", cfg.File, err)
	}
	return cfg, nil
}

// checkConfig checks cfg against the process settings and, if maxPayload
// is known (not 0), the largest message the store accepts.
func checkConfig(s Settings, cfg *policy.Config, maxPayload int64) error {
	if maxAge := cfg.MaxAge(); maxAge >= s.Retention {
		return fmt.Errorf("%s: a route's retry max_age (%s) must be shorter than JETHOOK_RETENTION (%s), or messages would expire while still being retried", s.Config, maxAge, s.Retention)
	}
	for _, r := range cfg.Routes {
		if maxPayload > 0 && r.MaxBody+headerRoom > maxPayload {
			return fmt.Errorf("%s:%d: route %q: max_body %d is more than the NATS server's max_payload (%d) allows", cfg.File, r.Line, r.Name, r.MaxBody, maxPayload)
		}
		if s.MaxInFlightBytes > 0 && r.MaxBody > s.MaxInFlightBytes {
			return fmt.Errorf("%s:%d: route %q: max_body %d is more than JETHOOK_MAX_INFLIGHT_BYTES (%d): a body that large would never find room and always get 503", cfg.File, r.Line, r.Name, r.MaxBody, s.MaxInFlightBytes)
		}
	}
	return nil
}

// onHangup reloads on each SIGHUP until ctx ends.
func (r *reloader) onHangup(ctx context.Context) {
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	for {
		select {
		case <-hup:
			r.log.Info("SIGHUP: reloading", "config", r.settings.Config)
			_ = r.reload(ctx) // reload logs what went wrong
		case <-ctx.Done():
			return
		}
	}
}
