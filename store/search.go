package store

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// Scan selects stored webhooks by route and time for Search; Match decides
// on each one it reads.
type Scan struct {
	Route string    // "" for every route
	Since time.Time // stored at or after; zero: the oldest retained
	Until time.Time // stored before; zero: now
	// Oldest reads oldest first; by default the scan reads newest first.
	Oldest bool
	// Cursor continues a scan where the previous page ended (Next): newest
	// first, it reads sequences before it; oldest first, from it on.
	Cursor uint64
	// Match decides whether the webhook e, stored at seq, is a hit; nil
	// matches every one. e holds the route, event id, method, headers and
	// body; Match may keep nothing of e after it returns.
	Match func(e *Envelope, seq uint64) bool
	// Values are what a hit's body must hold (filter.Filter.Values): one
	// value at least of each group, as Options.BodyValues gives them. The
	// scan passes over the blocks of the stream whose value filters lack
	// every value of a group (values.go).
	Values [][]string
	// NoBody says Match reads no body: the scan then reads headers alone,
	// and each hit's whole webhook once it is found. NoHeaders says Match
	// reads no headers: e.Header is then empty.
	NoBody, NoHeaders bool
	// Limit is the most hits one page holds (at least 1).
	Limit int
	// MaxBytes bounds the bytes (headers and bodies) one page reads; 0 is
	// no bound.
	MaxBytes int64
	// Deadline, if not zero, ends a page that runs until then, with a
	// cursor to go on from.
	Deadline time.Time
}

// Hit is one webhook a scan matched.
type Hit struct {
	Seq      uint64
	Envelope *Envelope
	Size     int // the body's length in bytes
}

// ScanProgress is how far a scan has come.
type ScanProgress struct {
	Scanned int   // webhooks read (of the route, within the window)
	Bytes   int64 // bytes read
	// Skipped is how many messages of the stream (of every route) the
	// scan passed over unread: its Values are not in their blocks.
	Skipped int
	// Reached is the stored time of the last webhook read: the scan has
	// covered the window from its start (newest first: its end) to here.
	Reached time.Time
}

// ScanEnd is how a page ended: with its progress, and Next, the cursor of
// the next page (0 when the window is covered), and Stopped, why it ended
// before the window's end: "limit" (the page is full), "max_bytes" or
// "deadline".
type ScanEnd struct {
	ScanProgress
	Next    uint64
	Stopped string
}

// scanBatch is how many messages one ask of a scan's read asks for, and
// shortBatch of a read of a short span (shortSpan); progressEvery is
// how many it reads between the progress it reports.
//
// The server sends what a read asked for through the stream's outgoing
// queue, the one ingest's acks wait in, and a search rests (pace) only
// between batches: the smaller the batch, the shorter the stretches of
// acks queued behind a search and of cores taken from ingest. Beside
// ingest, smaller batches took ingest's p99 down beside searches for a
// value, which read a few short spans (512: 4.4–5.5 ms, 128: 2.7–3.4 ms,
// 64: 2.4–2.8 ms), and a read of a whole day (one long span) keeps its
// speed at 256 but loses a fifth of it at 128 (performance.md, Search).
const (
	scanBatch     = 256
	shortBatch    = 64
	progressEvery = 512
)

