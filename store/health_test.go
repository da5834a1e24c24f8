package store_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/jethook/jethook/internal/testkit"
	"github.com/jethook/jethook/store"
	"github.com/jethook/jethook/store/storetest"
)

func TestAFreshStoreIsReadyAndKnowsItsLimitAndDisk(t *testing.T) {
	t.Parallel()
	st := storetest.Open(t, store.Options{MaxBytes: 64 << 20})
	h := st.Health()
	if !h.Ready() {
		t.Fatalf("a fresh store is not ready: %s: %s", h.Reason, h.Detail)
	}
	if err := st.Ready(context.Background()); err != nil {
		t.Errorf("Ready: %v", err)
	}
	if h.Limit != 64<<20 {
		t.Errorf("Limit = %d, want MaxBytes (%d)", h.Limit, 64<<20)
	}
	if runtime.GOOS == "linux" && (h.DiskSize == 0 || h.DiskFree == 0 || h.DiskFloor != 4*8<<20) {
		t.Errorf("disk: free %d of %d, floor %d; want the data dir's file system and a floor of 4 × MaxPayload", h.DiskFree, h.DiskSize, h.DiskFloor)
	}
	if room, ok := h.Headroom(); !ok || room == 0 || room > h.Limit {
		t.Errorf("Headroom() = %d, %v; want some, at most the limit", room, ok)
	}
}

// TestAFullDiskRefusesWritesAndTheStoreRecoversWhenSpaceReturns fills the
// store's file system. A webhook that hits "no space left on device" in
// nats-server leaves the stream refusing every later write, even once
// there is room: the store must clear that by itself. With the disk below
// its floor the store must say so and refuse publishes at once; it must
// take writes again within seconds of the disk having room, with
// everything acked before still there.
func TestAFullDiskRefusesWritesAndTheStoreRecoversWhenSpaceReturns(t *testing.T) {
	storetest.SkipJetStreamRestartUnderRace(t)
	dir := testkit.Tmpfs(t, "32m")
	var log testkit.LogBuffer
	st := storetest.Open(t, store.Options{DataDir: dir, DiskFloor: 64 << 10, PublishTimeout: time.Second,
		Logger: slog.New(slog.NewTextHandler(&log, nil))})
	ctx := context.Background()
	// A destination that delivers nothing: a full disk must not purge
	// what it has not had.
	if _, err := st.Consumer(ctx, "github", "app", time.Minute); err != nil {
		t.Fatal(err)
	}
	var acked []string
	publish := func(id string, size int) error {
		_, err := st.Publish(ctx, envelope(id, fmt.Sprintf(`{"pad":%q}`, strings.Repeat("x", size))))
		if err == nil {
			acked = append(acked, id)
		}
		return err
	}
	for i := range 5 {
		if err := publish(fmt.Sprintf("before-%d", i), 1000); err != nil {
			t.Fatalf("publish with room on the disk: %v", err)
		}
	}

	// Room above the floor, but not for a 1 MiB webhook: it fails inside
	// nats-server, whose stream then refuses every write.
	filler := testkit.FillDisk(t, dir, 256<<10)
	if err := publish("too-big", 1<<20); !errors.Is(err, store.ErrUnavailable) {
		t.Fatalf("publish of 1 MiB with 256 KiB free: %v, want ErrUnavailable", err)
	}
	n := 0
	testkit.Eventually(t, 15*time.Second, "small webhooks still refused after a write failed for want of space", func() bool {
		n++
		return publish(fmt.Sprintf("small-%d", n), 100) == nil
	})
	if !strings.Contains(log.String(), "restarting the embedded JetStream") {
		t.Errorf("the store took writes again without restarting JetStream; log:\n%s", log.String())
	}
	// The index reads the streams again: lookups and dedup find it.
	last := acked[len(acked)-1]
	testkit.Eventually(t, 5*time.Second, "webhook stored after the JetStream restart not indexed", func() bool {
		_, _, err := st.Event(ctx, last, "github")
		return err == nil
	})

	// No room above the floor: refused before nats-server sees it.
	testkit.FillDisk(t, dir, 0)
	testkit.Eventually(t, 5*time.Second, "store not disk_full with the disk full", func() bool {
		return st.Health().Reason == store.ReasonDiskFull
	})
	var nre *store.NotReadyError
	if err := st.Ready(ctx); !errors.As(err, &nre) || nre.Reason != store.ReasonDiskFull || !errors.Is(err, store.ErrUnavailable) {
		t.Errorf("Ready with the disk full: %v, want a *NotReadyError (disk_full) wrapping ErrUnavailable", err)
	}
	if err := publish("while-full", 100); !errors.As(err, &nre) {
		t.Errorf("publish while the disk is full: %v, want an immediate *NotReadyError", err)
	}

	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, 15*time.Second, "store not ready again after the disk had room", func() bool { return st.Health().Ready() })
	if err := publish("after", 1000); err != nil {
		t.Fatalf("publish after the disk had room again: %v", err)
	}
	for _, id := range acked {
		if _, _, err := st.Event(ctx, id, "github"); err != nil {
			t.Errorf("acked webhook %s after the recovery: %v", id, err)
		}
	}
}
