package admin

import (
	"crypto/subtle"
	"errors"
	"sync"
	"time"

	"golang.org/x/time/rate"
)

// Errors of Throttle.Check.
var (
	// ErrWrongToken: the token was checked and is not the admin token.
	ErrWrongToken = errors.New("wrong admin token")
	// ErrTooManyWrongTokens: the budget of wrong tokens is spent, so the
	// token was not checked; try again in a minute.
	ErrTooManyWrongTokens = errors.New("too many wrong admin tokens: try again in a minute")
)

// WrongTokens is how many wrong admin tokens a Throttle checks a minute,
// from all clients together: a fixed budget, so guessing is slow and its
// memory does not grow with the number of clients.
const WrongTokens = 10

// Throttle bounds how fast the admin token can be guessed. Every check
// takes a token of the budget first, so parallel guesses cannot pass
// together; a right token gives it back. Past WrongTokens wrong tokens a
// minute, from anywhere, no token is checked, the right one included,
// until the budget refills (one every minute ÷ WrongTokens): the evidence
// is the wrong tokens themselves, and the hold ends at most a minute after
// they stop. The zero value is ready to use; one Throttle may serve
// several doors (the API and the dashboard's bearer tokens share one).
type Throttle struct {
	// Now is the clock; nil is time.Now.
	Now func() time.Time

	once sync.Once
	l    *rate.Limiter
}

// Check compares got with want in constant time: nil when they match,
// ErrWrongToken when not, ErrTooManyWrongTokens when the budget is spent
// and nothing was compared.
func (t *Throttle) Check(got, want string) error {
	t.once.Do(func() {
		if t.Now == nil {
			t.Now = time.Now
		}
		t.l = rate.NewLimiter(rate.Every(time.Minute/WrongTokens), WrongTokens)
	})
	now := t.Now()
	res := t.l.ReserveN(now, 1)
	if !res.OK() || res.DelayFrom(now) > 0 {
		res.CancelAt(now)
		return ErrTooManyWrongTokens
	}
	if subtle.ConstantTimeCompare([]byte(got), []byte(want)) != 1 {
		return ErrWrongToken
	}
	res.CancelAt(now)
	return nil
}