// Search reads route's webhooks (every route's when empty) in the window
// q.Since to q.Until, newest or oldest first, and hands each one q.Match
// accepts to hit, in order, until q.Limit hits, q.MaxBytes or the window's
// end. progress, if not nil, is told after each batch read. A hit that
// returns false ends the page as if it were full. Memory: newest first, a
// page holds at most q.Limit envelopes of one window before handing them
// out newest first; oldest first, one batch.
func (s *Store) Search(ctx context.Context, q Scan, hit func(Hit) bool, progress func(ScanProgress)) (ScanEnd, error) {
	var end ScanEnd
	if q.Route != "" && !validToken(q.Route) {
		return end, fmt.Errorf("%q is not a route name: names hold only letters, digits, \"_\" and \"-\"", q.Route)
	}
	if q.Limit < 1 {
		q.Limit = 1
	}
	if err := s.ingest.yield(ctx, s.debt.due(time.Now())); err != nil {
		return end, err
	}
	began := time.Now()
	info, err := s.main.Info(ctx)
	if err != nil {
		return end, fmt.Errorf("%w: search: %w", ErrUnavailable, err)
	}
	first, last := max(info.State.FirstSeq, 1), info.State.LastSeq+1
	lo, hi := first, last
	if !q.Since.IsZero() {
		if lo, err = s.seqAt(ctx, q.Since, last); err != nil {
			return end, err
		}
	}
	if !q.Until.IsZero() {
		if hi, err = s.seqAt(ctx, q.Until, last); err != nil {
			return end, err
		}
	}
	l, err := s.searchLink(ctx)
	if err != nil {
		return end, fmt.Errorf("%w: search: %w", ErrUnavailable, err)
	}
	defer l.close()
	sc := &scanner{s: s, link: l, q: q, hit: hit, progress: progress, subject: "webhooks.*.*", pace: pace{&s.ingest, began}}
	defer func() { s.debt.owe(time.Now(), time.Since(sc.pace.since)) }()
	var open *valueBlocks
	if s.writer != nil {
		open = &s.writer.blocks
	}
	if sc.skip, err = s.idx.valueGaps(q.Values, info.Created, q.Since, lo, hi, open); err != nil {
		s.opts.Logger.Warn("search: value filters unreadable; reading every webhook", "err", err)
	}
	if info.State.Msgs > 0 {
		sc.avg = int64(info.State.Bytes / info.State.Msgs)
	}
	if q.Route != "" {
		sc.subject = "webhooks." + q.Route + ".*"
	}
	if q.Oldest {
		if q.Cursor > lo {
			lo = q.Cursor
		}
		err = sc.forward(ctx, lo, hi)
	} else {
		if q.Cursor > 0 && q.Cursor < hi {
			hi = q.Cursor
		}
		err = sc.backward(ctx, lo, hi)
	}
	return sc.end, err
}

// searchLink opens a connection for one search: its messages then queue
// on their own, not ahead of the acks ingest waits for. To the embedded
// server it is a wire; to another, a nats.go connection as the store's
// own is made but without its handlers.
func (s *Store) searchLink(ctx context.Context) (link, error) {
	if s.srv != nil {
		return dialWire(ctx, s.srv, s.opts.ClientToken)
	}
	o := s.nc.Opts
	o.Name = "jethook search"
	o.AllowReconnect = false
	o.CustomDialer = nil // the store's dialer keeps the store's connection
	o.ClosedCB, o.DisconnectedCB, o.DisconnectedErrCB, o.ConnectedCB, o.ReconnectedCB = nil, nil, nil, nil, nil
	o.DiscoveredServersCB, o.AsyncErrorCB, o.ReconnectErrCB, o.LameDuckModeHandler = nil, nil, nil, nil
	nc, err := o.Connect()
	if err != nil {
		return nil, err
	}
	return &clientLink{nc: nc}, nil
}

// seqAt is the sequence of the first message of the stream stored at or
// after t; last (the next sequence) if there is none. It asks the stream
// for that message (the server finds it by time, as a consumer that
// starts there would), and for its data alone: no consumer to make, read
// and delete for each bound of each search.
func (s *Store) seqAt(ctx context.Context, t time.Time, last uint64) (uint64, error) {
	req, err := json.Marshal(struct {
		NextFor   string    `json:"next_by_subj"`
		StartTime time.Time `json:"start_time"`
		NoHeaders bool      `json:"no_hdr"`
	}{">", t, true})
	if err != nil {
		return 0, err
	}
	ctx, cancel := context.WithTimeout(ctx, seqAtTimeout)
	defer cancel()
	m, err := s.nc.RequestWithContext(ctx, "$JS.API.STREAM.MSG.GET."+StreamName, req)
	if err != nil {
		return 0, fmt.Errorf("%w: search: %w", ErrUnavailable, err)
	}
	var resp struct {
		Error *struct {
			ErrCode     int    `json:"err_code"`
			Description string `json:"description"`
		} `json:"error"`
		Message *struct {
			Seq  uint64    `json:"seq"`
			Time time.Time `json:"time"`
		} `json:"message"`
	}
	switch err := json.Unmarshal(m.Data, &resp); {
	case err != nil:
		return 0, fmt.Errorf("%w: search: the stream's answer: %w", ErrUnavailable, err)
	case resp.Error != nil && resp.Error.ErrCode == msgNotFound:
		return last, nil
	case resp.Error != nil:
		return 0, fmt.Errorf("%w: search: %s", ErrUnavailable, resp.Error.Description)
	case resp.Message == nil:
		return 0, fmt.Errorf("%w: search: the stream answered with no message", ErrUnavailable)
	case resp.Message.Time.Before(t):
		// A server older than 2.11 ignores start_time and answers with
		// the stream's first message.
		return 0, errors.New("search: the NATS server does not find messages by time; searching a time window needs nats-server 2.11 or later")
	}
	return resp.Message.Seq, nil
}

