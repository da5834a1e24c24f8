package cli

import (
	"context"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"runtime"
	"runtime/debug"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/KimMachineGun/automemlimit/memlimit"

	"github.com/jethook/jethook/bench"
)

// benchShared is the flags the scenarios share.
type benchShared struct {
	duration                       time.Duration
	count, clients, destConc, size int
	dir                            string
	drainProfile                   io.Writer
}

func (c *benchShared) flags(fs *flag.FlagSet) {
	fs.DurationVar(&c.duration, "duration", 5*time.Second, "length of each ingest case")
	fs.IntVar(&c.count, "count", 20_000, "webhooks sent end to end")
	fs.IntVar(&c.clients, "clients", 64, "client concurrency of the end-to-end runs (through jethook and direct) and of the retention posts")
	fs.IntVar(&c.destConc, "dest-concurrency", 64, "jethook's concurrency toward the backend (end to end and retention)")
	fs.IntVar(&c.size, "body", 1024, "JSON body size in bytes")
	fs.StringVar(&c.dir, "dir", "", "where the stores' temporary data go (default the system temporary directory)")
}

func (c *benchShared) check() error {
	for _, f := range []struct {
		name string
		v    int
	}{{"count", c.count}, {"clients", c.clients}, {"dest-concurrency", c.destConc}, {"body", c.size}} {
		if f.v <= 0 {
			return fmt.Errorf("%w: -%s must be positive", errUsage, f.name)
		}
	}
	if c.duration <= 0 {
		return fmt.Errorf("%w: -duration must be positive", errUsage)
	}
	return nil
}

// options are the in-process scenarios' bench.Options.
func (c *benchShared) options() bench.Options {
	return bench.Options{Duration: c.duration, BodySize: c.size, Events: c.count, Clients: c.clients,
		DestConcurrency: c.destConc, Dir: c.dir, DrainProfile: c.drainProfile}
}

// benchScenario is one scenario of jethook bench: it registers its own
// flags (each help text names the scenario), checks them before anything
// runs, and runs.
type benchScenario interface {
	flags(fs *flag.FlagSet)
	check() error
	run(ctx context.Context, out io.Writer, c benchShared) error
}

// benchScenarios are the scenarios in the order a run takes them.
func benchScenarios() []struct {
	name string
	benchScenario
} {
	return []struct {
		name string
		benchScenario
	}{
		{"ingest", &ingestBench{}}, {"e2e", benchFunc(benchEndToEnd)}, {"transform", benchFunc(benchTransform)},
		{"recovery", &recoveryBench{}}, {"protection", &protectionBench{}}, {"backlog", &backlogBench{}},
		{"ordered", &orderedBench{}}, {"retention", &retentionBench{}}, {"search", &searchBench{}},
	}
}

