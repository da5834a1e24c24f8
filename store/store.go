// Package store keeps webhooks durably in NATS JetStream. It runs an embedded
// nats-server (the default) or connects to an external one, creates the
// streams and consumers jethook needs, publishes received webhooks with their
// route and event id as Nats-Msg-Id, and records dead letters. It knows nothing of HTTP.
package store

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/netip"
	neturl "net/url"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Stream and subject names. Every route publishes to webhooks.<route>; a
// replay for one destination goes to replay.<route>.<destination>, a subject
// only that destination's consumer filters on; dead letters go to
// dlq.<route>.<destination> in their own stream.
const (
	StreamName    = "WEBHOOKS"
	DLQStreamName = "WEBHOOKS_DLQ"
)

// maxConsumers bounds the consumers of WEBHOOKS: one per route ×
// destination, far above any sane configuration.
const maxConsumers = 10_000

// ErrUnavailable means the store could not take or confirm a write; the
// caller must not report success (ingress answers 503).
var ErrUnavailable = errors.New("store unavailable")

// Options configure Open. The zero value (plus DataDir) runs an embedded
// server with the defaults of docs/design.md, "Storage model".
type Options struct {
	// BodyValues calls fn with each string value of a webhook body that
	// a search may look for a field to equal (filter.BodyValues). The
	// embedded store keeps them in its value filters (values.go); nil
	// keeps none, and every search reads every webhook of its window.
	BodyValues func(body []byte, fn func(s []byte))
	// DataDir holds the embedded server's JetStream files and the index
	// (also with an external server). Empty, the index goes to a
	// temporary directory and is rebuilt from the streams at each start.
	DataDir string
	// URL of an external NATS server or cluster; empty runs an embedded server.
	URL string
	// ClientListen, if set ("127.0.0.1:4222"), opens the embedded server's
	// client port so the nats CLI can look inside. Closed by default.
	// Whoever connects there can read every stored webhook, delete the
	// streams, or store a webhook no signature was checked for, so Open
	// refuses an address other than loopback without a ClientToken.
	ClientListen string
	// ClientToken is the token every client of the embedded server must
	// present (nats --token), jethook's own connection too. Empty, the
	// loopback port of ClientListen takes any local user's connection.
	ClientToken string
	// Retention is the streams' MaxAge (default 72h).
	Retention time.Duration
	// DedupWindow is how long an event id is remembered (default and
	// cap: Retention). The index (index.go) remembers it on disk; the
	// stream's own in-memory Nats-Msg-Id window is only raceWindow long.
	DedupWindow time.Duration
	// RaceWindow is the stream's own, in-memory Nats-Msg-Id window
	// (default 30s, capped by DedupWindow): it dedups two copies of an
	// event stored within moments of each other, before the index has
	// read the first. It costs about 140 B of memory per webhook in it.
	RaceWindow time.Duration
	// DedupFilterBytes is the memory the index's in-memory filters of
	// stored event ids may take (default 16 MiB; dedup.go): they spare the
	// dedup check of a new webhook a disk lookup.
	DedupFilterBytes int
	// SyncAlways makes the embedded server fsync every write before it
	// acks. Off, it fsyncs every two minutes (nats-server's default).
	SyncAlways bool
	// Replicas for the streams on an external cluster (default 1).
	Replicas int
	// MaxPayload is the largest message the embedded server accepts
	// (default DefaultMaxPayload).
	MaxPayload int32
	// MaxAckPending bounds the messages each consumer may have delivered
	// and not yet acked, including those waiting in backoff (default 100,000).
	MaxAckPending int
	// PublishTimeout bounds how long a publish waits for the stream's ack
	// (default 5s).
	PublishTimeout time.Duration
	// AttemptLogAge is how long the attempt log (WEBHOOKS_ATTEMPTS) keeps
	// each record (default 72h).
	AttemptLogAge time.Duration
	// MaxBytes is the most the store may hold on disk, all streams
	// together; 0 leaves nats-server's limit (the embedded server's
	// default is 75 % of the disk that was free at its start). The
	// embedded server takes it as its JetStream max_file_store; with an
	// external server it is jethook's own budget. Near it, delivered
	// webhooks are purged, oldest first (purge.go).
	MaxBytes int64
	// DiskFloor is the free space on DataDir's file system below which
	// the store refuses new webhooks, so that acks, dead letters and the
	// index can still be written (default 4 × MaxPayload).
	DiskFloor int64
	// WaitingEvery turns on waiting records: each event queued behind its
	// ordering key's head (order.go) also leaves a small record in
	// WEBHOOKS_PARKED that brings it back should the index lose its queue,
	// renewed while the event waits, at least this long apart. Zero is 1
	// minute with an external server, whose index may be on a disk that
	// does not outlive the process, and off with the embedded one, whose
	// index lives beside its streams; negative is off.
	WaitingEvery time.Duration
	// Logger receives connection events; nil discards them.
	Logger *slog.Logger

	// writeDeadline, when set, is the embedded server's write deadline
	// (nats-server's write_deadline, 10 s by default): how long it waits
	// on a client that reads nothing before it closes the connection.
	// Tests lower it.
	writeDeadline time.Duration
}

