package store

import (
	"maps"
	"testing"
)

func TestSubjectsOverlap(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		a, b string
		want bool
	}{
		{"webhooks.shop.*", "webhooks.shop.*", true},
		{"webhooks.shop.*", "webhooks.crm.*", false},
		{"webhooks.>", "webhooks.shop.*", true},
		{">", "webhooks.shop.*", true},
		{"webhooks.*.v2", "webhooks.shop.*", true},
		{"replay.shop.app.*", "webhooks.shop.*", false},
		{"replay.shop.app.*", "webhooks.>", false},
		{"webhooks.shop", "webhooks.shop.*", false},
		{"webhooks.shop.v2.x", "webhooks.shop.*", false},
		{"webhooks.shop.v2.x", "webhooks.>", true},
		{"webhooks", "webhooks.>", false},
	} {
		if got := subjectsOverlap(tc.a, tc.b); got != tc.want {
			t.Errorf("subjectsOverlap(%q, %q) = %v, want %v", tc.a, tc.b, got, tc.want)
		}
		if got := subjectsOverlap(tc.b, tc.a); got != tc.want {
			t.Errorf("subjectsOverlap(%q, %q) = %v, want %v", tc.b, tc.a, got, tc.want)
		}
	}
}

func TestPlanKeep(t *testing.T) {
	t.Parallel()
	dest := func(route, d string, pending, ackPending, floor uint64) consumerState {
		return consumerState{filters: []string{"webhooks." + route + ".*", "replay." + route + "." + d + ".*"},
			pending: pending, ackPending: ackPending, ackFloor: floor}
	}
	const last = 1000
	for _, tc := range []struct {
		name   string
		cs     []consumerState
		routes map[string]uint64
		all    uint64
	}{
		{"a stream without consumers keeps nothing", nil, map[string]uint64{}, last + 1},
		{"a destination that has settled everything needs nothing, whatever its floor",
			[]consumerState{dest("shop", "app", 0, 0, 10)}, map[string]uint64{"shop": last + 1}, last + 1},
		{"a destination with messages in flight needs everything past its floor",
			[]consumerState{dest("shop", "app", 0, 3, 400)}, map[string]uint64{"shop": 401}, 401},
		{"a paused destination keeps its route's messages and only bounds the sweep of routes without consumers",
			[]consumerState{dest("shop", "app", 50, 0, 100), dest("crm", "app", 0, 0, 900)},
			map[string]uint64{"shop": 101, "crm": last + 1}, 101},
		{"of two destinations of one route the one further behind counts",
			[]consumerState{dest("shop", "app", 1, 0, 700), dest("shop", "crm", 5, 2, 300)},
			map[string]uint64{"shop": 301}, 301},
		{"a consumer of every subject (the index's tail) counts for every route",
			[]consumerState{dest("shop", "app", 0, 0, 0), {pending: 10, ackFloor: 600}},
			map[string]uint64{"shop": 601}, 601},
		{"a consumer of replays only counts for none",
			[]consumerState{{filters: []string{"replay.shop.app.*"}, pending: 10, ackFloor: 5}, dest("shop", "app", 0, 0, 0)},
			map[string]uint64{"shop": last + 1}, last + 1},
		{"a floor past the last sequence read keeps what came after",
			[]consumerState{dest("shop", "app", 1, 0, last+50)}, map[string]uint64{"shop": last + 1}, last + 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			k := planKeep(tc.cs, last)
			if !maps.Equal(k.routes, tc.routes) || k.all != tc.all {
				t.Errorf("planKeep = routes %v, all %d; want routes %v, all %d", k.routes, k.all, tc.routes, tc.all)
			}
		})
	}
}

func TestPurgeTarget(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		h      Health
		target uint64
		ok     bool
	}{
		{"below 90 % of the limit, none", Health{Used: 899, Limit: 1000}, 899, false},
		{"above 90 % of the limit, down to 80 %", Health{Used: 901, Limit: 1000}, 800, true},
		{"no limit known, none", Health{Used: 901}, 901, false},
		{"a disk with twice its floor free, none", Health{Used: 500, DiskFree: 200, DiskSize: 1000, DiskFloor: 100}, 500, false},
		{"a disk with less, what frees it back to twice its floor", Health{Used: 500, DiskFree: 150, DiskSize: 1000, DiskFloor: 100}, 450, true},
		{"both, the lower", Health{Used: 950, Limit: 1000, DiskFree: 210, DiskSize: 2000, DiskFloor: 200}, 760, true},
		{"a disk below its floor, none: a purge needs room too", Health{Used: 500, DiskFree: 50, DiskSize: 1000, DiskFloor: 100}, 500, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if target, ok := purgeTarget(tc.h); target != tc.target || ok != tc.ok {
				t.Errorf("purgeTarget = %d, %v; want %d, %v", target, ok, tc.target, tc.ok)
			}
		})
	}
}
