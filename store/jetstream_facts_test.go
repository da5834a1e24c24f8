package store_test

// This file pins the JetStream behaviour that jethook's storage model
// (docs/design.md, "Storage model") relies on. Every test runs a real embedded
// nats-server in-process, on the versions pinned in go.mod, and fails if the
// fact it names stops being true after an upgrade. Delays are short on
// purpose: lower bounds are exact (timers never fire early), upper bounds are
// generous so the tests stay stable under -race and t.Parallel.

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

const (
	factStreamName = "WEBHOOKS"
	factSubject    = "webhooks.github"
	// factSlack is the upper tolerance added to expected delays.
	factSlack = 500 * time.Millisecond
)

// factServer starts an embedded JetStream server storing in dir with no
// listening port, and shuts it down when the test ends.
func factServer(t *testing.T, dir string) *server.Server {
	t.Helper()
	srv, err := server.NewServer(&server.Options{
		ServerName: "jethook-facts",
		JetStream:  true,
		StoreDir:   dir,
		DontListen: true,
		NoLog:      true,
		NoSigs:     true,
	})
	if err != nil {
		t.Fatalf("new server: %v", err)
	}
	srv.Start()
	if !srv.ReadyForConnections(10 * time.Second) {
		srv.Shutdown()
		t.Fatal("embedded nats-server not ready")
	}
	t.Cleanup(func() {
		srv.Shutdown()
		srv.WaitForShutdown()
	})
	return srv
}

// factConnect opens an in-process connection to srv.
func factConnect(t *testing.T, srv *server.Server) (*nats.Conn, jetstream.JetStream) {
	t.Helper()
	nc, err := nats.Connect("", nats.InProcessServer(srv))
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatalf("jetstream: %v", err)
	}
	return nc, js
}

