package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"
)

func runListen(ctx context.Context, args []string, out io.Writer) error {
	fs := flags("listen", out)
	from := fs.String("from", "", "the jethook to pull from: the URL of its public listener, such as https://hooks.example.com")
	to := fs.String("to", "", "where to deliver each webhook, such as http://localhost:3000/webhooks (the sender's query is appended)")
	dest := fs.String("destination", "", "the route's pull destination to pull from (required); its token is JETHOOK_PULL_TOKEN")
	max := fs.Int("max", 100, "most webhooks to lease at once (1 to 256)")
	timeout := fs.Duration("timeout", 10*time.Second, "how long the local URL may take to answer one webhook")
	concurrency := fs.Int("concurrency", 8, "most webhooks posted to the local URL at once; 1 posts them one by one, in the order leased")
	pos, err := parseAll(fs, args)
	if err != nil {
		return err
	}
	o := ListenOptions{From: *from, To: *to, Destination: *dest, Token: os.Getenv("JETHOOK_PULL_TOKEN"), Max: *max, Timeout: *timeout, Concurrency: *concurrency}
	if len(pos) != 1 {
		return fmt.Errorf("%w: want one ROUTE", errUsage)
	}
	o.Route = pos[0]
	if o.Token == "" {
		return fmt.Errorf("%w: set JETHOOK_PULL_TOKEN to the destination's pull token", errUsage)
	}
	if err := o.check(); err != nil {
		return fmt.Errorf("%w: %w", errUsage, err)
	}
	return Listen(ctx, o, out)
}

// ListenOptions configure Listen.
type ListenOptions struct {
	From        string // the remote jethook's public URL
	To          string // the local URL webhooks go to
	Route       string
	Destination string
	Token       string // the destination's pull token
	Max         int    // webhooks per lease, 1 to 256
	// Concurrency is how many webhooks are posted to To at once (default
	// 1: one by one, in the order leased).
	Concurrency int
	// Timeout bounds one local delivery; Wait is the long poll (default
	// 20s); Retry is the first wait after a failed pull (default 1s),
	// doubling up to 30s.
	Timeout time.Duration
	Wait    time.Duration
	Retry   time.Duration
}

func (o *ListenOptions) check() error {
	for _, u := range []struct{ flag, v string }{{"-from", o.From}, {"-to", o.To}} {
		p, err := url.Parse(u.v)
		if err != nil || (p.Scheme != "http" && p.Scheme != "https") || p.Host == "" {
			return fmt.Errorf("%s must be an http or https URL, got %q", u.flag, u.v)
		}
	}
	if o.Destination == "" {
		return errors.New("-destination is required: the name of the route's pull destination")
	}
	if o.Max < 1 || o.Max > 256 {
		return fmt.Errorf("-max must be from 1 to 256, got %d", o.Max)
	}
	return nil
}

// Listen pulls the webhooks of a remote jethook's pull destination and
// delivers each to o.To, in the order leased, with its method, headers and
// body as jethook would have sent them. It prints one line per webhook,
// acks each the local URL answered 2xx and naks the others, and keeps
// pulling until ctx ends; after a failed pull it says so and tries again.
// It returns an error only when jethook refuses the token or the
// destination.
func Listen(ctx context.Context, o ListenOptions, out io.Writer) error {
	if err := o.check(); err != nil {
		return err
	}
	if o.Wait <= 0 {
		o.Wait = 20 * time.Second
	}
	if o.Retry <= 0 {
		o.Retry = time.Second
	}
	if o.Timeout <= 0 {
		o.Timeout = 10 * time.Second
	}
	o.Concurrency = max(o.Concurrency, 1)
	base := strings.TrimSuffix(o.From, "/") + "/v1/pull/" + url.PathEscape(o.Route) + "/" + url.PathEscape(o.Destination)
	// Deliveries run in parallel; out need not be safe for that.
	out = &lockedWriter{w: out}
	l := &listener{o: o, base: base, out: out,
		remote: &http.Client{Timeout: o.Wait + 15*time.Second},
		local: &http.Client{Timeout: o.Timeout, CheckRedirect: func(*http.Request, []*http.Request) error {
			return http.ErrUseLastResponse
		}}}
	fmt.Fprintf(out, "listening: %s → %s (route %s, destination %s)\n", o.From, o.To, o.Route, o.Destination)
	retry, down := o.Retry, false
	for ctx.Err() == nil {
		hooks, err := l.pull(ctx)
		if ctx.Err() != nil {
			return nil
		}
		if fe, ok := errors.AsType[*refusedError](err); ok {
			return fe
		}
		if err != nil {
			fmt.Fprintf(out, "jethook unreachable: %v; trying again in %s\n", err, retry)
			down = true
			select {
			case <-time.After(retry):
			case <-ctx.Done():
				return nil
			}
			retry = min(2*retry, 30*time.Second)
			continue
		}
		if down {
			fmt.Fprintf(out, "connected again to %s\n", o.From)
			down, retry = false, o.Retry
		}
		l.deliver(ctx, hooks)
	}
	return nil
}

// listener is one Listen's state.
type listener struct {
	o      ListenOptions
	base   string // the destination's pull URL
	out    io.Writer
	remote *http.Client
	local  *http.Client
}

// pulled is one webhook as jethook leases it.
type pulled struct {
	Lease   string      `json:"lease"`
	EventID string      `json:"event_id"`
	Attempt int         `json:"attempt"`
	Method  string      `json:"method"`
	Query   string      `json:"query"`
	Header  http.Header `json:"header"`
	Body    []byte      `json:"body"`
}