// DefaultMaxPayload is the embedded server's max_payload when
// Options.MaxPayload sets none: 8 MiB, so a 5 MiB body and its headers fit.
const DefaultMaxPayload = 8 << 20

func (o *Options) applyDefaults() {
	if o.Retention <= 0 {
		o.Retention = 72 * time.Hour
	}
	if o.DedupWindow <= 0 || o.DedupWindow > o.Retention {
		o.DedupWindow = o.Retention
	}
	if o.RaceWindow <= 0 {
		o.RaceWindow = raceWindow
	}
	o.RaceWindow = min(o.RaceWindow, o.DedupWindow)
	if o.DedupFilterBytes <= 0 {
		o.DedupFilterBytes = 16 << 20
	}
	if o.Replicas <= 0 {
		o.Replicas = 1
	}
	if o.MaxPayload <= 0 {
		o.MaxPayload = DefaultMaxPayload
	}
	if o.MaxAckPending <= 0 {
		o.MaxAckPending = 100_000
	}
	if o.PublishTimeout <= 0 {
		o.PublishTimeout = 5 * time.Second
	}
	if o.AttemptLogAge <= 0 {
		o.AttemptLogAge = 72 * time.Hour
	}
	if o.DiskFloor <= 0 {
		o.DiskFloor = 4 * int64(o.MaxPayload)
	}
	if o.WaitingEvery == 0 && o.URL != "" {
		o.WaitingEvery = time.Minute
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
}

// ErrOpenClientPort is Open's answer to a ClientListen on an address other
// than loopback without a ClientToken: anyone who can reach it could read,
// delete or inject webhooks.
var ErrOpenClientPort = errors.New("the embedded NATS client port is reachable from other machines and has no token: listen on 127.0.0.1 or set a token")

// loopback reports whether host (of a listen address) is only reachable
// from this machine. An empty host or 0.0.0.0 listens on every interface.
func loopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip, err := netip.ParseAddr(host)
	return err == nil && ip.IsLoopback()
}