const (
	// seqAtTimeout bounds seqAt's ask, as nats.go bounds a JetStream
	// API call made without a deadline.
	seqAtTimeout = 5 * time.Second
	// msgNotFound is JetStream's error code for "no message found"
	// (JSNoMessageFoundErr).
	msgNotFound = 10037
)

// scanner is one page of a Search.
type scanner struct {
	s        *Store
	link     link     // the search's own connection
	e        Envelope // what Match is given, reused
	q        Scan
	hit      func(Hit) bool
	progress func(ScanProgress)
	subject  string
	// route is the route of the last subject Match was given a webhook
	// of, subjectOf: a scan reads one subject per route.
	route, subjectOf string
	end              ScanEnd
	hits             int
	avg              int64     // the stream's average message size, for window sizes
	skip             *passOver // the blocks that hold not all of q.Values
	pace             pace
}

// span is a run of stream sequences [lo, hi) that a scan reads, or that
// it passes over (skip).
type span struct {
	lo, hi uint64
	skip   bool
}

// spans cuts [lo, hi) into the runs of blocks the scan reads and those it
// passes over, in order.
func (sc *scanner) spans(lo, hi uint64) []span {
	if sc.skip == nil {
		return []span{{lo, hi, false}}
	}
	var out []span
	add := func(lo, hi uint64, skip bool) {
		if n := len(out); n > 0 && out[n-1].skip == skip {
			out[n-1].hi = hi
		} else if lo < hi {
			out = append(out, span{lo, hi, skip})
		}
	}
	for seq := lo; seq < hi; {
		b := blockOf(seq)
		end := min((b+1)*valueBlock+1, hi)
		if to, ok := sc.skip.open[b]; ok && seq < to {
			add(seq, min(to, end), true)
			seq = min(to, end)
		}
		add(seq, end, sc.skip.skips(b))
		seq = end
	}
	return out
}

// read reads the webhooks in [start, stop) in order and calls fn on each
// hit, until fn returns false. It returns the sequence it stopped at (stop
// when it read the whole span), whether it ran into a bound (only checked
// when bound is true), and the stored time of the first webhook it read.
//
// It reads through one consumer without acks on the search's own
// connection (so that its traffic does not queue ahead of ingest's acks),
// asking for a batch at a time with up to two asks outstanding: the server
// sends the next batch while the scan reads this one, and never more than
// was asked for, so a slow scan makes it wait, not drop messages.
func (sc *scanner) read(ctx context.Context, start, stop uint64, bound bool, fn func(Hit) bool) (at uint64, full bool, first time.Time, err error) {
	at = stop
	short := stop-start <= shortSpan
	filter := sc.subject
	if sc.q.Route == "" || short {
		filter = "" // the scan takes the subjects it wants itself (wants)
	}
	if err := sc.pace.rest(ctx); err != nil {
		return 0, false, first, err
	}
	c, err := sc.s.main.CreateConsumer(ctx, jetstream.ConsumerConfig{
		Description:       "jethook: search",
		AckPolicy:         jetstream.AckNonePolicy,
		FilterSubject:     filter,
		DeliverPolicy:     jetstream.DeliverByStartSequencePolicy,
		OptStartSeq:       start,
		InactiveThreshold: 30 * time.Second, // the server drops it if a search cannot
		MemoryStorage:     true,
		HeadersOnly:       sc.q.NoBody,
	})
	if err != nil {
		return 0, false, first, fmt.Errorf("%w: search: %w", ErrUnavailable, err)
	}
	info := c.CachedInfo()
	defer func() { _ = sc.s.main.DeleteConsumer(context.WithoutCancel(ctx), info.Name) }()
	if info.NumPending == 0 {
		return at, false, first, nil
	}
	batch := scanBatch
	if short {
		batch = shortBatch
	}
	p, err := pullFrom(sc.link, &sc.pace, info.Name, batch)
	if err != nil {
		return 0, false, first, err
	}
	for {
		m, err := p.next(ctx)
		if err != nil {
			return 0, false, first, err
		}
		seq, stored, pending, ok := ackFacts(m.reply)
		switch {
		case !ok:
			continue
		case seq >= stop:
			return at, full, first, nil
		case filter == "" && !sc.wants(m.subject):
			if pending == 0 {
				return at, full, first, nil
			}
			continue
		case bound && sc.over() != "":
			return seq, true, first, nil
		}
		sc.end.Scanned++
		sc.end.Bytes += int64(m.size)
		if first.IsZero() {
			first = stored
		}
		if bound {
			sc.end.Reached = stored
		}
		if sc.matches(m, seq) {
			e, err := sc.whole(ctx, m, seq)
			if err != nil {
				return 0, false, first, err
			}
			if e != nil && !fn(Hit{Seq: seq, Envelope: e, Size: len(e.Body)}) {
				return seq, full, first, nil
			}
		}
		if bound && sc.progress != nil && p.got%progressEvery == 0 {
			sc.progress(sc.end.ScanProgress)
		}
		if pending == 0 {
			return at, full, first, nil
		}
	}
}

