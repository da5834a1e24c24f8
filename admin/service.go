package admin

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/jethook/jethook/catchup"
	"github.com/jethook/jethook/forward"
	"github.com/jethook/jethook/store"
)

// Service is what an operator can ask of a running jethook and do to it:
// status, events and their search, dead letters, replay, purge, resend,
// pause and resume, and reload. It is built once (internal/app) and has
// two faces that call it: the HTTP API (Handler) and the dashboard. Set
// the fields, then call the methods; the zero value of the optional
// fields works.
type Service struct {
	// Store holds events and dead letters. Required.
	Store *store.Store
	// Forwarder runs the destinations. Required.
	Forwarder *forward.Forwarder
	// CatchUp reports each route's catch-up in Status; nil reports none.
	CatchUp *catchup.Runner
	// ReloadConfig re-reads and applies the configuration; nil makes
	// Reload answer ErrNoReload.
	ReloadConfig func(context.Context) error
	// Logger gets operator actions (replay, purge, pause, resend).
	Logger *slog.Logger
	// Now is the clock for ages and relative times; nil is time.Now.
	Now func() time.Time
	// Tracer, when not nil, records each replay as a span of the
	// replayed webhook's trace.
	Tracer trace.Tracer

	once     sync.Once
	searches chan struct{} // one token per search running
}

// setup fills in the defaults once.
func (svc *Service) setup() {
	svc.once.Do(func() {
		if svc.Logger == nil {
			svc.Logger = slog.New(slog.DiscardHandler)
		}
		if svc.Now == nil {
			svc.Now = time.Now
		}
		svc.searches = make(chan struct{}, maxSearches)
	})
}

// ErrNoReload is Reload's answer when the service has no configuration to
// reload (ReloadConfig is nil).
var ErrNoReload = errors.New("reload is not available")

// Reload re-reads and applies the configuration with ReloadConfig.
func (svc *Service) Reload(ctx context.Context) error {
	if svc.ReloadConfig == nil {
		return ErrNoReload
	}
	return svc.ReloadConfig(ctx)
}

// Hold pauses (on) or resumes a destination, and logs the operator's act.
func (svc *Service) Hold(route, destination string, on bool) error {
	svc.setup()
	act := svc.Forwarder.Resume
	if on {
		act = svc.Forwarder.Pause
	}
	if err := act(route, destination); err != nil {
		return err
	}
	msg := "destination resumed by operator"
	if on {
		msg = "destination paused by operator"
	}
	svc.Logger.Info(msg, "route", route, "destination", destination, "paused", on)
	return nil
}
