package cli

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/netip"
	"net/url"
	"reflect"
	"runtime/debug"
	"strings"
	"time"
	"unicode"

	"github.com/caarlos0/env/v11"

	"github.com/jethook/jethook/egress"
	"github.com/jethook/jethook/internal/app"
	"github.com/jethook/jethook/internal/size"
	"github.com/jethook/jethook/proxy"
	"github.com/jethook/jethook/store"
)

// Settings are the process settings, read from JETHOOK_* variables.
type Settings struct {
	Listen        string        `env:"LISTEN" envDefault:":8080"`
	AdminListen   string        `env:"ADMIN_LISTEN" envDefault:"127.0.0.1:8081"`
	AdminToken    string        `env:"ADMIN_TOKEN"`
	Config        string        `env:"CONFIG" envDefault:"policies.yaml"`
	DataDir       string        `env:"DATA_DIR" envDefault:"./data"`
	NATSURL       string        `env:"NATS_URL"`
	NATSListen    string        `env:"NATS_LISTEN"`
	NATSToken     string        `env:"NATS_TOKEN"` // required with NATSListen (checkNATSListen)
	Retention     time.Duration `env:"RETENTION" envDefault:"72h"`
	DedupWindow   time.Duration `env:"DEDUP_WINDOW" envDefault:"72h"`
	StoreSync     string        `env:"STORE_SYNC" envDefault:"interval"`
	StoreMaxBytes string        `env:"STORE_MAX_BYTES"`
	Replicas      int           `env:"REPLICAS" envDefault:"1"`
	LogLevel      string        `env:"LOG_LEVEL" envDefault:"info"`
	LogFormat     string        `env:"LOG_FORMAT" envDefault:"json"`
	ShutdownGrace time.Duration `env:"SHUTDOWN_GRACE" envDefault:"20s"`
	// HeaderTimeout cuts off a client that has not sent its request
	// headers in time (slowloris); ReadTimeout bounds the whole request.
	HeaderTimeout time.Duration `env:"HEADER_TIMEOUT" envDefault:"5s"`
	ReadTimeout   time.Duration `env:"READ_TIMEOUT" envDefault:"30s"`
	AttemptLogAge time.Duration `env:"ATTEMPT_LOG_AGE" envDefault:"72h"`
	// WaitingEvery is store.Options.WaitingEvery: 0 picks the default.
	WaitingEvery time.Duration `env:"WAITING_EVERY" envDefault:"0s"`
	// MemoryLimit is the Go memory limit ("512MiB"); empty derives it
	// (memory.go).
	MemoryLimit string `env:"MEMORY_LIMIT"`
	// AdaptiveProcs runs jethook on one scheduler processor while it
	// uses little CPU (internal/procs); off where GOMAXPROCS is set.
	AdaptiveProcs bool `env:"ADAPTIVE_PROCS" envDefault:"true"`
	// MaxInFlightBytes bounds the request bodies held in memory at once
	// (proxy.Handler.MaxInFlightBytes); MaxConns bounds the public
	// listener's open connections, each of which may hold up to 64 KiB of
	// headers. 0 derives each when serve starts: see resolved.
	MaxInFlightBytes int64 `env:"MAX_INFLIGHT_BYTES" envDefault:"0"`
	MaxConns         int   `env:"MAX_CONNS" envDefault:"0"`
	// DedupFilterBytes bounds the in-memory filters that spare the
	// dedup check of a new webhook a disk read
	// (store.Options.DedupFilterBytes); 0 derives it when serve starts.
	DedupFilterBytes int64 `env:"DEDUP_FILTER_BYTES" envDefault:"0"`
	// TrustedProxies are the load balancers in front, comma-separated
	// CIDRs or addresses: their X-Forwarded-Proto and X-Forwarded-Host
	// reach the backend (proxy.Handler.TrustedProxies).
	TrustedProxies string `env:"TRUSTED_PROXIES"`
	// PublicHost is the host (and port) providers call jethook at, which
	// the backend gets as X-Forwarded-Host (proxy.Handler.PublicHost).
	PublicHost string `env:"PUBLIC_HOST"`
	// AdminHosts are more names the admin listener answers to, besides IP
	// addresses, localhost and the name in AdminListen (admin.Handler.Hosts).
	AdminHosts string `env:"ADMIN_HOSTS"`
	// EgressDeny adds ranges to the addresses deliveries may not connect
	// to (egress.DefaultDeny); EgressAllow are exceptions to both.
	// Comma-separated CIDRs or addresses.
	EgressDeny  string `env:"EGRESS_DENY"`
	EgressAllow string `env:"EGRESS_ALLOW"`
}

