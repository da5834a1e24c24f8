package metrics

import (
	"testing"
	"time"
)

func TestLastHourCountsEachMinuteAndForgetsOlderOnes(t *testing.T) {
	t.Parallel()
	m := newMinutes()
	app, audit := &Destination{route: "shop", destination: "app"}, &Destination{route: "shop", destination: "audit"}
	t0 := time.Date(2026, 5, 2, 9, 0, 30, 0, time.UTC)
	m.add(app, true, t0)
	m.add(app, true, t0.Add(10*time.Second))
	m.add(app, false, t0.Add(time.Minute))
	m.add(audit, false, t0)

	got := m.lastHour("shop", "app", t0.Add(time.Minute))
	if len(got) != HistoryMinutes {
		t.Fatalf("%d minutes, want %d", len(got), HistoryMinutes)
	}
	last, before := got[HistoryMinutes-1], got[HistoryMinutes-2]
	if !last.Start.Equal(time.Date(2026, 5, 2, 9, 1, 0, 0, time.UTC)) || last.Delivered != 0 || last.Failed != 1 {
		t.Errorf("current minute: %+v, want 09:01 with 1 failed", last)
	}
	if before.Delivered != 2 || before.Failed != 0 {
		t.Errorf("minute before: %+v, want 2 delivered", before)
	}

	// An hour later the ring's slots are reused: the old counts are gone.
	later := t0.Add(HistoryMinutes * time.Minute)
	m.add(app, true, later)
	got = m.lastHour("shop", "app", later)
	total := 0
	for _, mn := range got {
		total += mn.Delivered + mn.Failed
	}
	if total != 2 || got[HistoryMinutes-1].Delivered != 1 {
		t.Errorf("an hour later: %d attempts in the hour (want 2: 09:01's failure and the new delivery), last %+v", total, got[HistoryMinutes-1])
	}
}

func TestADestinationIdleForAnHourLeavesNoRing(t *testing.T) {
	t.Parallel()
	m := newMinutes()
	idle, app := &Destination{route: "shop", destination: "idle"}, &Destination{route: "shop", destination: "app"}
	t0 := time.Date(2026, 5, 2, 9, 0, 0, 0, time.UTC)
	m.add(idle, true, t0)
	later := t0.Add(2 * HistoryMinutes * time.Minute)
	m.add(app, true, later)
	if _, ok := m.rings[[2]string{"shop", "idle"}]; ok {
		t.Fatal("the ring of a destination idle for two hours is still kept")
	}
	if len(m.rings) != 1 {
		t.Fatalf("%d rings, want 1", len(m.rings))
	}

	// Its attempts, should it make some again, count in a ring kept anew.
	m.add(idle, false, later)
	if got := m.lastHour("shop", "idle", later); got[HistoryMinutes-1].Failed != 1 {
		t.Errorf("an idle destination's attempt after its ring was dropped: %+v, want 1 failed", got[HistoryMinutes-1])
	}
}

func TestANilMetricsHasAnEmptyHour(t *testing.T) {
	t.Parallel()
	var m *Metrics
	got := m.LastHour("shop", "app", time.Now())
	if len(got) != HistoryMinutes || got[0].Delivered+got[0].Failed != 0 {
		t.Fatalf("nil metrics: %d minutes %+v", len(got), got[0])
	}
}
