package catchup

import (
	"net/http"
	"strconv"
	"testing"
	"time"
)

func TestRateLimited(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 12, 5, 0, 0, 0, 0, time.UTC)
	tests := []struct {
		name    string
		status  int
		header  map[string]string
		wait    time.Duration
		limited bool
	}{
		{"a 200 is not limited", 200, nil, 0, false},
		{"a 429 waits its Retry-After seconds", 429, map[string]string{"Retry-After": "7"}, 7 * time.Second, true},
		{"a 429 waits until its Retry-After date", 429, map[string]string{"Retry-After": now.Add(90 * time.Second).Format(http.TimeFormat)}, 90 * time.Second, true},
		{"GitHub's exhausted primary limit waits for the reset", 403,
			map[string]string{"X-RateLimit-Remaining": "0", "X-RateLimit-Reset": strconv.FormatInt(now.Add(30*time.Second).Unix(), 10)}, 30 * time.Second, true},
		{"GitHub's secondary limit waits its Retry-After", 403, map[string]string{"Retry-After": "60"}, time.Minute, true},
		{"a 403 without limit headers is a refusal, not a limit", 403, nil, 0, false},
		{"a 429 that says nothing waits the longest", 429, nil, maxRateWait, true},
		{"a past reset does not wait", 429, map[string]string{"X-RateLimit-Remaining": "0", "X-RateLimit-Reset": "1"}, 0, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			resp := &http.Response{StatusCode: tt.status, Header: http.Header{}}
			for k, v := range tt.header {
				resp.Header.Set(k, v)
			}
			wait, limited := rateLimited(resp, now)
			if wait != tt.wait || limited != tt.limited {
				t.Errorf("rateLimited = %v, %v; want %v, %v", wait, limited, tt.wait, tt.limited)
			}
		})
	}
}
