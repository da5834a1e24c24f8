package store

import (
	"bytes"
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// AttemptStreamName is the stream of the attempt log: one small JSON
// message per HTTP attempt, kept for Options.AttemptLogAge.
const AttemptStreamName = "WEBHOOKS_ATTEMPTS"

// Attempt is one HTTP attempt to one destination, as the attempt log keeps
// it: no payload, no headers.
type Attempt struct {
	Time        time.Time // when the attempt ended
	Route       string
	Destination string
	EventID     string
	Attempt     int           // 1 for the first attempt
	Status      int           // HTTP status, 0 if no response arrived
	Error       string        // network or timeout error, if any
	Latency     time.Duration // until the response headers or the error
	// Outcome is "delivered", "transient" or "permanent", or
	// OutcomeFiltered when no request was made.
	Outcome string
	// Next is the delay before the next attempt; 0 when there is none
	// (delivered, or dead-lettered).
	Next time.Duration
	// Parked is true when the event waits for that next attempt parked
	// in the store (Park), its message acked, rather than in its
	// consumer.
	Parked bool
	// Sent says what the attempt sent when its destination has a
	// transform, which makes each attempt's request anew; nil when it has
	// none, or when the attempt sent nothing.
	Sent *Sent
}

// Sent is what an attempt through a transform sent, without the payload
// or any header value: a script may put a secret from its env into a
// header, and the attempt log keeps no payloads. The body's digest tells
// whether two attempts, or an attempt and today's preview of the script,
// sent the same bytes.
type Sent struct {
	// Script identifies the script that ran: "sha256:" and the first 16
	// hex digits of the SHA-256 of its source.
	Script string `json:"script"`
	// BodySHA256 is the hex SHA-256 of the body sent, and BodySize its
	// length in bytes.
	BodySHA256 string `json:"body_sha256"`
	BodySize   int    `json:"body_size"`
	// Changed lists what the script changed of "method", "path", "query"
	// and "body".
	Changed []string `json:"changed,omitempty"`
	// Headers lists, in lower case and sorted, the headers the script
	// set, changed or removed: at most MaxSentHeaders of them.
	Headers []string `json:"headers,omitempty"`
}

// MaxSentHeaders bounds Sent.Headers, which keeps an attempt record small
// whatever a script does to the headers.
const MaxSentHeaders = 16

// OutcomeFiltered is the Outcome of a webhook the destination's filter did
// not match: it was acked, and no request was made.
const OutcomeFiltered = "filtered"

// attemptRecord is an Attempt on the wire.
type attemptRecord struct {
	Time        time.Time   `json:"time"`
	Route       string      `json:"route"`
	Destination string      `json:"destination"`
	EventID     string      `json:"event_id"`
	Attempt     int         `json:"attempt"`
	Status      int         `json:"status,omitempty"`
	Error       string      `json:"error,omitempty"`
	LatencyNS   int64       `json:"latency_ns"`
	Outcome     string      `json:"outcome"`
	NextNS      int64       `json:"next_ns,omitempty"`
	Parked      bool        `json:"parked,omitempty"`
	Sent        *sentRecord `json:"sent,omitempty"`
}

// sentRecord is a Sent as an attempt record keeps it, about 30 %
// smaller than Sent's own JSON (the API's): short names, and the body's
// SHA-256 in unpadded base64url (RFC 4648 §5) rather than hex. The record
// is the index's largest entry per attempt, and the index's compactions
// rewrite it several times. A BodySHA256 that is not a SHA-256 in hex
// keeps its name and value. Records written before this form have
// Sent's JSON, read into the fields named as Sent names them.
type sentRecord struct {
	Script     string   `json:"s"`
	Body       string   `json:"b,omitempty"`           // the SHA-256, base64url
	BodySHA256 string   `json:"body_sha256,omitempty"` // when not one in hex, and in records before
	Size       int      `json:"n"`
	Changed    []string `json:"c,omitempty"`
	Headers    []string `json:"h,omitempty"`

	// Sent's own names, in records written before this form.
	OldScript  string   `json:"script,omitempty"`
	OldSize    int      `json:"body_size,omitempty"`
	OldChanged []string `json:"changed,omitempty"`
	OldHeaders []string `json:"headers,omitempty"`
}

// recordOf is s as a record keeps it.
func recordOf(s *Sent) *sentRecord {
	if s == nil {
		return nil
	}
	r := &sentRecord{Script: s.Script, Size: s.BodySize, Changed: s.Changed, Headers: s.Headers}
	if sum, ok := digestOf(s.BodySHA256); ok {
		r.Body = base64.RawURLEncoding.EncodeToString(sum[:])
	} else {
		r.BodySHA256 = s.BodySHA256
	}
	return r
}

// digestOf reads h, a SHA-256 in lower-case hex as Sent.BodySHA256 holds
// it; ok is false when it is not one.
func digestOf(h string) (sum [sha256.Size]byte, ok bool) {
	if len(h) != hex.EncodedLen(len(sum)) {
		return sum, false
	}
	for i := 0; i < len(h); i++ {
		if c := h[i]; !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return sum, false
		}
	}
	_, err := hex.Decode(sum[:], []byte(h))
	return sum, err == nil
}

