package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// RetentionOptions configure the retention scenario; a zero field takes
// its default.
type RetentionOptions struct {
	// Retained is N: the webhooks posted, delivered and kept before the
	// first reading, and again before the second (default 300,000).
	Retained int
	// BodySize is the size of every JSON body in bytes (default 1024).
	BodySize int
	// Clients is how many posts are in flight at once (default 64).
	Clients int
	// DestConcurrency is the destination's `concurrency` (default 64).
	DestConcurrency int
	// Settle is how long each reading waits first, after the last
	// delivery or after the restart (default 5s).
	Settle time.Duration
	// Readings is how many times each reading samples the RSS, Interval
	// apart; it reports their median (default 5, 1s apart).
	Readings int
	Interval time.Duration
	// Lookups is how many times the oldest and the newest event are each
	// looked up by id after the restart: the first is the cold one, the
	// median is over all (default 10).
	Lookups int
	// Timeout bounds each wait: for the deliveries of each N, for ready,
	// for the exit after SIGTERM (default 10m).
	Timeout time.Duration
	// Binary is the jethook executable run as `jethook serve` (default
	// this process's own executable, which is jethook when the scenario
	// runs from `jethook bench`).
	Binary string
	// Dir holds the run's temporary data directory (default the system's
	// temporary directory).
	Dir string
	// Progress, if set, gets a line at each step of the run.
	Progress io.Writer
}

func (o *RetentionOptions) applyDefaults() error {
	if o.Retained <= 0 {
		o.Retained = 300_000
	}
	if o.BodySize <= 0 {
		o.BodySize = 1024
	}
	if o.Clients <= 0 {
		o.Clients = 64
	}
	if o.DestConcurrency <= 0 {
		o.DestConcurrency = 64
	}
	if o.Settle <= 0 {
		o.Settle = 5 * time.Second
	}
	if o.Readings <= 0 {
		o.Readings = 5
	}
	if o.Interval <= 0 {
		o.Interval = time.Second
	}
	if o.Lookups <= 0 {
		o.Lookups = 10
	}
	if o.Timeout <= 0 {
		o.Timeout = 10 * time.Minute
	}
	if o.Progress == nil {
		o.Progress = io.Discard
	}
	if o.Binary == "" {
		bin, err := os.Executable()
		if err != nil {
			return fmt.Errorf("jethook binary: %w", err)
		}
		o.Binary = bin
	}
	return nil
}

// Reading is the jethook process at one point of the run.
type Reading struct {
	// Retained counts the webhooks stored and delivered so far.
	Retained int
	// RSS is the median of the RSS (VmRSS) samples; RSSMin and RSSMax are
	// their range. All are 0 where /proc is missing.
	RSS, RSSMin, RSSMax uint64
	// Peak is the most RSS the process has had since it started (VmHWM).
	Peak uint64
	// DataDir is the sum of the sizes of the data directory's files.
	DataDir int64
}

// Lookup is the same event looked up by id over and over through the
// admin API, GET /v1/events/{id}.
type Lookup struct {
	Seq int64  // the webhook's sequence number (0 is the first posted)
	ID  string // the event id ingress answered with
	// Cold is the first lookup after the restart, Median the median of
	// all of them.
	Cold, Median time.Duration
	// Found is true if every lookup answered 200 with this event; State
	// is its destination's state in the last answer (delivered).
	Found bool
	State string
}

