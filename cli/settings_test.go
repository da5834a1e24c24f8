package cli

import (
	"fmt"
	"log/slog"
	"runtime/debug"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jethook/jethook/internal/app"
	"github.com/jethook/jethook/policy"
	"github.com/jethook/jethook/proxy"
)

func TestSettingsHaveTheDocumentedDefaults(t *testing.T) {
	t.Parallel()
	s, err := loadSettings(map[string]string{})
	if err != nil {
		t.Fatal(err)
	}
	want := Settings{Listen: ":8080", AdminListen: "127.0.0.1:8081", Config: "policies.yaml", DataDir: "./data",
		Retention: 72 * time.Hour, DedupWindow: 72 * time.Hour, StoreSync: "interval", Replicas: 1,
		LogLevel: "info", LogFormat: "json", ShutdownGrace: 20 * time.Second, HeaderTimeout: 5 * time.Second, ReadTimeout: 30 * time.Second, AttemptLogAge: 72 * time.Hour,
		AdaptiveProcs: true}
	if s != want {
		t.Fatalf("got %+v\nwant %+v", s, want)
	}
}

func TestABadSettingIsAClearErrorNamingTheVariable(t *testing.T) {
	t.Parallel()
	cases := map[string]string{
		"JETHOOK_RETENTION":          "three days",
		"JETHOOK_STORE_SYNC":         "sometimes",
		"JETHOOK_LOG_FORMAT":         "xml",
		"JETHOOK_LOG_LEVEL":          "loud",
		"JETHOOK_REPLICAS":           "7",
		"JETHOOK_ATTEMPT_LOG_AGE":    "0s",
		"JETHOOK_MAX_INFLIGHT_BYTES": "-1",
		"JETHOOK_MAX_CONNS":          "lots",
		"JETHOOK_DEDUP_FILTER_BYTES": "-5",
		"JETHOOK_STORE_MAX_BYTES":    "20 gigs",
		"JETHOOK_ADMIN_HOSTS":        "https://jethook.internal",
		"JETHOOK_PUBLIC_HOST":        "https://hooks.example.com/",
	}
	for name, value := range cases {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			_, err := loadSettings(map[string]string{name: value})
			if err == nil || !strings.Contains(err.Error(), name) {
				t.Fatalf("%s=%q: err = %v, want it to name the variable", name, value, err)
			}
		})
	}
}

func TestAnAdminTokenNoRequestCouldPresentIsRefusedAtStart(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, token string
		ok          bool
	}{
		{"no token is allowed (loopback admin only)", "", true},
		{"a token is allowed", "s3cret-s3cret-s3cret-s3cret", true},
		{"the token serve makes (64 hex characters) is allowed", strings.Repeat("0f", 32), true},
		{"a token of 24 characters is allowed", strings.Repeat("x", 24), true},
		{"a token of 23 characters is refused", strings.Repeat("x", 23), false},
		{"a short token is refused", "s3cret", false},
		{"spaces only are refused", "   ", false},
		{"a tab and a newline are refused", "\t\n", false},
		{"a trailing newline is refused", "s3cret-s3cret-s3cret-s3cret\n", false},
		{"a leading space is refused", " s3cret-s3cret-s3cret-s3cret", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, err := loadSettings(map[string]string{"JETHOOK_ADMIN_TOKEN": tc.token})
			if tc.ok && err != nil {
				t.Fatalf("%q: %v", tc.token, err)
			}
			if !tc.ok && (err == nil || !strings.Contains(err.Error(), "JETHOOK_ADMIN_TOKEN")) {
				t.Fatalf("%q: err = %v, want an error naming JETHOOK_ADMIN_TOKEN", tc.token, err)
			}
		})
	}
}

func TestTheMemoryLimitsAreDerivedUnlessSet(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name      string
		set, want Settings
	}{
		{"all set are kept", Settings{MaxInFlightBytes: 1 << 30, MaxConns: 10, DedupFilterBytes: 1 << 20}, Settings{MaxInFlightBytes: 1 << 30, MaxConns: 10, DedupFilterBytes: 1 << 20}},
		{"connections follow the body budget", Settings{MaxInFlightBytes: 256 << 20, DedupFilterBytes: 1}, Settings{MaxInFlightBytes: 256 << 20, MaxConns: 2048, DedupFilterBytes: 1}},
		{"never fewer than 128 connections", Settings{MaxInFlightBytes: 1 << 20, DedupFilterBytes: 1}, Settings{MaxInFlightBytes: 1 << 20, MaxConns: 128, DedupFilterBytes: 1}},
	} {
		if got := tc.set.resolved(); got != tc.want {
			t.Errorf("%s: got %d bytes, %d connections; want %d, %d", tc.name, got.MaxInFlightBytes, got.MaxConns, tc.want.MaxInFlightBytes, tc.want.MaxConns)
		}
	}
	got := Settings{}.resolved()
	if want := proxy.InFlightBytes(debug.SetMemoryLimit(-1)); got.MaxInFlightBytes != want || got.MaxConns < 128 {
		t.Errorf("derived %d bytes, %d connections; want %d bytes from the memory limit", got.MaxInFlightBytes, got.MaxConns, want)
	}
	// Without GOMEMLIMIT the test's limit is none at all (MaxInt64), which
	// must not size the filters past the cap.
	if want := min(debug.SetMemoryLimit(-1)/32, 256<<20); got.DedupFilterBytes != want {
		t.Errorf("derived dedup filters of %d bytes; want %d, a 32nd of the memory limit, at most 256 MiB", got.DedupFilterBytes, want)
	}
}

