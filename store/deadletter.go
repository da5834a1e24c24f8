package store

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// DeadLetter is a delivery that failed for good: the original webhook and
// why jethook gave up on it for one destination.
type DeadLetter struct {
	Envelope    *Envelope
	Destination string
	Seq         uint64 // sequence of the original in WEBHOOKS
	Reason      string // "permanent", "redirect", "exhausted", "crashed" or "max_blocked"
	LastStatus  int    // last HTTP status, 0 if none
	LastError   string // last network error, if any
	Attempts    int
	FirstSeen   time.Time // when the original was stored
	LastAttempt time.Time
	// OrderKey is the ordering key whose head this was, for a destination
	// with `order:`: its dead letter let the key's next event go.
	OrderKey string
	DLQSeq   uint64 // sequence in WEBHOOKS_DLQ, set when read back
	// DeadLetteredAt is when WEBHOOKS_DLQ stored it, set when read back.
	DeadLetteredAt time.Time
}

const (
	hdrDest        = "Jethook-Destination"
	hdrSeq         = "Jethook-Seq"
	hdrReason      = "Jethook-Reason"
	hdrLastStatus  = "Jethook-Last-Status"
	hdrLastError   = "Jethook-Last-Error"
	hdrAttempts    = "Jethook-Attempts"
	hdrFirstSeen   = "Jethook-First-Seen"
	hdrLastAttempt = "Jethook-Last-Attempt"
	hdrDLOrderKey  = "Jethook-Dead-Letter-Order-Key"
)

// DLQSubject is the subject of one destination's dead letters.
func DLQSubject(route, destination string) string {
	return "dlq." + route + "." + destination + "." + layoutToken
}

// AddDeadLetter stores d and waits for the stream's ack. The caller may
// Term the original only after this returns nil: acks and terms are
// fire-and-forget, the dead letter must not be. A crash between the two
// stores it once: the index knows the dead letter of the original's
// sequence, and its Nats-Msg-Id, derived from that sequence, covers the
// moment before the index has read it.
func (s *Store) AddDeadLetter(ctx context.Context, d DeadLetter) error {
	e := d.Envelope
	if prev, err := s.lastDeadLetter(ctx, e.Route, d.Destination, e.EventID); err == nil && prev != nil && prev.Seq == d.Seq {
		return nil
	}
	m := e.msg(DLQSubject(e.Route, d.Destination))
	m.Header.Set(hdrDest, d.Destination)
	m.Header.Set(hdrSeq, strconv.FormatUint(d.Seq, 10))
	m.Header.Set(hdrReason, d.Reason)
	m.Header.Set(hdrLastStatus, strconv.Itoa(d.LastStatus))
	m.Header.Set(hdrLastError, oneLine(d.LastError))
	m.Header.Set(hdrAttempts, strconv.Itoa(d.Attempts))
	m.Header.Set(hdrFirstSeen, d.FirstSeen.UTC().Format(time.RFC3339Nano))
	m.Header.Set(hdrLastAttempt, d.LastAttempt.UTC().Format(time.RFC3339Nano))
	if d.OrderKey != "" {
		m.Header.Set(hdrDLOrderKey, oneLine(d.OrderKey))
	}
	for k := range m.Header {
		if !ValidHeaderName(k) {
			delete(m.Header, k)
		}
	}
	ctx, cancel := context.WithTimeout(ctx, s.opts.PublishTimeout)
	defer cancel()
	id := fmt.Sprintf("%s/%d", d.Destination, d.Seq)
	if _, err := s.js.PublishMsg(ctx, m, jetstream.WithMsgID(id), jetstream.WithExpectStream(DLQStreamName)); err != nil {
		return fmt.Errorf("%w: dead letter: %w", ErrUnavailable, err)
	}
	return nil
}