// Store is an open connection to JetStream with jethook's streams in place.
type Store struct {
	opts Options
	srv  *server.Server // nil when external
	nc   *nats.Conn
	js   jetstream.JetStream
	// ingress publishes webhooks (Publish), on a connection of its own
	// with the embedded server, so that the ingress does not queue behind
	// deliveries' fetches, acks and attempt records for the connection's
	// lock, and the server reads its publishes on a goroutine of their
	// own. With an external server it is js: one connection is watched
	// for stalls and broken under nats.go (dialer.go).
	ingress   jetstream.JetStream
	ingressNC *nats.Conn // nil when ingress is js
	dlq       jetstream.Stream
	main      jetstream.Stream
	// inherited is WEBHOOKS' last sequence when the embedded server
	// started: messages up to it may have been handled by an earlier run
	// (Inherited). 0 with an external server.
	inherited atomic.Uint64
	// ingest is when a webhook was last stored: searches yield to it.
	ingest ingestSeen
	debt   searchDebt // what searches owe ingest a rest for (searchpace.go)

	attempts *attemptLog // nil until the streams exist

	mover       *mover
	inst        *instances // with waiting records (owners.go)
	ownMu       sync.Mutex
	owned       map[string]*Ownership // by bucket key
	parked      jetstream.Stream      // WEBHOOKS_PARKED
	idx         *index
	order       orderState    // order.go
	writer      *writer       // indexes this process's webhooks; nil when the index follows WEBHOOKS
	tails       []*tailer     // WEBHOOKS, WEBHOOKS_DLQ, WEBHOOKS_ATTEMPTS
	expired     chan struct{} // closed by close: ends expireIndex
	expiryEnded chan struct{} // closed when expireIndex has returned
	closed      sync.Once
	// tmpIndex is the index's temporary directory when DataDir is empty.
	tmpIndex string

	mon      monitor                // monitor.go
	dialer   *dialer                // an external server's connections; nil when embedded
	jsConfig server.JetStreamConfig // the embedded JetStream's, for restartJetStream
}

// raceWindow is the default Options.RaceWindow. The index dedups for the
// whole DedupWindow, but only once it has read the first copy back from
// the stream (milliseconds later); this window covers two copies stored
// at the same moment, through this jethook or another replica. The stream
// keeps its ids in memory, so it is short.
const raceWindow = 30 * time.Second

// Open starts the embedded server or connects to opts.URL, then creates or
// updates the WEBHOOKS, WEBHOOKS_DLQ and WEBHOOKS_ATTEMPTS streams.
func Open(ctx context.Context, opts Options) (*Store, error) {
	opts.applyDefaults()
	s := &Store{opts: opts}
	s.mon.init()
	var err error
	if opts.URL == "" {
		if err = s.startEmbedded(); err != nil {
			return nil, err
		}
		if err = s.connect(); err == nil {
			err = s.ensureStreams(ctx)
		}
	} else {
		err = s.openExternal(ctx)
	}
	if err != nil {
		s.Close()
		return nil, err
	}
	s.startMonitor()
	return s, nil
}

// startupWait bounds how long Open waits for an external cluster that is
// starting with it (no server listening yet, or JetStream without a meta
// leader), as under `docker compose up` or a new Kubernetes rollout.
const startupWait = time.Minute

// openExternal connects to opts.URL and creates the streams, retrying every
// second while the cluster is not there yet or not ready; any other error,
// such as more replicas than the cluster has servers, returns at once.
func (s *Store) openExternal(ctx context.Context) error {
	deadline := time.Now().Add(startupWait)
	for tries := 1; ; tries++ {
		err := s.connect()
		if err == nil {
			err = s.ensureStreams(ctx)
		}
		if err == nil || !startingUp(err) || time.Now().After(deadline) {
			return err
		}
		s.opts.Logger.Warn("waiting for NATS JetStream", "url", redact(s.opts.URL), "try", tries, "err", err)
		select {
		case <-time.After(time.Second):
		case <-ctx.Done():
			return fmt.Errorf("%w (gave up: %v)", err, ctx.Err())
		}
	}
}

// startingUp reports whether err is what a NATS cluster answers while it
// starts: nobody listening, a connection taken but not answered or hung
// up on (a frozen server, or a proxy in front of it whose upstream is not
// ready, as a service mesh's is at a pod's start), nobody answering the
// JetStream API, or the API saying it is not available yet.
func startingUp(err error) bool {
	var api *jetstream.APIError
	switch {
	case errors.Is(err, nats.ErrNoServers), errors.Is(err, nats.ErrNoResponders), errors.Is(err, nats.ErrTimeout),
		errors.Is(err, context.DeadlineExceeded), errors.Is(err, jetstream.ErrJetStreamNotEnabled):
		return true
	case errors.Is(err, os.ErrDeadlineExceeded), errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF),
		errors.Is(err, syscall.ECONNRESET), errors.Is(err, syscall.ECONNREFUSED), errors.Is(err, syscall.EPIPE):
		return true
	case errors.Is(err, jetstream.ErrJetStreamNotEnabledForAccount):
		return false // a configuration error, not a start-up
	case errors.As(err, &api):
		return api.Code == 503
	}
	return false
}

