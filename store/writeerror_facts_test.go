package store_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/jethook/jethook/internal/testkit"
	"github.com/jethook/jethook/store/storetest"
)

// errorLog is a nats-server logger that keeps its error lines.
type errorLog struct {
	mu     sync.Mutex
	errors []string
}

func (l *errorLog) Errorf(format string, v ...any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.errors = append(l.errors, fmt.Sprintf(format, v...))
}
func (l *errorLog) Noticef(string, ...any) {}
func (l *errorLog) Warnf(string, ...any)   {}
func (l *errorLog) Fatalf(string, ...any)  {}
func (l *errorLog) Debugf(string, ...any)  {}
func (l *errorLog) Tracef(string, ...any)  {}

func (l *errorLog) lines() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Join(l.errors, "\n")
}

// TestFactAWriteErrorStaysUntilJetStreamRestarts pins what store/monitor.go
// and store/recover.go rely on: a stream whose file store failed to write
// (the disk full) gets no answer to a publish, logs "Critical write error"
// and "failed to store a msg", and still refuses writes once the disk has
// room; stopping and starting the server's JetStream clears it, keeping
// every stored message and the consumer's ack floor.
func TestFactAWriteErrorStaysUntilJetStreamRestarts(t *testing.T) {
	storetest.SkipJetStreamRestartUnderRace(t)
	dir := testkit.Tmpfs(t, "16m")
	srv, err := server.NewServer(&server.Options{ServerName: "jethook-facts", JetStream: true, StoreDir: dir,
		DontListen: true, NoLog: true, NoSigs: true})
	if err != nil {
		t.Fatal(err)
	}
	log := &errorLog{}
	srv.SetLoggerV2(log, false, false, false)
	srv.Start()
	if !srv.ReadyForConnections(10 * time.Second) {
		t.Fatal("embedded nats-server not ready")
	}
	t.Cleanup(srv.Shutdown)
	_, js := factConnect(t, srv)
	ctx := factCtx(t)
	st, err := js.CreateStream(ctx, factStreamConfig())
	if err != nil {
		t.Fatal(err)
	}
	cons, err := st.CreateOrUpdateConsumer(ctx, jetstream.ConsumerConfig{Durable: "app", AckPolicy: jetstream.AckExplicitPolicy})
	if err != nil {
		t.Fatal(err)
	}
	body := strings.Repeat("x", 10_000)
	const stored = 20
	for range stored {
		factPublish(ctx, t, js, body)
	}
	msgs, _ := factFetch(t, cons, 5, time.Second)
	for _, m := range msgs {
		if err := m.DoubleAck(ctx); err != nil {
			t.Fatal(err)
		}
	}

	filler := testkit.FillDisk(t, dir, 0)
	publish := func() error {
		pctx, cancel := context.WithTimeout(ctx, time.Second)
		defer cancel()
		_, err := js.Publish(pctx, factSubject, []byte(body))
		return err
	}
	if err := publish(); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("publish to a full disk: %v, want no answer (context deadline exceeded)", err)
	}
	for _, want := range []string{"Filestore [WEBHOOKS] Critical write error", "JetStream failed to store a msg on stream '$G > WEBHOOKS'"} {
		if !strings.Contains(log.lines(), want) {
			t.Errorf("nats-server's errors do not say %q:\n%s", want, log.lines())
		}
	}
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	if err := publish(); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("publish once the disk has room again: %v, want still no answer", err)
	}

	cfg := *srv.JetStreamConfig()
	cfg.StoreDir = filepath.Dir(cfg.StoreDir)
	if err := srv.ShutdownJetStream(); err != nil {
		t.Fatal(err)
	}
	if err := srv.EnableJetStream(&cfg); err != nil {
		t.Fatal(err)
	}
	if err := publish(); err != nil {
		t.Fatalf("publish after restarting JetStream: %v", err)
	}
	info, err := st.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if info.State.Msgs != stored+1 {
		t.Errorf("after the restart the stream holds %d messages, want the %d stored before and the one after", info.State.Msgs, stored+1)
	}
	ci, err := cons.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if ci.AckFloor.Stream != 5 {
		t.Errorf("after the restart the consumer's ack floor is %d, want 5", ci.AckFloor.Stream)
	}
}
