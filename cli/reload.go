package cli

import (
	"context"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/jethook/jethook/internal/app"
	"github.com/jethook/jethook/policy"
)

// loadConfig reads s.Config and runs app.Check on it against the
// settings s, as serve does and as a reload does: what passes `jethook
// check` starts.
func loadConfig(s Settings) (*policy.Config, error) {
	cfg, err := policy.Load(s.Config)
	if err != nil {
		return nil, err
	}
	l, err := s.limits()
	if err != nil {
		return nil, err
	}
	if err := app.Check(cfg, l); err != nil {
		return nil, err
	}
	return cfg, nil
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