// refusedError is an answer another pull cannot change: the token or the
// destination is wrong.
type refusedError struct {
	status int
	msg    string
}

func (e *refusedError) Error() string {
	return fmt.Sprintf("jethook refused (%d): %s", e.status, e.msg)
}

// pull long-polls for a batch.
func (l *listener) pull(ctx context.Context) ([]pulled, error) {
	u := fmt.Sprintf("%s?max=%d&wait=%s", l.base, l.o.Max, l.o.Wait)
	var answer struct{ Webhooks []pulled }
	if err := l.call(ctx, u, nil, &answer); err != nil {
		return nil, err
	}
	return answer.Webhooks, nil
}

// call posts body as JSON to u and decodes the answer into out.
func (l *listener) call(ctx context.Context, u string, body any, out any) error {
	var rd io.Reader = http.NoBody
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u, rd)
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+l.o.Token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := l.remote.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		var e struct{ Message string }
		_ = json.NewDecoder(io.LimitReader(resp.Body, 64<<10)).Decode(&e)
		if resp.StatusCode == http.StatusUnauthorized || resp.StatusCode == http.StatusNotFound {
			return &refusedError{resp.StatusCode, e.Message}
		}
		return fmt.Errorf("%s: %s", resp.Status, e.Message)
	}
	return json.NewDecoder(resp.Body).Decode(out)
}

// deliver posts the webhooks to the local URL, o.Concurrency at a time,
// then acks those it took with one request; each failure is nak'd as it
// happens. When ctx ends midway, what was delivered is still acked; the
// rest comes back when its lease runs out.
func (l *listener) deliver(ctx context.Context, hooks []pulled) {
	var (
		mu   sync.Mutex
		acks []string
		wg   sync.WaitGroup
	)
	slots := make(chan struct{}, l.o.Concurrency)
	for _, w := range hooks {
		if ctx.Err() != nil {
			break
		}
		slots <- struct{}{}
		wg.Go(func() {
			defer func() { <-slots }()
			if l.deliverOne(ctx, w) {
				mu.Lock()
				acks = append(acks, w.Lease)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if len(acks) == 0 {
		return
	}
	// Acks go out even when ctx ended: the local URL has these.
	actx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	if err := l.settle(actx, "ack", map[string]any{"leases": acks}); err != nil {
		fmt.Fprintf(l.out, "ack of %d webhooks not sent: %v; jethook delivers them again\n", len(acks), err)
	}
}

// deliverOne posts w to the local URL, prints its line, and naks it unless
// the answer was 2xx; it reports whether w is to be acked.
func (l *listener) deliverOne(ctx context.Context, w pulled) bool {
	start := time.Now()
	status, err := l.post(ctx, w)
	latency := time.Since(start).Round(100 * time.Microsecond)
	line := fmt.Sprintf("%s %s %s", time.Now().Format("15:04:05.000"), w.Method, w.EventID)
	if w.Attempt > 1 {
		line += " (attempt " + strconv.Itoa(w.Attempt) + ")"
	}
	switch {
	case err == nil && status/100 == 2:
		fmt.Fprintf(l.out, "%s → %d in %s\n", line, status, latency)
		return true
	case err != nil && ctx.Err() != nil:
		fmt.Fprintf(l.out, "%s → stopped before an answer; jethook offers it again\n", line)
		return false
	case err != nil:
		fmt.Fprintf(l.out, "%s → failed in %s: %v; nak\n", line, latency, err)
	default:
		fmt.Fprintf(l.out, "%s → %d in %s; nak\n", line, status, latency)
	}
	why := map[string]any{"leases": []string{w.Lease}, "status": status}
	if err != nil {
		why["error"] = errText(err)
	}
	if err := l.settle(ctx, "nak", why); err != nil {
		fmt.Fprintf(l.out, "nak of %s not sent: %v; jethook offers it again when its lease runs out\n", w.EventID, err)
	}
	return false
}

// settle sends an ack or a nak and reports the leases that had run out.
func (l *listener) settle(ctx context.Context, verb string, body map[string]any) error {
	var answer struct{ Gone []string }
	if err := l.call(ctx, l.base+"/"+verb, body, &answer); err != nil {
		return err
	}
	if len(answer.Gone) > 0 {
		fmt.Fprintf(l.out, "%d leases had run out before the %s; jethook offers those webhooks again\n", len(answer.Gone), verb)
	}
	return nil
}

// post delivers w to the local URL and returns its status.
func (l *listener) post(ctx context.Context, w pulled) (int, error) {
	u, err := url.Parse(l.o.To)
	if err != nil {
		return 0, err
	}
	if w.Query != "" {
		if u.RawQuery != "" {
			u.RawQuery += "&"
		}
		u.RawQuery += w.Query
	}
	method := w.Method
	if method == "" {
		method = http.MethodPost
	}
	req, err := http.NewRequestWithContext(ctx, method, u.String(), bytes.NewReader(w.Body))
	if err != nil {
		return 0, err
	}
	req.Header = w.Header
	if req.Header == nil {
		req.Header = http.Header{}
	}
	if _, ok := req.Header["User-Agent"]; !ok {
		req.Header["User-Agent"] = []string{""}
	}
	resp, err := l.local.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	return resp.StatusCode, nil
}

// errText is err without the URL a *url.Error quotes.
func errText(err error) string {
	if ue, ok := errors.AsType[*url.Error](err); ok {
		return ue.Err.Error()
	}
	return err.Error()
}

// lockedWriter serializes the lines of parallel deliveries.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}