// factCtx is a per-test context with an overall deadline.
func factCtx(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// factStreamConfig is the stream jethook creates: file storage, limits
// retention, a retention MaxAge and a dedup window.
func factStreamConfig() jetstream.StreamConfig {
	return jetstream.StreamConfig{
		Name:       factStreamName,
		Subjects:   []string{"webhooks.>"},
		Storage:    jetstream.FileStorage,
		Retention:  jetstream.LimitsPolicy,
		MaxAge:     time.Hour,
		Duplicates: time.Minute,
	}
}

// factSetup starts a server in a fresh directory, creates the WEBHOOKS stream
// and one durable pull consumer with the given config (Durable, AckPolicy
// and FilterSubject are filled in when empty).
func factSetup(t *testing.T, cc jetstream.ConsumerConfig) (context.Context, *nats.Conn, jetstream.JetStream, jetstream.Stream, jetstream.Consumer) {
	t.Helper()
	ctx := factCtx(t)
	srv := factServer(t, t.TempDir())
	nc, js := factConnect(t, srv)
	stream, err := js.CreateStream(ctx, factStreamConfig())
	if err != nil {
		t.Fatalf("create stream: %v", err)
	}
	if cc.Durable == "" {
		cc.Durable = "github-backend"
	}
	cc.AckPolicy = jetstream.AckExplicitPolicy
	if cc.FilterSubject == "" {
		cc.FilterSubject = factSubject
	}
	cons, err := stream.CreateConsumer(ctx, cc)
	if err != nil {
		t.Fatalf("create consumer: %v", err)
	}
	return ctx, nc, js, stream, cons
}

// factPublish publishes body to the route subject and waits for the PubAck.
func factPublish(ctx context.Context, t *testing.T, js jetstream.JetStream, body string, opts ...jetstream.PublishOpt) *jetstream.PubAck {
	t.Helper()
	ack, err := js.Publish(ctx, factSubject, []byte(body), opts...)
	if err != nil {
		t.Fatalf("publish %q: %v", body, err)
	}
	return ack
}

// factFetch pulls up to batch messages, waiting at most wait, and returns
// them with the time each one arrived.
func factFetch(t *testing.T, cons jetstream.Consumer, batch int, wait time.Duration) ([]jetstream.Msg, []time.Time) {
	t.Helper()
	res, err := cons.Fetch(batch, jetstream.FetchMaxWait(wait))
	if err != nil {
		t.Fatalf("fetch: %v", err)
	}
	var msgs []jetstream.Msg
	var at []time.Time
	for m := range res.Messages() {
		msgs = append(msgs, m)
		at = append(at, time.Now())
	}
	if err := res.Error(); err != nil {
		t.Fatalf("fetch: %v", err)
	}
	return msgs, at
}

// factFetchOne pulls exactly one message within wait or fails the test.
func factFetchOne(t *testing.T, cons jetstream.Consumer, wait time.Duration) (jetstream.Msg, time.Time) {
	t.Helper()
	msgs, at := factFetch(t, cons, 1, wait)
	if len(msgs) != 1 {
		t.Fatalf("expected one message within %v, got %d", wait, len(msgs))
	}
	return msgs[0], at[0]
}

// factMeta returns the JetStream metadata of m.
func factMeta(t *testing.T, m jetstream.Msg) *jetstream.MsgMetadata {
	t.Helper()
	md, err := m.Metadata()
	if err != nil {
		t.Fatalf("metadata: %v", err)
	}
	return md
}

// factWaitAdvisories waits until n messages arrived on sub (for example nak
// advisories, which the server emits while it holds the consumer lock, so
// once one is seen the nak is applied before any later pull is served).
func factWaitAdvisories(t *testing.T, sub *nats.Subscription, n int) {
	t.Helper()
	for i := range n {
		if _, err := sub.NextMsg(5 * time.Second); err != nil {
			t.Fatalf("advisory %d of %d: %v", i+1, n, err)
		}
	}
}

// factNakAdvisories subscribes to the consumer's nak advisories.
func factNakAdvisories(t *testing.T, nc *nats.Conn, consumer string) *nats.Subscription {
	t.Helper()
	sub, err := nc.SubscribeSync(fmt.Sprintf("$JS.EVENT.ADVISORY.CONSUMER.MSG_NAKED.%s.%s", factStreamName, consumer))
	if err != nil {
		t.Fatalf("subscribe advisories: %v", err)
	}
	if err := nc.Flush(); err != nil {
		t.Fatalf("flush: %v", err)
	}
	return sub
}

// Fact 1: a message Nak'd with NakWithDelay stays in the consumer's pending
// map and counts against MaxAckPending until it is acked or terminated. With
// MaxAckPending=2 and two messages parked with a 30s delay, a newly published
// message is not delivered at all; terminating one parked message lets it
// through. jethook therefore sizes MaxAckPending for the whole backlog in
// backoff (not for HTTP concurrency, which the forwarder limits itself) and
// benchmarks the pending map at 100k and 1M entries.
//
// Also pinned: the client refuses Term() on a Msg it already nak'd
// (ErrMsgAlreadyAckd), so to drop a parked message early (operator cancel)
// jethook must send "+TERM" to the message's reply subject itself, or wait
// for the redelivery and Term() that.
func TestFactNakDelayedMessagesCountAgainstMaxAckPendingAndStallNewMessages(t *testing.T) {
	t.Parallel()
	ctx, nc, js, _, cons := factSetup(t, jetstream.ConsumerConfig{
		AckWait:       10 * time.Second,
		MaxAckPending: 2,
	})
	naks := factNakAdvisories(t, nc, "github-backend")

	factPublish(ctx, t, js, "one")
	factPublish(ctx, t, js, "two")
	first, _ := factFetch(t, cons, 2, 2*time.Second)
	if len(first) != 2 {
		t.Fatalf("expected both messages on first fetch, got %d", len(first))
	}
	for _, m := range first {
		if err := m.NakWithDelay(30 * time.Second); err != nil {
			t.Fatalf("nak: %v", err)
		}
	}
	factWaitAdvisories(t, naks, 2)

	third := factPublish(ctx, t, js, "three")
	if got, _ := factFetch(t, cons, 1, 300*time.Millisecond); len(got) != 0 {
		t.Fatalf("new message delivered although MaxAckPending is full of nak-delayed messages: seq %d",
			factMeta(t, got[0]).Sequence.Stream)
	}
	info, err := cons.Info(ctx)
	if err != nil {
		t.Fatalf("consumer info: %v", err)
	}
	if info.NumAckPending != 2 || info.NumPending != 1 {
		t.Fatalf("expected 2 ack-pending (the nak'd ones) and 1 undelivered, got ack-pending %d, pending %d",
			info.NumAckPending, info.NumPending)
	}

	// The client refuses to Term a message it already nak'd...
	if err := first[0].Term(); !errors.Is(err, jetstream.ErrMsgAlreadyAckd) {
		t.Fatalf("Term() after NakWithDelay: err = %v, want ErrMsgAlreadyAckd", err)
	}
	// ...but the server still accepts +TERM on its reply subject, which is
	// what Term() sends; as a request the server confirms it. Freeing one
	// slot lets the stalled message out at once.
	if _, err := nc.RequestWithContext(ctx, first[0].Reply(), []byte("+TERM")); err != nil {
		t.Fatalf("term parked message: %v", err)
	}
	m, _ := factFetchOne(t, cons, 2*time.Second)
	md := factMeta(t, m)
	if md.Sequence.Stream != third.Sequence || md.NumDelivered != 1 {
		t.Fatalf("expected first delivery of seq %d, got seq %d delivery %d",
			third.Sequence, md.Sequence.Stream, md.NumDelivered)
	}
}

// Fact 1b: while MaxAckPending is full, redeliveries of nak-delayed messages
// still go out (only new messages stall). jethook relies on this so that a
// full pending map never freezes retries already scheduled, only intake.
func TestFactRedeliveriesStillGoOutWhileMaxAckPendingIsFull(t *testing.T) {
	t.Parallel()
	ctx, nc, js, _, cons := factSetup(t, jetstream.ConsumerConfig{
		AckWait:       10 * time.Second,
		MaxAckPending: 2,
	})
	naks := factNakAdvisories(t, nc, "github-backend")

	factPublish(ctx, t, js, "one")
	factPublish(ctx, t, js, "two")
	first, _ := factFetch(t, cons, 2, 2*time.Second)
	if len(first) != 2 {
		t.Fatalf("expected both messages on first fetch, got %d", len(first))
	}
	const short = 250 * time.Millisecond
	if err := first[0].NakWithDelay(30 * time.Second); err != nil {
		t.Fatalf("nak: %v", err)
	}
	nakAt := time.Now()
	if err := first[1].NakWithDelay(short); err != nil {
		t.Fatalf("nak: %v", err)
	}
	factWaitAdvisories(t, naks, 2)
	factPublish(ctx, t, js, "three")

	// Ask for two: if the new message were deliverable it would come too.
	got, at := factFetch(t, cons, 2, time.Second)
	if len(got) != 1 {
		t.Fatalf("expected only the redelivery while MaxAckPending is full, got %d messages", len(got))
	}
	md := factMeta(t, got[0])
	if md.Sequence.Stream != 2 || md.NumDelivered != 2 {
		t.Fatalf("expected redelivery of seq 2 (delivery 2), got seq %d delivery %d", md.Sequence.Stream, md.NumDelivered)
	}
	if d := at[0].Sub(nakAt); d < short {
		t.Fatalf("redelivered after %v, before the nak delay %v", d, short)
	}
}

// Fact 2: NakWithDelay(d) redelivers no earlier than d after the nak, and
// Metadata().NumDelivered is 1-based (first delivery is 1) and grows by one
// per redelivery. jethook uses NumDelivered as the attempt number
// (X-Webhook-Attempt) and drives its whole retry schedule with
// NakWithDelay, keeping no per-message state of its own.
func TestFactNakWithDelayRedeliversNoEarlierThanTheDelayAndNumDeliveredCountsAttempts(t *testing.T) {
	t.Parallel()
	ctx, _, js, _, cons := factSetup(t, jetstream.ConsumerConfig{AckWait: 10 * time.Second})
	pub := factPublish(ctx, t, js, "payload")

	m, _ := factFetchOne(t, cons, 2*time.Second)
	if n := factMeta(t, m).NumDelivered; n != 1 {
		t.Fatalf("first delivery: NumDelivered = %d, want 1", n)
	}
	delays := []time.Duration{200 * time.Millisecond, 350 * time.Millisecond}
	for i, d := range delays {
		nakAt := time.Now()
		if err := m.NakWithDelay(d); err != nil {
			t.Fatalf("nak: %v", err)
		}
		var at time.Time
		m, at = factFetchOne(t, cons, d+2*time.Second)
		md := factMeta(t, m)
		if md.Sequence.Stream != pub.Sequence {
			t.Fatalf("redelivered seq %d, want %d", md.Sequence.Stream, pub.Sequence)
		}
		if want := uint64(i + 2); md.NumDelivered != want {
			t.Fatalf("NumDelivered = %d, want %d", md.NumDelivered, want)
		}
		waited := at.Sub(nakAt)
		if waited < d {
			t.Fatalf("NakWithDelay(%v) redelivered after only %v", d, waited)
		}
		if waited > d+factSlack {
			t.Fatalf("NakWithDelay(%v) redelivered after %v, far later than asked", d, waited)
		}
		t.Logf("NakWithDelay(%v): redelivered after %v as delivery %d", d, waited, md.NumDelivered)
	}
	if err := m.Ack(); err != nil {
		t.Fatalf("ack: %v", err)
	}
}

// Fact 3: Nats-Msg-Id dedup. A second publish with the same id inside the
// Duplicates window is acknowledged with PubAck.Duplicate and not stored
// again; on a limits-retention file stream this still holds after the server
// is shut down and a new one starts on the same store directory (the dedup
// index is rebuilt from the stored messages). jethook sets Nats-Msg-Id to
// the provider's event id, answers a provider's redelivery with success
// without storing it twice, and keeps limits retention so the index survives
// restarts.
func TestFactMsgIDDedupReportsDuplicateAndSurvivesAServerRestart(t *testing.T) {
	t.Parallel()
	ctx := factCtx(t)
	dir := t.TempDir()
	srv := factServer(t, dir)
	_, js := factConnect(t, srv)
	stream, err := js.CreateStream(ctx, factStreamConfig())
	if err != nil {
		t.Fatalf("create stream: %v", err)
	}
	const id = "72d3162e-cc78-11e3-81ab-4c9367dc0958" // an X-GitHub-Delivery

	ack1 := factPublish(ctx, t, js, "body", jetstream.WithMsgID(id))
	if ack1.Duplicate {
		t.Fatal("first publish reported as duplicate")
	}
	ack2 := factPublish(ctx, t, js, "body", jetstream.WithMsgID(id))
	if !ack2.Duplicate {
		t.Fatal("second publish with the same Nats-Msg-Id not reported as duplicate")
	}
	if ack2.Sequence != ack1.Sequence {
		t.Logf("duplicate PubAck carries seq %d, original is %d", ack2.Sequence, ack1.Sequence)
	}
	info, err := stream.Info(ctx)
	if err != nil {
		t.Fatalf("stream info: %v", err)
	}
	if info.State.Msgs != 1 {
		t.Fatalf("stream holds %d messages, want 1", info.State.Msgs)
	}

	// Restart on the same store directory.
	srv.Shutdown()
	srv.WaitForShutdown()
	srv2 := factServer(t, dir)
	_, js2 := factConnect(t, srv2)

	ack3 := factPublish(ctx, t, js2, "body", jetstream.WithMsgID(id))
	if !ack3.Duplicate {
		t.Fatal("after restart, a publish with a known Nats-Msg-Id is no longer reported as duplicate")
	}
	if ack4 := factPublish(ctx, t, js2, "other", jetstream.WithMsgID("another-id")); ack4.Duplicate || ack4.Sequence != 2 {
		t.Fatalf("fresh id after restart: duplicate=%v seq=%d, want stored as seq 2", ack4.Duplicate, ack4.Sequence)
	}
	stream2, err := js2.Stream(ctx, factStreamName)
	if err != nil {
		t.Fatalf("stream after restart: %v", err)
	}
	info, err = stream2.Info(ctx)
	if err != nil {
		t.Fatalf("stream info: %v", err)
	}
	if info.State.Msgs != 2 {
		t.Fatalf("after restart stream holds %d messages, want 2", info.State.Msgs)
	}
}

// Fact 3b: the dedup index is rebuilt on restart only from messages still in
// the stream. On a work-queue stream an acked (hence removed) message's id is
// still remembered while the server runs, but forgotten after a restart. This
// is why jethook uses limits retention with MaxAge, never interest or
// work-queue retention, for WEBHOOKS.
func TestFactDedupIndexForgetsIDsOfRemovedMessagesAfterARestart(t *testing.T) {
	t.Parallel()
	ctx := factCtx(t)
	dir := t.TempDir()
	srv := factServer(t, dir)
	_, js := factConnect(t, srv)
	cfg := factStreamConfig()
	cfg.Retention = jetstream.WorkQueuePolicy
	stream, err := js.CreateStream(ctx, cfg)
	if err != nil {
		t.Fatalf("create stream: %v", err)
	}
	cons, err := stream.CreateConsumer(ctx, jetstream.ConsumerConfig{
		Durable: "wq", AckPolicy: jetstream.AckExplicitPolicy,
	})
	if err != nil {
		t.Fatalf("create consumer: %v", err)
	}
	const id = "evt_1"
	factPublish(ctx, t, js, "body", jetstream.WithMsgID(id))
	m, _ := factFetchOne(t, cons, 2*time.Second)
	if err := m.DoubleAck(ctx); err != nil {
		t.Fatalf("double ack: %v", err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		info, err := stream.Info(ctx)
		if err != nil {
			t.Fatalf("stream info: %v", err)
		}
		if info.State.Msgs == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("work-queue message not removed after ack")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if ack := factPublish(ctx, t, js, "body", jetstream.WithMsgID(id)); !ack.Duplicate {
		t.Fatal("while running, the id of an acked work-queue message should still be a duplicate")
	}

	srv.Shutdown()
	srv.WaitForShutdown()
	srv2 := factServer(t, dir)
	_, js2 := factConnect(t, srv2)
	if ack := factPublish(ctx, t, js2, "body", jetstream.WithMsgID(id)); ack.Duplicate {
		t.Fatal("after restart the id of a removed message is still known: the index now survives removal")
	}
}

// Fact 4: consumer BackOff combined with NakWithDelay. The server sets
// AckWait = BackOff[0] and, on a nak with delay d of delivery k (1-based),
// stamps the message as if delivered at now − BackOff[0] + d; its
// redelivery deadline is BackOff[min(k−1, len−1)]. So the real delay is
// d + BackOff[k−1] − BackOff[0] (docs/design.md, "Storage model"): exactly
// d on the first nak, longer afterwards.
// jethook therefore never sets BackOff; NakWithDelay alone drives the
// schedule and AckWait covers one attempt.
func TestFactBackOffAddsBackOffKMinusBackOff0ToNakDelay(t *testing.T) {
	t.Parallel()
	backoff := []time.Duration{200 * time.Millisecond, time.Second}
	ctx, _, js, _, cons := factSetup(t, jetstream.ConsumerConfig{BackOff: backoff})
	info, err := cons.Info(ctx)
	if err != nil {
		t.Fatalf("consumer info: %v", err)
	}
	if info.Config.AckWait != backoff[0] {
		t.Fatalf("AckWait = %v, want BackOff[0] = %v", info.Config.AckWait, backoff[0])
	}
	factPublish(ctx, t, js, "payload")
	m, _ := factFetchOne(t, cons, 2*time.Second)

	const d = 300 * time.Millisecond
	for k := 1; k <= 2; k++ { // k = delivery being nak'd
		nakAt := time.Now()
		if err := m.NakWithDelay(d); err != nil {
			t.Fatalf("nak: %v", err)
		}
		var at time.Time
		m, at = factFetchOne(t, cons, 3*time.Second)
		if n := factMeta(t, m).NumDelivered; n != uint64(k+1) {
			t.Fatalf("NumDelivered = %d, want %d", n, k+1)
		}
		want := d + backoff[min(k-1, len(backoff)-1)] - backoff[0]
		got := at.Sub(nakAt)
		t.Logf("delivery %d nak'd with %v: redelivered after %v (formula %v)", k, d, got, want)
		if got < want || got > want+factSlack {
			t.Fatalf("delivery %d nak'd with %v: redelivered after %v, want %v (d + BackOff[k-1] - BackOff[0])",
				k, d, got, want)
		}
	}
	if err := m.Term(); err != nil {
		t.Fatalf("term: %v", err)
	}
}

// Fact 5: a stream created with MaxConsumers unset (stored as -1,
// "unlimited") is limited to 1,000 consumers on 2.15 by the server default
// JetStreamLimits.DefaultMaxConsumers (JSDefaultMaxConsumersPerStream); -1
// counts as "not set", so it cannot opt out. An explicit positive
// MaxConsumers on the stream replaces the default, can exceed 1,000 and can
// be raised with a stream update. jethook therefore sets MaxConsumers
// explicitly (from the number of (route, destination) pairs plus headroom)
// and checks it at load.
func TestFactStreamWithoutMaxConsumersIsCappedAtOneThousandConsumers(t *testing.T) {
	t.Parallel()
	ctx := factCtx(t)
	srv := factServer(t, t.TempDir())
	_, js := factConnect(t, srv)
	cfg := factStreamConfig()
	cfg.Storage = jetstream.MemoryStorage // consumer limit is storage-independent; memory keeps the test fast
	stream, err := js.CreateStream(ctx, cfg)
	if err != nil {
		t.Fatalf("create stream: %v", err)
	}
	if got := stream.CachedInfo().Config.MaxConsumers; got != -1 {
		t.Fatalf("unset MaxConsumers reported as %d, want -1", got)
	}

	create := func(i int) error {
		_, err := stream.CreateConsumer(ctx, jetstream.ConsumerConfig{
			Durable:   fmt.Sprintf("c%05d", i),
			AckPolicy: jetstream.AckExplicitPolicy,
		})
		return err
	}
	const defaultLimit = 1000
	var (
		wg     sync.WaitGroup
		next   atomic.Int64
		failed atomic.Int64
		mu     sync.Mutex
		first  error
	)
	for range 16 {
		wg.Go(func() {
			for {
				i := int(next.Add(1))
				if i > defaultLimit {
					return
				}
				if err := create(i); err != nil {
					failed.Add(1)
					mu.Lock()
					if first == nil {
						first = fmt.Errorf("consumer %d: %w", i, err)
					}
					mu.Unlock()
				}
			}
		})
	}
	wg.Wait()
	if first != nil {
		t.Fatalf("%d of the first %d consumers failed; first: %v", failed.Load(), defaultLimit, first)
	}
	if err := create(defaultLimit + 1); !errors.Is(err, jetstream.ErrMaximumConsumersLimit) {
		t.Fatalf("consumer %d: err = %v, want ErrMaximumConsumersLimit (default limit gone or changed?)",
			defaultLimit+1, err)
	}

	// An explicit MaxConsumers overrides the default, also by update.
	cfg.MaxConsumers = defaultLimit + 2
	if _, err := js.UpdateStream(ctx, cfg); err != nil {
		t.Fatalf("update stream MaxConsumers: %v", err)
	}
	for i := defaultLimit + 1; i <= defaultLimit+2; i++ {
		if err := create(i); err != nil {
			t.Fatalf("consumer %d with MaxConsumers=%d: %v", i, cfg.MaxConsumers, err)
		}
	}
	if err := create(defaultLimit + 3); !errors.Is(err, jetstream.ErrMaximumConsumersLimit) {
		t.Fatalf("consumer %d beyond explicit MaxConsumers: err = %v, want ErrMaximumConsumersLimit", defaultLimit+3, err)
	}
}

// Fact 6: Term() stops redelivery: a terminated message is not delivered
// again after AckWait, while an unacknowledged one beside it is. jethook
// terminates a message only after its dead letter is stored.
func TestFactTermStopsRedeliveryAfterAckWait(t *testing.T) {
	t.Parallel()
	const ackWait = 200 * time.Millisecond
	ctx, _, js, _, cons := factSetup(t, jetstream.ConsumerConfig{AckWait: ackWait})
	factPublish(ctx, t, js, "terminated")
	factPublish(ctx, t, js, "left alone")
	first, _ := factFetch(t, cons, 2, 2*time.Second)
	if len(first) != 2 {
		t.Fatalf("expected 2 messages, got %d", len(first))
	}
	if err := first[0].Term(); err != nil {
		t.Fatalf("term: %v", err)
	}
	// Collect everything delivered during several AckWaits: the message
	// left alone comes back (proving AckWait elapsed, possibly more than
	// once), the terminated one must not.
	got, _ := factFetch(t, cons, 10, 5*ackWait)
	if len(got) == 0 {
		t.Fatal("the unacknowledged control message was not redelivered")
	}
	for _, m := range got {
		md := factMeta(t, m)
		if md.Sequence.Stream == 1 {
			t.Fatalf("terminated message redelivered (delivery %d)", md.NumDelivered)
		}
		if md.Sequence.Stream != 2 || md.NumDelivered < 2 {
			t.Fatalf("unexpected delivery: seq %d delivery %d", md.Sequence.Stream, md.NumDelivered)
		}
	}
	got = got[len(got)-1:]
	if err := got[0].DoubleAck(ctx); err != nil {
		t.Fatalf("double ack: %v", err)
	}
	info, err := cons.Info(ctx)
	if err != nil {
		t.Fatalf("consumer info: %v", err)
	}
	if info.NumAckPending != 0 {
		t.Fatalf("NumAckPending = %d after term and ack, want 0", info.NumAckPending)
	}
}

// Fact 6b: msg.Ack() (like Nak, NakWithDelay, InProgress and Term) is
// fire-and-forget: it returns nil even when nothing receives it, here
// because the consumer was deleted. msg.DoubleAck(ctx) waits for the server's
// reply, so it reports the failure, and when it succeeds the ack is already
// applied (NumAckPending is updated without polling). jethook therefore
// waits for the dead letter's PubAck before Term(), and uses DoubleAck
// where it must know an ack landed.
func TestFactAckIsFireAndForgetWhileDoubleAckWaitsForTheServer(t *testing.T) {
	t.Parallel()
	ctx, _, js, stream, cons := factSetup(t, jetstream.ConsumerConfig{AckWait: 10 * time.Second})
	for _, b := range []string{"a", "b", "c"} {
		factPublish(ctx, t, js, b)
	}
	msgs, _ := factFetch(t, cons, 3, 2*time.Second)
	if len(msgs) != 3 {
		t.Fatalf("expected 3 messages, got %d", len(msgs))
	}

	// Confirmed ack: applied by the time DoubleAck returns.
	if err := msgs[0].DoubleAck(ctx); err != nil {
		t.Fatalf("double ack on a live consumer: %v", err)
	}
	info, err := cons.Info(ctx)
	if err != nil {
		t.Fatalf("consumer info: %v", err)
	}
	if info.NumAckPending != 2 {
		t.Fatalf("NumAckPending right after DoubleAck = %d, want 2", info.NumAckPending)
	}

	// Nobody listens any more: Ack still says nil, DoubleAck reports it.
	if err := stream.DeleteConsumer(ctx, "github-backend"); err != nil {
		t.Fatalf("delete consumer: %v", err)
	}
	if err := msgs[1].Ack(); err != nil {
		t.Fatalf("Ack() with no consumer returned %v; expected nil (fire-and-forget)", err)
	}
	dctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	err = msgs[2].DoubleAck(dctx)
	if err == nil {
		t.Fatal("DoubleAck with no consumer returned nil; expected the missing reply to be reported")
	}
	t.Logf("DoubleAck with no consumer: %v", err)
}

// Fact 7: Metadata().Timestamp is the stream timestamp of the original
// publish, identical on every redelivery. jethook takes "first received"
// (for max_age and the dead letter) from it and keeps no extra state.
func TestFactRedeliveredMessageCarriesTheOriginalPublishTimestamp(t *testing.T) {
	t.Parallel()
	ctx, _, js, stream, cons := factSetup(t, jetstream.ConsumerConfig{AckWait: 10 * time.Second})
	before := time.Now()
	pub := factPublish(ctx, t, js, "payload")
	after := time.Now()
	raw, err := stream.GetMsg(ctx, pub.Sequence)
	if err != nil {
		t.Fatalf("get msg: %v", err)
	}
	if raw.Time.Before(before.Add(-time.Second)) || raw.Time.After(after.Add(time.Second)) {
		t.Fatalf("stream timestamp %v outside publish window [%v, %v]", raw.Time, before, after)
	}

	m, _ := factFetchOne(t, cons, 2*time.Second)
	if ts := factMeta(t, m).Timestamp; !ts.Equal(raw.Time) {
		t.Fatalf("first delivery timestamp %v, stored %v", ts, raw.Time)
	}
	const d = 150 * time.Millisecond
	for attempt := 2; attempt <= 3; attempt++ {
		if err := m.NakWithDelay(d); err != nil {
			t.Fatalf("nak: %v", err)
		}
		var at time.Time
		m, at = factFetchOne(t, cons, 2*time.Second)
		md := factMeta(t, m)
		if md.NumDelivered != uint64(attempt) {
			t.Fatalf("NumDelivered = %d, want %d", md.NumDelivered, attempt)
		}
		if !md.Timestamp.Equal(raw.Time) {
			t.Fatalf("delivery %d timestamp %v, want original %v", attempt, md.Timestamp, raw.Time)
		}
		if age := at.Sub(md.Timestamp); age < time.Duration(attempt-1)*d {
			t.Fatalf("delivery %d: timestamp only %v old, not the original publish time", attempt, age)
		}
	}
	if err := m.Ack(); err != nil {
		t.Fatalf("ack: %v", err)
	}
}

// Fact 8: InProgress() restarts the AckWait timer: a message held for
// several AckWaits with periodic InProgress() is not redelivered, and once
// the calls stop it is redelivered after AckWait. jethook sets AckWait to
// one attempt (timeout + margin) and calls InProgress() while a slow
// backend is still answering.
func TestFactInProgressExtendsAckWaitSoAHeldMessageIsNotRedelivered(t *testing.T) {
	t.Parallel()
	const ackWait = 300 * time.Millisecond
	ctx, _, js, _, cons := factSetup(t, jetstream.ConsumerConfig{AckWait: ackWait})
	factPublish(ctx, t, js, "slow backend")
	m, _ := factFetchOne(t, cons, 2*time.Second)

	const hold = 3 * ackWait
	// A concurrent pull would receive any redelivery during the hold.
	type result struct {
		n   int
		err error
	}
	done := make(chan result, 1)
	go func() {
		res, err := cons.Fetch(1, jetstream.FetchMaxWait(hold))
		if err != nil {
			done <- result{err: err}
			return
		}
		n := 0
		for range res.Messages() {
			n++
		}
		done <- result{n: n, err: res.Error()}
	}()

	end := time.Now().Add(hold)
	lastProgress := time.Now()
	for time.Now().Before(end) {
		if err := m.InProgress(); err != nil {
			t.Fatalf("in progress: %v", err)
		}
		lastProgress = time.Now()
		time.Sleep(ackWait / 3)
	}
	r := <-done
	if r.err != nil {
		t.Fatalf("concurrent fetch: %v", r.err)
	}
	if r.n != 0 {
		t.Fatalf("message redelivered during the hold (%v > AckWait %v) despite InProgress()", hold, ackWait)
	}

	// Control: once InProgress() stops, AckWait expires and it comes back.
	again, at := factFetchOne(t, cons, 2*time.Second)
	if n := factMeta(t, again).NumDelivered; n != 2 {
		t.Fatalf("NumDelivered after the hold = %d, want 2", n)
	}
	if gap := at.Sub(lastProgress); gap < ackWait {
		t.Fatalf("redelivered %v after the last InProgress(), before AckWait %v", gap, ackWait)
	}
	if err := again.Ack(); err != nil {
		t.Fatalf("ack: %v", err)
	}
}
