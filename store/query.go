package store

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// DeadLetterQuery selects dead letters (the dead-letter selection of the
// admin API, dashboard and CLI). Zero fields match everything.
type DeadLetterQuery struct {
	Route       string
	Destination string // only with Route
	// Status is a last HTTP status ("503"), a class ("5xx"), or "none" for
	// attempts that got no response.
	Status string
	Reason string    // "permanent" or "exhausted"
	Since  time.Time // dead-lettered at or after
	Until  time.Time // dead-lettered before
	// MaxSeq, if not 0, is the last WEBHOOKS_DLQ sequence to consider, so a
	// paged replay does not chase the dead letters its own replays add.
	MaxSeq uint64
}

// Validate reports a query that cannot match as the caller meant it.
func (q DeadLetterQuery) Validate() error {
	if q.Destination != "" && q.Route == "" {
		return errors.New("a query by destination needs a route")
	}
	// Names become subject tokens: anything but the characters a policy
	// name may hold (letters, digits, "_" and "-") would make a subject
	// the server refuses, or one that matches other names.
	for _, tok := range []string{q.Route, q.Destination} {
		if strings.ContainsFunc(tok, func(c rune) bool {
			return !(c == '_' || c == '-' || c >= '0' && c <= '9' || c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z')
		}) {
			return fmt.Errorf("%q is not a route or destination name: names hold only letters, digits, \"_\" and \"-\"", tok)
		}
	}
	if q.Status != "" && q.Status != "none" {
		if c, ok := strings.CutSuffix(q.Status, "xx"); ok {
			if len(c) != 1 || c[0] < '1' || c[0] > '5' {
				return fmt.Errorf("status %q: want a status, a class such as 5xx, or none", q.Status)
			}
		} else if n, err := strconv.Atoi(q.Status); err != nil || n < 100 || n > 599 {
			return fmt.Errorf("status %q: want a status, a class such as 5xx, or none", q.Status)
		}
	}
	if !q.Since.IsZero() && !q.Until.IsZero() && !q.Until.After(q.Since) {
		return errors.New("until must be after since")
	}
	return nil
}

// subject is the DLQ subject filter the route and destination select.
func (q DeadLetterQuery) subject() string {
	switch {
	case q.Destination != "":
		return "dlq." + q.Route + "." + q.Destination + ".*"
	case q.Route != "":
		return "dlq." + q.Route + ".>"
	}
	return "dlq.>"
}

// bySubjectOnly is true when the stream can answer the query without
// reading each message.
func (q DeadLetterQuery) bySubjectOnly() bool {
	return q.Status == "" && q.Reason == "" && q.Since.IsZero() && q.Until.IsZero() && q.MaxSeq == 0
}

func (q DeadLetterQuery) match(d DeadLetter) bool {
	if q.Reason != "" && d.Reason != q.Reason {
		return false
	}
	if !q.Since.IsZero() && d.DeadLetteredAt.Before(q.Since) {
		return false
	}
	if !q.Until.IsZero() && !d.DeadLetteredAt.Before(q.Until) {
		return false
	}
	switch {
	case q.Status == "":
	case q.Status == "none":
		return d.LastStatus == 0
	case strings.HasSuffix(q.Status, "xx"):
		return d.LastStatus/100 == int(q.Status[0]-'0')
	default:
		return strconv.Itoa(d.LastStatus) == q.Status
	}
	return true
}

// maxScan bounds the dead letters one page reads when the query's status,
// reason or times reject most of them; the page then ends early with a
// cursor.
const maxScan = 10_000

// Page is one page of dead letters, oldest first.
type Page struct {
	DeadLetters []DeadLetter
	// Next is the WEBHOOKS_DLQ sequence to pass as the cursor of the next
	// page, 0 when there is none. A page may hold fewer than the limit and
	// still have a Next when the query rejected maxScan dead letters.
	Next uint64
}

// QueryDeadLetters returns up to limit dead letters matching q, oldest first
// (by WEBHOOKS_DLQ sequence), starting at sequence cursor (0 is the start).
func (s *Store) QueryDeadLetters(ctx context.Context, q DeadLetterQuery, cursor uint64, limit int) (Page, error) {
	var p Page
	if limit <= 0 {
		return p, nil
	}
	resume, err := s.scanDeadLetters(ctx, q, cursor, maxScan, func(d DeadLetter) bool {
		if len(p.DeadLetters) == limit {
			p.Next = d.DLQSeq
			return false
		}
		p.DeadLetters = append(p.DeadLetters, d)
		return true
	})
	if resume > 0 {
		p.Next = resume
	}
	return p, err
}

// DeadLetterCount counts the dead letters matching q. A query on route and
// destination only is answered by the stream; others read every candidate.
func (s *Store) DeadLetterCount(ctx context.Context, q DeadLetterQuery) (uint64, error) {
	if q.bySubjectOnly() {
		// A consumer made only for its count of what it has to deliver;
		// the server drops it after a while if it cannot be deleted.
		c, err := s.dlq.CreateConsumer(ctx, jetstream.ConsumerConfig{
			Description:       "jethook: dead-letter count",
			AckPolicy:         jetstream.AckNonePolicy,
			FilterSubject:     q.subject(),
			InactiveThreshold: 30 * time.Second,
			MemoryStorage:     true,
		})
		if err != nil {
			return 0, fmt.Errorf("%w: count dead letters: %w", ErrUnavailable, err)
		}
		info := c.CachedInfo()
		_ = s.dlq.DeleteConsumer(context.WithoutCancel(ctx), info.Name)
		return info.NumPending, nil
	}
	var n uint64
	_, err := s.scanDeadLetters(ctx, q, 0, 0, func(DeadLetter) bool { n++; return true })
	return n, err
}

// DeadLetter returns the dead letter at WEBHOOKS_DLQ sequence seq, or
// ErrNotFound.
func (s *Store) DeadLetter(ctx context.Context, seq uint64) (DeadLetter, error) {
	m, err := s.dlq.GetMsg(ctx, seq)
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return DeadLetter{}, ErrNotFound
	}
	if err != nil {
		return DeadLetter{}, fmt.Errorf("%w: dead letter %d: %w", ErrUnavailable, seq, err)
	}
	d, err := deadLetterFrom(m.Subject, m.Header, m.Data)
	if err != nil {
		return DeadLetter{}, err
	}
	d.DLQSeq, d.DeadLetteredAt = m.Sequence, m.Time
	return d, nil
}

