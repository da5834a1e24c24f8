package procs

import (
	"testing"
	"time"
)

func TestTheGovernorGoesToOneProcessorOnlyAfterAQuietSpellAndBackAtOnce(t *testing.T) {
	var g Governor
	step := func(cpus float64, want bool, why string) {
		t.Helper()
		if got := g.Next(cpus, Tick); got != want {
			t.Fatalf("%s: one processor %v, want %v", why, got, want)
		}
	}
	for i := 0; i < int(DownAfter/Tick)-1; i++ {
		step(Down/2, false, "quiet, not yet for DownAfter")
	}
	step((Down+Up)/2, false, "busier than Down: the quiet spell starts over")
	for i := 0; i < int(DownAfter/Tick)-1; i++ {
		step(Down/2, false, "quiet again, not yet for DownAfter")
	}
	step(Down/2, true, "quiet for DownAfter")
	step((Down+Up)/2, true, "under Up on one processor")
	step(Up+0.1, false, "over Up: the default at once")
	step(Down/2, false, "quiet for one tick only")
}

func TestCPUTimeGrowsWithWork(t *testing.T) {
	before := CPUTime()
	if before == 0 {
		t.Skip("no CPU time here")
	}
	for deadline := time.Now().Add(10 * time.Second); CPUTime() <= before; {
		if time.Now().After(deadline) {
			t.Fatalf("CPU time still %v after 10 s of work", before)
		}
	}
}
