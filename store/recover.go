package store

import (
	"context"
	"fmt"
	"path/filepath"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// restartJetStream stops and starts the embedded server's JetStream with
// the configuration it had. nats-server keeps a file store's first write
// error and refuses every later write to that stream until the store is
// reopened, even once the disk has room again (filestore.go, setWriteErr);
// a standalone server does not reopen it by itself. Stopping JetStream
// flushes and closes every stream and consumer; starting it recovers them
// from their files, as a restart of the process would, with the
// connection, the durable consumers and their ack floors kept. Publishes
// and fetches in between fail and are retried by their callers.
func (s *Store) restartJetStream() error {
	if c := s.srv.JetStreamConfig(); c != nil {
		s.jsConfig = *c // a JetStream that failed to start again has none to read back
	}
	if s.jsConfig.StoreDir == "" {
		return fmt.Errorf("restart JetStream: its configuration is unknown")
	}
	if err := s.srv.ShutdownJetStream(); err != nil {
		return fmt.Errorf("stop JetStream: %w", err)
	}
	cfg := s.jsConfig
	// With its limits set, EnableJetStream takes StoreDir as
	// server.Options.StoreDir is given: the parent of "jetstream".
	cfg.StoreDir = filepath.Dir(cfg.StoreDir)
	if err := s.srv.EnableJetStream(&cfg); err != nil {
		return fmt.Errorf("start JetStream: %w", err)
	}
	return nil
}

// recover clears a recorded write failure once the store takes writes
// again. After a write error nats-server logged, the embedded JetStream is
// restarted first (at most once per resetWait, doubling): that reopens the
// file stores, the only way to clear their error. Then a probe is written;
// its ack clears what was recorded before it was sent.
func (s *Store) recover() {
	m := &s.mon
	m.mu.Lock()
	server, pending, next := m.server, m.server.set() || m.noAck.set() || m.refused.set(), m.nextReset
	m.mu.Unlock()
	if !pending {
		return
	}
	start := time.Now()
	if server.set() && s.srv != nil {
		if start.Before(next) {
			return
		}
		m.mu.Lock()
		m.nextReset, m.resetWait = start.Add(m.resetWait), min(2*m.resetWait, maxResetWait)
		m.mu.Unlock()
		s.opts.Logger.Warn("restarting the embedded JetStream to clear a write error", "err", server.what)
		if err := s.restartJetStream(); err != nil {
			s.opts.Logger.Error("restarting the embedded JetStream failed", "err", err)
			return
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), checkTimeout)
	defer cancel()
	if _, err := s.js.Publish(ctx, probeSubject, nil, jetstream.WithExpectStream(StreamName)); err != nil {
		s.opts.Logger.Debug("store probe not acked", "err", err)
		return
	}
	if m.acked(start) {
		s.opts.Logger.Info("store takes writes again")
	}
}

// probeSubject is where the monitor writes to learn whether the store
// takes writes again: a WEBHOOKS subject no route can have ('~' is not
// allowed in names), so no consumer delivers it, and without an event id
// the index skips it.
const probeSubject = "webhooks.~probe." + layoutToken
