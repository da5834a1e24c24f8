package store

import "testing"

func TestHeadroomIsTheSmallerOfTheLimitAndTheDisk(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		h    Health
		want uint64
		ok   bool
	}{
		{"nothing known", Health{}, 0, false},
		{"the limit", Health{Used: 30, Limit: 100}, 70, true},
		{"the disk above its floor", Health{DiskFree: 500, DiskSize: 1000, DiskFloor: 100}, 400, true},
		{"the disk when it is tighter than the limit", Health{Used: 30, Limit: 1000, DiskFree: 150, DiskSize: 1000, DiskFloor: 100}, 50, true},
		{"none past a full limit", Health{Used: 120, Limit: 100, DiskFree: 500, DiskSize: 1000}, 0, true},
		{"none below the floor", Health{DiskFree: 50, DiskSize: 1000, DiskFloor: 100}, 0, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got, ok := tc.h.Headroom(); got != tc.want || ok != tc.ok {
				t.Errorf("Headroom() = %d, %v; want %d, %v", got, ok, tc.want, tc.ok)
			}
		})
	}
}

func TestServerWriteErrorLines(t *testing.T) {
	t.Parallel()
	for line, want := range map[string]bool{
		"Filestore [WEBHOOKS] Critical write error: write /d/1.blk: no space left on device":                 true,
		"JetStream stream '$G > WEBHOOKS' critical write error: write /d/1.blk: no space left on device":     true,
		"JetStream failed to store a msg on stream '$G > WEBHOOKS': write /d/1.blk: no space left on device": true,
		"JetStream file resource limits exceeded for server":                                                 false,
		"Error trying to connect to route (attempt 1): dial tcp 127.0.0.1:6222: connect: connection refused": false,
	} {
		if got := isWriteError(line); got != want {
			t.Errorf("isWriteError(%q) = %v, want %v", line, got, want)
		}
	}
}
