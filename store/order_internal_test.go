package store

import (
	"context"
	"slices"
	"testing"
	"time"
)

// orderRig admits and settles claims of one ordered destination of s.
type orderRig struct {
	t *testing.T
	s *Store
}

func (r orderRig) admit(k OrderKey, seqs ...uint64) []Verdict {
	r.t.Helper()
	var cs []Claim
	for _, seq := range seqs {
		cs = append(cs, Claim{Key: k, Seq: seq, EventID: "evt", FirstSeen: time.Now()})
	}
	v, err := r.s.Admit("shop", "app", cs, time.Now())
	if err != nil {
		r.t.Fatal(err)
	}
	return v
}

func (r orderRig) settle(k OrderKey, seq uint64) {
	r.t.Helper()
	if err := r.s.SettleHead(context.Background(), "shop", "app", k, seq, time.Now()); err != nil {
		r.t.Fatal(err)
	}
}

// onDisk reports whether k has a head entry in the index.
func (r orderRig) onDisk(k OrderKey) bool {
	r.t.Helper()
	_, ok, err := r.s.readHead(headKey("shop", "app", k))
	if err != nil {
		r.t.Fatal(err)
	}
	return ok
}

// A key's head in its first attempt, with nothing behind it, is in memory
// only: passing it on writes nothing. It goes to disk when an event queues
// behind it or when KeepHead keeps it (its message goes back).
func TestAFreshHeadIsWrittenOnlyWhenItMustOutliveACrash(t *testing.T) {
	t.Parallel()
	s, err := Open(context.Background(), Options{DataDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	r := orderRig{t, s}
	a, b, c := KeyOf("a"), KeyOf("b"), KeyOf("c")

	if v := r.admit(a, 1); !slices.Equal(v, []Verdict{Go}) {
		t.Fatalf("a#1: %v, want Go", v)
	}
	if r.onDisk(a) {
		t.Error("a's fresh head was written to the index")
	}
	if p, ok, err := s.PlaceOf("shop", "app", a, 1); err != nil || !ok || !p.Head {
		t.Errorf("PlaceOf a#1: %+v %v %v, want its key's head", p, ok, err)
	}
	r.settle(a, 1)
	if v := r.admit(a, 2); !slices.Equal(v, []Verdict{Go}) {
		t.Errorf("a#2 after a#1 was settled: %v, want Go", v)
	}

	if v := r.admit(b, 1, 2); !slices.Equal(v, []Verdict{Go, Queued}) {
		t.Fatalf("b#1, b#2: %v, want Go, Queued", v)
	}
	if !r.onDisk(b) {
		t.Error("b's head, with an event queued behind it, is not in the index")
	}

	r.admit(c, 1)
	if err := s.KeepHead("shop", "app", c, 1); err != nil {
		t.Fatal(err)
	}
	if !r.onDisk(c) {
		t.Error("c's head, kept, is not in the index")
	}
	if v := r.admit(c, 2); !slices.Equal(v, []Verdict{Queued}) {
		t.Errorf("c#2 behind c's kept head: %v, want Queued", v)
	}
}

// The counts of head entries on disk, which let Admit skip the index for
// a key that has none, are read again when the store opens, and a key
// whose slot it shares with another is read from the index until both
// are gone.
func TestHeadsOnDiskHoldTheirKeysAcrossARestartAndBesideKeysOfTheirSlot(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	s, err := Open(ctx, Options{DataDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	// Two keys of one stripe and one slot.
	var a, b OrderKey
	a[15], b[15] = 1, 2
	if stripe(a) != stripe(b) || slot(a) != slot(b) {
		t.Fatal("the keys do not share a slot")
	}
	r := orderRig{t, s}
	r.admit(a, 1, 2)
	r.admit(b, 3, 4)
	s.Close()

	s, err = Open(ctx, Options{DataDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	r = orderRig{t, s}
	if v := r.admit(a, 5); !slices.Equal(v, []Verdict{Queued}) {
		t.Errorf("a#5 after a restart: %v, want Queued behind a#1", v)
	}
	r.settle(a, 1) // a#2 goes (a due record)
	r.settle(a, 2) // a#5 goes
	r.settle(a, 5) // a's entries go
	if r.onDisk(a) {
		t.Fatal("a's head is still in the index")
	}
	if v := r.admit(b, 6); !slices.Equal(v, []Verdict{Queued}) {
		t.Errorf("b#6 once a, of its slot, is gone: %v, want Queued behind b#3", v)
	}
}
