package cli

import (
	"context"
	"log/slog"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/jethook/jethook/internal/testkit"
	"github.com/jethook/jethook/store"
)

// serve refuses to open the embedded NATS client port without a token,
// on loopback (every local user reaches it) as well as on every interface.
func TestServeRefusesANATSClientPortWithoutAToken(t *testing.T) {
	t.Parallel()
	_, port, err := net.SplitHostPort(testkit.FreeAddr(t))
	if err != nil {
		t.Fatal(err)
	}
	for _, host := range []string{"127.0.0.1", "0.0.0.0", ""} {
		listen := net.JoinHostPort(host, port)
		t.Run(listen, func(t *testing.T) {
			s, err := loadSettings(map[string]string{
				"JETHOOK_LISTEN":       "127.0.0.1:0",
				"JETHOOK_ADMIN_LISTEN": "127.0.0.1:0",
				"JETHOOK_NATS_LISTEN":  listen,
				"JETHOOK_DATA_DIR":     t.TempDir(),
				"JETHOOK_CONFIG":       "../policies.yaml",
			})
			if err != nil {
				t.Fatal(err)
			}
			// Serve returns at once when it refuses; the deadline ends one
			// that started.
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			err = Serve(ctx, s, slog.New(slog.DiscardHandler), nil)
			if err == nil || !strings.Contains(err.Error(), "JETHOOK_NATS_TOKEN") {
				t.Fatalf("JETHOOK_NATS_LISTEN=%s without a token: err = %v, want one naming JETHOOK_NATS_TOKEN", listen, err)
			}
		})
	}
}

// With a token, the port takes the nats CLI that presents it and nobody
// else, and jethook itself stores webhooks as before.
func TestTheNATSClientPortTakesOnlyItsToken(t *testing.T) {
	t.Parallel()
	natsAddr := testkit.FreeAddr(t)
	const token = "a-long-random-nats-token-for-tests"
	addr := serveForTest(t, func(s *Settings) { s.NATSListen, s.NATSToken = natsAddr, token })

	if nc, err := nats.Connect("nats://" + natsAddr); err == nil {
		nc.Close()
		t.Fatal("connected to the NATS client port without the token")
	}
	nc, err := nats.Connect("nats://"+natsAddr, nats.Token(token))
	if err != nil {
		t.Fatalf("with the token: %v", err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	before := streamMsgs(t, js)
	resp := postExample(t, addr)
	if resp != 200 {
		t.Fatalf("webhook answered %d, want 200", resp)
	}
	if after := streamMsgs(t, js); after != before+1 {
		t.Fatalf("WEBHOOKS holds %d messages after one webhook, had %d", after, before)
	}
}

func streamMsgs(t *testing.T, js jetstream.JetStream) uint64 {
	t.Helper()
	s, err := js.Stream(context.Background(), store.StreamName)
	if err != nil {
		t.Fatal(err)
	}
	info, err := s.Info(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return info.State.Msgs
}
