package cli

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/jethook/jethook/internal/testkit"
)

func runProbeFor(admin string, args ...string) (string, error) {
	var out bytes.Buffer
	err := probe(context.Background(), map[string]string{"JETHOOK_ADMIN_LISTEN": admin}, args, &out)
	return out.String(), err
}

func TestProbePassesAgainstARunningJethook(t *testing.T) {
	t.Parallel()
	admin := testkit.FreeAddr(t)
	serveForTest(t, func(s *Settings) { s.AdminListen = admin })
	for _, tc := range []struct {
		args []string
		want string
	}{
		{nil, "ready\n"},
		{[]string{"ready"}, "ready\n"},
		{[]string{"live"}, "ok\n"},
		{[]string{"live", "-timeout", "1s"}, "ok\n"},
	} {
		out, err := runProbeFor(admin, tc.args...)
		if err != nil || out != tc.want {
			t.Errorf("probe %v: %q, %v; want %q", tc.args, out, err, tc.want)
		}
	}
}

func TestProbeSaysNotReadyWhileTheNATSServerIsDownButStillLive(t *testing.T) {
	t.Parallel()
	// max_payload as deploy/nats.conf sets it: the 1 MB default is refused.
	ns := testkit.StartNATS(t)
	admin := testkit.FreeAddr(t)
	serveForTest(t, func(s *Settings) { s.AdminListen, s.NATSURL = admin, ns.ClientURL() })
	if _, err := runProbeFor(admin, "ready"); err != nil {
		t.Fatalf("ready with NATS up: %v", err)
	}
	ns.Shutdown()
	var notReady error
	testkit.Eventually(t, 10*time.Second, "probe ready still passes with NATS down", func() bool {
		_, notReady = runProbeFor(admin, "ready")
		return notReady != nil
	})
	if !strings.Contains(notReady.Error(), "503") {
		t.Errorf("not ready: %v, want the 503 from /readyz", notReady)
	}
	if _, err := runProbeFor(admin, "live"); err != nil {
		t.Errorf("live with NATS down: %v (a store outage must not restart the container)", err)
	}
}

func TestProbeFailsWhenNothingAnswers(t *testing.T) {
	t.Parallel()
	if _, err := runProbeFor(testkit.FreeAddr(t), "live"); err == nil {
		t.Fatal("probe passed with nothing listening")
	}
}

func TestProbeRefusesAnUnknownCheck(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{{"alive"}, {"ready", "live"}} {
		if _, err := runProbeFor("127.0.0.1:1", args...); !errors.Is(err, errUsage) {
			t.Errorf("probe %v: %v, want a usage error", args, err)
		}
	}
}

func TestAWildcardAdminAddressIsProbedOnLoopback(t *testing.T) {
	t.Parallel()
	for listen, want := range map[string]string{
		":8081":            "127.0.0.1:8081",
		"0.0.0.0:8081":     "127.0.0.1:8081",
		"[::]:8081":        "127.0.0.1:8081",
		"127.0.0.1:8081":   "127.0.0.1:8081",
		"[::1]:8081":       "[::1]:8081",
		"localhost:8081":   "localhost:8081",
		"10.1.2.3:8081":    "10.1.2.3:8081",
		"no port, no luck": "no port, no luck",
	} {
		if got := dialable(listen); got != want {
			t.Errorf("dialable(%q) = %q, want %q", listen, got, want)
		}
	}
}