func TestARouteWhoseMaxBodyCouldNeverFitInTheBudgetIsRefused(t *testing.T) {
	t.Parallel()
	cfg, err := policy.Load("../policies.yaml")
	if err != nil {
		t.Fatal(err)
	}
	s, err := loadSettings(map[string]string{"JETHOOK_MAX_INFLIGHT_BYTES": "1048576"})
	if err != nil {
		t.Fatal(err)
	}
	l, err := s.limits()
	if err != nil {
		t.Fatal(err)
	}
	if err := app.Check(cfg, l); err == nil || !strings.Contains(err.Error(), "JETHOOK_MAX_INFLIGHT_BYTES") {
		t.Fatalf("err = %v, want one naming JETHOOK_MAX_INFLIGHT_BYTES", err)
	}
}

func TestStoreMaxBytesTakesASize(t *testing.T) {
	t.Parallel()
	for value, want := range map[string]int64{"": 0, "20GiB": 20 << 30, "512MB": 512_000_000, "1048576": 1 << 20} {
		s, err := loadSettings(map[string]string{"JETHOOK_STORE_MAX_BYTES": value})
		if err != nil {
			t.Fatalf("JETHOOK_STORE_MAX_BYTES=%q: %v", value, err)
		}
		if got, _ := s.storeMaxBytes(); got != want {
			t.Errorf("JETHOOK_STORE_MAX_BYTES=%q: %d bytes, want %d", value, got, want)
		}
	}
}

func TestLogsWriteDurationsAsText(t *testing.T) {
	t.Parallel()
	for _, format := range []string{"json", "text"} {
		var out strings.Builder
		Settings{LogLevel: "info", LogFormat: format}.logger(&out).Info("breaker opened", "cooldown", 30*time.Second,
			slog.Group("retry", "wait", 1500*time.Millisecond))
		for _, want := range []string{"30s", "1.5s"} {
			if !strings.Contains(out.String(), want) || strings.Contains(out.String(), "30000000000") {
				t.Errorf("%s log: %s, want %s and no nanoseconds", format, out.String(), want)
			}
		}
	}
}

func TestTrustedProxiesTakeCIDRsAndAddresses(t *testing.T) {
	t.Parallel()
	s, err := loadSettings(map[string]string{"JETHOOK_TRUSTED_PROXIES": "10.0.0.0/8, 192.0.2.7,2001:db8::/32"})
	if err != nil {
		t.Fatal(err)
	}
	got, _ := s.trustedProxies()
	if fmt.Sprint(got) != "[10.0.0.0/8 192.0.2.7/32 2001:db8::/32]" {
		t.Errorf("trusted proxies %v", got)
	}
	if _, err := loadSettings(map[string]string{"JETHOOK_TRUSTED_PROXIES": "10.0.0.0/33"}); err == nil ||
		!strings.Contains(err.Error(), `JETHOOK_TRUSTED_PROXIES: "10.0.0.0/33"`) {
		t.Errorf("a bad CIDR: err = %v", err)
	}
	// The list is read as the egress lists are: a mapped address is its
	// IPv4 address, the form the ingress compares a client's address in.
	s, err = loadSettings(map[string]string{"JETHOOK_TRUSTED_PROXIES": "::ffff:192.0.2.7"})
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := s.trustedProxies(); fmt.Sprint(got) != "[192.0.2.7/32]" {
		t.Errorf("a mapped address: trusted proxies %v", got)
	}
	if _, err := loadSettings(map[string]string{"JETHOOK_TRUSTED_PROXIES": "::ffff:10.0.0.0/104"}); err == nil ||
		!strings.Contains(err.Error(), `JETHOOK_TRUSTED_PROXIES: "::ffff:10.0.0.0/104": write an IPv4 range as IPv4`) {
		t.Errorf("a mapped range: err = %v", err)
	}
}

func TestTheAdminListenerAnswersToItsListenNameAndTheListedOnes(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, listen, hosts string
		want                []string
	}{
		{"the default listens on an address only", "127.0.0.1:8081", "", []string{"127.0.0.1"}},
		{"all interfaces add no name", ":8081", "", nil},
		{"a listen name is added", "jethook-admin:8081", "", []string{"jethook-admin"}},
		{"listed names follow", ":8081", " jethook.internal, admin.example.com ,", []string{"jethook.internal", "admin.example.com"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got, err := Settings{AdminListen: tc.listen, AdminHosts: tc.hosts}.adminHosts()
			if err != nil || !slices.Equal(got, tc.want) {
				t.Errorf("adminHosts = %q, %v; want %q", got, err, tc.want)
			}
		})
	}
	for _, bad := range []string{"jethook.internal:8081", "https://jethook.internal", "a b", "[::1]"} {
		if _, err := (Settings{AdminHosts: bad}).adminHosts(); err == nil || !strings.Contains(err.Error(), "JETHOOK_ADMIN_HOSTS") {
			t.Errorf("JETHOOK_ADMIN_HOSTS=%q: err = %v, want one naming the variable", bad, err)
		}
	}
}

func TestThePublicHostIsAHostWithAnOptionalPort(t *testing.T) {
	t.Parallel()
	for v, ok := range map[string]bool{
		"": true, "hooks.example.com": true, "hooks.example.com:8443": true, "[2001:db8::1]:443": true, "192.0.2.1": true,
		"https://hooks.example.com": false, "hooks.example.com/in": false, "u@hooks.example.com": false,
		"hooks example.com": false, ":8443": false, "hooks.example.com?x": false, "hooks.example.com\n": false,
	} {
		if err := checkPublicHost(v); (err == nil) != ok {
			t.Errorf("JETHOOK_PUBLIC_HOST=%q: err = %v, want ok: %v", v, err, ok)
		}
	}
}