func runBench(ctx context.Context, args []string, out io.Writer) error {
	fs := flags("bench", out)
	var shared benchShared
	shared.flags(fs)
	scenario := fs.String("scenario", "ingest,e2e", "scenarios to run, comma-separated: ingest, e2e, transform, recovery, protection, backlog, retention, search, ordered")
	all := benchScenarios()
	for _, sc := range all {
		sc.flags(fs)
	}
	serveBare := fs.String("serve-bare", "", "only serve the bare baseline handler on this loopback address until interrupted, for an outside load generator (bench/wrk.sh)")
	cpuProfile := fs.String("cpuprofile", "", "write a CPU profile of the whole run (baselines included) to this file, for go tool pprof")
	drainProfile := fs.String("drainprofile", "", "e2e or transform: write a CPU profile of the drain alone (resume to last delivery; transform: the drain through the transform) to this file, for go tool pprof")
	if err := parse(fs, args); err != nil {
		return err
	}
	if *serveBare != "" {
		return bench.ServeBare(ctx, *serveBare, func(a net.Addr) {
			fmt.Fprintf(out, "bare net/http handler on http://%s\n", a)
		})
	}
	want, err := scenarios(*scenario)
	if err != nil {
		return err
	}
	if err := shared.check(); err != nil {
		return err
	}
	for _, sc := range all {
		if !want[sc.name] {
			continue
		}
		if err := sc.check(); err != nil {
			return err
		}
	}

	if *cpuProfile != "" && *drainProfile != "" {
		return fmt.Errorf("%w: -cpuprofile and -drainprofile cannot be taken at once", errUsage)
	}
	if *drainProfile != "" && want["e2e"] && want["transform"] {
		return fmt.Errorf("%w: -drainprofile profiles one drain: run e2e or transform, not both", errUsage)
	}
	if *drainProfile != "" {
		f, err := os.Create(*drainProfile)
		if err != nil {
			return fmt.Errorf("drainprofile: %w", err)
		}
		defer f.Close()
		shared.drainProfile = f
	}
	if *cpuProfile != "" {
		stop, err := startCPUProfile(*cpuProfile)
		if err != nil {
			return err
		}
		defer stop()
	}
	// The in-process scenarios run jethook's parts under the memory limit
	// serve would set; retention's child process sets its own.
	limit, from, err := memoryLimit(os.Getenv("JETHOOK_MEMORY_LIMIT"), memlimit.FromCgroup)
	if err != nil {
		return err
	}
	debug.SetMemoryLimit(limit)
	fmt.Fprintf(out, "jethook bench: %d CPUs, %s %s/%s, %d-byte JSON bodies, loopback, memory limit %d MiB (%s)%s\n",
		runtime.NumCPU(), runtime.Version(), runtime.GOOS, runtime.GOARCH, shared.size, limit>>20, from, loadAverage())
	for _, sc := range all {
		if !want[sc.name] {
			continue
		}
		if err := sc.run(ctx, out, shared); err != nil {
			return err
		}
	}
	if la := loadAverage(); la != "" {
		fmt.Fprintf(out, "\ndone%s\n", la)
	}
	return nil
}

// benchFunc is a scenario with no flags of its own.
type benchFunc func(ctx context.Context, out io.Writer, o bench.Options) error

func (benchFunc) flags(*flag.FlagSet) {}
func (benchFunc) check() error        { return nil }
func (f benchFunc) run(ctx context.Context, out io.Writer, c benchShared) error {
	return f(ctx, out, c.options())
}

// ingestBench measures the ingress alone at each client concurrency.
type ingestBench struct {
	levels string
	conc   []int
}

func (b *ingestBench) flags(fs *flag.FlagSet) {
	fs.StringVar(&b.levels, "concurrency", "16,64", "client concurrencies of the ingest cases, comma-separated")
}

func (b *ingestBench) check() (err error) {
	b.conc, err = concurrencies(b.levels)
	return err
}

func (b *ingestBench) run(ctx context.Context, out io.Writer, c benchShared) error {
	return benchIngest(ctx, out, c.options(), c.duration, b.conc)
}

// recoveryBench replays an outage and the backend's recovery.
type recoveryBench struct{ o bench.RecoveryOptions }

func (b *recoveryBench) flags(fs *flag.FlagSet) {
	fs.IntVar(&b.o.Arrival, "arrival", 100, "recovery: webhooks per second posted throughout")
	fs.DurationVar(&b.o.Outage, "outage", 20*time.Second, "recovery: how long the backend answers 503")
	fs.IntVar(&b.o.Capacity, "capacity", 200, "recovery: requests per second the backend answers 200 once up")
	fs.IntVar(&b.o.Rate, "rate", 180, "recovery: the destination's rate per second")
	fs.IntVar(&b.o.BreakerFailures, "breaker-failures", 5, "recovery: the destination's breaker failures (0: off)")
	fs.DurationVar(&b.o.BreakerCooldown, "breaker-cooldown", 2*time.Second, "recovery: the destination's breaker cooldown")
	fs.DurationVar(&b.o.SlowStart, "slow-start", 2*time.Second, "recovery: the destination's slow_start (0: off)")
}

func (b *recoveryBench) check() error { return nil }

func (b *recoveryBench) run(ctx context.Context, out io.Writer, c benchShared) error {
	b.o.BodySize, b.o.Dir = c.size, c.dir
	r, err := bench.Recovery(ctx, b.o)
	if err != nil {
		return fmt.Errorf("recovery: %w", err)
	}
	r.Report(out)
	return nil
}

// protectionBench runs the rows of the protection table.
type protectionBench struct {
	o             bench.ProtectionOptions
	rows, logFile string
}