// RetentionResult is what keeping webhooks costs jethook: memory and disk
// after N and 2N, the restart, and the lookups by id of the oldest and
// newest.
type RetentionResult struct {
	Options RetentionOptions // with defaults applied
	// Config is the policies.yaml the run used.
	Config string
	// Env is the bench's value of each variable passed to jethook that
	// decides its memory ("" if unset).
	Env map[string]string
	// Empty is read once jethook is ready on an empty data directory,
	// AtN and At2N after N and 2N webhooks were delivered, Restarted once
	// it is ready again on the same data directory.
	Empty, AtN, At2N, Restarted Reading
	// Post is how long posting each N took.
	Post [2]time.Duration
	// Accepted counts the posts ingress answered 200 as new webhooks,
	// Duplicates those it answered 200 as already stored, Failed the rest.
	Accepted, Duplicates, Failed int
	// Delivered counts the webhooks the backend received, Repeats the
	// deliveries beyond the first.
	Delivered, Repeats int
	// Stop runs from SIGTERM to the process's exit.
	Stop time.Duration
	// Ready runs from the restart to the admin listener's /readyz answering
	// 200, Listening to the public listener answering at all.
	Ready, Listening time.Duration
	// Oldest is the first webhook posted, Newest the last.
	Oldest, Newest Lookup
}

// PerWebhook is what each webhook between N and 2N added: RSS and data
// directory bytes, (reading at 2N − reading at N) ÷ N.
func (r RetentionResult) PerWebhook() (rss, disk float64) {
	n := float64(r.At2N.Retained - r.AtN.Retained)
	if n <= 0 {
		return 0, 0
	}
	return (float64(r.At2N.RSS) - float64(r.AtN.RSS)) / n, float64(r.At2N.DataDir-r.AtN.DataDir) / n
}

// retentionPath is the scenario's route on jethook's ingress.
const retentionPath = "/hooks/retention"

func retentionConfig(backendURL string, o RetentionOptions) string {
	return fmt.Sprintf(`routes:
  - name: retention
    path: %s
    provider: none
    retry: {max_age: 1h}
    destinations:
      - {name: backend, url: "%s", concurrency: %d}
`, retentionPath, backendURL, o.DestConcurrency)
}

// Retention runs jethook as a separate process (`jethook serve` from
// o.Binary) on a fresh data directory, delivering one route to a bare
// backend in this process. It posts N unique webhooks, waits until each is
// delivered, and reads the process's memory and the data directory's
// size; then N more and reads again. It then restarts jethook on the same
// data directory, times it to ready, reads again, and times lookups by id
// of the first and the last webhook posted. It uses only what an operator
// has: the binary, ingress, the admin API and /proc.
func Retention(ctx context.Context, o RetentionOptions) (RetentionResult, error) {
	if err := o.applyDefaults(); err != nil {
		return RetentionResult{}, err
	}
	r := RetentionResult{Options: o, Env: map[string]string{}}
	for _, k := range passThrough {
		r.Env[k] = os.Getenv(k)
	}
	n := o.Retained
	be := newBackend(2 * n)
	bs, err := listen(be)
	if err != nil {
		return r, err
	}
	defer bs.close()
	r.Config = retentionConfig(bs.URL+"/", o)

	dir, err := os.MkdirTemp(o.Dir, "jethook-bench-*")
	if err != nil {
		return r, err
	}
	defer os.RemoveAll(dir)
	config, data := filepath.Join(dir, "policies.yaml"), filepath.Join(dir, "data")
	if err := os.WriteFile(config, []byte(r.Config), 0o644); err != nil {
		return r, err
	}
	c, err := newChild(o.Binary, config, data, filepath.Join(dir, "jethook.log"))
	if err != nil {
		return r, err
	}
	defer c.Kill()
	if err := c.start(); err != nil {
		return r, err
	}
	if _, _, err := c.waitReady(ctx, time.Now(), o.Timeout); err != nil {
		return r, err
	}
	fmt.Fprintf(o.Progress, "jethook ready (pid %d); reading it empty\n", c.Pid())
	if r.Empty, err = read(ctx, c, data, o, 0); err != nil {
		return r, err
	}

	p := &poster{url: "http://" + c.public + retentionPath, bodySize: o.BodySize, clients: o.Clients,
		client: &http.Client{Transport: transport(o.Clients), Timeout: 30 * time.Second}, progress: o.Progress, total: int64(2 * n)}
	defer p.client.CloseIdleConnections()
	for i, reading := range []*Reading{&r.AtN, &r.At2N} {
		from, to := int64(i*n), int64((i+1)*n)
		t0 := time.Now()
		var err error
		switch i {
		case 0: // the oldest alone first, so it is the oldest
			if r.Oldest.ID, err = p.one(ctx, from); err == nil {
				err = p.many(ctx, from+1, to)
			}
			r.Oldest.Seq = from
		default: // the newest alone last, so it is the newest
			if err = p.many(ctx, from, to-1); err == nil {
				r.Newest.ID, err = p.one(ctx, to-1)
			}
			r.Newest.Seq = to - 1
		}
		r.Post[i] = time.Since(t0)
		r.Accepted, r.Duplicates, r.Failed = int(p.accepted.Load()), int(p.duplicates.Load()), int(p.failed.Load())
		if err != nil {
			return r, err
		}
		if r.Failed > 0 || r.Duplicates > 0 {
			p.mu.Lock()
			first := p.firstFail
			p.mu.Unlock()
			if first != "" {
				first = "; the first failed: " + first
			}
			return r, fmt.Errorf("of %d posts, %d failed and %d were answered as duplicates%s", to, r.Failed, r.Duplicates, first)
		}
		fmt.Fprintf(o.Progress, "posted %d (%d in all) in %s; waiting for their delivery\n", to-from, to, seconds(r.Post[i]))
		if err := waitDelivered(ctx, c, be, int(to), o); err != nil {
			return r, err
		}
		if *reading, err = read(ctx, c, data, o, int(to)); err != nil {
			return r, err
		}
	}
	r.Delivered, r.Repeats = int(be.first.Load()), int(be.repeats.Load())

	fmt.Fprintf(o.Progress, "restarting jethook on the same data directory\n")
	if r.Stop, err = c.Stop(o.Timeout); err != nil {
		return r, err
	}
	started := time.Now()
	if err := c.start(); err != nil {
		return r, err
	}
	if r.Ready, r.Listening, err = c.waitReady(ctx, started, o.Timeout); err != nil {
		return r, err
	}
	if r.Restarted, err = read(ctx, c, data, o, 2*n); err != nil {
		return r, err
	}
	for _, l := range []*Lookup{&r.Oldest, &r.Newest} {
		if err := l.run(ctx, c, o.Lookups); err != nil {
			return r, err
		}
	}
	_, err = c.Stop(o.Timeout)
	return r, err
}

