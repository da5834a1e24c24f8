package store_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jethook/jethook/internal/testkit"

	"github.com/nats-io/nats-server/v2/server"

	"github.com/jethook/jethook/store"
)

// natsOn starts a JetStream nats-server on a loopback port, shut down
// when the test ends.
func natsOn(t *testing.T, port int, dir string) error {
	s, err := server.NewServer(&server.Options{
		Host: "127.0.0.1", Port: port, JetStream: true, StoreDir: dir,
		MaxPayload: 8 << 20, NoLog: true, NoSigs: true,
	})
	if err != nil {
		return err
	}
	t.Cleanup(s.Shutdown)
	s.Start()
	if !s.ReadyForConnections(10 * time.Second) {
		return fmt.Errorf("nats-server on port %d did not start", port)
	}
	return nil
}

// A jethook started beside its NATS server (docker compose up, a new
// rollout) must wait for it rather than exit.
func TestOpenWaitsForAnExternalServerThatIsStillStarting(t *testing.T) {
	t.Parallel()
	port, dir := testkit.FreePort(t), t.TempDir()
	started := make(chan error, 1)
	go func() {
		time.Sleep(1500 * time.Millisecond) // the server comes up after jethook
		started <- natsOn(t, port, dir)
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	st, err := store.Open(ctx, store.Options{URL: fmt.Sprintf("nats://127.0.0.1:%d", port)})
	if err != nil {
		t.Fatalf("Open before the server was up: %v", err)
	}
	defer st.Close()
	select {
	case err := <-started:
		if err != nil {
			t.Fatal(err)
		}
	default:
		t.Fatal("Open returned before the server had started")
	}
	if err := st.Ready(ctx); err != nil {
		t.Fatalf("ready: %v", err)
	}
}

// A mistake the cluster will not outgrow is reported at once.
func TestOpenDoesNotWaitOnAConfigurationError(t *testing.T) {
	t.Parallel()
	port := testkit.FreePort(t)
	if err := natsOn(t, port, t.TempDir()); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	_, err := store.Open(context.Background(), store.Options{URL: fmt.Sprintf("nats://127.0.0.1:%d", port), Replicas: 3})
	if err == nil {
		t.Fatal("3 replicas on a single server: no error")
	}
	if !strings.Contains(err.Error(), "stream WEBHOOKS") {
		t.Errorf("error %q does not name the stream", err)
	}
	// Not a timing assertion on speed: a retried error would take the
	// whole start-up wait (a minute) before it surfaced.
	if took := time.Since(start); took > 30*time.Second {
		t.Errorf("took %s: the error was retried", took)
	}
}