func (s *Store) startEmbedded() error {
	o := &server.Options{
		ServerName: "jethook",
		JetStream:  true,
		StoreDir:   s.opts.DataDir,
		SyncAlways: s.opts.SyncAlways,
		MaxPayload: s.opts.MaxPayload,
		NoSigs:     true,
		NoLog:      true,
		DontListen: s.opts.ClientListen == "",
		// 0 is nats-server's default (75 % of the free disk at start).
		JetStreamMaxStore: s.opts.MaxBytes,
		WriteDeadline:     s.opts.writeDeadline,
	}
	if s.opts.ClientListen != "" {
		host, port, err := net.SplitHostPort(s.opts.ClientListen)
		if err != nil {
			return fmt.Errorf("nats client listen %q: %w", s.opts.ClientListen, err)
		}
		o.Host = host
		if o.Port, err = strconv.Atoi(port); err != nil {
			return fmt.Errorf("nats client listen %q: bad port", s.opts.ClientListen)
		}
		if s.opts.ClientToken == "" && !loopback(host) {
			return fmt.Errorf("nats client listen %q: %w", s.opts.ClientListen, ErrOpenClientPort)
		}
	}
	o.Authorization = s.opts.ClientToken
	srv, err := server.NewServer(o)
	if err != nil {
		return fmt.Errorf("embedded nats-server: %w", err)
	}
	srv.SetLoggerV2(serverLog{log: s.opts.Logger, writeError: s.mon.serverWriteError}, false, false, false)
	srv.Start()
	if !srv.ReadyForConnections(30 * time.Second) {
		srv.Shutdown()
		return fmt.Errorf("embedded nats-server in %s did not start", s.opts.DataDir)
	}
	s.srv = srv
	return nil
}

func (s *Store) connect() error {
	if s.nc != nil {
		return nil // connected on an earlier try of openExternal
	}
	log := s.opts.Logger
	nopts := []nats.Option{
		nats.Name("jethook"),
		nats.MaxReconnects(-1),
		nats.RetryOnFailedConnect(false),
		// No reconnect buffer: while disconnected a publish fails at once,
		// so ingress answers 503 within milliseconds instead of buffering a
		// payload it has just told the provider it did not store.
		nats.ReconnectBufSize(-1),
		nats.DisconnectErrHandler(func(_ *nats.Conn, err error) {
			s.mon.disconnectedNow()
			if err != nil { // nil: we closed it ourselves
				log.Warn("nats disconnected", "err", err)
			}
		}),
		nats.ReconnectHandler(func(nc *nats.Conn) {
			s.mon.connected()
			log.Info("nats reconnected", "url", nc.ConnectedUrlRedacted())
		}),
		// A write to the socket may block this long, holding the
		// connection's lock (nats.go's default is a minute); the health
		// monitor closes a stalled connection sooner (dialer.go).
		nats.FlusherTimeout(s.opts.PublishTimeout),
	}
	url := s.opts.URL
	if s.srv != nil {
		nopts = append(nopts, nats.InProcessServer(s.srv))
		if s.opts.ClientToken != "" {
			nopts = append(nopts, nats.Token(s.opts.ClientToken))
		}
		url = ""
	} else {
		s.dialer = newDialer(nats.DefaultTimeout)
		nopts = append(nopts, nats.SetCustomDialer(s.dialer))
	}
	nc, js, err := connectJetStream(url, nopts, s.opts.PublishTimeout)
	if err != nil {
		return err
	}
	s.nc, s.js, s.ingress = nc, js, js
	if s.srv == nil {
		return nil
	}
	s.ingressNC, s.ingress, err = connectJetStream(url, append(nopts, nats.Name("jethook-ingress")), s.opts.PublishTimeout)
	return err
}