// sent is the Sent r records, in either form.
func (r *sentRecord) sent() *Sent {
	if r == nil {
		return nil
	}
	s := &Sent{Script: cmp.Or(r.Script, r.OldScript), BodySHA256: r.BodySHA256, BodySize: cmp.Or(r.Size, r.OldSize),
		Changed: r.Changed, Headers: r.Headers}
	if sum, err := base64.RawURLEncoding.DecodeString(r.Body); err == nil && len(sum) == sha256.Size {
		s.BodySHA256 = hex.EncodeToString(sum)
	} else if r.Body != "" {
		s.BodySHA256 = r.Body
	}
	if s.Changed == nil {
		s.Changed = r.OldChanged
	}
	if s.Headers == nil {
		s.Headers = r.OldHeaders
	}
	return s
}

// AttemptSubject is the subject of the attempts to one destination.
func AttemptSubject(route, destination string) string {
	return "attempts." + route + "." + destination + "." + layoutToken
}

// attemptLog batches attempt records: each destination's records made
// within attemptLinger of each other go to the stream as one message, one
// record per line. The stream's work per message (storing it, reading it
// back into the index) was about a tenth of a delivery's CPU; per record
// it is now a fraction of that.
type attemptLog struct {
	s       *Store
	linger  time.Duration // attemptLinger, or attemptLingerExternal
	dropped atomic.Uint64

	flushing sync.Mutex // one flush at a time, so a destination's batches go out in order

	mu      sync.Mutex
	pending map[string][]byte // subject → records not yet published, newline-terminated
	size    int               // bytes in pending
	kick    chan struct{}     // a token when pending goes from empty to not
	done    chan struct{}
	ended   chan struct{}
}

// attemptLinger is how long a record waits for others of its destination
// before it is published: a crash loses at most the records of that long,
// as it loses those nats.go has buffered but not yet written.
const attemptLinger = 2 * time.Millisecond

// attemptLingerExternal is attemptLinger with an external NATS server.
// There every replica reads every message of the log back into its index,
// so a message costs each of them, and a destination that takes a few
// hundred attempts a second a replica would send about one message per
// record with 2 ms. The server keeps every settle a jethook sent it
// (Inherited is always false), so the records a crash loses are lines of
// history, not what a restart decides on.
const attemptLingerExternal = 20 * time.Millisecond

// attemptBatchBytes bounds one message of records.
const attemptBatchBytes = 64 << 10

// attemptPendingBytes bounds the records waiting to be published, should
// publishing stall (a connection stuck on a frozen server): past it, new
// records are dropped and counted.
const attemptPendingBytes = 4 << 20

func newAttemptLog(s *Store) *attemptLog {
	l := &attemptLog{s: s, linger: attemptLinger, pending: make(map[string][]byte), kick: make(chan struct{}, 1),
		done: make(chan struct{}), ended: make(chan struct{})}
	if s.srv == nil {
		l.linger = attemptLingerExternal
	}
	go l.run()
	return l
}

