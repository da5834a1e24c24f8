package policy

import "time"

// Step is one row of a retry schedule: the wait after Attempt fails, and the
// total time from first receipt to the start of attempt Attempt+1 (attempt
// durations not counted).
type Step struct {
	Attempt        int
	Min, Max       time.Duration // bounds of the wait, as Range
	CumMin, CumMax time.Duration // bounds of the time from first receipt to attempt Attempt+1
}

// Schedule lists every wait the policy can produce, one Step per failed
// attempt that may be followed by another, for publishing to users. The list
// stops when Exhausted does: at MaxAttempts, or when even the shortest wait
// (CumMin) would start the next attempt past MaxAge. So it shows the latest
// possible stop; the final rows whose CumMax exceeds MaxAge happen only for
// some jitter draws. It has at most 10000 rows.
func (r Retry) Schedule() []Step {
	var steps []Step
	var cumMin, cumMax time.Duration
	for n := 1; n <= maxAttemptsLimit; n++ {
		lo, hi := r.Range(n)
		if r.Exhausted(n, cumMin, lo) {
			break
		}
		cumMin, cumMax = addSat(cumMin, lo), addSat(cumMax, hi)
		steps = append(steps, Step{Attempt: n, Min: lo, Max: hi, CumMin: cumMin, CumMax: cumMax})
	}
	return steps
}