// connCost is what the derived connection limit allows one public
// connection: net/http holds about 130 KiB of heap for a connection that
// has sent 60 KiB of headers it has not finished (MaxHeaderBytes is 64 KiB)
// while it parses them, as TestHeaderFloodsAreBoundedByTheConnectionLimit
// logs.
const connCost = 128 << 10

// dedupFilterShare is the part of the memory limit the dedup filters
// take by default: 16 MiB of the default 512 MiB.
const dedupFilterShare = 32

// maxDerivedDedupFilter caps the derived size: 256 MiB holds about 200
// million ids at 1 % false positives.
const maxDerivedDedupFilter = 256 << 20

// resolved returns s with the limits derived from the memory budget set:
// MaxInFlightBytes from the Go memory limit as it is now (so after
// anything that sets it), MaxConns so that connections full of headers
// cost about as much as the bodies in flight, and at least 128.
func (s Settings) resolved() Settings {
	if s.MaxInFlightBytes == 0 {
		s.MaxInFlightBytes = proxy.InFlightBytes(debug.SetMemoryLimit(-1))
	}
	if s.MaxConns == 0 {
		s.MaxConns = int(max(s.MaxInFlightBytes/connCost, 128))
	}
	if s.DedupFilterBytes == 0 {
		// GOMEMLIMIT=off leaves no limit (MaxInt64): the filters then
		// take their largest derived size.
		s.DedupFilterBytes = min(debug.SetMemoryLimit(-1)/dedupFilterShare, maxDerivedDedupFilter)
	}
	return s
}

// loadSettings reads and checks the environment.
func loadSettings(environ map[string]string) (Settings, error) {
	var s Settings
	opts := env.Options{Prefix: "JETHOOK_"}
	if environ != nil {
		opts.Environment = environ
	}
	if err := env.ParseWithOptions(&s, opts); err != nil {
		return s, envError(opts.Prefix, err)
	}
	switch s.StoreSync {
	case "interval", "always":
	default:
		return s, fmt.Errorf("environment: JETHOOK_STORE_SYNC=%q: want interval or always", s.StoreSync)
	}
	if _, err := s.storeMaxBytes(); err != nil {
		return s, err
	}
	switch s.LogFormat {
	case "json", "text":
	default:
		return s, fmt.Errorf("environment: JETHOOK_LOG_FORMAT=%q: want json or text", s.LogFormat)
	}
	if _, err := parseLevel(s.LogLevel); err != nil {
		return s, err
	}
	if s.Retention <= 0 || s.DedupWindow <= 0 || s.ShutdownGrace <= 0 || s.AttemptLogAge <= 0 ||
		s.HeaderTimeout <= 0 || s.ReadTimeout <= 0 {
		return s, fmt.Errorf("environment: JETHOOK_RETENTION, JETHOOK_DEDUP_WINDOW, JETHOOK_SHUTDOWN_GRACE and JETHOOK_ATTEMPT_LOG_AGE must be positive")
	}
	if _, _, err := memoryLimit(s.MemoryLimit, func() (uint64, error) { return 0, nil }); err != nil {
		return s, err
	}
	if s.MaxInFlightBytes < 0 {
		return s, fmt.Errorf("environment: JETHOOK_MAX_INFLIGHT_BYTES=%d: want bytes, or 0 to derive it from the memory limit", s.MaxInFlightBytes)
	}
	if s.DedupFilterBytes < 0 {
		return s, fmt.Errorf("environment: JETHOOK_DEDUP_FILTER_BYTES=%d: want bytes, or 0 to derive it from the memory limit", s.DedupFilterBytes)
	}
	if s.MaxConns < 0 {
		return s, fmt.Errorf("environment: JETHOOK_MAX_CONNS=%d: want a number of connections, or 0 to derive it", s.MaxConns)
	}
	if s.WaitingEvery < 0 || s.WaitingEvery > 0 && s.WaitingEvery < time.Second {
		return s, fmt.Errorf("environment: JETHOOK_WAITING_EVERY=%s: want 1s or more, or 0 for the default", s.WaitingEvery)
	}
	if s.Replicas < 1 || s.Replicas > 5 {
		return s, fmt.Errorf("environment: JETHOOK_REPLICAS=%d: want 1 to 5", s.Replicas)
	}
	if err := checkAdminToken(s.AdminToken); err != nil {
		return s, err
	}
	if _, err := s.adminHosts(); err != nil {
		return s, err
	}
	if err := checkPublicHost(s.PublicHost); err != nil {
		return s, err
	}
	if _, err := s.trustedProxies(); err != nil {
		return s, err
	}
	if _, err := s.egress(); err != nil {
		return s, err
	}
	return s, nil
}