func (l *attemptLog) add(subject string, a Attempt) {
	l.mu.Lock()
	if l.size >= attemptPendingBytes {
		l.mu.Unlock()
		l.drop(subject, 1, errors.New("too many records waiting to be published"))
		return
	}
	buf := l.pending[subject]
	first := len(l.pending) == 0
	n := len(buf)
	buf = append(a.appendJSON(buf), '\n')
	l.pending[subject] = buf
	l.size += len(buf) - n
	l.mu.Unlock()
	if first {
		select {
		case l.kick <- struct{}{}:
		default:
		}
	}
}

// run publishes what is pending l.linger after the first record of a
// batch, until close.
func (l *attemptLog) run() {
	defer close(l.ended)
	linger := time.NewTimer(l.linger)
	linger.Stop()
	for {
		select {
		case <-l.kick:
		case <-l.done:
			l.flush()
			return
		}
		linger.Reset(l.linger)
		select {
		case <-linger.C:
		case <-l.done:
			l.flush()
			return
		}
		l.flush()
	}
}

// flush publishes every pending record now, without waiting for the
// stream.
func (l *attemptLog) flush() { _ = l.publish(context.Background(), false) }

// flushStored publishes every pending record now and waits until the
// stream has stored them, so that a read of the log that follows finds
// them.
func (l *attemptLog) flushStored(ctx context.Context) error { return l.publish(ctx, true) }

// publish sends the pending records, acked by the stream if acked.
func (l *attemptLog) publish(ctx context.Context, acked bool) error {
	if l == nil {
		return nil
	}
	l.flushing.Lock()
	defer l.flushing.Unlock()
	l.mu.Lock()
	pending := l.pending
	if len(pending) == 0 {
		l.mu.Unlock()
		return nil
	}
	l.pending = make(map[string][]byte, len(pending))
	l.size = 0
	l.mu.Unlock()
	var first error
	for subject, buf := range pending {
		for len(buf) > 0 {
			n := len(buf)
			if n > attemptBatchBytes {
				// Whole records only: up to the last newline within
				// the bound, or the first record if it alone is larger.
				if i := bytes.LastIndexByte(buf[:attemptBatchBytes], '\n'); i >= 0 {
					n = i + 1
				} else {
					n = bytes.IndexByte(buf, '\n') + 1
				}
			}
			var err error
			if !acked {
				err = l.s.nc.Publish(subject, buf[:n])
			} else {
				_, err = l.s.js.Publish(ctx, subject, buf[:n])
			}
			if err != nil {
				l.drop(subject, bytes.Count(buf[:n], []byte{'\n'}), err)
				first = cmp.Or(first, err)
			}
			buf = buf[n:]
		}
	}
	return first
}

func (l *attemptLog) close() {
	if l == nil {
		return
	}
	close(l.done)
	<-l.ended
}

func (s *Store) ensureAttempts(ctx context.Context) (jetstream.Stream, error) {
	st, err := s.js.CreateOrUpdateStream(ctx, jetstream.StreamConfig{
		Name:        AttemptStreamName,
		Description: "jethook: one record per delivery attempt, no payloads",
		Subjects:    []string{"attempts.>"},
		Retention:   jetstream.LimitsPolicy,
		Storage:     jetstream.FileStorage,
		MaxAge:      s.opts.AttemptLogAge,
		Replicas:    s.opts.Replicas,
	})
	if err != nil {
		return nil, fmt.Errorf("stream %s: %w", AttemptStreamName, err)
	}
	if s.attempts == nil {
		s.attempts = newAttemptLog(s)
	}
	return st, nil
}

func (l *attemptLog) drop(subject string, records int, err error) {
	n := l.dropped.Add(uint64(records))
	l.s.opts.Logger.Debug("attempts not logged", "subject", subject, "records", records, "err", err, "dropped", n)
}