func (b *protectionBench) flags(fs *flag.FlagSet) {
	fs.StringVar(&b.rows, "rows", strings.Join(bench.ProtectionRows(), ","), "protection: rows to run, comma-separated")
	fs.DurationVar(&b.o.LongOutage, "long-outage", 15*time.Minute, "protection: how long the long-outage row's backend refuses connections (100 webhooks a minute arrive meanwhile)")
	fs.Float64Var(&b.o.Size, "size", 1, "protection: share of the other rows' webhooks and durations (1: the documented table)")
	fs.StringVar(&b.logFile, "log", "", "protection: append jethook's own log of every row (each failed attempt, the breaker) to this file")
}

func (b *protectionBench) check() (err error) {
	if b.o.Rows, err = protectionRows(b.rows); err != nil {
		return err
	}
	if b.o.LongOutage <= 0 || b.o.Size <= 0 {
		return fmt.Errorf("%w: -long-outage and -size must be positive", errUsage)
	}
	return nil
}

func (b *protectionBench) run(ctx context.Context, out io.Writer, c benchShared) error {
	b.o.BodySize, b.o.Dir, b.o.Progress = c.size, c.dir, out
	if b.logFile != "" {
		f, err := os.OpenFile(b.logFile, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
		if err != nil {
			return err
		}
		defer f.Close()
		b.o.Log = f
	}
	r, err := bench.Protection(ctx, b.o)
	if err != nil {
		return fmt.Errorf("protection: %w", err)
	}
	r.Report(out)
	return nil
}

// backlogBench parks webhooks in backoff and times new ones beside them.
type backlogBench struct{ o bench.BacklogOptions }

func (b *backlogBench) flags(fs *flag.FlagSet) {
	fs.IntVar(&b.o.Messages, "messages", 100_000, "backlog: webhooks parked in backoff")
	fs.DurationVar(&b.o.Delay, "backlog-delay", 2*time.Minute, "backlog: how long each parked webhook waits before its retry")
	fs.IntVar(&b.o.MaxAckPending, "max-ack-pending", 0, "backlog: consumers' MaxAckPending (default: sized for -messages)")
	fs.IntVar(&b.o.Probes, "probes", 20, "backlog: new webhooks timed to the healthy destination")
}

func (b *backlogBench) check() error { return nil }

func (b *backlogBench) run(ctx context.Context, out io.Writer, c benchShared) error {
	b.o.BodySize, b.o.Dir, b.o.Progress = c.size, c.dir, out
	r, err := bench.Backlog(ctx, b.o)
	if err != nil {
		return fmt.Errorf("backlog: %w", err)
	}
	r.Report(out)
	return nil
}

// orderedBench runs the cases of ordered delivery.
type orderedBench struct {
	o     bench.OrderedOptions
	cases string
}

// orderedCases are the cases the ordered scenario knows.
var orderedCases = []string{"interleaved", "throughput", "blocked", "memory"}

func (b *orderedBench) flags(fs *flag.FlagSet) {
	fs.IntVar(&b.o.Keys, "keys", 10_000, "ordered: keys of the interleaved and throughput cases")
	fs.IntVar(&b.o.PerKey, "per-key", 10, "ordered: events per key of the interleaved case")
	fs.Float64Var(&b.o.Fail, "fail", 0.2, "ordered: share of attempts answered 500 at random in the interleaved case")
	fs.IntVar(&b.o.Healthy, "healthy", 1000, "ordered: healthy keys beside the blocked one")
	fs.DurationVar(&b.o.Duration, "blocked-for", 20*time.Second, "ordered: how long the blocked case posts, at 200 events a second")
	fs.DurationVar(&b.o.MaxBlocked, "max-blocked", 5*time.Second, "ordered: the destination's max_blocked in the blocked case")
	fs.StringVar(&b.cases, "ordered-cases", "interleaved,throughput,blocked", "ordered: cases to run, comma-separated: interleaved, throughput, blocked, memory")
	fs.IntVar(&b.o.MemoryKeys, "memory-keys", 1_000_000, "ordered: distinct keys of the memory case, one event each")
	fs.IntVar(&b.o.MemoryBlocked, "memory-blocked", 100_000, "ordered: keys of the memory case behind a head that always fails, with one more event waiting")
}

func (b *orderedBench) check() error {
	for c := range strings.SplitSeq(b.cases, ",") {
		if !slices.Contains(orderedCases, c) {
			return fmt.Errorf("%w: -ordered-cases %q: want interleaved, throughput, blocked or memory, comma-separated", errUsage, c)
		}
		b.o.Cases = append(b.o.Cases, c)
	}
	return nil
}

func (b *orderedBench) run(ctx context.Context, out io.Writer, c benchShared) error {
	b.o.Concurrency, b.o.Clients, b.o.Dir, b.o.Progress = c.destConc, c.clients, c.dir, out
	r, err := bench.Ordered(ctx, b.o)
	if err != nil {
		return fmt.Errorf("ordered: %w", err)
	}
	r.Report(out)
	return nil
}

// retentionBench measures a serving jethook's memory with webhooks kept.
type retentionBench struct{ o bench.RetentionOptions }

func (b *retentionBench) flags(fs *flag.FlagSet) {
	fs.IntVar(&b.o.Retained, "retained", 300_000, "retention: N, webhooks delivered and kept before the first reading and again before the second")
	fs.DurationVar(&b.o.Settle, "settle", 5*time.Second, "retention: wait after the last delivery, or after ready, before reading memory")
	fs.StringVar(&b.o.Binary, "jethook", "", "retention: the jethook binary to run as `jethook serve` (default this one)")
}

func (b *retentionBench) check() error {
	if b.o.Retained <= 0 {
		return fmt.Errorf("%w: -retained must be positive", errUsage)
	}
	if b.o.Settle <= 0 {
		return fmt.Errorf("%w: -settle must be positive", errUsage)
	}
	return nil
}

func (b *retentionBench) run(ctx context.Context, out io.Writer, c benchShared) error {
	b.o.BodySize, b.o.Clients, b.o.DestConcurrency, b.o.Dir, b.o.Progress = c.size, c.clients, c.destConc, c.dir, out
	r, err := bench.Retention(ctx, b.o)
	if err != nil {
		return fmt.Errorf("retention: %w", err)
	}
	r.Report(out)
	return nil
}

// searchBench times searches over retained webhooks and the ingest
// latency beside them.
type searchBench struct{ o bench.SearchOptions }

func (b *searchBench) flags(fs *flag.FlagSet) {
	fs.IntVar(&b.o.Retained, "searched", 1_000_000, "search: webhooks retained when the searches run")
	fs.IntVar(&b.o.Load, "search-load", 4, "search: clients posting webhooks one after the other while ingest latency is measured")
	fs.BoolVar(&b.o.Apart, "search-apart", false, "search: run jethook as a separate process (jethook serve from this binary), searched through its admin API")
	fs.Float64Var(&b.o.Rate, "search-rate", 0, "search: instead of -search-load, post webhooks at this constant rate a second while ingest latency is measured")
}

func (b *searchBench) check() error {
	if b.o.Retained <= 0 {
		return fmt.Errorf("%w: -searched must be positive", errUsage)
	}
	if b.o.Load <= 0 {
		return fmt.Errorf("%w: -search-load must be positive", errUsage)
	}
	if b.o.Rate < 0 {
		return fmt.Errorf("%w: -search-rate must not be negative", errUsage)
	}
	return nil
}

func (b *searchBench) run(ctx context.Context, out io.Writer, c benchShared) error {
	b.o.BodySize, b.o.Clients, b.o.Dir, b.o.Progress = c.size, c.clients, c.dir, out
	r, err := bench.Search(ctx, b.o)
	if err != nil {
		return fmt.Errorf("search: %w", err)
	}
	benchSearchReport(out, r)
	return nil
}

func benchIngest(ctx context.Context, out io.Writer, o bench.Options, duration time.Duration, conc []int) error {
	fmt.Fprintf(out, "\nIngest: %s per case; jethook answers 200 once the store acked (delivery paused)\n", duration)
	fmt.Fprintf(out, "%-20s %7s %9s %9s %9s %7s %8s %6s\n", "CASE", "CLIENTS", "REQ/S", "P50", "P99", "÷ BARE", "CPU/REQ", "FAILED")
	for _, c := range conc {
		r, err := bench.Ingest(ctx, o, c)
		if err != nil {
			return err
		}
		for _, row := range []struct {
			name string
			l    bench.Measurement
		}{{"bare net/http", r.Bare}, {"jethook", r.Jethook}, {"jethook sync_always", r.SyncAlways}} {
			fmt.Fprintf(out, "%-20s %7d %9.0f %9s %9s %7.2f %8s %6d\n", row.name, c, row.l.PerSecond(),
				millis(row.l.P50), millis(row.l.P99), ratio(row.l.PerSecond(), r.Bare.PerSecond()),
				micros(row.l.CPUPerRequest()), row.l.Failed)
		}
	}
	return nil
}

func benchEndToEnd(ctx context.Context, out io.Writer, o bench.Options) error {
	fmt.Fprintf(out, "\nEnd to end: %d webhooks, %d clients, destination concurrency %d\n",
		o.Events, o.Clients, o.DestConcurrency)
	r, err := bench.EndToEnd(ctx, o)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "%-26s %9s %9s %9s %9s\n", "PATH", "EVENTS/S", "ELAPSED", "÷ DIRECT", "CPU/EVENT")
	fmt.Fprintf(out, "%-26s %9.0f %9s %9.2f %9s\n", "direct to backend", r.Direct.PerSecond(),
		seconds(r.Direct.Elapsed), 1.0, micros(r.Direct.CPUPerRequest()))
	for _, row := range []struct {
		name string
		d    bench.Delivery
	}{{"through jethook, sustained", r.Sustained}, {"through jethook, drain", r.Drain}} {
		fmt.Fprintf(out, "%-26s %9.0f %9s %9.2f %9s\n", row.name, row.d.PerSecond(), seconds(row.d.Elapsed),
			ratio(row.d.PerSecond(), r.Direct.PerSecond()), micros(row.d.CPUPerEvent()))
	}
	fmt.Fprintf(out, "(sustained: first post to last delivery, posts and deliveries at once; ingress took the posts at %.0f req/s, p99 %s.\n",
		r.Sustained.Ingest.PerSecond(), millis(r.Sustained.Ingest.P99))
	fmt.Fprintf(out, " drain: resume to last delivery of %d webhooks stored while the destination was paused.\n",
		r.Drain.Ingest.Requests)
	fmt.Fprintf(out, " repeated deliveries: %d sustained, %d drain)\n", r.Sustained.Repeats, r.Drain.Repeats)
	return nil
}

