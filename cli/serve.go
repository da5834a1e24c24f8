package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/jethook/jethook/internal/app"
	"github.com/jethook/jethook/internal/procs"
	"github.com/jethook/jethook/policy"
	"github.com/jethook/jethook/proxy"
	"github.com/jethook/jethook/store"
	"github.com/jethook/jethook/telemetry"
)

func runServe(ctx context.Context, args []string, out io.Writer) error {
	fs := flags("serve", out)
	fs.Usage = func() {
		commandUsage(fs, "serve")
		printSettings(fs.Output())
	}
	if err := parse(fs, args); err != nil {
		return err
	}
	s, err := loadSettings(nil)
	if err != nil {
		return err
	}
	return Serve(ctx, s, s.logger(os.Stderr), nil)
}

// Serve runs jethook until ctx is done, then shuts down gracefully: stop
// accepting, finish the publishes in flight (each answered only after its
// ack), stop fetching, let attempts in flight finish within
// s.ShutdownGrace, and close the store. If ready is not nil it receives the
// public listener's address once jethook accepts webhooks.
func Serve(ctx context.Context, s Settings, log *slog.Logger, ready chan<- net.Addr) error {
	if err := checkAdminListen(s); err != nil {
		return err
	}
	if err := checkNATSListen(s); err != nil {
		return err
	}
	if s.AdminToken == "" {
		token, path, err := localAdminToken(s.DataDir)
		if err != nil {
			return err
		}
		s.AdminToken = token
		log.Info("admin token from the data dir: the CLI on this machine reads it", "file", path)
	}
	if err := applyMemoryLimit(s, log); err != nil {
		return err
	}
	s = s.resolved()
	cfg, err := policy.Load(s.Config) // app.New checks it against the settings and the store
	if err != nil {
		return err
	}
	for _, w := range cfg.Warnings() {
		log.Warn(w)
	}
	maxBytes, err := s.storeMaxBytes()
	if err != nil {
		return err
	}
	trusted, err := s.trustedProxies()
	if err != nil {
		return err
	}
	adminHosts, err := s.adminHosts()
	if err != nil {
		return err
	}
	rules, err := s.egress()
	if err != nil {
		return err
	}
	tp, err := telemetry.Setup(ctx, buildVersion())
	if err != nil {
		return err
	}
	var tracer trace.Tracer
	if tp != nil {
		log = slog.New(telemetry.LogHandler(log.Handler()))
		tracer = tp.Tracer("github.com/jethook/jethook")
		defer func() {
			fctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			if err := tp.Shutdown(fctx); err != nil {
				log.Warn("traces not all sent at shutdown", "err", err)
			}
		}()
		log.Info("tracing on (OpenTelemetry)")
	}
	if s.NATSListen != "" && s.NATSURL == "" && !loopback(s.NATSListen) {
		log.Warn("the embedded NATS client port is reachable from other machines, and its token travels unencrypted", "nats_listen", s.NATSListen)
	}
	a, err := app.New(ctx, cfg, app.Options{
		StoreOptions: store.Options{
			DataDir:          s.DataDir,
			URL:              s.NATSURL,
			ClientListen:     s.NATSListen,
			ClientToken:      s.NATSToken,
			Retention:        s.Retention,
			DedupWindow:      s.DedupWindow,
			DedupFilterBytes: int(s.DedupFilterBytes),
			SyncAlways:       s.StoreSync == "always",
			Replicas:         s.Replicas,
			AttemptLogAge:    s.AttemptLogAge,
			MaxBytes:         maxBytes,
			WaitingEvery:     s.WaitingEvery,
		},
		Logger:     log,
		Load:       func() (*policy.Config, error) { return policy.Load(s.Config) },
		AdminToken: s.AdminToken,
		AdminHosts: adminHosts,
		// Not ready once shutdown begins: the admin listener outlives the
		// public one, and a load balancer must stop sending before the
		// listener closes.
		Ready: func(context.Context) error {
			if ctx.Err() != nil {
				return errors.New("shutting down")
			}
			return nil
		},
		MaxInFlightBytes: s.MaxInFlightBytes,
		TrustedProxies:   trusted,
		PublicHost:       s.PublicHost,
		Egress:           rules,
		Tracer:           tracer,
	})
	if err != nil {
		return err
	}
	defer a.Close(s.ShutdownGrace) // after the listeners: attempts finish, the last dead letters are told

	adminAddr, stopAdmin, err := startAdmin(s, a.Admin, log)
	if err != nil {
		return err
	}
	defer func() {
		actx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		stopAdmin(actx)
	}()
	go reloadOnHangup(ctx, a, s.Config, log)
	go releaseWhenIdle(ctx, log)
	if s.AdaptiveProcs && os.Getenv("GOMAXPROCS") == "" {
		go procs.Run(ctx, log)
	}
	srv := &http.Server{
		Handler:           a.Public,
		ReadHeaderTimeout: s.HeaderTimeout,
		ReadTimeout:       s.ReadTimeout,
		WriteTimeout:      30 * time.Second,
		IdleTimeout:       120 * time.Second,
		MaxHeaderBytes:    64 << 10,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelDebug),
	}
	ln, err := net.Listen("tcp", s.Listen)
	if err != nil {
		return fmt.Errorf("listen %s: %w", s.Listen, err)
	}
	// Each connection may hold up to MaxHeaderBytes of headers. Past the
	// limit, a new connection closes one idle for a second or more.
	conns := proxy.NewConnLimit(s.MaxConns)
	srv.ConnState = conns.ConnState
	ln = conns.Listen(ln)
	log.Info("jethook ready", "listen", ln.Addr().String(), "admin", adminAddr.String(), "routes", len(cfg.Routes), "store", storeName(s),
		"max_conns", s.MaxConns, "max_inflight_bytes", s.MaxInFlightBytes)
	if ready != nil {
		ready <- ln.Addr()
	}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return fmt.Errorf("serve %s: %w", s.Listen, err)
	case <-ctx.Done():
	}
	log.Info("shutting down", "grace", s.ShutdownGrace)
	sctx, cancel := context.WithTimeout(context.Background(), s.ShutdownGrace)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil && !errors.Is(err, context.DeadlineExceeded) {
		log.Warn("http shutdown", "err", err)
	}
	return nil
}

func storeName(s Settings) string {
	if s.NATSURL != "" {
		return "external"
	}
	return "embedded:" + s.DataDir
}
