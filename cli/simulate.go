package cli

import (
	"context"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/jethook/jethook/forward"
	"github.com/jethook/jethook/policy"
)

func runSimulate(_ context.Context, args []string, out io.Writer) error {
	fs := flags("simulate", out)
	file := fs.String("config", configDefault(), "policies file")
	route := fs.String("route", "", "route whose policy to use (default: the first)")
	dest := fs.String("destination", "", "destination whose limits to use (default: the route's first)")
	arrival := fs.String("arrival", "100/m", "steady arrival rate of events (N/s, N/m or N/h)")
	events := fs.Int("events", 0, "events arriving steadily (default: enough to cover the outage and as long again)")
	burst := fs.Int("burst", 0, "events that all arrive at time 0, on top of the steady ones")
	outageStart := fs.Duration("outage-start", time.Minute, "when the backend goes down")
	outage := fs.Duration("outage", 15*time.Minute, "how long the backend stays down")
	capacity := fs.String("capacity", "10/s", "requests per second the backend can answer (N/s); more get 503; 0 for unlimited")
	latency := fs.Duration("latency", 50*time.Millisecond, "duration of one request")
	poison := fs.Float64("poison", 0, "share of events that always get 500 (0 to 1)")
	flaky := fs.Int("flaky", 0, "each event gets 503 on its first 0…N attempts, spread evenly")
	failFirst := fs.Int("fail-first", 0, "every event gets 503 on its first N attempts")
	failShare := fs.Float64("fail-share", 0, "each attempt gets 503 with this probability (0 to 1)")
	outageAnswer := fs.String("outage-answer", "refused", "what the backend answers while down: refused (connections refused) or an HTTP status such as 503")
	all := fs.Bool("all", false, "compare every backoff × jitter combination, with the route's other settings")
	limits := fs.Bool("limits", true, "apply the destination's concurrency, rate, breaker and slow start")
	destRate := fs.String("dest-rate", "", "override the destination's rate (N/s, N/m or N/h)")
	svg := fs.String("svg", "", "write a chart of requests per second over time to this file")
	backoff := fs.String("backoff", "", "override the backoff (fixed, linear, exponential)")
	jitter := fs.String("jitter", "", "override the jitter (none, full, equal, decorrelated)")
	if err := parse(fs, args); err != nil {
		return err
	}
	cfg, err := policy.Load(*file)
	if err != nil {
		return err
	}
	r, d, err := pickDestination(cfg, *route, *dest)
	if err != nil {
		return err
	}
	perSec, err := perSecond(*arrival)
	if err != nil {
		return fmt.Errorf("%w: -arrival: %w", errUsage, err)
	}
	capPerSec, err := perSecond(*capacity)
	if err != nil {
		return fmt.Errorf("%w: -capacity: %w", errUsage, err)
	}
	if *poison < 0 || *poison > 1 {
		return fmt.Errorf("%w: -poison %g: want a share from 0 to 1", errUsage, *poison)
	}
	if *failFirst < 0 {
		return fmt.Errorf("%w: -fail-first %d: want 0 or more", errUsage, *failFirst)
	}
	if *failShare < 0 || *failShare > 1 {
		return fmt.Errorf("%w: -fail-share %g: want a share from 0 to 1", errUsage, *failShare)
	}
	outageStatus := 0
	if *outageAnswer != "refused" {
		n, err := strconv.Atoi(*outageAnswer)
		if err != nil || n < 400 || n > 599 {
			return fmt.Errorf("%w: -outage-answer %q: want refused or a status from 400 to 599", errUsage, *outageAnswer)
		}
		outageStatus = n
	}
	if *flaky < 0 {
		return fmt.Errorf("%w: -flaky %d: want 0 or more", errUsage, *flaky)
	}
	sc := forward.Scenario{Arrival: perSec, Events: *events, Burst: *burst, OutageStart: *outageStart,
		Outage: *outage, OutageStatus: outageStatus, Capacity: capPerSec, Latency: *latency, Poison: *poison, Flaky: *flaky,
		FailFirst: *failFirst, FailShare: *failShare}
	if sc.Events == 0 && perSec > 0 {
		sc.Events = int(perSec * (2**outage + *outageStart).Seconds())
	}
	if *destRate != "" {
		v, err := perSecond(*destRate)
		if err != nil {
			return fmt.Errorf("%w: -dest-rate: %w", errUsage, err)
		}
		d.Rate = policy.Rate{PerSecond: v, Burst: max(1, int(v/20))}
	}
	if !*limits {
		d.Concurrency, d.Rate, d.Breaker, d.SlowStart = 1<<20, policy.Rate{}, policy.Breaker{}, 0
	}
	base := r.Retry
	if *backoff != "" {
		base.Kind = policy.Backoff(*backoff)
	}
	if *jitter != "" {
		base.Jitter = policy.Jitter(*jitter)
	}
	if err := checkStrategy(base); err != nil {
		return err
	}
	strategies := []policy.Retry{base}
	if *all {
		strategies = strategies[:0]
		for _, k := range []policy.Backoff{policy.BackoffFixed, policy.BackoffLinear, policy.BackoffExponential} {
			for _, j := range []policy.Jitter{policy.JitterNone, policy.JitterFull, policy.JitterEqual, policy.JitterDecorrelated} {
				s := base
				s.Kind, s.Jitter = k, j
				strategies = append(strategies, s)
			}
		}
	}
	fmt.Fprintf(out, "route %s → %s: %d steady events at %s + %d at once; backend down %s–%s, capacity %s%s; limits %s\n\n",
		r.Name, d.Name, sc.Events, *arrival, sc.Burst, short(sc.OutageStart), short(sc.OutageStart+sc.Outage), *capacity,
		troubleText(sc), limitsText(d, *limits))
	tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "BACKOFF\tJITTER\tREQUESTS\tWASTED\tIN OUTAGE\tPEAK REQ/S\tPEAK AFTER\tDRAIN\tP95 DELAY\tP99 DELAY\tDELIVERED\tDEAD\tLEFT\tLIMIT\t")
	var series []chartSeries
	for _, s := range strategies {
		res := forward.Simulate(sc, s, d)
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%d\t%d\t%d\t%s\t%s\t%s\t%d\t%d\t%d\t%s\t\n", s.Kind, s.Jitter, res.Requests, res.Wasted, res.InOutage,
			res.PeakRPS, res.PeakAfter, short(res.Drain), short(res.P95), short(res.P99), res.Delivered, res.DeadLettered, res.Left,
			limitText(res.Limit))
		series = append(series, chartSeries{name: fmt.Sprintf("%s/%s", s.Kind, s.Jitter), perSecond: res.PerSecond})
	}
	tw.Flush()
	fmt.Fprintln(out, "\nWASTED: attempts that failed (outage, overload, poison or flaky events). IN OUTAGE: attempts")
	fmt.Fprintln(out, "while the backend was down. PEAK AFTER: peak once the outage is over. DRAIN: from the end")
	fmt.Fprintln(out, "of the outage until every event received before it was delivered or dead-lettered.")
	fmt.Fprintln(out, "P95, P99 DELAY: arrival to delivery. LIMIT: the learned limit at the end (- if none).")
	if *svg != "" {
		f, err := os.Create(*svg)
		if err != nil {
			return err
		}
		defer f.Close()
		writeChart(f, series, sc)
		fmt.Fprintf(out, "chart written to %s\n", *svg)
	}
	return nil
}

