package e2e

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/jethook/jethook/internal/testkit"
)

// natsProcess is one JetStream nats-server process on a loopback port,
// which a test can freeze (SIGSTOP) and thaw (SIGCONT). Its max_payload is
// 8 MiB, as jethook's embedded server has.
type natsProcess struct {
	url     string
	logPath string
	cmd     *exec.Cmd
	exited  chan struct{}
}

func startNATSProcess(t *testing.T) *natsProcess {
	t.Helper()
	dir := t.TempDir()
	port := testkit.FreePort(t)
	conf := filepath.Join(dir, "nats.conf")
	text := fmt.Sprintf("server_name: e2e\nhost: 127.0.0.1\nport: %d\nmax_payload: %d\njetstream { store_dir: %q }\n",
		port, 8<<20, filepath.Join(dir, "store"))
	if err := os.WriteFile(conf, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	n := &natsProcess{url: "nats://" + net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), logPath: filepath.Join(dir, "nats.log"),
		exited: make(chan struct{})}
	n.cmd = exec.Command(natsServerBinary(t), "-c", conf, "-l", n.logPath)
	if err := n.cmd.Start(); err != nil {
		t.Fatalf("start nats-server: %v", err)
	}
	go func() {
		_ = n.cmd.Wait()
		close(n.exited)
	}()
	t.Cleanup(func() {
		_ = n.cmd.Process.Signal(syscall.SIGCONT)
		_ = n.cmd.Process.Kill()
		<-n.exited
		if t.Failed() {
			b, _ := os.ReadFile(n.logPath)
			lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
			t.Logf("nats-server log, last lines:\n%s", strings.Join(lines[max(0, len(lines)-15):], "\n"))
		}
	})
	deadline := time.Now().Add(10 * time.Second)
	for {
		if c, err := net.DialTimeout("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), 100*time.Millisecond); err == nil {
			c.Close()
			return n
		}
		if time.Now().After(deadline) {
			t.Fatalf("nats-server not listening on port %d after 10s", port)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func (n *natsProcess) signal(t *testing.T, sig syscall.Signal) {
	t.Helper()
	if err := n.cmd.Process.Signal(sig); err != nil {
		t.Fatalf("nats-server: %v: %v", sig, err)
	}
}

// sent is one post of the load, and what came of it.
type sent struct {
	n          int
	start, end time.Time
	status     int
	err        error
}

// TestAFrozenNATSServerGets503WithinThePublishTimeout freezes an external
// nats-server (SIGSTOP) under the load that used to hang requests for a
// minute, nats.go's flusher timeout: 64 clients posting 1 MiB webhooks.
// Every request must get its 503 while the server is still frozen, none
// a 2xx; /readyz must answer within its 2s bound and say the store is not
// ready; after SIGCONT jethook takes webhooks again by itself, and every
// webhook it acknowledged is delivered.
func TestAFrozenNATSServerGets503WithinThePublishTimeout(t *testing.T) {
	if testing.Short() {
		t.Skip("frozen NATS: skipped with -short")
	}
	const (
		publishTimeout = 5 * time.Second // store.Options.PublishTimeout's default
		clients        = 64
		body           = 1 << 20
		frozenFor      = 2*publishTimeout + 2*time.Second
	)
	ns := startNATSProcess(t)
	be := newBackend(t, healthy)
	// 1 MiB bodies to a backend in a test process that may run under
	// -race: attempts get 10s rather than the suite's usual 500ms.
	pol := policies(be.URL, fastRetry)
	if !strings.Contains(pol, "timeout: 500ms") {
		t.Fatalf("the test policies lack timeout: 500ms:\n%s", pol)
	}
	pol = strings.Replace(pol, "timeout: 500ms", "timeout: 10s", 1)
	jh := newProcess(t, pol, map[string]string{"JETHOOK_NATS_URL": ns.url})
	jh.start()
	po := newPoster(jh.url("/hooks/crash"), t.Name())
	po.pad = body
	po.client.Timeout = time.Minute // longer than any answer may take: the test measures it
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	var next atomic.Int64
	var mu sync.Mutex
	var calls []sent
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for range clients {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				n := int(next.Add(1))
				c := sent{n: n, start: time.Now()}
				a, err := po.once(ctx, n)
				c.end, c.status, c.err = time.Now(), a.status, err
				if err == nil && a.status == http.StatusOK {
					po.mu.Lock()
					po.acked[n] = a.id
					po.mu.Unlock()
				}
				mu.Lock()
				calls = append(calls, c)
				mu.Unlock()
				if a.status != http.StatusOK {
					time.Sleep(250 * time.Millisecond) // as a provider backs off
				}
			}
		})
	}
	for po.ackedCount() < clients {
		if ctx.Err() != nil {
			t.Fatalf("only %d webhooks acknowledged under load before the freeze", po.ackedCount())
		}
		time.Sleep(5 * time.Millisecond)
	}

	ns.signal(t, syscall.SIGSTOP)
	frozen := time.Now()
	jh.Mark("nats-server frozen (SIGSTOP)")
	reason, slowestReadyz := jh.awaitReadyz(t, http.StatusServiceUnavailable, 10*time.Second)
	notReady := time.Since(frozen)
	// The load stops in time for every request to end within the publish
	// timeout, with a second to spare, before the server is thawed.
	for time.Since(frozen) < frozenFor-publishTimeout-time.Second {
		if _, _, slow := jh.awaitReadyzOnce(t); slow > slowestReadyz {
			slowestReadyz = slow
		}
		time.Sleep(100 * time.Millisecond)
	}
	close(stop)
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(time.Until(frozen.Add(frozenFor))):
		t.Errorf("requests still hung %s after the server froze (publish timeout %s)", time.Since(frozen).Round(time.Millisecond), publishTimeout)
		<-done
	}
	allEnded := time.Since(frozen)
	ns.signal(t, syscall.SIGCONT)
	thawed := time.Now()
	jh.Mark("nats-server thawed (SIGCONT)")

	var during, refused, cut int
	var slowest time.Duration
	for _, c := range calls {
		if c.end.Before(frozen) {
			continue
		}
		during++
		took := c.end.Sub(c.start)
		slowest = max(slowest, took)
		switch {
		case c.err != nil && took <= 2*publishTimeout && connectionCut(c.err):
			// Under a heavily loaded test run a few uploads of 1 MiB
			// see their connection closed under them instead of a 503:
			// no answer, but no wait past twice the publish timeout
			// either, and nothing acknowledged, so the sender tries
			// again as it does after a 503.
			cut++
		case c.err != nil:
			t.Errorf("webhook %d, in flight while the server was frozen: no answer after %s: %v", c.n, took, c.err)
		case c.start.After(frozen) && c.status/100 == 2:
			t.Errorf("webhook %d, posted while the server was frozen: acknowledged (%d)", c.n, c.status)
		case c.status == http.StatusServiceUnavailable:
			refused++
		case c.status != http.StatusOK:
			t.Errorf("webhook %d, in flight while the server was frozen: status %d, want 503", c.n, c.status)
		}
	}
	if refused == 0 {
		t.Errorf("no webhook got 503 while the server was frozen")
	}

	pctx, pcancel := context.WithTimeout(ctx, 30*time.Second)
	probe := int(next.Add(1))
	err := po.post(pctx, probe)
	pcancel()
	if err != nil {
		t.Fatalf("jethook did not take webhooks again after the server was thawed: %v", err)
	}
	recovered := time.Since(thawed)
	jh.awaitReadyz(t, http.StatusOK, 30*time.Second)
	acked := po.ackedIDs()
	ackedNs := make([]int, 0, len(acked))
	for n := range acked {
		ackedNs = append(ackedNs, n)
	}
	eventually(t, 60*time.Second, "acknowledged webhooks delivered after the server was thawed", func() []int { return be.missing(ackedNs) })
	be.checkIDs(t, acked)
	jh.checkAlive()
	t.Logf("frozen under %d clients posting %d-byte webhooks: /readyz 503 (%s) after %s, slowest /readyz answer %s",
		clients, body, reason, notReady.Round(time.Millisecond), slowestReadyz.Round(time.Millisecond))
	t.Logf("%d requests answered after the freeze, %d of them 503, %d connections closed under an upload; slowest %s; all ended %s after the freeze (publish timeout %s)",
		during, refused, cut, slowest.Round(time.Millisecond), allEnded.Round(time.Millisecond), publishTimeout)
	t.Logf("thawed: first webhook taken after %s; all %d acknowledged delivered", recovered.Round(time.Millisecond), len(acked))
}

// awaitReadyzOnce asks /readyz once, as awaitReadyz does, and fails the
// test if it does not answer within readyzPatience.
func (p *process) awaitReadyzOnce(t *testing.T) (int, string, time.Duration) {
	t.Helper()
	start := time.Now()
	code, reason, err := p.readyz(readyzPatience)
	if err != nil {
		t.Fatalf("/readyz did not answer within %s (its bound is 2s): %v", readyzPatience, err)
	}
	return code, reason, time.Since(start)
}

// connectionCut reports whether err is a connection the server closed
// under a request being sent: the write failed, or, on a kept-alive
// connection, net/http's client saw it closed before any answer (its
// unexported errServerClosedIdle, known only by its text).
func connectionCut(err error) bool {
	return errors.Is(err, syscall.EPIPE) || errors.Is(err, syscall.ECONNRESET) || errors.Is(err, net.ErrClosed) ||
		strings.Contains(err.Error(), "http: server closed idle connection")
}
