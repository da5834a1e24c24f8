package policy

import (
	"strings"
	"testing"
	"time"
)

func TestParseDuration(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in   string
		want time.Duration
		ok   bool
	}{
		{"2s", 2 * time.Second, true},
		{"1h30m", 90 * time.Minute, true},
		{"3d", 72 * time.Hour, true},
		{"1d12h", 36 * time.Hour, true},
		{"1.5d", 36 * time.Hour, true},
		{"0", 0, true},
		{"2x", 0, false},
		{"-1s", 0, false},
		{"-1d", 0, false},
		{"30", 0, false},
		{"d", 0, false},
		{"1dd", 0, false},
		{"999999999d", 0, false},
		{"", 0, false},
	}
	for _, tt := range tests {
		t.Run("duration "+tt.in, func(t *testing.T) {
			t.Parallel()
			got, err := parseDuration(tt.in)
			if (err == nil) != tt.ok || got != tt.want {
				t.Errorf("parseDuration(%q) = %v, %v; want %v, ok=%v", tt.in, got, err, tt.want, tt.ok)
			}
		})
	}
}

func TestParseRate(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in   string
		want float64
		ok   bool
	}{
		{"50/s", 50, true},
		{"120/m", 2, true},
		{"7200/h", 2, true},
		{"0.5/s", 0.5, true},
		{"50 / s", 50, true},
		{"50", 0, false},
		{"0/s", 0, false},
		{"-1/s", 0, false},
		{"NaN/s", 0, false},
		{"Inf/s", 0, false},
		{"1e3/s", 0, false},
		{"50/d", 0, false},
		{"50/s burst 20", 0, false},
	}
	for _, tt := range tests {
		t.Run("rate "+tt.in, func(t *testing.T) {
			t.Parallel()
			got, err := parseRate(tt.in)
			if (err == nil) != tt.ok || got != tt.want {
				t.Errorf("parseRate(%q) = %v, %v; want %v, ok=%v", tt.in, got, err, tt.want, tt.ok)
			}
		})
	}
}

func TestParseStatus(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in   string
		want StatusMatch
		ok   bool
	}{
		{"429", StatusMatch{Code: 429}, true},
		{"5xx", StatusMatch{Class: 5}, true},
		{"4XX", StatusMatch{Class: 4}, true},
		{"2xx", StatusMatch{}, false},
		{"302", StatusMatch{}, false},
		{"600", StatusMatch{}, false},
		{"abc", StatusMatch{}, false},
	}
	for _, tt := range tests {
		t.Run("status "+tt.in, func(t *testing.T) {
			t.Parallel()
			got, err := parseStatus(tt.in)
			if (err == nil) != tt.ok || got != tt.want {
				t.Errorf("parseStatus(%q) = %v, %v; want %v, ok=%v", tt.in, got, err, tt.want, tt.ok)
			}
		})
	}
}

func TestCheckPath(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in string
		ok bool
	}{
		{"/hooks/github", true},
		{"/", true},
		{"/hooks/", true},
		{"hooks", false},
		{"/a b", false},
		{"/a\tb", false},
		{"/a?b", false},
		{"/a#b", false},
		{"/a/{id}", false},
		{"/a//b", false},
		{"/a/../b", false},
	}
	for _, tt := range tests {
		t.Run("path "+tt.in, func(t *testing.T) {
			t.Parallel()
			if err := checkPath(tt.in); (err == nil) != tt.ok {
				t.Errorf("checkPath(%q) = %v, want ok=%v", tt.in, err, tt.ok)
			}
		})
	}
}

func TestValidWhsec(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in string
		ok bool
	}{
		{"whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", true},
		{"whsec_c2VjcmV0", true},
		{"whsec_", false},
		{"whsec_!!!", false},
		{"MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", false},
	}
	for _, tt := range tests {
		t.Run("secret "+tt.in, func(t *testing.T) {
			t.Parallel()
			if got := validWhsec(tt.in); got != tt.ok {
				t.Errorf("validWhsec(%q) = %v, want %v", tt.in, got, tt.ok)
			}
		})
	}
}

func TestAnInvalidURLIsNamedWithoutItsCredentials(t *testing.T) {
	t.Parallel()
	dest := func(url string) string {
		return "routes:\n  - name: a\n    path: /a\n    destinations: [{name: a, url: '" + url + "'}]\n"
	}
	for _, tc := range []struct{ name, yaml, want string }{
		{"a destination that is not http",
			dest("ftp://alice:S3cretPass@backend/x?token=S3cretPass"),
			`p.yaml:4: routes[0].destinations[0].url: URL "ftp://backend/x" must be absolute http or https`},
		{"a destination without a host",
			dest("http://alice:S3cretPass@/x?token=S3cretPass"),
			`p.yaml:4: routes[0].destinations[0].url: URL "http:///x" has no host`},
		{"a destination that does not parse",
			dest("http://alice:S3cretPass@backend/x%zz?token=S3cretPass"),
			`p.yaml:4: routes[0].destinations[0].url: invalid URL "http://backend/x%zz"`},
		{"a catch-up api_url that is not http",
			catchUpRoute("stripe", "      stripe: {api_key: k, api_url: 'ftp://alice:S3cretPass@stripe.internal/?key=S3cretPass'}\n      window: 30d\n"),
			`p.yaml:8: routes[0].catch_up.stripe.api_url: URL "ftp://stripe.internal/" must be absolute http or https`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, err := Parse("p.yaml", []byte(tc.yaml), nil)
			if err == nil {
				t.Fatal("no error")
			}
			first, _, _ := strings.Cut(err.Error(), "\n")
			if first != tc.want || strings.Contains(err.Error(), "S3cretPass") {
				t.Errorf("error:\n%v\nwant first:\n%s\nand no secret", err, tc.want)
			}
		})
	}
}