// startCPUProfile profiles the process into path until stop is called.
func benchTransform(ctx context.Context, out io.Writer, o bench.Options) error {
	fmt.Fprintf(out, "\nTransform: %d webhooks end to end, %d clients, destination concurrency %d, without and with a transform that renames the body's fields and adds two headers\n",
		o.Events, o.Clients, o.DestConcurrency)
	r, err := bench.Transform(ctx, o)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "%-30s %9s %9s %9s %9s\n", "PATH", "EVENTS/S", "ELAPSED", "÷ PLAIN", "CPU/EVENT")
	for _, row := range []struct {
		name     string
		d, plain bench.Delivery
	}{
		{"sustained, no transform", r.Plain, r.Plain}, {"sustained, with the transform", r.Transformed, r.Plain},
		{"drain, no transform", r.PlainDrain, r.PlainDrain}, {"drain, with the transform", r.TransformDrain, r.PlainDrain},
	} {
		fmt.Fprintf(out, "%-30s %9.0f %9s %9.2f %9s\n", row.name, row.d.PerSecond(), seconds(row.d.Elapsed),
			ratio(row.d.PerSecond(), row.plain.PerSecond()), micros(row.d.CPUPerEvent()))
	}
	return nil
}

func startCPUProfile(path string) (stop func(), err error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, fmt.Errorf("cpuprofile: %w", err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, fmt.Errorf("cpuprofile: %w", err)
	}
	return func() {
		pprof.StopCPUProfile()
		_ = f.Close()
	}, nil
}