// connectJetStream opens one NATS connection and its JetStream context. A
// publish the stream never answers (a store write error) gives up its slot
// after publishTimeout; without it the slots fill for good.
func connectJetStream(url string, opts []nats.Option, publishTimeout time.Duration) (*nats.Conn, jetstream.JetStream, error) {
	nc, err := nats.Connect(url, opts...)
	if err != nil {
		return nil, nil, fmt.Errorf("connect to nats %s: %w", redact(url), err)
	}
	js, err := jetstream.New(nc, jetstream.WithPublishAsyncMaxPending(4096), jetstream.WithPublishAsyncTimeout(publishTimeout))
	if err != nil {
		nc.Close()
		return nil, nil, fmt.Errorf("jetstream: %w", err)
	}
	return nc, js, nil
}

func (s *Store) ensureStreams(ctx context.Context) error {
	main, err := s.js.CreateOrUpdateStream(ctx, jetstream.StreamConfig{
		Name:        StreamName,
		Description: "jethook: every received webhook, byte for byte",
		Subjects:    []string{"webhooks.>", "replay.>", "due.>"},
		Retention:   jetstream.LimitsPolicy,
		Storage:     jetstream.FileStorage,
		MaxAge:      s.opts.Retention,
		Duplicates:  s.opts.RaceWindow,
		Replicas:    s.opts.Replicas,
		// An unset (or -1) MaxConsumers still means the server's default of
		// 1,000 per stream (pinned in jetstream_facts_test.go); jethook has
		// one consumer per route × destination and sets its own bound.
		MaxConsumers: maxConsumers,
		MaxMsgSize:   s.opts.MaxPayload,
		// Reads by sequence (a lookup by id, a parked webhook come due)
		// skip the JetStream API queue.
		AllowDirect: true,
	})
	if err != nil {
		return fmt.Errorf("stream %s: %w", StreamName, err)
	}
	dlq, err := s.js.CreateOrUpdateStream(ctx, jetstream.StreamConfig{
		Name:        DLQStreamName,
		Description: "jethook: deliveries that failed for good",
		Subjects:    []string{"dlq.>"},
		Retention:   jetstream.LimitsPolicy,
		Storage:     jetstream.FileStorage,
		MaxAge:      s.opts.Retention,
		Duplicates:  s.opts.RaceWindow,
		Replicas:    s.opts.Replicas,
		MaxMsgSize:  s.opts.MaxPayload,
		AllowDirect: true,
	})
	if err != nil {
		return fmt.Errorf("stream %s: %w", DLQStreamName, err)
	}
	attempts, err := s.ensureAttempts(ctx)
	if err != nil {
		return err
	}
	if err := s.ensureParked(ctx); err != nil {
		return err
	}
	s.main, s.dlq = main, dlq
	if s.srv != nil {
		s.inherited.Store(main.CachedInfo().State.LastSeq)
	}
	if err := s.startIndex(ctx, attempts); err != nil {
		return err
	}
	if s.Waits() && s.inst == nil {
		s.startInstances()
	}
	if s.mover == nil {
		return s.startMover(ctx)
	}
	return nil
}

