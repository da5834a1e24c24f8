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

	"golang.org/x/net/netutil"

	"github.com/jethook/jethook/admin"
	"github.com/jethook/jethook/alert"
	"github.com/jethook/jethook/catchup"
	"github.com/jethook/jethook/dashboard"
	"github.com/jethook/jethook/forward"
	"github.com/jethook/jethook/policy"
	"github.com/jethook/jethook/proxy"
	"github.com/jethook/jethook/store"
)

// headerRoom is what a stored message may need beyond its body for the
// original headers and jethook's own.
const headerRoom = 256 << 10

func runServe(ctx context.Context, args []string, out io.Writer) error {
	fs := flags("serve", out)
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
	if err := applyMemoryLimit(s, log); err != nil {
		return err
	}
	s = s.resolved()
	cfg, err := policy.Load(s.Config)
	if err != nil {
		return err
	}
	for _, w := range cfg.Warnings() {
		log.Warn(w)
	}
	if err := checkConfig(s, cfg, 0); err != nil {
		return err
	}
	maxBytes, err := s.storeMaxBytes()
	if err != nil {
		return err
	}
	st, err := store.Open(ctx, store.Options{
		DataDir:          s.DataDir,
		URL:              s.NATSURL,
		ClientListen:     s.NATSListen,
		Retention:        s.Retention,
		DedupWindow:      s.DedupWindow,
		DedupFilterBytes: int(s.DedupFilterBytes),
		SyncAlways:       s.StoreSync == "always",
		Replicas:         s.Replicas,
		AttemptLogAge:    s.AttemptLogAge,
		MaxBytes:         maxBytes,
		Logger:           log,
	})
	if err != nil {
		return err
	}
	defer st.Close()
	if err := checkConfig(s, cfg, st.MaxPayload()); err != nil {
		return err
	}

	// prom.Handler() serves /metrics (admin.Handler's Metrics field).
	prom := newMetrics(st)
	alerts := alert.New(cfg.Alerts, log)
	alerts.Start()
	defer alerts.Stop() // after fwd.Stop, so the last dead letters are told
	go tellStore(ctx, st, alerts)
	fwd := &forward.Forwarder{Store: st, Logger: log, Metrics: prom, Alerts: alerts}
	if err := fwd.Start(ctx, cfg); err != nil {
		return err
	}
	defer fwd.Stop(s.ShutdownGrace)

	h, err := proxy.New(cfg, st, log)
	if err != nil {
		return err
	}
	h.Metrics = prom
	h.MaxInFlightBytes = s.MaxInFlightBytes
	cu := &catchup.Runner{Store: st, Logger: log, Metrics: prom}
	cu.Start(ctx, cfg)
	defer cu.Stop()
	rl := &reloader{settings: s, store: st, fwd: fwd, ingress: h, alerts: alerts, catchUp: cu, log: log}
	// Not ready once shutdown begins: the admin listener outlives the public
	// one, and a load balancer must stop sending before the listener closes.
	shuttingDown := func(context.Context) error {
		if ctx.Err() != nil {
			return errors.New("shutting down")
		}
		return nil
	}
	dash := &dashboard.Handler{Store: st, Forwarder: fwd, Metrics: prom, Token: s.AdminToken, Logger: log}
	adminAddr, stopAdmin, err := startAdmin(s, &admin.Handler{Store: st, Forwarder: fwd, Token: s.AdminToken,
		Reload: rl.reload, Metrics: prom.Handler(), Logger: log, Ready: shuttingDown, Dashboard: dash, CatchUp: cu}, log)
	if err != nil {
		return err
	}
	defer func() {
		actx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		stopAdmin(actx)
	}()
	go rl.onHangup(ctx)
	go releaseWhenIdle(ctx, log)
	srv := &http.Server{
		Handler:           h,
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
	// Past the limit, new connections wait in the kernel's accept queue
	// until one closes: each may hold up to MaxHeaderBytes of headers.
	ln = netutil.LimitListener(ln, s.MaxConns)
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
