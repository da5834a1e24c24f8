package store

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/nats-io/nats.go/jetstream"
)

// tailer copies one stream into the index, in stream order, with an
// ordered consumer starting after the index's watermark for that stream.
// It is the index's only writer for that stream, on every replica: a
// webhook another jethook stored is found here as soon as it is indexed.
type tailer struct {
	s *Store
	// follow is false for a tailer that stops once caught up: the
	// embedded store's WEBHOOKS, which only this process writes, indexing
	// each write itself (Store.indexStored).
	follow  bool
	stopped atomic.Bool
	st      jetstream.Stream
	filters []string // the subjects it reads; nil: all
	x       *index
	stream  string
	apply   func(b *pebble.Batch, m jetstream.Msg, md *jetstream.MsgMetadata)
	msgs    chan jetstream.Msg
	linger  time.Duration // tailLinger with an external server; 0: no linger
	hurry   chan struct{} // a lookup waits: write what was taken in without lingering
	cc      jetstream.ConsumeContext
	done    chan struct{}
	ended   chan struct{}

	applied *progress // the last stream sequence indexed
}

// tailBatch bounds the messages one index write takes in.
const tailBatch = 1024

// tailLinger is how long a tailer that took in fewer than tailFew
// messages waits for more before it writes them to the index. At low rates
// each message would otherwise be a write of its own, and wake the tailer
// and Pebble's commit pipeline alone; on a cluster every replica pays that
// for every message of every stream. A lookup that waits for the tailer
// (sync) cuts the wait short, so the linger delays only what nobody asks
// for yet. On the embedded store a tailer reads only what this process
// wrote (the attempt log, dead letters), once, and does not linger: an
// instance on it writes its index as it did before.
const tailLinger = 5 * time.Millisecond

// tailFew is the batch below which a tailer lingers: at rates that bring
// this many messages between two writes, a write is already shared.
const tailFew = 64

// catchUpMargin is how far before its watermark a tailer that does not
// follow starts again: the writes indexed directly may land out of order
// (at most the publishes in flight), and a crash may lose the last few.
// Indexing a message twice is harmless.
const catchUpMargin = 20_000

// tailHeartbeat is the tail's idle heartbeat: two missed make the ordered
// consumer start over from the last message it had, within 2s of a
// JetStream restart (recover.go) rather than nats.go's default 10s.
const tailHeartbeat = time.Second

func (s *Store) startTailer(ctx context.Context, st jetstream.Stream, follow, headersOnly bool, filters []string,
	apply func(b *pebble.Batch, m jetstream.Msg, md *jetstream.MsgMetadata)) (*tailer, error) {
	name := st.CachedInfo().Config.Name
	from, err := s.idx.watermark(name)
	if err != nil {
		return nil, err
	}
	if !follow {
		from -= min(from, catchUpMargin)
	}
	info, err := st.Info(ctx)
	if err != nil {
		return nil, fmt.Errorf("stream %s: %w", name, err)
	}
	if from > info.State.LastSeq {
		// The stream was recreated under the index: start again. Lookups
		// check what they find, so stale entries never answer.
		s.opts.Logger.Warn("index is ahead of its stream; reindexing", "stream", name, "index", from, "stream_last", info.State.LastSeq)
		from = 0
	}
	cfg := jetstream.OrderedConsumerConfig{HeadersOnly: headersOnly, DeliverPolicy: jetstream.DeliverAllPolicy, FilterSubjects: filters}
	if from > 0 {
		cfg.DeliverPolicy, cfg.OptStartSeq = jetstream.DeliverByStartSequencePolicy, from+1
	}
	c, err := s.js.OrderedConsumer(ctx, name, cfg)
	if err != nil {
		return nil, fmt.Errorf("index %s: %w", name, err)
	}
	t := &tailer{s: s, follow: follow, st: st, filters: filters, x: s.idx, stream: name, apply: apply, applied: newProgress(from),
		msgs: make(chan jetstream.Msg, tailBatch), hurry: make(chan struct{}, 1), done: make(chan struct{}), ended: make(chan struct{})}
	if s.srv == nil {
		t.linger = tailLinger
	}
	log := s.opts.Logger
	t.cc, err = c.Consume(func(m jetstream.Msg) {
		select {
		case t.msgs <- m:
		case <-t.done:
		}
	}, jetstream.PullMaxMessages(tailBatch), jetstream.PullHeartbeat(tailHeartbeat), jetstream.ConsumeErrHandler(func(_ jetstream.ConsumeContext, err error) {
		log.Debug("index tail", "stream", name, "err", err)
	}))
	if err != nil {
		return nil, fmt.Errorf("index %s: %w", name, err)
	}
	go t.run(log)
	return t, nil
}

func (t *tailer) run(log *slog.Logger) {
	defer close(t.ended)
	linger := time.NewTimer(time.Hour)
	linger.Stop()
	for {
		var m jetstream.Msg
		select {
		case m = <-t.msgs:
		case <-t.done:
			return
		}
		b := t.x.db.NewBatch()
		n, last := t.take(b, m, 0, 0)
		if n < tailFew && t.linger > 0 {
			linger.Reset(t.linger)
			select {
			case <-linger.C:
			case <-t.hurry:
				linger.Stop()
			case <-t.done:
				b.Close()
				return
			}
			_, last = t.take(b, nil, n, last)
		}
		if last == 0 {
			b.Close()
			continue
		}
		setWatermark(b, t.stream, last)
		if err := b.Commit(pebble.NoSync); err != nil {
			log.Error("index write failed", "stream", t.stream, "err", err)
			t.x.rewriteMarkers(log)
			continue
		}
		t.applied.set(last)
	}
}