// startIndex opens the index and tails the three streams into it, then
// waits until it holds everything the streams held when it started: the
// first start after an upgrade from the per-event-subject layout reads
// every retained message once.
func (s *Store) startIndex(ctx context.Context, attempts jetstream.Stream) error {
	if s.idx != nil {
		return nil // an earlier try of openExternal got this far
	}
	dir := s.opts.DataDir
	if dir == "" {
		// External NATS and no data dir: the index lives as long as
		// this process and is rebuilt from the streams at every start.
		tmp, err := os.MkdirTemp("", "jethook-index-")
		if err != nil {
			return fmt.Errorf("index: %w", err)
		}
		s.tmpIndex, dir = tmp, tmp
	}
	keep := max(s.opts.Retention, s.opts.DedupWindow, s.opts.AttemptLogAge)
	idx, err := openIndex(dir, keep, s.opts.DedupFilterBytes, s.opts.Logger)
	if err != nil {
		return err
	}
	s.idx = idx
	start := time.Now()
	// The embedded server's WEBHOOKS has no writer but this process,
	// which indexes each webhook and replay as it stores it: reading them
	// back would cost about 40 µs of CPU per webhook. Another jethook may
	// write to an external server's, so there the index follows it.
	followWebhooks := s.srv == nil
	for _, t := range []struct {
		st          jetstream.Stream
		follow      bool
		headersOnly bool
		filters     []string // nil: all
		apply       func(*pebble.Batch, jetstream.Msg, *jetstream.MsgMetadata)
	}{
		{s.main, followWebhooks, true, []string{"webhooks.>", "replay.>"}, s.indexWebhook}, // not the due records
		{s.dlq, true, true, nil, s.indexDeadLetter},
		{attempts, true, false, nil, s.indexAttempt},
	} {
		tl, err := s.startTailer(ctx, t.st, t.follow, t.headersOnly, t.filters, t.apply)
		if err != nil {
			return err
		}
		s.tails = append(s.tails, tl)
	}
	if !followWebhooks {
		s.writer = s.idx.startWriter(StreamName, s.main.CachedInfo().Created, s.opts.Logger)
	}
	for _, tl := range s.tails {
		if err := tl.catchUp(ctx, s.opts.Logger); err != nil {
			return err
		}
		tl.settle()
	}
	s.opts.Logger.Debug("index ready", "took", time.Since(start))
	s.expired, s.expiryEnded = make(chan struct{}), make(chan struct{})
	go s.expireIndex()
	return nil
}

// expireIndex drops what the streams no longer hold from the index, once
// a minute until Close.
func (s *Store) expireIndex() {
	defer close(s.expiryEnded)
	t := time.NewTicker(time.Minute)
	defer t.Stop()
	for {
		if err := s.idx.expire(time.Now()); err != nil {
			s.opts.Logger.Warn("index expiry", "err", err)
		}
		select {
		case <-t.C:
		case <-s.expired:
			return
		}
	}
}

// MaxPayload is the largest message the server accepts (body plus headers).
func (s *Store) MaxPayload() int64 { return s.nc.MaxPayload() }

// Retention is how long the streams keep a message (Options.Retention).
func (s *Store) Retention() time.Duration { return s.opts.Retention }

// Close drains nothing: callers finish their publishes first. It closes the
// connection and shuts the embedded server down, which flushes its files.
func (s *Store) Close() error {
	var err error
	s.closed.Do(func() { err = s.close() })
	return err
}

func (s *Store) close() error {
	s.releaseOwned()
	s.inst.close()
	s.mover.close()
	s.mon.stop()
	if s.expired != nil {
		close(s.expired)
		<-s.expiryEnded // before the index closes under it
	}
	for _, t := range s.tails {
		t.stop()
	}
	s.attempts.close() // its last records, before the connection closes
	if s.ingressNC != nil {
		s.ingressNC.Close()
	}
	if s.nc != nil {
		s.nc.Close()
	}
	if s.srv != nil {
		s.srv.Shutdown()
		s.srv.WaitForShutdown()
	}
	var err error
	if s.writer != nil {
		s.writer.close()
	}
	if s.idx != nil {
		err = s.idx.close()
	}
	if s.tmpIndex != "" {
		_ = os.RemoveAll(s.tmpIndex)
	}
	return err
}

func redact(url string) string {
	if url == "" {
		return "(embedded)"
	}
	parts := strings.Split(url, ",")
	for i, p := range parts {
		if u, err := neturl.Parse(strings.TrimSpace(p)); err == nil {
			parts[i] = u.Redacted()
		}
	}
	return strings.Join(parts, ",")
}