// A consumer made with a subject filter that has a wildcard, and that
// starts past the stream's first message, counts the messages it has to
// deliver at its creation by going through the stream's blocks on one
// side of its start: up to half of them, holding the stream's store
// locked, so that every message stored meanwhile waits (nats-server's
// fileStore.NumPending). With no filter it counts them from each block's
// totals. A read of a short span, as a search that passes over blocks
// makes, and every read of a search of every route, makes its consumer
// with no filter and passes over the messages of other subjects itself:
// they are few (the other routes' in a short span; replays and due
// messages) against the time the store stays locked for each consumer.
const shortSpan = 4 * valueBlock

// wants reports whether subject is one sc.subject, the scan's filter,
// takes: webhooks.<route>.<token>, of the searched route if any.
func (sc *scanner) wants(subject string) bool {
	rest, ok := strings.CutPrefix(subject, "webhooks.")
	if !ok {
		return false
	}
	route, token, ok := strings.Cut(rest, ".")
	if !ok || route == "" || token == "" || strings.Contains(token, ".") {
		return false
	}
	return sc.q.Route == "" || route == sc.q.Route
}

// ackFacts reads a message's stream sequence, stored time and the
// consumer's count of messages left from the reply subject the server
// delivered it with: $JS.ACK.<stream>.<consumer>.<delivered>.<stream
// sequence>.<consumer sequence>.<time>.<pending>, or, in the newer form,
// with a domain and an account hash after $JS.ACK and a token at the end
// (ADR-15).
func ackFacts(reply string) (seq uint64, stored time.Time, pending uint64, ok bool) {
	var tokens [12]string
	n := 0
	for more := true; more && n < len(tokens); n++ {
		tokens[n], reply, more = strings.Cut(reply, ".")
	}
	var t []string
	switch {
	case n == 9:
		t = tokens[5:]
	case n >= 11:
		t = tokens[7:]
	default:
		return 0, stored, 0, false
	}
	seq, err1 := strconv.ParseUint(t[0], 10, 64)
	ns, err2 := strconv.ParseInt(t[2], 10, 64)
	pending, err3 := strconv.ParseUint(t[3], 10, 64)
	if err1 != nil || err2 != nil || err3 != nil {
		return 0, stored, 0, false
	}
	return seq, time.Unix(0, ns), pending, true
}

// matches decodes m into the scanner's reused envelope, as far as Match
// reads one, and asks Match.
func (sc *scanner) matches(m *scanMsg, seq uint64) bool {
	if sc.q.Match == nil {
		return true
	}
	if m.subject != sc.subjectOf {
		route, err := routeOf(m.subject)
		if err != nil {
			return false
		}
		sc.subjectOf, sc.route = m.subject, route
	}
	route := sc.route
	e := &sc.e
	if e.Header == nil {
		e.Header = make(map[string][]string)
	}
	clear(e.Header)
	if !sc.q.NoHeaders {
		m.origHeaders(e.Header)
	}
	e.EventID, e.Method, e.JSON = m.facts()
	e.Route, e.Body = route, m.data
	return sc.q.Match(e, seq)
}

// whole is the webhook a hit read as m, stored at seq: read again in
// full when the scan read headers only. It is nil for a message that is
// not a webhook or is gone (past the retention) since.
func (sc *scanner) whole(ctx context.Context, m *scanMsg, seq uint64) (*Envelope, error) {
	// A link reuses m's data for the next message; its headers are
	// decoded for m alone.
	subject, h, data := m.subject, m.header(), bytes.Clone(m.data)
	if sc.q.NoBody {
		w, err := sc.s.main.GetMsg(ctx, seq)
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			return nil, nil
		}
		if err != nil {
			return nil, fmt.Errorf("%w: search: %w", ErrUnavailable, err)
		}
		subject, h, data = w.Subject, w.Header, w.Data
	}
	e, err := decodeEnvelope(subject, h, data)
	if err != nil {
		return nil, nil
	}
	return e, nil
}

// over says which bound the page has reached, if any: "max_bytes" or
// "deadline".
func (sc *scanner) over() string {
	switch {
	case sc.q.MaxBytes > 0 && sc.end.Bytes >= sc.q.MaxBytes:
		return "max_bytes"
	case !sc.q.Deadline.IsZero() && !time.Now().Before(sc.q.Deadline):
		return "deadline"
	}
	return ""
}