// scenarios parses "ingest,e2e" into the set of scenarios to run.
func scenarios(s string) (map[string]bool, error) {
	want := map[string]bool{}
	for f := range strings.SplitSeq(s, ",") {
		switch f = strings.TrimSpace(f); f {
		case "ingest", "e2e", "transform", "recovery", "protection", "backlog", "retention", "search", "ordered":
			want[f] = true
		default:
			return nil, fmt.Errorf("%w: -scenario %q: want ingest, e2e, transform, recovery, protection, backlog, retention, search or ordered, comma-separated", errUsage, s)
		}
	}
	return want, nil
}

// protectionRows parses "dead,overload" into rows of the protection
// scenario, refusing a name it does not have.
func protectionRows(s string) ([]string, error) {
	known := bench.ProtectionRows()
	var out []string
	for f := range strings.SplitSeq(s, ",") {
		f = strings.TrimSpace(f)
		if !slices.Contains(known, f) {
			return nil, fmt.Errorf("%w: -rows %q: want some of %s, comma-separated", errUsage, s, strings.Join(known, ", "))
		}
		out = append(out, f)
	}
	return out, nil
}

// concurrencies parses "16,64".
func concurrencies(s string) ([]int, error) {
	var out []int
	for f := range strings.SplitSeq(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n <= 0 {
			return nil, fmt.Errorf("%w: -concurrency %q: want positive integers separated by commas", errUsage, s)
		}
		out = append(out, n)
	}
	return out, nil
}

