// Command acktrace reads a runtime trace of `jethook serve` (from the
// admin API's /debug/pprof/trace, as bench/rate.sh TRACE=DIR takes it) and
// says what the ingress's requests waited on between publishing a webhook
// and going on with its ack: blocked until the ack came, then runnable
// until they had a CPU again. For the longest blocked waits it names the
// goroutine that was on a CPU the longest while they waited, and what it
// was doing when it stopped: the stall that held the acks up.
//
//	go run ./bench/acktrace run-1-2000.trace
package main

import (
	"cmp"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"time"

	"golang.org/x/exp/trace"
)

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: acktrace TRACE")
		os.Exit(2)
	}
	f, err := os.Open(os.Args[1])
	if err != nil {
		fmt.Fprintln(os.Stderr, "acktrace:", err)
		os.Exit(1)
	}
	defer f.Close()
	a, err := read(f)
	if err != nil {
		fmt.Fprintln(os.Stderr, "acktrace:", err)
		os.Exit(1)
	}
	a.print(os.Stdout)
}

// publishing marks the stack of a request's goroutine waiting for its
// webhook's ack.
const publishing = "store.(*Store).publish"

// wait is one request's wait for its ack.
type wait struct {
	start, acked, running trace.Time
}

// run is a stretch of time a goroutine held a CPU, and where it stopped.
type run struct {
	g          trace.GoID
	start, end trace.Time
	stopped    string
}

type analysis struct {
	t0    trace.Time
	waits []wait
	runs  []run
}

// read follows every goroutine's state changes through the trace.
func read(r io.Reader) (*analysis, error) {
	tr, err := trace.NewReader(r)
	if err != nil {
		return nil, err
	}
	a := &analysis{}
	open := map[trace.GoID]*wait{}       // requests waiting for an ack, or for a CPU after it
	onCPU := map[trace.GoID]trace.Time{} // since when each running goroutine runs
	for {
		ev, err := tr.ReadEvent()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, err
		}
		if a.t0 == 0 {
			a.t0 = ev.Time()
		}
		if ev.Kind() != trace.EventStateTransition {
			continue
		}
		st := ev.StateTransition()
		if st.Resource.Kind != trace.ResourceGoroutine {
			continue
		}
		g, now := st.Resource.Goroutine(), ev.Time()
		from, to := st.Goroutine()
		if from == trace.GoRunning {
			if start, ok := onCPU[g]; ok {
				a.runs = append(a.runs, run{g: g, start: start, end: now, stopped: frames(ev.Stack(), 3)})
				delete(onCPU, g)
			}
			if to == trace.GoWaiting && strings.Contains(frames(ev.Stack(), 0), publishing) {
				open[g] = &wait{start: now}
			}
		}
		w := open[g]
		switch {
		case to == trace.GoRunning:
			onCPU[g] = now
			if w != nil && w.acked != 0 {
				w.running = now
				a.waits = append(a.waits, *w)
				delete(open, g)
			}
		case w != nil && from == trace.GoWaiting && to == trace.GoRunnable:
			w.acked = now
		}
	}
	return a, nil
}

// frames is the stack's function names, innermost first, at most n (all
// when n is 0).
func frames(s trace.Stack, n int) string {
	var out []string
	for f := range s.Frames() {
		out = append(out, f.Func)
		if n > 0 && len(out) == n {
			break
		}
	}
	return strings.Join(out, " < ")
}

func (a *analysis) print(w io.Writer) {
	if len(a.waits) == 0 {
		fmt.Fprintln(w, "no request waited for an ack in this trace")
		return
	}
	blocked := make([]time.Duration, len(a.waits))
	runnable := make([]time.Duration, len(a.waits))
	for i, x := range a.waits {
		blocked[i] = time.Duration(x.acked - x.start)
		runnable[i] = time.Duration(x.running - x.acked)
	}
	fmt.Fprintf(w, "%d requests waited for an ack:\n", len(a.waits))
	fmt.Fprintf(w, "  blocked until the ack came   %s\n", quantiles(blocked))
	fmt.Fprintf(w, "  then runnable without a CPU  %s\n", quantiles(runnable))

	// The longest waits, and who held a CPU the longest during each.
	slices.SortFunc(a.waits, func(x, y wait) int { return cmp.Compare(y.acked-y.start, x.acked-x.start) })
	slices.SortFunc(a.runs, func(x, y run) int { return cmp.Compare(x.start, y.start) })
	fmt.Fprintln(w, "the longest blocked waits, and the longest time one goroutine held a CPU during each:")
	shown := 0
	var last trace.Time
	for _, x := range a.waits {
		if shown == 8 {
			break
		}
		if last != 0 && x.start < last {
			continue // the same stall as one already shown
		}
		last = x.acked
		shown++
		var top run
		for _, r := range a.runs {
			if r.start >= x.acked {
				break
			}
			if r.end > x.start && min(r.end, x.acked)-max(r.start, x.start) > min(top.end, x.acked)-max(top.start, x.start) {
				top = r
			}
		}
		fmt.Fprintf(w, "  at %6.3fs blocked %-8s g%d held a CPU %s, stopped in %s\n",
			float64(x.start-a.t0)/1e9, ms(time.Duration(x.acked-x.start)), top.g, ms(time.Duration(top.end-top.start)), top.stopped)
	}
}

func quantiles(d []time.Duration) string {
	slices.Sort(d)
	at := func(q float64) time.Duration { return d[int(float64(len(d)-1)*q)] }
	return fmt.Sprintf("p50 %-8s p99 %-8s max %s", ms(at(0.5)), ms(at(0.99)), ms(at(1)))
}

func ms(d time.Duration) string { return fmt.Sprintf("%.2fms", float64(d)/1e6) }