func pickDestination(cfg *policy.Config, route, dest string) (policy.Route, policy.Destination, error) {
	r := cfg.Routes[0]
	if route != "" {
		rp, ok := cfg.Route(route)
		if !ok {
			return r, policy.Destination{}, fmt.Errorf("%w: %s has no route %q", errUsage, cfg.File, route)
		}
		r = *rp
	}
	if dest == "" {
		return r, r.Destinations[0], nil
	}
	for _, d := range r.Destinations {
		if d.Name == dest {
			return r, d, nil
		}
	}
	return r, policy.Destination{}, fmt.Errorf("%w: route %s has no destination %q", errUsage, r.Name, dest)
}

func checkStrategy(r policy.Retry) error {
	switch r.Kind {
	case policy.BackoffFixed, policy.BackoffLinear, policy.BackoffExponential:
	default:
		return fmt.Errorf("%w: -backoff %q: want fixed, linear or exponential", errUsage, r.Kind)
	}
	switch r.Jitter {
	case policy.JitterNone, policy.JitterFull, policy.JitterEqual, policy.JitterDecorrelated:
	default:
		return fmt.Errorf("%w: -jitter %q: want none, full, equal or decorrelated", errUsage, r.Jitter)
	}
	return nil
}

// perSecond parses "N/s", "N/m", "N/h" or "0".
func perSecond(v string) (float64, error) {
	if v == "0" {
		return 0, nil
	}
	num, unit, ok := strings.Cut(v, "/")
	n, err := strconv.ParseFloat(num, 64)
	if !ok || err != nil || n <= 0 {
		return 0, fmt.Errorf("%q: want N/s, N/m or N/h", v)
	}
	switch unit {
	case "s":
		return n, nil
	case "m":
		return n / 60, nil
	case "h":
		return n / 3600, nil
	}
	return 0, fmt.Errorf("%q: want N/s, N/m or N/h", v)
}

func limitsText(d policy.Destination, on bool) string {
	if !on {
		return "off"
	}
	rate := "unlimited rate"
	if d.Rate.PerSecond > 0 {
		rate = fmt.Sprintf("rate %g/s", d.Rate.PerSecond)
	}
	learned := "learned limit"
	if d.SlowStart <= 0 {
		learned = "no learned limit"
	}
	return fmt.Sprintf("concurrency %d, %s, breaker %d/%s, %s", d.Concurrency, rate,
		d.Breaker.Failures, short(d.Breaker.Cooldown), learned)
}

// troubleText describes the events that fail whatever the backend's state.
func troubleText(sc forward.Scenario) string {
	var s string
	if sc.Poison > 0 {
		s += fmt.Sprintf(", %g%% poison events", sc.Poison*100)
	}
	if sc.Flaky > 0 {
		s += fmt.Sprintf(", events fail their first 0–%d attempts", sc.Flaky)
	}
	if sc.FailFirst > 0 {
		s += fmt.Sprintf(", events fail their first %d attempts", sc.FailFirst)
	}
	if sc.FailShare > 0 {
		s += fmt.Sprintf(", %g%% of attempts fail", sc.FailShare*100)
	}
	if sc.OutageStatus != 0 {
		s += fmt.Sprintf(", %d while down", sc.OutageStatus)
	}
	return s
}

// limitText shows a learned limit in requests per second.
func limitText(l float64) string {
	if l <= 0 {
		return "-"
	}
	return fmt.Sprintf("%.1f/s", l)
}