// limits are what app.Check holds a configuration to under s. The
// embedded server's max_payload is known before it starts; an external
// server's is checked when serve connects.
func (s Settings) limits() (app.Limits, error) {
	rules, err := s.egress()
	if err != nil {
		return app.Limits{}, err
	}
	l := app.Limits{Retention: s.Retention, MaxInFlightBytes: s.MaxInFlightBytes, Egress: rules}
	if s.NATSURL == "" {
		l.MaxPayload = store.DefaultMaxPayload
	}
	return l, nil
}

// egress parses JETHOOK_EGRESS_DENY and JETHOOK_EGRESS_ALLOW into the
// rules deliveries connect by.
func (s Settings) egress() (*egress.Rules, error) {
	deny, err := egress.ParseList(s.EgressDeny)
	if err != nil {
		return nil, fmt.Errorf("environment: JETHOOK_EGRESS_DENY: %w", err)
	}
	allow, err := egress.ParseList(s.EgressAllow)
	if err != nil {
		return nil, fmt.Errorf("environment: JETHOOK_EGRESS_ALLOW: %w", err)
	}
	return egress.New(deny, allow), nil
}

// trustedProxies parses JETHOOK_TRUSTED_PROXIES: CIDRs ("10.0.0.0/8") or
// single addresses, comma-separated, as the egress lists are written.
func (s Settings) trustedProxies() ([]netip.Prefix, error) {
	out, err := egress.ParseList(s.TrustedProxies)
	if err != nil {
		return nil, fmt.Errorf("environment: JETHOOK_TRUSTED_PROXIES: %w", err)
	}
	return out, nil
}

// minAdminToken is the shortest admin token serve takes: 24 characters
// of a random token hold at least 96 bits (hex), beyond guessing at the
// rate the admin listener checks wrong tokens (admin.Throttle). serve's
// own token is 64 hex characters, `openssl rand -hex 32` makes one too.
const minAdminToken = 24

// checkAdminToken refuses a token no request could present, and one short
// enough to guess: the admin API trims the bearer token it is sent, so a
// blank one, or one with spaces or a newline around it (a secret file's
// last line), would never match.
func checkAdminToken(token string) error {
	switch {
	case token == "":
		return nil
	case strings.TrimSpace(token) == "":
		return errors.New("environment: JETHOOK_ADMIN_TOKEN is only whitespace: set a real token, or leave it unset")
	case strings.TrimSpace(token) != token:
		return errors.New("environment: JETHOOK_ADMIN_TOKEN starts or ends with whitespace (a newline from a secret file?): no bearer token could match it; remove it")
	case len(token) < minAdminToken:
		return fmt.Errorf("environment: JETHOOK_ADMIN_TOKEN is %d characters, too short to be safe: use at least %d random ones (openssl rand -hex 32), or leave it unset for a random one kept in the data dir", len(token), minAdminToken)
	}
	return nil
}

// adminHosts are the names the admin listener answers to besides IP
// addresses and localhost: the host in JETHOOK_ADMIN_LISTEN, and those in
// JETHOOK_ADMIN_HOSTS (comma-separated).
func (s Settings) adminHosts() ([]string, error) {
	var out []string
	if host, _, err := net.SplitHostPort(s.AdminListen); err == nil && host != "" {
		out = append(out, host)
	}
	for v := range strings.SplitSeq(s.AdminHosts, ",") {
		v = strings.TrimSpace(v)
		if v == "" {
			continue
		}
		if strings.ContainsAny(v, ":/@[] ") || strings.ContainsFunc(v, unicode.IsControl) {
			return nil, fmt.Errorf("environment: JETHOOK_ADMIN_HOSTS: %q is not a host name (give names only, like jethook.internal: no scheme, port or path)", v)
		}
		out = append(out, v)
	}
	return out, nil
}

