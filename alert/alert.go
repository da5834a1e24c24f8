// Package alert tells an operator, through another channel, what jethook
// cannot fix alone: events dead-lettered, circuit breakers that open or
// stay open, and a store that refuses writes or runs short of room. A Notifier gathers what happened during a batch window and
// POSTs it as one Slack-compatible JSON notice ({"text": "..."}), at most
// MaxPerHour times an hour. Notices name routes, destinations, event ids
// and reasons, never payloads or secrets.
package alert

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"sort"
	"strings"
	"sync"
	"time"
)

// Limits that keep one notice readable.
const (
	maxLines    = 20 // lines about dead letters and breakers per notice
	maxExamples = 3  // event ids quoted per route × destination × reason
)

// postTimeout bounds one POST of a notice.
const postTimeout = 10 * time.Second

// Notifier batches alerts and posts them. Set the fields, then Start;
// Reload changes URL, Batch and MaxPerHour while it runs. A nil
// *Notifier, or one without a URL, ignores everything, so callers need no
// check.
type Notifier struct {
	// URL receives the notices. It is a secret: it is never logged.
	URL string
	// Batch is how long the first event of a burst waits for the rest
	// (default 1m); it is also how often a rate-limited notice is retried.
	Batch time.Duration
	// MaxPerHour bounds the POSTs in any hour (default 30). Past it,
	// events are counted into the next notice allowed, not dropped.
	MaxPerHour int
	// Remind is how often a breaker that stays open, or a store that
	// keeps refusing writes, is reported again (default 15m).
	Remind time.Duration
	// Headroom is the share of the store's capacity left below which a
	// notice says it runs short of room (default 10 %, 0.10).
	Headroom float64
	// Client posts the notices (default http.DefaultClient; each POST is
	// bounded to 10s).
	Client *http.Client
	// Logger gets failed posts.
	Logger *slog.Logger
	// Now is the clock of the rate limit and the reminders.
	Now func() time.Time

	mu       sync.Mutex // guards URL, Batch and MaxPerHour once started
	reconf   chan struct{}
	pending  batch
	breakers map[target]*breaker
	store    storeState
	sent     []time.Time // POSTs within the last hour, oldest first
	held     int         // flushes the hourly limit held back
	wake     chan struct{}
	stop     context.CancelFunc
	done     chan struct{}
}

// Config is the `alerts:` block of policies.yaml (policy.Alerts, whose
// doc says what each field means and its default).
type Config struct {
	URL        string        // receives each notice as a JSON POST
	Batch      time.Duration // how long the notices of a burst are gathered
	MaxPerHour int           // the most POSTs in any hour
	Headroom   float64       // the share of the store's room below which a notice warns
}

// New returns a Notifier for the `alerts:` block of policies.yaml; with no
// block (cfg nil) it stays quiet until Reload gives it one.
func New(cfg *Config, log *slog.Logger) *Notifier {
	n := &Notifier{Logger: log}
	if cfg != nil {
		n.URL, n.Batch, n.MaxPerHour, n.Headroom = cfg.URL, cfg.Batch, cfg.MaxPerHour, cfg.Headroom
	}
	return n
}

// Reload applies a reloaded `alerts:` block at once: a new URL, batch
// window or hourly limit. With no block (cfg nil), what is pending is
// dropped and nothing more is gathered until a block returns. The hourly
// count of notices sent carries over, so a reload cannot lift the limit.
func (n *Notifier) Reload(cfg *Config) {
	if n == nil || n.wake == nil {
		return
	}
	n.mu.Lock()
	if cfg == nil || cfg.URL == "" {
		n.URL, n.pending, n.breakers, n.store = "", batch{}, map[target]*breaker{}, storeState{}
	} else {
		n.URL = cfg.URL
		n.Batch, n.MaxPerHour = defaults(cfg.Batch, cfg.MaxPerHour)
		n.Headroom = cfg.Headroom
	}
	n.mu.Unlock()
	select {
	case n.reconf <- struct{}{}:
	default:
	}
}

// defaults fills in the default batch window and hourly limit.
func defaults(batch time.Duration, maxPerHour int) (time.Duration, int) {
	if batch <= 0 {
		batch = time.Minute
	}
	if maxPerHour <= 0 {
		maxPerHour = 30
	}
	return batch, maxPerHour
}

// target is a route × destination.
type target struct{ route, destination string }

