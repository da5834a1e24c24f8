package store

import (
	"fmt"
	"path/filepath"
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
