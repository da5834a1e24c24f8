package bench

import (
	"context"
	"testing"
	"time"
)

func TestBacklogParksEveryMessageAndStillDeliversToTheHealthyDestination(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name          string
		maxAckPending int
		wantParked    uint64
	}{
		{"with MaxAckPending above the backlog every message is parked", 1000, 300},
		{"with MaxAckPending below the backlog the rest waits unattempted", 100, 100},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			r, err := Backlog(context.Background(), BacklogOptions{
				Messages:      300,
				Delay:         time.Second,
				MaxAckPending: tc.maxAckPending,
				Probes:        3,
				BodySize:      64,
				Publishers:    8,
				Concurrency:   16,
				Timeout:       time.Minute,
				Idle:          50 * time.Millisecond,
				Dir:           t.TempDir(),
			})
			if err != nil {
				t.Fatal(err)
			}
			if r.Parked.AckPending != tc.wantParked || r.Parked.Pending != 300-tc.wantParked {
				t.Errorf("parked: a ack-pending %d, pending %d; want %d and %d",
					r.Parked.AckPending, r.Parked.Pending, tc.wantParked, 300-tc.wantParked)
			}
			if len(r.Probes) != 3 || r.ProbesLost != 0 {
				t.Errorf("b got %d of 3 probes (%d lost)", len(r.Probes), r.ProbesLost)
			}
			if r.Drained.AckPending != 0 || r.Drained.Pending != 0 || r.DeadLettered != 0 {
				t.Errorf("drained: a ack-pending %d, pending %d, dead letters %d; want all 0",
					r.Drained.AckPending, r.Drained.Pending, r.DeadLettered)
			}
			if uint64(len(r.Late)) < tc.wantParked {
				t.Errorf("%d parked messages timed against their due time, want at least %d", len(r.Late), tc.wantParked)
			}
			if r.Parked.RSS == 0 && r.Parked.Heap == 0 {
				t.Error("no memory figure at all")
			}
		})
	}
}