// read waits o.Settle, then samples jethook's RSS o.Readings times,
// o.Interval apart, and sizes its data directory.
func read(ctx context.Context, c *child, data string, o RetentionOptions, retained int) (Reading, error) {
	rd := Reading{Retained: retained}
	if !sleep(ctx, o.Settle) {
		return rd, ctx.Err()
	}
	pid := strconv.Itoa(c.Pid())
	samples := make([]uint64, 0, o.Readings)
	for i := range o.Readings {
		if i > 0 && !sleep(ctx, o.Interval) {
			return rd, ctx.Err()
		}
		rss, peak := procMemory(pid)
		samples = append(samples, rss)
		rd.Peak = peak
	}
	slices.Sort(samples)
	rd.RSS, rd.RSSMin, rd.RSSMax = samples[(len(samples)-1)/2], samples[0], samples[len(samples)-1]
	var err error
	rd.DataDir, err = dirSize(data)
	return rd, err
}

// waitDelivered waits until the backend has received want webhooks and
// jethook has settled every one: its destination has nothing pending or
// in flight.
func waitDelivered(ctx context.Context, c *child, be *backend, want int, o RetentionOptions) error {
	err := waitFor(ctx, o.Timeout, o.Progress, func() (bool, string, error) {
		got := int(be.first.Load())
		note := fmt.Sprintf("delivered %d of %d", got, want)
		if got < want {
			return false, note, nil
		}
		settled, err := c.settled(ctx)
		return settled, note + "; waiting for jethook to settle them", err
	})
	if err != nil {
		return fmt.Errorf("delivery: %w; jethook's log tail:\n%s", err, c.LogTail(20))
	}
	return nil
}

