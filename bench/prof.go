package bench

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"runtime/trace"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jethook/jethook/admin"
	"github.com/jethook/jethook/store"
)

// phaseProf profiles one phase of the search scenario when
// JETHOOK_SEARCH_PROF names a directory: CPU, a trace of its first
// seconds, and the cumulative mutex and block profiles at its end.
type phaseProf struct {
	dir, name string
	cpu, tr   *os.File
	stopTrace *time.Timer
}

func profStart(name string) *phaseProf {
	dir := os.Getenv("JETHOOK_SEARCH_PROF")
	if dir == "" {
		return nil
	}
	runtime.SetMutexProfileFraction(5)
	runtime.SetBlockProfileRate(10000)
	p := &phaseProf{dir: dir, name: name}
	p.cpu, _ = os.Create(filepath.Join(dir, name+".cpu"))
	_ = pprof.StartCPUProfile(p.cpu)
	p.tr, _ = os.Create(filepath.Join(dir, name+".trace"))
	if err := trace.Start(p.tr); err == nil {
		p.stopTrace = time.AfterFunc(3*time.Second, trace.Stop)
	}
	return p
}

func (p *phaseProf) stop() {
	if p == nil {
		return
	}
	pprof.StopCPUProfile()
	p.cpu.Close()
	if p.stopTrace.Stop() {
		trace.Stop()
	}
	p.tr.Close()
	for _, k := range []string{"mutex", "block"} {
		f, _ := os.Create(filepath.Join(p.dir, p.name+"."+k))
		_ = pprof.Lookup(k).WriteTo(f, 0)
		f.Close()
	}
}

var expSink []byte

// stallExp runs one step of the experiment JETHOOK_STALL_EXP names in
// place of a search, and reports whether it did.
func stallExp(int) bool {
	exp := os.Getenv("JETHOOK_STALL_EXP")
	if exp == "" {
		return false
	}
	end := time.Now().Add(10 * time.Millisecond)
	switch exp {
	case "sleep":
		time.Sleep(10 * time.Millisecond)
	case "spin":
		for time.Now().Before(end) {
		}
	case "spin-gosched":
		for time.Now().Before(end) {
			for range 1000 {
				expSink = expSink[:0]
			}
			runtime.Gosched()
		}
	case "spin-half":
		for time.Now().Before(end) {
		}
		time.Sleep(10 * time.Millisecond)
	case "alloc":
		for time.Now().Before(end) {
			expSink = make([]byte, 32<<10)
		}
	}
	return true
}

// stallAB is TEMPORARY: it posts webhooks from o.Load clients while it
// runs each condition JETHOOK_STALL_AB names for 1 s in turn, again and
// again, and prints ingest's latency beside each: slow changes of the
// machine's load fall on every condition alike.
func stallAB(ctx context.Context, st *stack, url string, o SearchOptions, first int64, hour time.Time) error {
	conds := strings.Split(os.Getenv("JETHOOK_STALL_AB"), ",")
	rounds := 8
	if n, err := strconv.Atoi(os.Getenv("JETHOOK_STALL_ROUNDS")); err == nil {
		rounds = n
	}
	var slot atomic.Int64 // round*len(conds)+cond; -1 when done
	lat := make([][]time.Duration, len(conds))
	runs := make([]int, len(conds))
	var mu sync.Mutex
	client := &http.Client{Transport: transport(o.Load), Timeout: 30 * time.Second}
	defer client.CloseIdleConnections()
	var next atomic.Int64
	var wg sync.WaitGroup
	for range o.Load {
		wg.Go(func() {
			for ctx.Err() == nil {
				s0 := slot.Load()
				if s0 < 0 {
					return
				}
				t0 := time.Now()
				ok := post(ctx, client, url, first+next.Add(1), o.BodySize)
				d := time.Since(t0)
				if ok && slot.Load() == s0 {
					mu.Lock()
					lat[int(s0)%len(conds)] = append(lat[int(s0)%len(conds)], d)
					mu.Unlock()
				}
			}
		})
	}
	sel := admin.Search{Route: "bench", Since: hour.Format(time.RFC3339Nano), Expr: fmt.Sprintf(`body.id == "evt_%d"`, o.Retained-max(o.Retained/24, 1))}
	none := admin.Search{Route: "bench", Since: "24h", Expr: `body.id == "evt_none"`}
	for r := range rounds {
		for i, c := range conds {
			slot.Store(int64(r*len(conds) + i))
			end := time.Now().Add(time.Second)
			for time.Now().Before(end) {
				var err error
				switch c {
				case "idle":
					time.Sleep(time.Until(end))
					continue
				case "search", "search-oldpace":
					store.StallOldPace.Store(c == "search-oldpace")
					_, err = st.app.Service.Search(ctx, sel, func(admin.EventSummary) bool { return true }, nil)
				case "search-none", "search-none-oldpace":
					store.StallOldPace.Store(c == "search-none-oldpace")
					_, err = st.app.Service.Search(ctx, none, func(admin.EventSummary) bool { return true }, nil)
				default:
					err = st.app.Store.StallStep(ctx, c, "bench", hour)
				}
				if err != nil {
					return fmt.Errorf("%s: %w", c, err)
				}
				runs[i]++
			}
		}
	}
	slot.Store(-1)
	wg.Wait()
	for i, c := range conds {
		l := lat[i]
		slices.Sort(l)
		fmt.Fprintf(os.Stdout, "AB %-18s posts %6d  p50 %8s  p99 %8s  p999 %8s  steps %6d\n", c, len(l), percentile(l, 50), percentile(l, 99), l[len(l)*999/1000], runs[i])
	}
	return nil
}
