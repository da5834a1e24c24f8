package cli

import (
	"context"
	"fmt"
	"iter"
	"log/slog"
	"net/netip"
	"net/url"
	"os"
	"os/signal"
	"syscall"

	"github.com/jethook/jethook/egress"
	"github.com/jethook/jethook/forward"
	"github.com/jethook/jethook/internal/app"
	"github.com/jethook/jethook/policy"
	"github.com/jethook/jethook/proxy"
)

// loadConfig reads s.Config and runs every check serve applies to it
// before it knows its store: those of policy.Load, checkConfig, and the
// provider settings (a throwaway ingress, not served). jethook check runs
// it as it is; serve and a reload add the store's rule
// (app.CheckPayload).
func loadConfig(s Settings) (*policy.Config, error) {
	cfg, err := policy.Load(s.Config)
	if err != nil {
		return nil, err
	}
	if err := checkConfig(s, cfg); err != nil {
		return nil, err
	}
	if _, err := proxy.New(cfg, nil, nil); err != nil {
		return nil, fmt.Errorf("%s: %w", cfg.File, err)
	}
	if err := forward.CheckTLS(cfg); err != nil {
		return nil, err
	}
	return cfg, nil
}

// checkConfig checks cfg against the process settings.
func checkConfig(s Settings, cfg *policy.Config) error {
	if maxAge := cfg.MaxAge(); maxAge >= s.Retention {
		return fmt.Errorf("%s: a route's retry max_age (%s) must be shorter than JETHOOK_RETENTION (%s), or messages would expire while still being retried", s.Config, maxAge, s.Retention)
	}
	rules, err := s.egress()
	if err != nil {
		return err
	}
	for _, r := range cfg.Routes {
		for _, d := range r.Destinations {
			if err := checkEgress(rules, d); err != nil {
				return fmt.Errorf("%s:%d: route %q destination %q: %w", cfg.File, r.Line, r.Name, d.Name, err)
			}
		}
		if s.MaxInFlightBytes > 0 && r.MaxBody > s.MaxInFlightBytes {
			return fmt.Errorf("%s:%d: route %q: max_body %d is more than JETHOOK_MAX_INFLIGHT_BYTES (%d): a body that large would never find room and always get 503", cfg.File, r.Line, r.Name, r.MaxBody, s.MaxInFlightBytes)
		}
	}
	return nil
}

// reloadOnHangup reloads a's configuration on each SIGHUP until ctx ends.
func reloadOnHangup(ctx context.Context, a *app.App, config string, log *slog.Logger) {
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	for {
		select {
		case <-hup:
			log.Info("SIGHUP: reloading", "config", config)
			_ = a.Reload(ctx) // Reload logs what went wrong
		case <-ctx.Done():
			return
		}
	}
}

// checkEgress refuses a destination whose URL, or OAuth2 token URL, names
// an address the egress rules refuse. A name is checked at every
// connection instead, whatever it resolves to then (jethook check also
// resolves it once: checkResolved).
func checkEgress(rules *egress.Rules, d policy.Destination) error {
	for key, raw := range destinationURLs(d) {
		u, err := url.Parse(raw)
		if err != nil {
			continue
		}
		if ip, err := netip.ParseAddr(u.Hostname()); err == nil {
			if err := rules.Check(ip); err != nil {
				return fmt.Errorf("%s: %w", key, err)
			}
		}
	}
	return nil
}

// destinationURLs are the URLs jethook connects to for d, under their
// keys.
func destinationURLs(d policy.Destination) iter.Seq2[string, string] {
	return func(yield func(string, string) bool) {
		if !yield("url", d.URL) {
			return
		}
		if d.Auth != nil && d.Auth.OAuth2 != nil {
			yield("auth.oauth2.token_url", d.Auth.OAuth2.TokenURL)
		}
	}
}