// DeleteDeadLetters removes the dead letters at the given WEBHOOKS_DLQ
// sequences and returns how many it removed; unknown sequences are skipped.
func (s *Store) DeleteDeadLetters(ctx context.Context, seqs []uint64) (int, error) {
	n := 0
	for _, seq := range seqs {
		err := s.dlq.DeleteMsg(ctx, seq)
		switch {
		case err == nil:
			n++
		case errors.Is(err, jetstream.ErrMsgNotFound), errors.Is(err, jetstream.ErrMsgDeleteUnsuccessful):
		default:
			return n, fmt.Errorf("%w: delete dead letter %d: %w", ErrUnavailable, seq, err)
		}
	}
	return n, nil
}

// PurgeDeadLetters removes every dead letter matching q and returns how
// many. A query on route and destination only is one stream purge.
func (s *Store) PurgeDeadLetters(ctx context.Context, q DeadLetterQuery) (int, error) {
	if q.bySubjectOnly() {
		n, err := s.DeadLetterCount(ctx, q)
		if err != nil {
			return 0, err
		}
		if err := s.dlq.Purge(ctx, jetstream.WithPurgeSubject(q.subject())); err != nil {
			return 0, fmt.Errorf("%w: purge dead letters: %w", ErrUnavailable, err)
		}
		return int(n), nil
	}
	var seqs []uint64
	if _, err := s.scanDeadLetters(ctx, q, 0, 0, func(d DeadLetter) bool {
		seqs = append(seqs, d.DLQSeq)
		return true
	}); err != nil {
		return 0, err
	}
	return s.DeleteDeadLetters(ctx, seqs)
}

// scanDeadLetters calls fn for each dead letter matching q, oldest first,
// from sequence from, until fn returns false or the stream has no more. It
// reads at most maxScan dead letters; if it stops for that reason, it
// returns the sequence to resume at, else 0.
//
// It reads through an ordered consumer (recordSource), which starts each
// fetch after the last dead letter read: nats.go drops what arrives after
// it ended a fetch on its own clock, and a consumer that counted those as
// delivered would go on after them, past dead letters never read.
func (s *Store) scanDeadLetters(ctx context.Context, q DeadLetterQuery, from uint64, maxScan int, fn func(d DeadLetter) bool) (uint64, error) {
	cfg := jetstream.OrderedConsumerConfig{FilterSubjects: []string{q.subject()}, InactiveThreshold: 30 * time.Second}
	switch {
	case from > 0:
		cfg.DeliverPolicy, cfg.OptStartSeq = jetstream.DeliverByStartSequencePolicy, from
	case !q.Since.IsZero():
		since := q.Since
		cfg.DeliverPolicy, cfg.OptStartTime = jetstream.DeliverByStartTimePolicy, &since
	}
	scanned := 0
	var resume uint64
	var stopped error
	err := recordSource{s.dlq, cfg}.while(ctx, 256, func(m jetstream.Msg) bool {
		if stopped = ctx.Err(); stopped != nil {
			return false
		}
		md, err := m.Metadata()
		if err != nil {
			return true
		}
		if maxScan > 0 && scanned == maxScan {
			resume = md.Sequence.Stream
			return false
		}
		scanned++
		if (!q.Until.IsZero() && !md.Timestamp.Before(q.Until)) || (q.MaxSeq > 0 && md.Sequence.Stream > q.MaxSeq) {
			return false // sequence and stream time only grow: nothing later matches
		}
		if d, err := decodeDeadLetter(m); err == nil && q.match(d) && !fn(d) {
			return false
		}
		return md.NumPending > 0 // none was left when it came: no fetch to find that out
	})
	if stopped != nil {
		return 0, stopped
	}
	if err != nil {
		return 0, fmt.Errorf("%w: dead letters: %w", ErrUnavailable, err)
	}
	return resume, nil
}

// LastDeadLetterSeq is the WEBHOOKS_DLQ sequence of the newest dead letter
// so far (0 if none ever was).
func (s *Store) LastDeadLetterSeq(ctx context.Context) (uint64, error) {
	info, err := s.dlq.Info(ctx)
	if err != nil {
		return 0, fmt.Errorf("%w: %w", ErrUnavailable, err)
	}
	return info.State.LastSeq, nil
}
