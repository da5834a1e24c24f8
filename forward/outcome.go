package forward

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/jethook/jethook/policy"
	"github.com/jethook/jethook/store"
	"github.com/jethook/jethook/transform"
)

// Kind is what one attempt's result means for the delivery.
type Kind int

const (
	// Delivered: the backend answered 2xx.
	Delivered Kind = iota
	// Transient: worth another attempt (408, 429, 5xx, network error,
	// timeout, a protocol switch nobody asked for).
	Transient
	// Permanent: another attempt cannot succeed (other 4xx, 3xx).
	Permanent
)

func (k Kind) String() string {
	switch k {
	case Delivered:
		return "delivered"
	case Transient:
		return "transient"
	default:
		return "permanent"
	}
}

// Outcome is one classified attempt.
type Outcome struct {
	Kind       Kind
	Status     int           // 0 when no response arrived
	Err        error         // network or timeout error, if any
	RetryAfter time.Duration // the backend's Retry-After on 429/503, 0 if none
	Reason     string        // short, for dead letters and logs
	// Unsent is true when the stored message could not be made into a
	// request, so nothing reached the backend and the breaker learns
	// nothing from it.
	Unsent bool
	// Dropped is true when the destination's transform returned null: the
	// event is not for it, as if its filter had not matched.
	Dropped bool
	// Transform is the destination's transform's error, when that is
	// why nothing was sent.
	Transform *transform.Error
	// Sent is what the destination's transform made of the request that
	// was sent, for the attempt log; nil without a transform.
	Sent *store.Sent
	// Detail, when set, is the dead letter's last error instead of Err's
	// text, which logs show: it may quote what a script threw.
	Detail string
	// Span is the attempt's span, empty with tracing off: the metrics
	// take its trace id as the latency's exemplar.
	Span trace.SpanContext
}

// Classify applies the retry rules (docs/design.md, "Retry policy") to one
// attempt's result: 2xx is delivered; statuses the route's retry_on lists
// (408, 429, 5xx by default) and every network error or timeout are
// transient; redirects (not followed) and every other status are
// permanent.
//
// A 101 Switching Protocols (the one 1xx net/http returns) is transient:
// jethook never sends Upgrade, and a server may switch only to a protocol
// the request's Upgrade names (RFC 9110 §7.8), so it is a protocol error,
// like a malformed response, which net/http reports as an error and which
// is retried. A backend that does it every time opens its breaker and its
// events end as dead letters when their retries run out.
func Classify(r policy.Retry, resp *http.Response, err error, now func() time.Time) Outcome {
	if err != nil {
		reason := "network error"
		if errors.Is(err, context.DeadlineExceeded) || isTimeout(err) {
			reason = "timeout"
		}
		return Outcome{Kind: Transient, Err: err, Reason: reason}
	}
	o := Outcome{Status: resp.StatusCode}
	switch {
	case resp.StatusCode < 200:
		o.Kind, o.Reason = Transient, fmt.Sprintf("protocol error: status %d to a request that asked for no upgrade", resp.StatusCode)
	case resp.StatusCode >= 200 && resp.StatusCode < 300:
		o.Kind, o.Reason = Delivered, "delivered"
	case resp.StatusCode >= 300 && resp.StatusCode < 400:
		o.Kind, o.Reason = Permanent, fmt.Sprintf("redirect %d (not followed; fix the destination url)", resp.StatusCode)
	case r.Transient(resp.StatusCode):
		o.Kind, o.Reason = Transient, fmt.Sprintf("status %d", resp.StatusCode)
		if resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode == http.StatusServiceUnavailable {
			o.RetryAfter = RetryAfter(resp.Header.Get("Retry-After"), now())
		}
	default:
		o.Kind, o.Reason = Permanent, fmt.Sprintf("status %d", resp.StatusCode)
	}
	return o
}

func isTimeout(err error) bool {
	var t interface{ Timeout() bool }
	return errors.As(err, &t) && t.Timeout()
}

// RetryAfter parses a Retry-After value, delta-seconds or an HTTP-date
// (RFC 9110 §10.2.3), into a wait from now. Anything unparseable, or a date
// in the past, is 0.
func RetryAfter(v string, now time.Time) time.Duration {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0
	}
	if secs, err := strconv.ParseInt(v, 10, 64); err == nil {
		if secs <= 0 {
			return 0
		}
		if secs > int64(100*365*24*time.Hour/time.Second) {
			secs = int64(100 * 365 * 24 * time.Hour / time.Second)
		}
		return time.Duration(secs) * time.Second
	}
	if t, err := http.ParseTime(v); err == nil && t.After(now) {
		return t.Sub(now)
	}
	return 0
}
