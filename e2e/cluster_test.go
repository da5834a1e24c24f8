package e2e

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jethook/jethook/internal/testkit"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// failoverBound is the longest deliveries may stop while a NATS node and a
// jethook replica die. A new stream or consumer leader is elected within
// the raft election timeout (at most 9 s in nats-server), a client whose
// server died reconnects to another at once, and a fetch that failed is
// retried after 1 s; a replica's unsettled messages come back after ackWait,
// but the other replica goes on with the rest meanwhile.
const failoverBound = 20 * time.Second

// clusterStartTimeout bounds how long a jethook started with its cluster
// may take to open its listener. It waits up to a minute for the cluster
// to elect its leaders and for each stream it makes to elect its own
// (store.startupWait), then starts as on a running cluster. Each new
// stream's raft group elects its leader at once on an idle machine, but
// took over 5 s each, more than 30 s for the four, on a busy 2-core one.
const clusterStartTimeout = time.Minute + startTimeout

// natsServerBinary is nats-server built from the module jethook embeds,
// so the cluster runs the same server version.
func natsServerBinary(t *testing.T) string {
	t.Helper()
	return build.natsSrv.get(t, "nats-server", "github.com/nats-io/nats-server/v2")
}

// natsNode is one nats-server process of a cluster.
type natsNode struct {
	name    string
	port    int
	logPath string
	cmd     *exec.Cmd
	exited  chan struct{}
}

// natsCluster is a JetStream cluster of nats-server processes on loopback.
type natsCluster struct {
	t     *testing.T
	nodes []*natsNode
}