func (t target) String() string { return t.route + " → " + t.destination }

// group is the dead letters of one target for one reason.
type group struct {
	target
	reason string
}

type deadGroup struct {
	count    int
	examples []string
}

// batch is what the next notice will say.
type batch struct {
	start   time.Time // first event not yet told; zero when empty
	dead    map[group]*deadGroup
	order   []group // first seen first
	total   int
	notes   []string // breaker and store lines
	store   int      // how many of notes are about the store
	dropped int      // lines beyond maxLines
}

func (b *batch) empty() bool { return b.total == 0 && len(b.notes) == 0 && b.dropped == 0 }

// breaker is what the Notifier knows of one destination's breaker.
type breaker struct {
	since time.Time // opened
	told  time.Time // last said so
}

// Start starts the batching loop; Stop ends it.
func (n *Notifier) Start() {
	if n == nil {
		return
	}
	n.Batch, n.MaxPerHour = defaults(n.Batch, n.MaxPerHour)
	if n.Remind <= 0 {
		n.Remind = 15 * time.Minute
	}
	if n.Headroom <= 0 {
		n.Headroom = 0.10
	}
	if n.Client == nil {
		n.Client = http.DefaultClient
	}
	if n.Logger == nil {
		n.Logger = slog.New(slog.DiscardHandler)
	}
	if n.Now == nil {
		n.Now = time.Now
	}
	n.breakers = map[target]*breaker{}
	n.wake = make(chan struct{}, 1)
	n.reconf = make(chan struct{}, 1)
	n.done = make(chan struct{})
	ctx, stop := context.WithCancel(context.Background())
	n.stop = stop
	go n.run(ctx)
}

// Stop ends the loop and posts what is pending (if the rate limit allows),
// waiting up to 10s for it.
func (n *Notifier) Stop() {
	if n == nil || n.stop == nil {
		return
	}
	n.stop()
	<-n.done
	n.flush(true)
}

// DeadLettered reports a delivery stored as a dead letter; reason is why
// jethook gave up ("permanent" or "exhausted").
func (n *Notifier) DeadLettered(route, destination, eventID, reason string) {
	if n == nil || n.wake == nil {
		return
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.URL == "" {
		return
	}
	b := &n.pending
	g := group{target{route, destination}, reason}
	if b.dead == nil {
		b.dead = map[group]*deadGroup{}
	}
	dg := b.dead[g]
	if dg == nil {
		dg = &deadGroup{}
		b.dead[g] = dg
		b.order = append(b.order, g)
	}
	dg.count++
	b.total++
	if len(dg.examples) < maxExamples {
		dg.examples = append(dg.examples, eventID)
	}
	n.opened()
}

// Breaker reports a destination's breaker state after an attempt; a change
// (or an open breaker that stays open past Remind) makes a notice line.
func (n *Notifier) Breaker(route, destination string, open bool) {
	if n == nil || n.wake == nil {
		return
	}
	t := target{route, destination}
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.URL == "" {
		return
	}
	b, was := n.breakers[t]
	switch {
	case open && !was:
		now := n.Now()
		n.breakers[t] = &breaker{since: now, told: now}
		n.note(fmt.Sprintf("breaker opened: %s: attempts stopped until the backend answers again", t))
	case !open && was:
		delete(n.breakers, t)
		n.note(fmt.Sprintf("breaker closed: %s: delivering again after %s", t, round(n.Now().Sub(b.since))))
	}
}

// Removed forgets a destination a reload stopped (removed, or restarted
// with new settings and a closed breaker); if its breaker was open, a
// notice says it is no longer watched, and no reminder follows.
func (n *Notifier) Removed(route, destination string) {
	if n == nil || n.wake == nil {
		return
	}
	t := target{route, destination}
	n.mu.Lock()
	defer n.mu.Unlock()
	if _, was := n.breakers[t]; was {
		delete(n.breakers, t)
		n.note(fmt.Sprintf("breaker no longer watched: %s: the destination was removed or changed by a reload", t))
	}
}

// note adds a breaker line to the pending notice. Call with n.mu held.
func (n *Notifier) note(line string) {
	if len(n.pending.notes) >= maxLines {
		n.pending.dropped++
	} else {
		n.pending.notes = append(n.pending.notes, line)
	}
	n.opened()
}

// opened starts a batch window at the first event of a notice. Call with
// n.mu held.
func (n *Notifier) opened() {
	if !n.pending.start.IsZero() {
		return
	}
	n.pending.start = n.Now()
	select {
	case n.wake <- struct{}{}:
	default:
	}
}

func (n *Notifier) run(ctx context.Context) {
	defer close(n.done)
	tick := time.NewTicker(n.window())
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-n.wake:
			// The first event of a burst: gather the rest for one window.
			t := time.NewTimer(n.window())
			select {
			case <-t.C:
			case <-ctx.Done():
				t.Stop()
				return
			}
		case <-tick.C:
			n.remind()
		case <-n.reconf:
			tick.Reset(n.window())
		}
		n.flush(false)
	}
}