// run looks l.ID up n times and records the first time, the median, and
// whether every answer was the event.
func (l *Lookup) run(ctx context.Context, c *child, n int) error {
	u := "http://" + c.admin + "/v1/events/" + url.PathEscape(l.ID)
	times := make([]time.Duration, 0, n)
	l.Found = true
	for range n {
		t0 := time.Now()
		status, b, err := c.fetch(ctx, u, true)
		times = append(times, time.Since(t0))
		if err != nil {
			return fmt.Errorf("look up event %s: %w", l.ID, err)
		}
		var e struct {
			EventID      string `json:"event_id"`
			Destinations []struct {
				State string `json:"state"`
			} `json:"destinations"`
		}
		if status != http.StatusOK || json.Unmarshal(b, &e) != nil || e.EventID != l.ID {
			l.Found = false
			continue
		}
		l.State = ""
		if len(e.Destinations) > 0 {
			l.State = e.Destinations[0].State
		}
	}
	l.Cold = times[0]
	slices.Sort(times)
	l.Median = times[(len(times)-1)/2]
	return nil
}

// poster posts the scenario's webhooks to ingress, unique by sequence
// number, and counts the answers.
type poster struct {
	url      string
	bodySize int
	clients  int
	client   *http.Client
	progress io.Writer
	total    int64 // webhooks in the whole run, for progress

	accepted, duplicates, failed atomic.Int64

	mu        sync.Mutex
	firstFail string // what the first failed post got, for the error
}

// fail counts a failed post and remembers what the first one got.
func (p *poster) fail(seq int64, got string) {
	p.failed.Add(1)
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.firstFail == "" {
		p.firstFail = fmt.Sprintf("webhook %d at %s: %s", seq, time.Now().UTC().Format("15:04:05.000"), got)
	}
}

// one posts webhook seq and returns the event id ingress stored it under.
func (p *poster) one(ctx context.Context, seq int64) (string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, p.url, bytes.NewReader(body(seq, p.bodySize)))
	if err != nil {
		return "", err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set(seqHeader, strconv.FormatInt(seq, 10))
	resp, err := p.client.Do(req)
	if err != nil {
		p.fail(seq, err.Error())
		return "", nil
	}
	b, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	var a struct {
		ID        string `json:"id"`
		Duplicate bool   `json:"duplicate"`
	}
	switch {
	case err != nil || resp.StatusCode != http.StatusOK || json.Unmarshal(b, &a) != nil || a.ID == "":
		p.fail(seq, fmt.Sprintf("%d %.200s (read: %v)", resp.StatusCode, b, err))
	case a.Duplicate:
		p.duplicates.Add(1)
	default:
		p.accepted.Add(1)
	}
	return a.ID, nil
}

// many posts webhooks from to to-1 from p.clients goroutines, each waiting
// for its answer before its next post.
func (p *poster) many(ctx context.Context, from, to int64) error {
	var (
		next atomic.Int64
		wg   sync.WaitGroup
	)
	next.Store(from)
	step := max(p.total/10, 1)
	for range p.clients {
		wg.Go(func() {
			for ctx.Err() == nil {
				seq := next.Add(1) - 1
				if seq >= to {
					return
				}
				_, _ = p.one(ctx, seq)
				if (seq+1)%step == 0 {
					fmt.Fprintf(p.progress, "posted %d of %d\n", seq+1, p.total)
				}
			}
		})
	}
	wg.Wait()
	return ctx.Err()
}