// loadAverage is ", load average 0.52 0.61 0.70" where /proc/loadavg
// exists: the bench shares the machine, and its numbers mean little
// without it.
func loadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return ""
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return ""
	}
	return ", load average " + strings.Join(f[:3], " ")
}

func ratio(a, b float64) float64 {
	if b == 0 {
		return 0
	}
	return a / b
}

func millis(d time.Duration) string {
	return fmt.Sprintf("%.2fms", float64(d)/float64(time.Millisecond))
}

// micros prints a CPU cost; zero means the platform does not report one.
func micros(d time.Duration) string {
	if d == 0 {
		return "-"
	}
	return fmt.Sprintf("%.0fµs", float64(d)/float64(time.Microsecond))
}

func seconds(d time.Duration) string { return fmt.Sprintf("%.2fs", d.Seconds()) }

// benchSearchReport prints the search scenario: each search's time and
// rate, and ingest's p99 and rate beside it against its idle ones.
func benchSearchReport(out io.Writer, r bench.SearchResult) {
	load := fmt.Sprintf("from %d clients", r.Idle.Concurrency)
	if r.Rate > 0 {
		load = fmt.Sprintf("posted at a constant %g/s", r.Rate)
	}
	if r.Apart {
		load += ", to jethook in a process of its own"
	}
	fmt.Fprintf(out, "\nSearch: %d webhooks retained (stored in %s, %.0f/s); ingest beside each search %s\n",
		r.Retained, r.Fill.Elapsed.Round(time.Second), r.Fill.PerSecond(), load)
	const row = "%-44s %9s %9s %10s %10s %10s %9s %5s %9s %7s %9s %7s\n"
	fmt.Fprintf(out, row, "SEARCH", "FIRST", "PAGE", "SCANNED", "SKIPPED", "SCANNED/S", "MIB/S", "RUNS", "P99", "÷ IDLE", "INGEST/S", "÷ IDLE")
	fmt.Fprintf(out, row, "(idle)", "-", "-", "-", "-", "-", "-", "-", brief(r.Idle.P99), "1.00", fmt.Sprintf("%.0f", r.Idle.PerSecond()), "1.00")
	ratio := func(a, b float64) float64 {
		if b <= 0 {
			return 0
		}
		return a / b
	}
	for _, s := range []bench.SearchRun{r.Selective, r.Full, r.Unindexed} {
		first := "-"
		if s.Found > 0 {
			first = brief(s.First)
		}
		secs := s.Elapsed.Seconds()
		fmt.Fprintf(out, "%-44s %9s %9s %10d %10d %10.0f %9.1f %5d %9s %7.2f %9.0f %7.2f\n", clip(s.Window+": "+s.Search.Expr, 44), first,
			brief(s.Elapsed), s.End.Scanned, s.End.Skipped, float64(s.End.Scanned)/secs, float64(s.End.Bytes)/secs/(1<<20), s.Runs,
			brief(s.Ingest.P99), ratio(float64(s.Ingest.P99), float64(r.Idle.P99)), s.Ingest.PerSecond(), ratio(s.Ingest.PerSecond(), r.Idle.PerSecond()))
	}
}
