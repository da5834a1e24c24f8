package store

import (
	"bufio"
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
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

// A mark is counted after the process that made it is killed (SIGKILL,
// nothing of it runs after): one in a slot, and one whose key is too long
// for a slot and goes to the index.
func TestAMarkOutlivesTheProcessKilledDuringItsWork(t *testing.T) {
	long := strings.Repeat("r", slotKeyMax)
	if dir := os.Getenv("JETHOOK_TEST_WORK_DIR"); dir != "" {
		x, err := openIndex(dir, time.Hour, 1<<20, slog.Default())
		if err != nil {
			fmt.Println(err)
			os.Exit(1)
		}
		st := &Store{idx: x}
		for _, route := range []string{"shop", long} {
			if _, err := st.BeginWork(route, "app", 7, time.Now()); err != nil {
				fmt.Println(err)
				os.Exit(1)
			}
		}
		fmt.Println("marked")
		select {} // until killed
	}
	t.Parallel()
	dir := t.TempDir()
	cmd := exec.Command(os.Args[0], "-test.run=^TestAMarkOutlivesTheProcessKilledDuringItsWork$")
	cmd.Env = append(os.Environ(), "JETHOOK_TEST_WORK_DIR="+dir)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil || line != "marked\n" {
		_ = cmd.Process.Kill()
		t.Fatalf("the child said %q (%v)", line, err)
	}
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()

	x, err := openIndex(dir, time.Hour, 1<<20, slog.Default())
	if err != nil {
		t.Fatal(err)
	}
	defer x.close()
	st := &Store{idx: x}
	for _, route := range []string{"shop", long} {
		if n, err := st.BeginWork(route, "app", 7, time.Now()); err != nil || n != 1 {
			t.Errorf("route of %d bytes: BeginWork = %d, %v; want the 1 death", len(route), n, err)
		}
	}
	if n, err := st.BeginWork("shop", "crm", 7, time.Now()); err != nil || n != 0 {
		t.Errorf("work never begun: BeginWork = %d, %v; want 0", n, err)
	}
}

// When every slot is taken, a mark goes to the index, and counts the same.
func TestMarksBeyondTheSlotsAreCountedInTheIndex(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	x, err := openIndex(dir, time.Hour, 1<<20, slog.Default())
	if err != nil {
		t.Fatal(err)
	}
	st := &Store{idx: x}
	const works = slotCount + 10
	for seq := range uint64(works) {
		if _, err := st.BeginWork("shop", "app", seq, time.Now()); err != nil {
			t.Fatal(err)
		}
	}
	st.EndWork("shop", "app", 3)       // a slot
	st.EndWork("shop", "app", works-1) // a record in the index
	if err := x.close(); err != nil {
		t.Fatal(err)
	}

	if x, err = openIndex(dir, time.Hour, 1<<20, slog.Default()); err != nil {
		t.Fatal(err)
	}
	defer x.close()
	st = &Store{idx: x}
	for seq := range uint64(works) {
		want := 1
		if seq == 3 || seq == works-1 {
			want = 0
		}
		if n, err := st.BeginWork("shop", "app", seq, time.Now()); err != nil || n != want {
			t.Fatalf("seq %d: BeginWork = %d, %v; want %d", seq, n, err, want)
		}
	}
}

// Where the file of slots cannot be made, the index opens all the same and
// the marks go to the index, counted as before.
func TestMarksGoToTheIndexWhenTheSlotsCannotBeMapped(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	if err := os.Mkdir(filepath.Join(dir, workSlotsFile), 0o700); err != nil {
		t.Fatal(err)
	}
	var logs strings.Builder
	log := slog.New(slog.NewTextHandler(&logs, nil))
	x, err := openIndex(dir, time.Hour, 1<<20, log)
	if err != nil {
		t.Fatal(err)
	}
	if x.work.slots != nil || !strings.Contains(logs.String(), "work marks go to the index") {
		t.Errorf("slots %v; log:\n%s", x.work.slots, logs.String())
	}
	st := &Store{idx: x}
	if _, err := st.BeginWork("shop", "app", 7, time.Now()); err != nil {
		t.Fatal(err)
	}
	if err := x.close(); err != nil {
		t.Fatal(err)
	}
	if x, err = openIndex(dir, time.Hour, 1<<20, log); err != nil {
		t.Fatal(err)
	}
	defer x.close()
	st = &Store{idx: x}
	if n, err := st.BeginWork("shop", "app", 7, time.Now()); err != nil || n != 1 {
		t.Errorf("BeginWork = %d, %v; want the 1 death", n, err)
	}
}
