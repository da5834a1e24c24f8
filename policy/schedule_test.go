package policy

import (
	"testing"
	"time"
)

func TestSchedule(t *testing.T) {
	t.Parallel()
	byAttempts := DefaultRetry()
	byAttempts.Jitter, byAttempts.MaxAttempts = JitterNone, 4
	byAge := DefaultRetry()
	byAge.Kind, byAge.Interval, byAge.Jitter, byAge.MaxAge = BackoffFixed, 10*time.Minute, JitterNone, 35*time.Minute
	equal := DefaultRetry()
	equal.Jitter, equal.MaxAge = JitterEqual, 10*time.Second
	decorrelated := DefaultRetry()
	decorrelated.Jitter, decorrelated.MaxAttempts = JitterDecorrelated, 5
	single := DefaultRetry()
	single.MaxAttempts = 1

	tests := []struct {
		name string
		r    Retry
		want []Step
	}{
		{"it stops at max_attempts", byAttempts, []Step{
			{1, 2 * time.Second, 2 * time.Second, 2 * time.Second, 2 * time.Second},
			{2, 4 * time.Second, 4 * time.Second, 6 * time.Second, 6 * time.Second},
			{3, 8 * time.Second, 8 * time.Second, 14 * time.Second, 14 * time.Second},
		}},
		{"it stops before max_age", byAge, []Step{
			{1, 10 * time.Minute, 10 * time.Minute, 10 * time.Minute, 10 * time.Minute},
			{2, 10 * time.Minute, 10 * time.Minute, 20 * time.Minute, 20 * time.Minute},
			{3, 10 * time.Minute, 10 * time.Minute, 30 * time.Minute, 30 * time.Minute},
		}},
		{"it keeps a row that only the shortest draws fit in max_age", equal, []Step{
			{1, time.Second, 2 * time.Second, time.Second, 2 * time.Second},
			{2, 2 * time.Second, 4 * time.Second, 3 * time.Second, 6 * time.Second},
			{3, 4 * time.Second, 8 * time.Second, 7 * time.Second, 14 * time.Second},
		}},
		{"decorrelated bounds chain", decorrelated, []Step{
			{1, 2 * time.Second, 6 * time.Second, 2 * time.Second, 6 * time.Second},
			{2, 2 * time.Second, 18 * time.Second, 4 * time.Second, 24 * time.Second},
			{3, 2 * time.Second, 54 * time.Second, 6 * time.Second, 78 * time.Second},
			{4, 2 * time.Second, 162 * time.Second, 8 * time.Second, 240 * time.Second},
		}},
		{"a single attempt has no retries", single, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got := tt.r.Schedule()
			if len(got) != len(tt.want) {
				t.Fatalf("Schedule() has %d steps, want %d: %v", len(got), len(tt.want), got)
			}
			for i := range got {
				if got[i] != tt.want[i] {
					t.Errorf("step %d = %+v, want %+v", i, got[i], tt.want[i])
				}
			}
		})
	}
}

func TestScheduleEndsWhereExhaustedSays(t *testing.T) {
	t.Parallel()
	for j, r := range jittered() {
		for _, maxAge := range []time.Duration{30 * time.Second, 10 * time.Minute, 72 * time.Hour} {
			r.MaxAge = maxAge
			t.Run(string(j)+" stops at "+maxAge.String(), func(t *testing.T) {
				t.Parallel()
				steps := r.Schedule()
				var age time.Duration
				for _, s := range steps {
					if r.Exhausted(s.Attempt, age, s.Min) {
						t.Fatalf("step %d is listed but Exhausted", s.Attempt)
					}
					age += s.Min
					if s.CumMin != age {
						t.Fatalf("step %d CumMin = %v, want %v", s.Attempt, s.CumMin, age)
					}
				}
				next := len(steps) + 1
				lo, _ := r.Range(next)
				if !r.Exhausted(next, age, lo) {
					t.Fatalf("schedule ends after %d steps but attempt %d is not Exhausted", len(steps), next)
				}
			})
		}
	}
}
