package proxy

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"testing/iotest"
)

func TestABodyIsReadWholeAndGivesItsBudgetBack(t *testing.T) {
	t.Parallel()
	const limit = 200 << 10
	for _, size := range []int{0, 1, 1000, firstRead - 1, firstRead, firstRead + 1, 3 * firstRead, limit} {
		body := bytes.Repeat([]byte("abcdefg"), size/7+1)[:size]
		for _, tc := range []struct {
			name   string
			length int64
			wrap   func(io.Reader) io.Reader
		}{
			{"with its length declared", int64(size), func(r io.Reader) io.Reader { return r }},
			{"chunked", -1, func(r io.Reader) io.Reader { return r }},
			{"with its length declared, a byte at a time", int64(size), iotest.OneByteReader},
			{"chunked, a byte at a time", -1, iotest.OneByteReader},
			{"with its length declared, the last bytes with EOF", int64(size), iotest.DataErrReader},
		} {
			t.Run(fmt.Sprintf("%d bytes %s", size, tc.name), func(t *testing.T) {
				b := newBudget(1 << 20)
				got, err := b.read(context.Background(), tc.wrap(http.MaxBytesReader(nil, io.NopCloser(bytes.NewReader(body)), limit)), tc.length, limit)
				if err != nil || !bytes.Equal(got, body) {
					t.Fatalf("got %d bytes, %v", len(got), err)
				}
				// The buffer grows only as bytes arrive: at most twice
				// what was sent, or the first read.
				if c := cap(got); c > max(2*size, firstRead) {
					t.Errorf("buffer of %d", c)
				}
				b.put(cap(got))
				if !b.sem.TryAcquire(1 << 20) {
					t.Error("the budget did not get everything back")
				}
			})
		}
	}
}

func TestABodyThatIsNotWhatItSaysHoldsNothing(t *testing.T) {
	t.Parallel()
	const limit = 100 << 10
	for _, tc := range []struct {
		name   string
		body   string
		length int64
		want   func(error) bool
	}{
		{"shorter than its Content-Length", "short", 100, func(err error) bool { return errors.Is(err, io.ErrUnexpectedEOF) }},
		{"far shorter than its Content-Length", "short", 90 << 10, func(err error) bool { return errors.Is(err, io.ErrUnexpectedEOF) }},
		{"longer than its Content-Length", "longer than declared", 6, func(err error) bool { return err != nil }},
		{"chunked, over the limit", strings.Repeat("x", limit+1), -1, func(err error) bool {
			var tooBig *http.MaxBytesError
			return errors.As(err, &tooBig)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			b := newBudget(1 << 20)
			r := http.MaxBytesReader(nil, io.NopCloser(strings.NewReader(tc.body)), limit)
			got, err := b.read(context.Background(), r, tc.length, limit)
			if got != nil || !tc.want(err) {
				t.Fatalf("got %d bytes, %v", len(got), err)
			}
			if !b.sem.TryAcquire(1 << 20) {
				t.Error("a failed read kept part of the budget")
			}
		})
	}
}

func TestTheDefaultBudgetIsAQuarterOfTheMemoryLimit(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		limit int64
		want  int64
	}{
		{"no limit (math.MaxInt64)", 1<<63 - 1, 256 << 20},
		{"a 1 GiB limit", 1 << 30, 256 << 20},
		{"a 4 GiB limit", 4 << 30, 1 << 30},
		{"a 32 MiB limit, raised to the floor", 32 << 20, 16 << 20},
	} {
		if got := InFlightBytes(tc.limit); got != tc.want {
			t.Errorf("%s: %d, want %d", tc.name, got, tc.want)
		}
	}
}