// checkPublicHost refuses a JETHOOK_PUBLIC_HOST that is not a host with
// an optional port: the backend gets it as X-Forwarded-Host as it is.
func checkPublicHost(v string) error {
	if v == "" {
		return nil
	}
	u, err := url.Parse("//" + v)
	if err != nil || u.Host != v || u.User != nil || u.Hostname() == "" || strings.ContainsAny(v, " /?#@") {
		return fmt.Errorf("environment: JETHOOK_PUBLIC_HOST=%q: want the host providers call, with a port if not the default (hooks.example.com, hooks.example.com:8443), no scheme or path", v)
	}
	return nil
}

// checkNATSListen refuses to open the embedded server's client port without
// a token: a client there reads every stored webhook, deletes the streams,
// and stores webhooks no signature was checked for. Loopback is no
// exception, since every local user can reach it. With an external server
// (JETHOOK_NATS_URL) no port is opened.
func checkNATSListen(s Settings) error {
	switch {
	case s.NATSListen == "" || s.NATSURL != "":
		return nil
	case s.NATSToken == "":
		return fmt.Errorf("environment: JETHOOK_NATS_LISTEN=%q opens the embedded NATS server to every client that reaches it: set JETHOOK_NATS_TOKEN, the token each client must present (nats --token)", s.NATSListen)
	case strings.TrimSpace(s.NATSToken) != s.NATSToken:
		return errors.New("environment: JETHOOK_NATS_TOKEN starts or ends with whitespace (a newline from a secret file?): remove it")
	}
	return nil
}

// storeMaxBytes is JETHOOK_STORE_MAX_BYTES, the most the store may hold
// ("20GiB"), in bytes; 0 when unset, which leaves nats-server's limit
// (store.Options.MaxBytes).
func (s Settings) storeMaxBytes() (int64, error) {
	if s.StoreMaxBytes == "" {
		return 0, nil
	}
	n, err := size.Parse(s.StoreMaxBytes)
	if err != nil {
		return 0, fmt.Errorf("environment: JETHOOK_STORE_MAX_BYTES: %v", err)
	}
	return n, nil
}

// printSettings lists the JETHOOK_* variables serve reads, with their
// defaults, for `jethook serve -h`.
func printSettings(w io.Writer) {
	fmt.Fprintln(w, "\nSettings (environment variables, default in brackets):")
	for f := range reflect.TypeFor[Settings]().Fields() {
		line := "  JETHOOK_" + f.Tag.Get("env")
		if d := f.Tag.Get("envDefault"); d != "" && d != "0" {
			line += " [" + d + "]"
		}
		fmt.Fprintln(w, line)
	}
	fmt.Fprintln(w, "\nWhat each one does: docs/configuration.md.")
}

// envError names the variable behind each parse error: the env library
// names only the Go field.
func envError(prefix string, err error) error {
	var agg env.AggregateError
	if !errors.As(err, &agg) {
		return fmt.Errorf("environment: %w", err)
	}
	msgs := make([]string, 0, len(agg.Errors))
	for _, e := range agg.Errors {
		var pe env.ParseError
		if errors.As(e, &pe) {
			if f, ok := reflect.TypeFor[Settings]().FieldByName(pe.Name); ok {
				msgs = append(msgs, fmt.Sprintf("%s%s: %v", prefix, f.Tag.Get("env"), pe.Err))
				continue
			}
		}
		msgs = append(msgs, e.Error())
	}
	return fmt.Errorf("environment: %s", strings.Join(msgs, "; "))
}

func parseLevel(v string) (slog.Level, error) {
	var l slog.Level
	if err := l.UnmarshalText([]byte(strings.ToUpper(v))); err != nil {
		return l, fmt.Errorf("environment: JETHOOK_LOG_LEVEL=%q: want debug, info, warn or error", v)
	}
	return l, nil
}

func (s Settings) logger(w io.Writer) *slog.Logger {
	level, _ := parseLevel(s.LogLevel)
	opts := &slog.HandlerOptions{Level: level, ReplaceAttr: durationText}
	if s.LogFormat == "text" {
		return slog.New(slog.NewTextHandler(w, opts))
	}
	return slog.New(slog.NewJSONHandler(w, opts))
}

// durationText logs a duration as Go writes it ("30s", "1.5s") instead of
// the JSON handler's nanoseconds (30000000000).
func durationText(_ []string, a slog.Attr) slog.Attr {
	if a.Value.Kind() == slog.KindDuration {
		a.Value = slog.StringValue(a.Value.Duration().String())
	}
	return a
}
