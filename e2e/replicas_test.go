package e2e

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestWhatEachReplicaAddsToTheCPUOfAWebhook measures how the CPU of a
// webhook grows with the number of jethook replicas on one 3-node NATS
// cluster (streams R3): for 1, 2 and 3 replicas, each on a fresh cluster,
// it posts webhooks spread over the replicas, waits until the backend has
// every one and the replicas are idle, and prints the sum of the replicas'
// CPU seconds per webhook, and its ratio to one replica's. The nats-server
// processes' CPU is not counted. A measurement, not a check: it runs only
// when asked, at scale with
//
//	JETHOOK_REPLICA_COST_N=20000 go test ./e2e/ -run WhatEachReplicaAdds -v
//
// It posts N webhooks as fast as 16 workers go. JETHOOK_REPLICA_COST_RATE
// posts them at that many a second instead, and JETHOOK_REPLICA_COST_SCALE=1
// makes N and the rate per replica, so that each replica takes the same
// traffic whatever their number (k replicas: k·N webhooks at k·rate).
// JETHOOK_REPLICA_COST_REPLICAS=1,3 picks the counts to run.
// JETHOOK_REPLICA_COST_PROFILE=DIR also keeps CPU profiles of each
// replica: the posting, as long as N at the rate takes and at least 10 s
// (DIR/replicas-K-I-posting.pprof), and the 15 s after it
// (DIR/replicas-K-I-after.pprof).
func TestWhatEachReplicaAddsToTheCPUOfAWebhook(t *testing.T) {
	perReplica := envInt(t, "JETHOOK_REPLICA_COST_N", 0)
	if perReplica == 0 {
		t.Skip("a measurement: set JETHOOK_REPLICA_COST_N to run it")
	}
	const workers = 16
	rate := envInt(t, "JETHOOK_REPLICA_COST_RATE", 20_000)
	scale := os.Getenv("JETHOOK_REPLICA_COST_SCALE") == "1"
	counts := []int{1, 2, 3}
	if v := os.Getenv("JETHOOK_REPLICA_COST_REPLICAS"); v != "" {
		counts = nil
		for f := range strings.SplitSeq(v, ",") {
			k, err := strconv.Atoi(f)
			if err != nil || k < 1 || k > 3 {
				t.Fatalf("JETHOOK_REPLICA_COST_REPLICAS=%q: want counts from 1 to 3, such as 1,3", v)
			}
			counts = append(counts, k)
		}
	}
	profiles := os.Getenv("JETHOOK_REPLICA_COST_PROFILE")
	var one float64
	var rows []string
	for _, replicas := range counts {
		n, r := perReplica, rate
		if scale {
			n, r = n*replicas, r*replicas
		}
		cl := startCluster(t, 3)
		be := newBackend(t, healthy)
		env := map[string]string{"JETHOOK_NATS_URL": cl.urls(), "JETHOOK_REPLICAS": "3"}
		var ps []*process
		var urls []string
		for range replicas {
			p := newProcess(t, policies(be.URL, fastRetry), env)
			ps = append(ps, p)
			urls = append(urls, p.url("/hooks/crash"))
		}
		for _, p := range ps {
			p.waitReadyWithin(p.launch(), clusterStartTimeout)
		}
		before := cpuSeconds(t, ps)
		profiled := profileReplicas(t, ps, profiles, max(10*time.Second, time.Duration(n/r)*time.Second), "posting")
		po := newPosterTo(urls, t.Name()+strconv.Itoa(replicas))
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
		start := time.Now()
		err := po.postAll(ctx, n, workers, time.Second/time.Duration(r))
		cancel()
		if err != nil {
			t.Fatalf("%d replicas: posting: %v", replicas, err)
		}
		took, posted := time.Since(start), cpuSeconds(t, ps)
		profiledAfter := profileReplicas(t, ps, profiles, 15*time.Second, "after")
		ns := make([]int, n)
		for i := range ns {
			ns[i] = i + 1
		}
		deadline := time.Now().Add(10 * time.Minute)
		for len(be.missing(ns)) > 0 {
			if time.Now().After(deadline) {
				t.Fatalf("%d replicas: %d of %d webhooks not delivered after 10 minutes", replicas, len(be.missing(ns)), n)
			}
			time.Sleep(50 * time.Millisecond)
		}
		// Each replica indexes what the others stored: wait until the
		// replicas use less than 5 % of a core each, as idle ones do.
		after := cpuSeconds(t, ps)
		for deadline := time.Now().Add(5 * time.Minute); time.Now().Before(deadline); {
			time.Sleep(time.Second)
			now := cpuSeconds(t, ps)
			idle := now-after < 0.05*float64(replicas)
			after = now
			if idle {
				break
			}
		}
		profiled()
		profiledAfter()
		us := (after - before) / float64(n) * 1e6
		if len(rows) == 0 {
			one = us
		}
		rows = append(rows, fmt.Sprintf("%-9d %9d %8.0f/s %9.1fs %9.1fs %11.0fµs %9.2f",
			replicas, n, float64(n)/took.Seconds(), posted-before, after-posted, us, us/one))
		for _, p := range ps {
			p.kill()
		}
		cl.cleanup()
	}
	t.Logf("jethook replicas on a 3-node NATS cluster (R3), webhooks posted over them by %d workers, delivered to one backend;\n"+
		"CPU: the sum of the replicas' user and system time while posting, and after it until all are idle after the last delivery\n"+
		"%-9s %9s %10s %10s %10s %12s %9s\n%s", workers, "REPLICAS", "WEBHOOKS", "POSTED AT", "CPU POSTING", "CPU AFTER", "PER WEBHOOK", "÷ FIRST", strings.Join(rows, "\n"))
}

// profileReplicas takes a CPU profile of each of ps for d into dir, in
// the background; the function it returns waits for them. Without dir it
// does nothing.
func profileReplicas(t *testing.T, ps []*process, dir string, d time.Duration, phase string) func() {
	if dir == "" {
		return func() {}
	}
	var wg sync.WaitGroup
	for i, p := range ps {
		wg.Add(1)
		go func() {
			defer wg.Done()
			req, _ := http.NewRequest(http.MethodGet, fmt.Sprintf("http://%s/debug/pprof/profile?seconds=%d", p.admin, int(d/time.Second)), nil)
			req.Header.Set("Authorization", "Bearer e2e-admin-token-0123456789")
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Errorf("profile of replica %d: %v", i+1, err)
				return
			}
			defer resp.Body.Close()
			b, _ := io.ReadAll(resp.Body)
			if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("replicas-%d-%d-%s.pprof", len(ps), i+1, phase)), b, 0o644); err != nil {
				t.Error(err)
			}
		}()
	}
	return wg.Wait
}

// cpuSeconds is the sum of the user and system time of ps, in seconds.
func cpuSeconds(t *testing.T, ps []*process) float64 {
	t.Helper()
	var ticks int64
	for _, p := range ps {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", p.Pid()))
		if err != nil {
			t.Fatal(err)
		}
		// The fields after the command's closing parenthesis; utime and
		// stime are the 14th and 15th of the whole line.
		f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+2:]))
		for _, s := range f[11:13] {
			v, _ := strconv.ParseInt(s, 10, 64)
			ticks += v
		}
	}
	return float64(ticks) / 100 // USER_HZ
}