// take applies m (if not nil) and the messages waiting behind it to b,
// until b holds tailBatch; n and last are the count and the newest stream
// sequence b holds so far, and it returns them updated.
func (t *tailer) take(b *pebble.Batch, m jetstream.Msg, n int, last uint64) (int, uint64) {
	for ; n < tailBatch; n++ {
		if m == nil {
			select {
			case m = <-t.msgs:
			default:
				return n, last
			}
		}
		if md, err := m.Metadata(); err == nil {
			t.apply(b, m, md)
			last = md.Sequence.Stream
		}
		m = nil
	}
	return n, last
}

// sync waits up to wait until the tailer has indexed the stream's newest
// message; it reports whether it has. Lookups call it when the index
// misses, so what was stored a moment ago is found.
func (t *tailer) sync(ctx context.Context, wait time.Duration) (bool, error) {
	if !t.follow && t.stopped.Load() {
		// Stopped after catching up: this process's writes index
		// themselves (Store.writer).
		return t.s.writer.sync(ctx, wait), nil
	}
	subjects := t.filters
	if subjects == nil {
		subjects = []string{">"}
	}
	var last uint64
	for _, subj := range subjects {
		m, err := t.st.GetLastMsgForSubject(ctx, subj)
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			continue
		}
		if err != nil {
			return false, fmt.Errorf("%w: stream %s: %w", ErrUnavailable, t.stream, err)
		}
		last = max(last, m.Sequence)
	}
	if last == 0 {
		return true, nil // nothing to read
	}
	if t.applied.get() >= last {
		return true, nil
	}
	select {
	case t.hurry <- struct{}{}:
	default:
	}
	return t.applied.reach(ctx, last, wait), nil
}

// catchUp waits until the tailer has indexed what the stream holds now,
// logging progress while it reads a large stream for the first time.
func (t *tailer) catchUp(ctx context.Context, log *slog.Logger) error {
	for {
		ok, err := t.sync(ctx, 5*time.Second)
		if err != nil || ok {
			return err
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		log.Info("indexing stream", "stream", t.stream, "indexed_through", t.applied.get())
	}
}

// settle stops a tailer that does not follow its stream, once caught up.
func (t *tailer) settle() {
	if !t.follow {
		t.stop()
	}
}

func (t *tailer) stop() {
	if t == nil || t.stopped.Swap(true) {
		return
	}
	t.cc.Stop()
	close(t.done)
	<-t.ended
}

// subjectParts splits a stream subject: kind.<route>[.<destination>].<token>.
func subjectParts(subject string) []string { return strings.Split(subject, ".") }

// indexWebhook indexes a WEBHOOKS message: a webhook under its route, a
// replay under its route and destination.
func (s *Store) indexWebhook(b *pebble.Batch, m jetstream.Msg, md *jetstream.MsgMetadata) {
	h := m.Headers()
	eventID := h.Get(hdrEventID)
	p := subjectParts(m.Subject())
	if eventID == "" || len(p) < 3 {
		return
	}
	g := s.idx.gen(b, md.Timestamp)
	id := eventHash(eventID)
	switch {
	case p[0] == "webhooks":
		s.idx.putEvent(b, g, id, p[1], md.Sequence.Stream, md.Timestamp)
		if k := h.Get(hdrSignedKey); k != "" {
			s.idx.putEvent(b, g, eventHash(k), p[1], md.Sequence.Stream, md.Timestamp)
		}
	case p[0] == "replay" && len(p) == 4:
		of, _ := strconv.ParseUint(h.Get(hdrReplayOf), 10, 64)
		putEntry(b, key(g, id, kindReplay, p[1], p[2], nil), md.Sequence.Stream, md.Timestamp, of)
	}
}

// indexDeadLetter indexes a WEBHOOKS_DLQ message under its route and
// destination.
func (s *Store) indexDeadLetter(b *pebble.Batch, m jetstream.Msg, md *jetstream.MsgMetadata) {
	h := m.Headers()
	eventID := h.Get(hdrEventID)
	p := subjectParts(m.Subject())
	if eventID == "" || len(p) != 4 {
		return
	}
	orig, _ := strconv.ParseUint(h.Get(hdrSeq), 10, 64)
	putEntry(b, key(s.idx.gen(b, md.Timestamp), eventHash(eventID), kindDeadLetter, p[1], p[2], nil),
		md.Sequence.Stream, md.Timestamp, orig)
}

// indexAttempt keeps each attempt record of a message (one per line) in
// the index, under its event. The key's extra is the record's time, the
// message's sequence and, after the first record of a message, the
// record's place in it.
func (s *Store) indexAttempt(b *pebble.Batch, m jetstream.Msg, md *jetstream.MsgMetadata) {
	data := m.Data()
	for i := 0; len(data) > 0; i++ {
		line, rest, _ := bytes.Cut(data, []byte{'\n'})
		data = rest
		r, ok := attemptKey(line)
		if !ok {
			continue
		}
		extra := binary.BigEndian.AppendUint64(nil, uint64(r.Time.UnixNano()))
		extra = binary.BigEndian.AppendUint64(extra, md.Sequence.Stream)
		if i > 0 {
			extra = binary.BigEndian.AppendUint16(extra, uint16(i))
		}
		_ = b.Set(key(s.idx.gen(b, md.Timestamp), eventHash(r.EventID), kindAttempt, r.Route, r.Destination, extra), line, nil)
	}
}
