package catchup

import (
	"io"
	"net/http"
	"strconv"
	"time"
)

// Rate limits: wait as the provider asks, up to maxRateWait per answer and
// maxRateTries tries per request; past that the answer goes back to the
// client and the pass fails, to be tried again at the next interval.
const (
	maxRateWait  = time.Minute
	maxRateTries = 4
)

// transport counts each request to the provider and obeys its rate
// limits: a 429 (or GitHub's 403 with X-RateLimit-Remaining: 0) is tried
// again after Retry-After (RFC 9110 §10.2.3) or X-RateLimit-Reset.
type transport struct {
	base    http.RoundTripper // not nil
	counted func()
}

// CloseIdleConnections closes the idle connections of the transport it
// wraps, so that http.Client.CloseIdleConnections reaches them.
func (t *transport) CloseIdleConnections() {
	if c, ok := t.base.(interface{ CloseIdleConnections() }); ok {
		c.CloseIdleConnections()
	}
}

func (t *transport) RoundTrip(req *http.Request) (*http.Response, error) {
	for try := 1; ; try++ {
		t.counted()
		resp, err := t.base.RoundTrip(req)
		if err != nil {
			return nil, err
		}
		wait, limited := rateLimited(resp, time.Now())
		if !limited || try == maxRateTries || wait > maxRateWait {
			return resp, nil
		}
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
		resp.Body.Close()
		timer := time.NewTimer(wait)
		select {
		case <-req.Context().Done():
			timer.Stop()
			return nil, req.Context().Err()
		case <-timer.C:
		}
		if req.Body != nil && req.GetBody != nil {
			body, err := req.GetBody()
			if err != nil {
				return nil, err
			}
			req = req.Clone(req.Context())
			req.Body = body
		}
	}
}

// rateLimited reports whether resp asks the client to slow down, and for
// how long: GitHub and Stripe answer 429 with Retry-After; GitHub's primary
// limit answers 403 or 429 with X-RateLimit-Remaining: 0 and the reset time
// in X-RateLimit-Reset (Unix seconds).
func rateLimited(resp *http.Response, now time.Time) (time.Duration, bool) {
	exhausted := resp.Header.Get("X-RateLimit-Remaining") == "0"
	retryAfter := resp.Header.Get("Retry-After")
	switch {
	case resp.StatusCode == http.StatusTooManyRequests:
	case resp.StatusCode == http.StatusForbidden && (exhausted || retryAfter != ""):
	default:
		return 0, false
	}
	if retryAfter != "" {
		if s, err := strconv.Atoi(retryAfter); err == nil && s >= 0 {
			// Longer than maxRateWait is refused anyway; capping first keeps
			// a huge value from overflowing into a negative wait.
			return time.Duration(min(s, int(maxRateWait/time.Second)+1)) * time.Second, true
		}
		if at, err := http.ParseTime(retryAfter); err == nil {
			return max(0, at.Sub(now)), true
		}
	}
	if exhausted {
		if s, err := strconv.ParseInt(resp.Header.Get("X-RateLimit-Reset"), 10, 64); err == nil {
			return max(0, time.Unix(s, 0).Sub(now)), true
		}
	}
	return maxRateWait, true // limited, without saying for how long
}
