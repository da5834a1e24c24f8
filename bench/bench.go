// Package bench measures jethook against bare baselines on loopback: how
// fast its ingress acknowledges webhooks next to a net/http handler that
// stores nothing, and how fast webhooks reach a backend through jethook next
// to posting them to it directly. Every such figure is meant to be read as
// a ratio against the baseline measured in the same run on the same
// machine. The recovery and protection scenarios put a failing backend
// behind jethook and measure what it sees, each case against its target.
// The retention scenario runs the jethook binary as a separate process
// instead, and reads what each webhook it keeps costs in memory and disk.
package bench

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"time"

	"github.com/jethook/jethook/internal/app"
	"github.com/jethook/jethook/policy"
	"github.com/jethook/jethook/store"
)

// Options configure the scenarios; a zero field takes its default.
type Options struct {
	// Duration bounds each ingest case (default 5s).
	Duration time.Duration
	// Requests, if positive, ends each ingest case after that many
	// requests, even before Duration.
	Requests int
	// BodySize is the size of every JSON body in bytes (default 1024).
	BodySize int
	// Events is how many webhooks the end-to-end scenario sends (default
	// 20,000).
	Events int
	// Clients is the client concurrency of the end-to-end scenario, both
	// through jethook and direct (default 64).
	Clients int
	// DestConcurrency is the destination's concurrency in jethook's
	// policy: the forwarder's requests in flight to the backend (default 64).
	DestConcurrency int
	// DeliveryTimeout bounds the wait for the last delivery (default 2m).
	DeliveryTimeout time.Duration
	// Dir holds the stores' temporary data directories (default the
	// system's temporary directory). Its disk is what sync_always pays for.
	Dir string
	// Logger gets jethook's own log; nil discards it.
	Logger *slog.Logger
	// DrainProfile, if not nil, gets a CPU profile of the end-to-end
	// scenario's drain alone: from the destination's resume to the last
	// delivery.
	DrainProfile io.Writer
}

func (o *Options) applyDefaults() {
	if o.Duration <= 0 {
		o.Duration = 5 * time.Second
	}
	if o.BodySize <= 0 {
		o.BodySize = 1024
	}
	if o.Events <= 0 {
		o.Events = 20_000
	}
	if o.Clients <= 0 {
		o.Clients = 64
	}
	if o.DestConcurrency <= 0 {
		o.DestConcurrency = 64
	}
	if o.DeliveryTimeout <= 0 {
		o.DeliveryTimeout = 2 * time.Minute
	}
}

// hookPath is the bench route's path on jethook's ingress.
const hookPath = "/hooks/bench"

// config is a policy with one route, without verification, delivering to
// backendURL at the given concurrency.
func config(backendURL string, concurrency int) (*policy.Config, error) {
	yaml := fmt.Sprintf(`
routes:
  - name: bench
    path: %s
    destinations:
      - {name: backend, url: "${BACKEND}", concurrency: %d}
`, hookPath, concurrency)
	return policy.Parse("bench.yaml", []byte(yaml), func(k string) (string, bool) {
		return backendURL, k == "BACKEND"
	})
}

// server is an HTTP server on a loopback port. Every side of the bench
// (baseline, ingress, backend) runs on the same settings.
type server struct {
	URL string // http://127.0.0.1:port
	srv *http.Server
}

func listen(h http.Handler) (*server, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	s := &server{URL: "http://" + ln.Addr().String(), srv: newServer(h)}
	go func() { _ = s.srv.Serve(ln) }()
	return s, nil
}

// newServer is an HTTP server with the settings every side of the bench
// shares.
func newServer(h http.Handler) *http.Server {
	return &http.Server{
		Handler:           h,
		ReadHeaderTimeout: 5 * time.Second,
		ReadTimeout:       30 * time.Second,
		WriteTimeout:      30 * time.Second,
		IdleTimeout:       120 * time.Second,
		MaxHeaderBytes:    64 << 10,
	}
}

func (s *server) close() { _ = s.srv.Close() }

