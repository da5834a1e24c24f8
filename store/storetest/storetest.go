// Package storetest opens a real embedded store for tests: JetStream on a
// temporary directory, closed when the test ends. There is no fake store.
package storetest

import (
	"bytes"
	"context"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/jethook/jethook/store"
)

// Open starts an embedded store in opts.DataDir (a new t.TempDir() when
// empty) and closes it at the end of the test.
func Open(t testing.TB, opts store.Options) *store.Store {
	t.Helper()
	if opts.DataDir == "" {
		opts.DataDir = t.TempDir()
	}
	if opts.PublishTimeout == 0 {
		opts.PublishTimeout = 2 * time.Second
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	st, err := store.Open(ctx, opts)
	if err != nil {
		t.Fatalf("open store: %v", err)
	}
	t.Cleanup(func() { st.Close() })
	return st
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

// Settled waits until every destination's consumer holds nothing: no
// message pending, none in flight or waiting in backoff, none parked. From
// then on no attempt is made until something new is stored, so a test
// that waited for it can assert that an unwanted delivery did not happen.
func Settled(t testing.TB, st *store.Store) {
	t.Helper()
	Backlog(t, st, "every destination settled", func(b store.Backlog) bool {
		return b.Pending == 0 && b.AckPending == 0 && b.Parked == 0
	})
}

// Backlog waits until every destination's backlog satisfies cond, such
// as "3 pending and none in flight" for a paused destination.
func Backlog(t testing.TB, st *store.Store, msg string, cond func(store.Backlog) bool) {
	t.Helper()
	var last []store.Backlog
	deadline := time.Now().Add(10 * time.Second)
	for {
		bs, err := st.Backlogs(context.Background())
		if err == nil && len(bs) > 0 && !slices.ContainsFunc(bs, func(b store.Backlog) bool { return !cond(b) }) {
			return
		}
		last = bs
		if time.Now().After(deadline) {
			t.Fatalf("after 10s: %s: backlogs %+v, err %v", msg, last, err)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// FreeAddr is a loopback address nothing listens on (for a moment), for a
// listener a test starts itself, such as Options.ClientListen.
func FreeAddr(t testing.TB) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
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

// SkipJetStreamRestartUnderRace skips a test that stops and starts
// JetStream in a running nats-server when it runs under -race: re-enabling
// JetStream (nats-server v2.15.3, jetstream_api.go:1115) writes the API
// queues without a lock the client goroutines reading them (:1028) take,
// and the detector reports it in about a third of runs. e2e's
// TestAFullDiskAnswers503AndRecoversWithoutARestart covers the same
// recovery in a jethook built without -race.
func SkipJetStreamRestartUnderRace(t testing.TB) {
	t.Helper()
	if raceDetector {
		t.Skip("restarts JetStream, which nats-server does not synchronise for the race detector; run without -race")
	}
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
