package bench

import (
	"context"
	"testing"
	"time"
)

func TestBacklogParksEveryMessageAndStillDeliversToTheHealthyDestination(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name           string
		delay          time.Duration // long enough that no parked slot comes due before the reading
		parkAfter      time.Duration
		maxAckPending  int
		concurrency    int
		wantParked     uint64
		wantAckPending uint64
	}{
		{"waits past ParkAfter park every message, whatever MaxAckPending", 5 * time.Second, 100 * time.Millisecond, 100, 16, 300, 0},
		// A destination whose every slot is taken parks its retries, short
		// waits too, while webhooks wait behind them, so that they do not
		// jump the queue; with slots to spare it does not.
		{"shorter waits of a destination with slots to spare stay in the consumer, as far as MaxAckPending lets them", time.Second, 0, 100, 128, 0, 100},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			r, err := Backlog(context.Background(), BacklogOptions{
				Messages:      300,
				Delay:         tc.delay,
				MaxAckPending: tc.maxAckPending,
				ParkAfter:     tc.parkAfter,
				Probes:        3,
				BodySize:      64,
				Publishers:    8,
				Concurrency:   tc.concurrency,
				Timeout:       time.Minute,
				Idle:          50 * time.Millisecond,
				Dir:           t.TempDir(),
			})
			if err != nil {
				t.Fatal(err)
			}
			waiting := tc.wantParked + tc.wantAckPending
			if r.Parked.Parked != tc.wantParked || r.Parked.AckPending != tc.wantAckPending || r.Parked.Pending != 300-waiting {
				t.Errorf("backlog: a parked %d, ack-pending %d, pending %d; want %d, %d and %d",
					r.Parked.Parked, r.Parked.AckPending, r.Parked.Pending, tc.wantParked, tc.wantAckPending, 300-waiting)
			}
			if len(r.Probes) != 3 || r.ProbesLost != 0 {
				t.Errorf("b got %d of 3 probes (%d lost)", len(r.Probes), r.ProbesLost)
			}
			if r.Drained.AckPending != 0 || r.Drained.Pending != 0 || r.Drained.Parked != 0 || r.DeadLettered != 0 {
				t.Errorf("drained: a ack-pending %d, pending %d, parked %d, dead letters %d; want all 0",
					r.Drained.AckPending, r.Drained.Pending, r.Drained.Parked, r.DeadLettered)
			}
			if uint64(len(r.Late)) < waiting {
				t.Errorf("%d waiting messages timed against their due time, want at least %d", len(r.Late), waiting)
			}
			if r.Parked.RSS == 0 && r.Parked.Heap == 0 {
				t.Error("no memory figure at all")
			}
		})
	}
}