// startCluster runs size nats-server processes, routed to each other, each
// with its own store directory. It does not wait for them. Their max_payload is 8 MiB, as jethook's embedded server has.
func startCluster(t *testing.T, size int) *natsCluster {
	t.Helper()
	bin := natsServerBinary(t)
	dir := t.TempDir()
	c := &natsCluster{t: t}
	routePorts := make([]int, size)
	for i := range size {
		c.nodes = append(c.nodes, &natsNode{name: fmt.Sprintf("n%d", i+1), port: testkit.FreePort(t)})
		routePorts[i] = testkit.FreePort(t)
	}
	for i, n := range c.nodes {
		var routes []string
		for j, p := range routePorts {
			if j != i {
				routes = append(routes, fmt.Sprintf("%q", fmt.Sprintf("nats-route://127.0.0.1:%d", p)))
			}
		}
		conf := filepath.Join(dir, n.name+".conf")
		text := fmt.Sprintf(`server_name: %s
host: 127.0.0.1
port: %d
max_payload: %d
jetstream { store_dir: %q }
cluster {
  name: e2e
  host: 127.0.0.1
  port: %d
  routes: [%s]
}
`, n.name, n.port, 8<<20, filepath.Join(dir, n.name), routePorts[i], strings.Join(routes, ", "))
		if err := os.WriteFile(conf, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		n.logPath = filepath.Join(dir, n.name+".log")
		n.cmd = exec.Command(bin, "-c", conf, "-l", n.logPath)
		if err := n.cmd.Start(); err != nil {
			t.Fatalf("start nats-server %s: %v", n.name, err)
		}
		n.exited = make(chan struct{})
		go func() {
			_ = n.cmd.Wait()
			close(n.exited)
		}()
	}
	t.Cleanup(c.cleanup)
	return c
}

// urls is the comma-separated list JETHOOK_NATS_URL takes.
func (c *natsCluster) urls() string {
	var us []string
	for _, n := range c.nodes {
		us = append(us, "nats://"+net.JoinHostPort("127.0.0.1", strconv.Itoa(n.port)))
	}
	return strings.Join(us, ",")
}

// connect opens a client connection to the cluster.
func (c *natsCluster) connect() (*nats.Conn, jetstream.JetStream) {
	c.t.Helper()
	nc, err := nats.Connect(c.urls(), nats.RetryOnFailedConnect(true), nats.MaxReconnects(-1))
	if err != nil {
		c.t.Fatalf("connect to the NATS cluster: %v", err)
	}
	js, err := jetstream.New(nc)
	if err != nil {
		c.t.Fatal(err)
	}
	return nc, js
}

// leader names the node that leads stream, as the cluster sees it now.
func (c *natsCluster) leader(stream string) string {
	c.t.Helper()
	nc, js := c.connect()
	defer nc.Close()
	deadline := time.Now().Add(15 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		s, err := js.Stream(ctx, stream)
		var info *jetstream.StreamInfo
		if err == nil {
			info, err = s.Info(ctx)
		}
		cancel()
		if err == nil && info.Cluster != nil && info.Cluster.Leader != "" {
			return info.Cluster.Leader
		}
		if time.Now().After(deadline) {
			c.t.Fatalf("stream %s has no leader after 15s (%v)", stream, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// kill sends SIGKILL to the named node and waits until it is gone.
func (c *natsCluster) kill(name string) {
	c.t.Helper()
	for _, n := range c.nodes {
		if n.name == name {
			if err := n.cmd.Process.Kill(); err != nil {
				c.t.Fatalf("kill -9 nats-server %s: %v", name, err)
			}
			<-n.exited
			return
		}
	}
	c.t.Fatalf("no NATS node %q", name)
}

func (c *natsCluster) cleanup() {
	for _, n := range c.nodes {
		select {
		case <-n.exited:
		default:
			_ = n.cmd.Process.Kill()
			<-n.exited
		}
		if c.t.Failed() {
			b, _ := os.ReadFile(n.logPath)
			lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
			c.t.Logf("nats-server %s log, last lines:\n%s", n.name, strings.Join(lines[max(0, len(lines)-15):], "\n"))
		}
	}
}

// TestClusterLosesNothingWhenANodeAndAReplicaDie runs jethook as it runs at
// scale: a 3-node NATS cluster, streams replicated 3 times, and two jethook
// replicas behind one (simulated) load balancer, sharing the consumers.
// Under load, the node leading the WEBHOOKS stream is killed with SIGKILL,
// then one jethook replica is. Every webhook either replica acknowledged
// must reach the backend, and deliveries must not stop for longer than a
// failover takes. Scale it with JETHOOK_CLUSTER_N.
func TestClusterLosesNothingWhenANodeAndAReplicaDie(t *testing.T) {
	if testing.Short() {
		t.Skip("cluster failover: skipped with -short")
	}
	n := envInt(t, "JETHOOK_CLUSTER_N", 1000)
	const workers = 16

	cl := startCluster(t, 3)
	be := newBackend(t, flaky)
	env := map[string]string{"JETHOOK_NATS_URL": cl.urls(), "JETHOOK_REPLICAS": "3"}
	a := newProcess(t, policies(be.URL, fastRetry), env)
	b := newProcess(t, policies(be.URL, fastRetry), env)
	// Everything starts at once, as under `docker compose up`: the
	// replicas wait for the cluster to elect its leaders and race each
	// other to create the streams.
	began := time.Now()
	exitedA, exitedB := a.launch(), b.launch()
	a.waitReadyWithin(exitedA, clusterStartTimeout)
	b.waitReadyWithin(exitedB, clusterStartTimeout)
	upIn := time.Since(began)
	po := newPosterTo([]string{a.url("/hooks/crash"), b.url("/hooks/crash")}, t.Name())

	// Posting spans about 15 s whatever n, so both kills land under load.
	pace := 15 * time.Second / time.Duration(n)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	postStart := time.Now()
	posting := po.postInBackground(ctx, n, workers, pace)

	posting.reached(n / 3)
	leader := cl.leader("WEBHOOKS")
	cl.kill(leader)
	nodeKilled := time.Now()
	a.Mark("nats-server " + leader + " (stream leader) killed -9")
	b.Mark("nats-server " + leader + " (stream leader) killed -9")
	ackedAtNodeKill := po.ackedCount()

	posting.reached(2 * n / 3)
	// Both replicas must have done part of the work before one dies: they
	// share the consumers, they do not each own a copy.
	for name, p := range map[string]*process{"a": a, "b": b} {
		d, err := p.counter("jethook_delivered_total")
		if err != nil {
			t.Fatalf("replica %s metrics: %v", name, err)
		}
		if d == 0 {
			t.Errorf("replica %s delivered nothing before the kill: the consumers are not shared", name)
		}
	}
	snap := be.snapshot(200 * time.Millisecond)
	ackedAtReplicaKill := po.ackedCount()
	b.kill()
	replicaKilled := time.Now()

	acked := posting.wait(t, "the replicas")
	lastAck := time.Now()

	allIn := be.awaitAll(t, a, n, replicaKilled, "the replica was killed")
	be.checkIDs(t, acked)
	rep := be.report(n)
	if len(rep.bad) > 0 {
		t.Errorf("backend got %d requests it could not attribute, first: %s", len(rep.bad), rep.bad[0])
	}
	stall, at := be.longestGap(postStart, lastAck)
	if stall > failoverBound {
		t.Errorf("deliveries stopped for %s (from %s after the start) while webhooks were being acknowledged; a failover should take under %s",
			stall.Round(time.Millisecond), at.Sub(began).Round(time.Millisecond), failoverBound)
	}
	dupAcks, failures := po.stats()
	newLeader := cl.leader("WEBHOOKS")
	t.Logf("cluster and both replicas started together; both replicas ready after %s", upIn.Round(time.Millisecond))
	t.Logf("%d webhooks, %d workers over 2 replicas: stream leader %s killed at %d acked; replica b killed at %d acked (%d in flight, %d delivered in the 200ms before)",
		n, workers, leader, ackedAtNodeKill, ackedAtReplicaKill, snap.inflight, snap.recentOK)
	t.Logf("new stream leader %s; posts: slowest acknowledgement %s, failed tries %v, %d acked as duplicates",
		newLeader, po.slowestAck().Round(time.Millisecond), failures, dupAcks)
	t.Logf("deliveries: longest pause while posting %s (at %s, node killed at %s, replica at %s); all %d delivered %s after the replica was killed",
		stall.Round(time.Millisecond), at.Sub(began).Round(time.Millisecond), nodeKilled.Sub(began).Round(time.Millisecond),
		replicaKilled.Sub(began).Round(time.Millisecond), n, allIn.Round(time.Millisecond))
	t.Logf("backend: %d attempts, %d webhooks delivered more than once (%d extra)", rep.attempts, rep.duplicates, rep.extra)
}

// longestGap is the longest time between two 2xx answers (or from from to
// the first) within [from, to], and when it began.
func (b *backend) longestGap(from, to time.Time) (time.Duration, time.Time) {
	b.mu.Lock()
	ts := slices.Clone(b.okTimes)
	b.mu.Unlock()
	slices.SortFunc(ts, func(x, y time.Time) int { return x.Compare(y) })
	prev, gap, at := from, time.Duration(0), from
	for _, t := range ts {
		if t.Before(from) {
			continue
		}
		if t.After(to) {
			t = to
		}
		if d := t.Sub(prev); d > gap {
			gap, at = d, prev
		}
		prev = t
		if t.Equal(to) {
			break
		}
	}
	return gap, at
}