// LogAttempt records a in the attempt log without waiting for the store:
// a delivery never waits on its own log. The record goes out within
// attemptLinger (attemptLingerExternal with an external server), with the
// other records of its destination made meanwhile, as a plain NATS
// publish, which the stream stores without sending back an ack: the log is
// observability, and an acked publish per attempt (the ack's round trip,
// its future and its decoding) cost about a tenth of the CPU of a
// delivery. The trade-off: a batch the stream refuses (the stream
// deleted, its limits reached) is lost without a trace; one that cannot
// be sent at all (the connection is down) is dropped and counted (logged
// at debug). A destination's records are stored in the order they were
// made.
func (s *Store) LogAttempt(a Attempt) {
	if s == nil || s.attempts == nil {
		return
	}
	s.attempts.add(AttemptSubject(a.Route, a.Destination), a)
}

// appendJSON appends a as an attemptRecord's JSON, the same bytes
// json.Marshal writes, built by hand because it runs once per attempt and
// reflection made up most of LogAttempt's own cost.
func (a Attempt) appendJSON(b []byte) []byte {
	b = append(b, `{"time":"`...)
	b = a.Time.UTC().AppendFormat(b, time.RFC3339Nano)
	b = append(b, `","route":`...)
	b = appendJSONString(b, a.Route)
	b = append(b, `,"destination":`...)
	b = appendJSONString(b, a.Destination)
	b = append(b, `,"event_id":`...)
	b = appendJSONString(b, a.EventID)
	b = append(b, `,"attempt":`...)
	b = strconv.AppendInt(b, int64(a.Attempt), 10)
	if a.Status != 0 {
		b = append(b, `,"status":`...)
		b = strconv.AppendInt(b, int64(a.Status), 10)
	}
	if a.Error != "" {
		b = append(b, `,"error":`...)
		b = appendJSONString(b, a.Error)
	}
	b = append(b, `,"latency_ns":`...)
	b = strconv.AppendInt(b, int64(a.Latency), 10)
	b = append(b, `,"outcome":`...)
	b = appendJSONString(b, a.Outcome)
	if a.Next != 0 {
		b = append(b, `,"next_ns":`...)
		b = strconv.AppendInt(b, int64(a.Next), 10)
	}
	if a.Parked {
		b = append(b, `,"parked":true`...)
	}
	if a.Sent != nil {
		b = a.Sent.appendJSON(append(b, `,"sent":`...))
	}
	return append(b, '}')
}

// appendJSON appends s as encoding/json writes recordOf(s).
func (s *Sent) appendJSON(b []byte) []byte {
	b = append(b, `{"s":`...)
	b = appendJSONString(b, s.Script)
	if sum, ok := digestOf(s.BodySHA256); ok {
		b = append(b, `,"b":"`...)
		b = base64.RawURLEncoding.AppendEncode(b, sum[:])
		b = append(b, '"')
	} else if s.BodySHA256 != "" {
		b = append(b, `,"body_sha256":`...)
		b = appendJSONString(b, s.BodySHA256)
	}
	b = append(b, `,"n":`...)
	b = strconv.AppendInt(b, int64(s.BodySize), 10)
	list := func(name string, vs []string) {
		if len(vs) == 0 {
			return
		}
		b = append(b, `,"`...)
		b = append(b, name...)
		b = append(b, `":[`...)
		for i, v := range vs {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendJSONString(b, v)
		}
		b = append(b, ']')
	}
	list("c", s.Changed)
	list("h", s.Headers)
	return append(b, '}')
}

// appendJSONString appends s as a JSON string. Printable ASCII other than
// the characters encoding/json escapes is copied as is; anything else goes
// through encoding/json, so the bytes are always the same as its own.
func appendJSONString(b []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < ' ' || c > '~' || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			q, _ := json.Marshal(s) // a string always encodes
			return append(b, q...)
		}
	}
	b = append(b, '"')
	b = append(b, s...)
	return append(b, '"')
}

// Attempts reads the logged attempts of one event, to every destination of
// every route that received it, oldest first (per destination, the order
// they were made). The index holds the records; an attempt logged a
// moment ago is found once the index has read it from the stream.
func (s *Store) Attempts(ctx context.Context, eventID string) ([]Attempt, error) {
	if err := s.syncAttempts(ctx, time.Second); err != nil {
		return nil, err
	}
	return s.indexedAttempts(eventID)
}

