// Package testkit holds what jethook's tests need beside the code they
// test: a condition waited for with a deadline, free loopback ports, a log
// buffer goroutines share, a small disk a test can fill and a NATS server
// replicas share. It knows
// nothing of jethook; storetest opens a store, apptest runs the app.
package testkit

import (
	"bytes"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"

	"github.com/jethook/jethook/internal/procs"
)

// NATSServer runs a JetStream nats-server on a temporary directory, as
// replicas share one, and returns its URL; it stops at the end of the
// test.
func NATSServer(t testing.TB) string {
	t.Helper()
	return StartNATS(t).ClientURL()
}

// StartNATS is NATSServer for a test that stops the server itself before
// the end (Shutdown may be called again): it returns the server. Its
// max_payload is 8 MiB, as deploy/nats.conf sets it and jethook's
// embedded server has.
func StartNATS(t testing.TB) *server.Server {
	t.Helper()
	s, err := server.NewServer(&server.Options{Host: "127.0.0.1", Port: -1, JetStream: true, StoreDir: t.TempDir(),
		MaxPayload: 8 << 20, NoLog: true, NoSigs: true})
	if err != nil {
		t.Fatal(err)
	}
	s.Start()
	t.Cleanup(s.Shutdown)
	if !s.ReadyForConnections(10 * time.Second) {
		t.Fatal("nats-server did not start")
	}
	return s
}

// Eventually polls cond every few milliseconds until it is true or the
// deadline passes, then fails the test with msg.
func Eventually(t testing.TB, within time.Duration, msg string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("after %s: %s", within, msg)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// FreePort is a loopback TCP port nobody listens on now, taken below the
// kernel's ephemeral range (ip_local_port_range starts at 32768 by
// default): a port from that range can be taken by any outgoing connection
// between this check and the bind, or by a restart later on the same
// port, and the test would then dial someone else's listener. No two
// calls in one test binary give the same port.
func FreePort(t testing.TB) int {
	t.Helper()
	ports.mu.Lock()
	defer ports.mu.Unlock()
	for range 1000 {
		port := 20000 + rand.IntN(12000)
		if ports.given[port] {
			continue // given out before, perhaps not bound yet
		}
		l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
		if err != nil {
			continue
		}
		l.Close()
		ports.given[port] = true
		return port
	}
	t.Fatal("no free loopback port between 20000 and 32000")
	return 0
}

// ports remembers what FreePort gave out: each port goes to one listener.
var ports = struct {
	mu    sync.Mutex
	given map[int]bool
}{given: map[int]bool{}}

// FreeAddr is FreePort's port on 127.0.0.1, as host:port, for a listener
// a test starts itself, such as a store's client listener.
func FreeAddr(t testing.TB) string {
	t.Helper()
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(FreePort(t)))
}

// Tmpfs mounts a tmpfs of size ("16m") on a new directory for the test, so
// that a test can fill a disk, and unmounts it when the test ends. It
// skips the test when it cannot (not root, no mount(8)); CI runs as root.
func Tmpfs(t testing.TB, size string) string {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("a full disk needs a tmpfs, and mounting one needs root")
	}
	dir := t.TempDir()
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size="+size, "tmpfs", dir).CombinedOutput(); err != nil {
		t.Skipf("mount tmpfs: %v: %s", err, out)
	}
	t.Cleanup(func() {
		if out, err := exec.Command("umount", "-l", dir).CombinedOutput(); err != nil {
			t.Errorf("umount %s: %v: %s", dir, err, out)
		}
	})
	return dir
}

// FillDisk writes a file in dir until the file system is full, then gives
// back leave bytes of it. It returns the file's path.
func FillDisk(t testing.TB, dir string, leave int64) string {
	t.Helper()
	path := filepath.Join(dir, "filler")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	buf := make([]byte, 1<<20)
	var n int64
	for {
		w, err := f.Write(buf)
		n += int64(w)
		if err != nil {
			break
		}
	}
	// Small writes take the last partial blocks.
	for {
		w, err := f.Write(buf[:512])
		n += int64(w)
		if err != nil {
			break
		}
	}
	if err := f.Truncate(max(n-leave, 0)); err != nil {
		t.Fatal(err)
	}
	return path
}

// LogBuffer is a log destination that goroutines may share and a test may
// read while they write.
type LogBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *LogBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *LogBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// CPUPerOp starts counting the process's CPU time; the function it
// returns reports it per operation of b, as cpu-ns/op.
func CPUPerOp(b *testing.B) func() {
	start := procs.CPUTime()
	return func() { b.ReportMetric(float64(procs.CPUTime()-start)/float64(b.N), "cpu-ns/op") }
}