// Report prints the run: the readings as a table, what each webhook
// costs, the restart, the lookups, and a footnote on how each figure was
// taken.
func (r RetentionResult) Report(w io.Writer) {
	o := r.Options
	fmt.Fprintf(w, "\nRetention: jethook serve as a separate process, one route (provider none) to a bare net/http backend;\n")
	fmt.Fprintf(w, "%d + %d webhooks of %d bytes posted by %d clients, each delivered (destination concurrency %d) and kept\n",
		o.Retained, o.Retained, o.BodySize, o.Clients, o.DestConcurrency)
	fmt.Fprintf(w, "%-16s %9s %9s %17s %9s %10s\n", "POINT", "RETAINED", "RSS", "RSS RANGE", "PEAK RSS", "DATA DIR")
	for _, row := range []struct {
		name string
		rd   Reading
	}{{"empty", r.Empty}, {"N", r.AtN}, {"2N", r.At2N}, {"restarted", r.Restarted}} {
		fmt.Fprintf(w, "%-16s %9d %9s %17s %9s %10s\n", row.name, row.rd.Retained, mib(row.rd.RSS),
			fmt.Sprintf("%.0f–%s", float64(row.rd.RSSMin)/(1<<20), mib(row.rd.RSSMax)), mib(row.rd.Peak), mib(uint64(row.rd.DataDir)))
	}
	rss, disk := r.PerWebhook()
	if math.Round(rss) == 0 { // a slope just under zero prints 0, not -0
		rss = 0
	}
	fmt.Fprintf(w, "%-16s %.0f bytes of RSS, %.0f bytes of data dir per retained webhook, (2N − N) ÷ N\n", "per webhook", rss, disk)
	fmt.Fprintf(w, "%-16s N in %s (%.0f/s), 2N in %s (%.0f/s); accepted %d, duplicates %d, failed %d; delivered %d, %d repeated\n",
		"posts", seconds(r.Post[0]), rate(o.Retained, r.Post[0]), seconds(r.Post[1]), rate(o.Retained, r.Post[1]),
		r.Accepted, r.Duplicates, r.Failed, r.Delivered, r.Repeats)
	fmt.Fprintf(w, "%-16s SIGTERM → exit %s; start → /readyz 200 %s, → ingress answers %s\n", "restart",
		seconds(r.Stop), seconds(r.Ready), seconds(r.Listening))
	fmt.Fprintf(w, "%-16s %9s %9s %10s  %s\n", "LOOKUP BY ID", "COLD", "MEDIAN", "STATE", "GET /v1/events/{id}")
	for _, row := range []struct {
		name string
		l    Lookup
	}{{"oldest", r.Oldest}, {"newest", r.Newest}} {
		state := row.l.State
		if !row.l.Found {
			state = "NOT FOUND"
		}
		fmt.Fprintf(w, "%-16s %9s %9s %10s  seq %d, %s\n", row.name, millis(row.l.Cold), millis(row.l.Median), state, row.l.Seq, row.l.ID)
	}
	fmt.Fprintf(w, "(RSS: jethook's VmRSS, median and range of %d samples %s apart, the first %s after the last delivery or the restart's ready;\n",
		o.Readings, o.Interval, o.Settle)
	fmt.Fprintf(w, " peak: VmHWM since that process started; data dir: the sum of its files' sizes;\n")
	fmt.Fprintf(w, " cold: the first lookup of that event after the restart (its data may be in the OS page cache), median of %d, oldest first;\n", o.Lookups)
	fmt.Fprintf(w, " %d CPUs, %s of memory; jethook %s with %s)\n", runtime.NumCPU(), memTotal(), o.Binary, r.envLine())
}

// envLine is "GOGC unset, GOMEMLIMIT=2GiB, …" for the variables in Env.
func (r RetentionResult) envLine() string {
	var b bytes.Buffer
	for i, k := range passThrough {
		if i > 0 {
			b.WriteString(", ")
		}
		if v := r.Env[k]; v != "" {
			b.WriteString(k + "=" + v)
		} else {
			b.WriteString(k + " unset")
		}
	}
	return b.String()
}

// memTotal is the machine's memory from /proc/meminfo, "?" without it.
func memTotal() string {
	b, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		return "?"
	}
	var kb uint64
	if _, err := fmt.Sscanf(string(b), "MemTotal: %d kB", &kb); err != nil {
		return "?"
	}
	return fmt.Sprintf("%.1fGiB", float64(kb)/(1<<20))
}

func rate(n int, d time.Duration) float64 {
	if d <= 0 {
		return 0
	}
	return float64(n) / d.Seconds()
}