// DeadLetters reads the dead letters whose subject matches filter (for
// example "dlq.>" or "dlq.<route>.<destination>.*"), oldest first, at most
// limit of them.
func (s *Store) DeadLetters(ctx context.Context, filter string, limit int) ([]DeadLetter, error) {
	if limit <= 0 {
		return nil, nil
	}
	var (
		out []DeadLetter
		bad error
	)
	src := recordSource{s.dlq, jetstream.OrderedConsumerConfig{FilterSubjects: []string{filter}}}
	err := src.while(ctx, min(256, limit), func(m jetstream.Msg) bool {
		d, err := decodeDeadLetter(m)
		if err != nil {
			bad = err
			return false
		}
		out = append(out, d)
		return len(out) < limit
	})
	if err != nil {
		return nil, fmt.Errorf("%w: dead letters: %w", ErrUnavailable, err)
	}
	if bad != nil {
		return nil, bad
	}
	return out, nil
}

// lastDeadLetter reads the newest dead letter of eventID at route's
// destination; nil if there is none.
func (s *Store) lastDeadLetter(ctx context.Context, route, destination, eventID string) (*DeadLetter, error) {
	en, ok, err := s.idx.latest(eventID, kindDeadLetter, route, destination, time.Time{})
	if err != nil || !ok {
		return nil, err
	}
	d, err := s.DeadLetter(ctx, en.Seq)
	if errors.Is(err, ErrNotFound) {
		return nil, nil // purged
	}
	if err != nil {
		return nil, err
	}
	if d.Envelope.EventID != eventID {
		return nil, nil // the index is older than the stream
	}
	return &d, nil
}

func decodeDeadLetter(m jetstream.Msg) (DeadLetter, error) {
	d, err := deadLetterFrom(m.Subject(), m.Headers(), m.Data())
	if err != nil {
		return DeadLetter{}, err
	}
	if md, err := m.Metadata(); err == nil {
		d.DLQSeq, d.DeadLetteredAt = md.Sequence.Stream, md.Timestamp
	}
	return d, nil
}

// deadLetterFrom reads a dead letter back from its subject, headers and data.
func deadLetterFrom(subject string, h nats.Header, data []byte) (DeadLetter, error) {
	e, err := decodeEnvelope(subject, h, data)
	if err != nil {
		return DeadLetter{}, err
	}
	d := DeadLetter{
		Envelope:    e,
		Destination: h.Get(hdrDest),
		Reason:      h.Get(hdrReason),
		OrderKey:    h.Get(hdrDLOrderKey),
		LastError:   h.Get(hdrLastError),
	}
	d.Seq, _ = strconv.ParseUint(h.Get(hdrSeq), 10, 64)
	d.LastStatus, _ = strconv.Atoi(h.Get(hdrLastStatus))
	d.Attempts, _ = strconv.Atoi(h.Get(hdrAttempts))
	d.FirstSeen, _ = time.Parse(time.RFC3339Nano, h.Get(hdrFirstSeen))
	d.LastAttempt, _ = time.Parse(time.RFC3339Nano, h.Get(hdrLastAttempt))
	return d, nil
}

// ValidHeaderName reports whether k is an HTTP field name (RFC 9110
// §5.6.2 token: printable ASCII without delimiters), which is also what
// nats.go writes as a header name. Ingress stores only names net/http
// accepted, which qualify; a message put on the stream another way may hold
// others, and its dead letter goes without them rather than fail to store
// on every try.
func ValidHeaderName(k string) bool {
	for i := 0; i < len(k); i++ {
		if c := k[i]; c <= ' ' || c >= 0x7f || strings.IndexByte(`"(),/:;<=>?@[\]{}`, c) >= 0 {
			return false
		}
	}
	return k != ""
}

// oneLine keeps a header value legal: NATS headers end at a line break.
func oneLine(s string) string {
	out := []rune(s)
	for i, r := range out {
		if r == '\r' || r == '\n' {
			out[i] = ' '
		}
	}
	return string(out)
}
