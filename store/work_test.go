package store

import (
	"context"
	"testing"
	"time"
)

// Work records count the evaluations that began and never ended, per
// webhook and destination, across a restart, until one ends; a record
// left behind is dropped once it is older than the index keeps anything.
func TestWorkRecordsCountWorkThatNeverEnded(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	open := func() *Store {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		st, err := Open(ctx, Options{DataDir: dir})
		if err != nil {
			t.Fatal(err)
		}
		return st
	}
	begin := func(st *Store, dest string, seq uint64, want int) {
		t.Helper()
		if n, err := st.BeginWork("shop", dest, seq, time.Now()); err != nil || n != want {
			t.Fatalf("BeginWork(%s, %d) = %d, %v; want %d", dest, seq, n, err, want)
		}
	}
	st := open()
	begin(st, "app", 7, 0)
	begin(st, "app", 7, 1)
	begin(st, "crm", 7, 0) // another destination counts apart
	begin(st, "app", 8, 0) // and another webhook
	st.Close()

	st = open()
	defer st.Close()
	begin(st, "app", 7, 2)
	st.EndWork("shop", "app", 7)
	begin(st, "app", 7, 0)

	if err := st.idx.expireWork(time.Now().Add(time.Minute)); err != nil {
		t.Fatal(err)
	}
	begin(st, "crm", 7, 0)
}