// shutdown stops s as `jethook serve` stops its listeners: it waits up to
// grace for the requests in flight to be answered, then closes what is
// left. Close alone leaves their handlers running.
func (s *server) shutdown(grace time.Duration) {
	ctx, cancel := context.WithTimeout(context.Background(), grace)
	defer cancel()
	if err := s.srv.Shutdown(ctx); err != nil {
		s.close()
	}
}

// bare is the ceiling: a handler that reads the body and answers 200,
// storing nothing.
var bare = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
	_, _ = io.ReadAll(r.Body)
	w.WriteHeader(http.StatusOK)
})

// stack is jethook in this process as serve assembles it (app.New): an
// embedded store in a fresh temporary directory, metrics, alerts, the
// forwarder, and the ingress on a loopback port.
type stack struct {
	dir     string
	cfg     *policy.Config
	app     *app.App
	ingress *server
}

// startStack starts jethook on cfg. Unless deliver is set, every
// destination starts paused: its consumer exists and keeps what the
// ingress stores, and nothing is attempted until resume.
func startStack(ctx context.Context, o Options, cfg *policy.Config, syncAlways, deliver bool) (_ *stack, err error) {
	s := &stack{cfg: cfg}
	defer func() {
		if err != nil {
			s.close()
		}
	}()
	if s.dir, err = os.MkdirTemp(o.Dir, "jethook-bench-*"); err != nil {
		return nil, err
	}
	if s.app, err = app.New(ctx, cfg, app.Options{StoreOptions: store.Options{DataDir: s.dir, SyncAlways: syncAlways}, Logger: o.Logger}); err != nil {
		return nil, err
	}
	if !deliver {
		if err = s.pause(); err != nil {
			return nil, err
		}
	}
	if s.ingress, err = listen(s.app.Ingress); err != nil {
		return nil, err
	}
	return s, nil
}

// pause holds every destination: nothing is attempted, everything stored
// waits in its consumer.
func (s *stack) pause() error {
	return s.eachDestination(s.app.Forwarder.Pause)
}

// resume lets every destination deliver again.
func (s *stack) resume() error {
	return s.eachDestination(s.app.Forwarder.Resume)
}

func (s *stack) eachDestination(do func(route, destination string) error) error {
	for _, r := range s.cfg.Routes {
		for _, d := range r.Destinations {
			if err := do(r.Name, d.Name); err != nil {
				return err
			}
		}
	}
	return nil
}

// close stops the stack and deletes its data. The ingress's handlers
// end before the store closes: a load stopped mid-request (the search
// scenario's) leaves handlers that still publish, and the store takes no
// publish once it closes.
func (s *stack) close() {
	if s.ingress != nil {
		s.ingress.shutdown(5 * time.Second)
	}
	if s.app != nil {
		s.app.Close(5 * time.Second)
	}
	if s.dir != "" {
		_ = os.RemoveAll(s.dir)
	}
}

// check fails a run in which any request was not answered 200: the
// end-to-end scenario waits for every event, so it cannot miss one.
func check(what string, l Measurement) error {
	if l.Failed > 0 {
		return fmt.Errorf("%s: %d of %d not answered 200", what, l.Failed, l.Failed+l.Requests)
	}
	return nil
}

// ServeBare serves the bare baseline handler on addr, a loopback address
// ("127.0.0.1:18080"), with the bench's server settings, until ctx ends. It
// lets an outside load generator such as wrk measure the same ceiling
// against a separate process (bench/wrk.sh).
func ServeBare(ctx context.Context, addr string, ready func(net.Addr)) error {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("bare listen %q: %w", addr, err)
	}
	if ip := net.ParseIP(host); ip == nil || !ip.IsLoopback() {
		return fmt.Errorf("bare listen %q: want a loopback IP address", addr)
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	s := newServer(bare)
	if ready != nil {
		ready(ln.Addr())
	}
	errc := make(chan error, 1)
	go func() { errc <- s.Serve(ln) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
		return s.Close()
	}
}