// forward reads [lo, hi) oldest first.
func (sc *scanner) forward(ctx context.Context, lo, hi uint64) error {
	if lo >= hi {
		return nil
	}
	found := func(h Hit) bool {
		if sc.hits == sc.q.Limit {
			sc.end.Stopped = "limit"
			return false // h is the next page's first
		}
		sc.hits++
		if !sc.hit(h) {
			sc.end.Stopped = "limit"
			sc.end.Next = h.Seq + 1
			return false
		}
		return true
	}
	for _, sp := range sc.spans(lo, hi) {
		if sp.skip {
			sc.end.Skipped += int(sp.hi - sp.lo)
			continue
		}
		if why := sc.over(); why != "" {
			sc.end.Stopped, sc.end.Next = why, sp.lo
			break
		}
		at, full, _, err := sc.read(ctx, sp.lo, sp.hi, true, found)
		if err != nil {
			return err
		}
		if full {
			sc.end.Stopped = sc.over()
		}
		if at < sp.hi {
			if sc.end.Next == 0 {
				sc.end.Next = at
			}
			break
		}
	}
	if sc.progress != nil {
		sc.progress(sc.end.ScanProgress)
	}
	return nil
}

// Newest first, a scan reads windows of the stream that grow backwards
// from the window's end: each window forward, keeping its last hits, then
// handing them out newest first. The byte bound is checked between
// windows, and a window spans no more messages than the bytes left to
// read hold at the stream's average size, so a page reads about
// MaxBytes. A window is at most maxWindow webhooks, so that a hit is
// handed out soon after it is read (a fraction of a second), not after
// a long window.
const (
	firstWindow = 1024
	maxWindow   = 16 * 1024
)

// backward reads [lo, hi) newest first.
func (sc *scanner) backward(ctx context.Context, lo, hi uint64) error {
	window := uint64(firstWindow)
	for end := hi; end > lo; {
		if why := sc.over(); why != "" {
			sc.end.Stopped, sc.end.Next = why, end
			return nil
		}
		n := min(window, end-lo)
		if sc.q.MaxBytes > 0 {
			left := sc.q.MaxBytes - sc.end.Bytes
			n = min(n, uint64(max(left/max(sc.avg, 1), 1)))
		}
		start := end - n
		var kept []Hit
		keep := func(h Hit) bool {
			if len(kept) == sc.q.Limit-sc.hits {
				kept = append(kept[1:], h) // the page has room for the newest only
			} else {
				kept = append(kept, h)
			}
			return true
		}
		reached := false
		for _, sp := range sc.spans(start, end) {
			if sp.skip {
				sc.end.Skipped += int(sp.hi - sp.lo)
				continue
			}
			_, _, first, err := sc.read(ctx, sp.lo, sp.hi, false, keep)
			if err != nil {
				return err
			}
			if !reached && !first.IsZero() {
				sc.end.Reached, reached = first, true
			}
		}
		if sc.progress != nil {
			sc.progress(sc.end.ScanProgress)
		}
		for i := len(kept) - 1; i >= 0; i-- {
			sc.hits++
			if !sc.hit(kept[i]) || sc.hits == sc.q.Limit {
				sc.end.Stopped, sc.end.Next = "limit", kept[i].Seq
				return nil
			}
		}
		end, window = start, min(window*4, maxWindow)
	}
	return nil
}

// Deliveries tells where many events stand, as Delivery does, reading
// each destination's consumer once: for the hits of one page of a search.
// Its view of a consumer is as old as its first question about it.
type Deliveries struct {
	s      *Store
	synced bool
	infos  map[[2]string]*jetstream.ConsumerInfo
}

// Deliveries starts a set of questions about where events stand.
func (s *Store) Deliveries() *Deliveries {
	return &Deliveries{s: s, infos: map[[2]string]*jetstream.ConsumerInfo{}}
}

// Of is Delivery for the event e stored at seq, at destination.
func (d *Deliveries) Of(ctx context.Context, e *Envelope, seq uint64, destination string) (Delivery, error) {
	if !d.synced {
		for _, t := range d.s.tails[:2] {
			if _, err := t.sync(ctx, time.Second); err != nil {
				return Delivery{Destination: destination}, err
			}
		}
		d.synced = true
	}
	k := [2]string{e.Route, destination}
	info, ok := d.infos[k]
	if !ok {
		var err error
		if info, err = d.s.consumerInfo(ctx, e.Route, destination); err != nil {
			return Delivery{Destination: destination}, err
		}
		d.infos[k] = info
	}
	return d.s.delivery(ctx, e, seq, destination, info)
}