// window is the batch window.
func (n *Notifier) window() time.Duration {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.Batch
}

// remind notes the breakers that stayed open for another Remind.
func (n *Notifier) remind() {
	n.mu.Lock()
	defer n.mu.Unlock()
	now := n.Now()
	targets := make([]target, 0, len(n.breakers))
	for t := range n.breakers {
		targets = append(targets, t)
	}
	sort.Slice(targets, func(i, j int) bool { return targets[i].String() < targets[j].String() })
	for _, t := range targets {
		b := n.breakers[t]
		if now.Sub(b.told) >= n.Remind {
			b.told = now
			n.note(fmt.Sprintf("breaker still open: %s: no deliveries for %s", t, round(now.Sub(b.since))))
		}
	}
}

// flush posts the pending notice once its window has passed (or at once
// when final) and the hourly limit allows; otherwise it stays pending.
func (n *Notifier) flush(final bool) {
	n.mu.Lock()
	now := n.Now()
	b := n.pending
	if b.empty() || (!final && now.Sub(b.start) < n.Batch) {
		n.mu.Unlock()
		return
	}
	for len(n.sent) > 0 && now.Sub(n.sent[0]) >= time.Hour {
		n.sent = n.sent[1:]
	}
	if len(n.sent) >= n.MaxPerHour {
		n.held++
		n.mu.Unlock()
		if final {
			n.Logger.Warn("alert not sent: hourly limit reached", "dead_letters", b.total)
		}
		return
	}
	n.sent = append(n.sent, now)
	n.pending = batch{}
	to := n.URL
	n.mu.Unlock()
	if err := n.post(to, b.text(now)); err != nil {
		n.Logger.Warn("alert not sent", "err", err, "dead_letters", b.total)
	}
}

// text is the notice: a summary line, then one line per route ×
// destination × reason and per breaker change.
func (b *batch) text(now time.Time) string {
	var s strings.Builder
	switch {
	case b.total > 0:
		fmt.Fprintf(&s, "jethook: %d %s dead-lettered in the last %s", b.total, plural(b.total, "event", "events"), round(now.Sub(b.start)))
	case b.store == len(b.notes):
		s.WriteString("jethook: store")
	case b.store > 0:
		s.WriteString("jethook: circuit breaker and store")
	default:
		s.WriteString("jethook: circuit breaker")
	}
	lines := 0
	for _, g := range b.order {
		if lines == maxLines {
			fmt.Fprintf(&s, "\n• … and %d more destinations", len(b.order)-lines)
			break
		}
		dg := b.dead[g]
		fmt.Fprintf(&s, "\n• %s: %d %s (%s), e.g. %s", g.target, dg.count, plural(dg.count, "dead letter", "dead letters"), g.reason, strings.Join(dg.examples, ", "))
		lines++
	}
	for _, l := range b.notes {
		s.WriteString("\n• " + l)
	}
	if b.dropped > 0 {
		fmt.Fprintf(&s, "\n• … and %d more changes", b.dropped)
	}
	return s.String()
}

// notice is the JSON body: Slack's incoming-webhook "text" field, which
// other chat tools accept too.
type notice struct {
	Text string `json:"text"`
}

func (n *Notifier) post(to, text string) error {
	body, err := json.Marshal(notice{Text: text})
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), postTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, to, bytes.NewReader(body))
	if err != nil {
		return errors.New("bad alert URL")
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "jethook-alert")
	resp, err := n.Client.Do(req)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err // its message quotes the URL, a secret
		}
		return err
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("alert URL answered %s", resp.Status)
	}
	return nil
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

func round(d time.Duration) time.Duration {
	if d >= time.Minute {
		return d.Round(time.Second)
	}
	return d.Round(time.Millisecond)
}