// syncAttempts stores the attempt records made so far and waits, for up to
// wait, until the index has read every one the stream holds.
func (s *Store) syncAttempts(ctx context.Context, wait time.Duration) error {
	if err := s.attempts.flushStored(ctx); err != nil {
		return fmt.Errorf("%w: attempt log: %w", ErrUnavailable, err)
	}
	_, err := s.tails[2].sync(ctx, wait)
	return err
}

// LastAttempt returns the latest attempt of event eventID to route's
// destination logged at or after since (filtered records aside); ok is
// false if there is none. It reads the index as it is, without waiting for
// the newest records of the attempt log: it is for a message an earlier
// run handled (Inherited), whose attempts Open indexed.
func (s *Store) LastAttempt(route, destination, eventID string, since time.Time) (a Attempt, ok bool, err error) {
	as, err := s.indexedAttempts(eventID)
	if err != nil {
		return a, false, err
	}
	for _, x := range as {
		if x.Route == route && x.Destination == destination && x.Outcome != OutcomeFiltered && !x.Time.Before(since) {
			a, ok = x, true
		}
	}
	return a, ok, nil
}

// LoggedAttempt is LastAttempt once the index has read every attempt
// logged so far (as Attempts waits for it), for a message this process
// may have attempted a moment ago.
func (s *Store) LoggedAttempt(ctx context.Context, route, destination, eventID string, since time.Time) (Attempt, bool, error) {
	if err := s.syncAttempts(ctx, time.Second); err != nil {
		return Attempt{}, false, err
	}
	return s.LastAttempt(route, destination, eventID, since)
}

// indexedAttempts is Attempts without waiting for the index.
func (s *Store) indexedAttempts(eventID string) ([]Attempt, error) {
	es, err := s.idx.all(eventID, kindAttempt)
	if err != nil {
		return nil, err
	}
	out := make([]Attempt, 0, len(es))
	for _, e := range es {
		var r attemptRecord
		if err := json.Unmarshal(e.Data, &r); err != nil {
			return nil, fmt.Errorf("attempt record of %s: %w", e.Route, err)
		}
		if r.EventID != eventID {
			continue
		}
		out = append(out, Attempt{
			Time: r.Time, Route: r.Route, Destination: r.Destination, EventID: r.EventID,
			Attempt: r.Attempt, Status: r.Status, Error: r.Error, Latency: time.Duration(r.LatencyNS),
			Outcome: r.Outcome, Next: time.Duration(r.NextNS), Parked: r.Parked, Sent: r.Sent.sent(),
		})
	}
	slices.SortStableFunc(out, func(a, b Attempt) int { return a.Time.Compare(b.Time) })
	return out, nil
}

// attemptKey reads the fields the index keys an attempt record by (its
// time, route, destination and event id) from the front of the record,
// as appendJSON writes it, without reflection: the index reads every
// record back. Anything else (an escaped string, another field order)
// goes through encoding/json.
func attemptKey(data []byte) (attemptRecord, bool) {
	var r attemptRecord
	rest, ok := data, true
	field := func(p string) string { // p: `"name":"`
		if !ok {
			return ""
		}
		if len(rest) < len(p)+1 || string(rest[1:len(p)+1]) != p {
			ok = false
			return ""
		}
		rest = rest[len(p)+1:]
		for i, c := range rest {
			switch c {
			case '"':
				v := string(rest[:i])
				rest = rest[i+1:]
				return v
			case '\\':
				ok = false
				return ""
			}
		}
		ok = false
		return ""
	}
	// Each field starts after the byte before it: '{' or ','.
	at := field(`"time":"`)
	r.Route, r.Destination, r.EventID = field(`"route":"`), field(`"destination":"`), field(`"event_id":"`)
	if ok {
		t, err := time.Parse(time.RFC3339Nano, at)
		r.Time, ok = t, err == nil
	}
	if !ok {
		r = attemptRecord{}
		if json.Unmarshal(data, &r) != nil {
			return r, false
		}
	}
	return r, r.EventID != ""
}
