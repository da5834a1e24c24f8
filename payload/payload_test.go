package payload

import (
	"strings"
	"testing"
)

func TestTooDeep(t *testing.T) {
	t.Parallel()
	nest := func(n int) string { return strings.Repeat("[", n) + strings.Repeat("]", n) }
	for _, tc := range []struct {
		name string
		body string
		want bool
	}{
		{"an empty body is not too deep", "", false},
		{"a flat object is not too deep", `{"a":1,"b":[1,2]}`, false},
		{"arrays nested MaxDepth deep are not too deep", nest(MaxDepth), false},
		{"arrays nested one more than MaxDepth are too deep", nest(MaxDepth + 1), true},
		{"objects nested past MaxDepth are too deep", strings.Repeat(`{"a":`, MaxDepth+1), true},
		{"five megabytes of [ are too deep", strings.Repeat("[", 5<<20), true},
		{"brackets inside a string do not count", `"` + strings.Repeat("[", 1000) + `"`, false},
		{"an escaped quote does not end the string", `"\"` + strings.Repeat("[", 1000) + `"`, false},
		{"an escaped backslash ends before the quote", `["\\"` + strings.Repeat(",[", MaxDepth) + `]`, true},
		{"siblings do not add up", strings.Repeat(nest(MaxDepth), 100), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			if got := TooDeep([]byte(tc.body)); got != tc.want {
				t.Errorf("TooDeep = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestDepth(t *testing.T) {
	t.Parallel()
	for body, want := range map[string]int{"": 0, "1": 0, `{"a":[1,{}]}`: 3, `[[]][[[]]]`: 3, `"[[["`: 0} {
		if got := Depth([]byte(body)); got != want {
			t.Errorf("Depth(%q) = %d, want %d", body, got, want)
		}
	}
}

func TestTooDeepAllocatesNothing(t *testing.T) {
	b := []byte(strings.Repeat("[", 1<<20))
	if n := testing.AllocsPerRun(10, func() { TooDeep(b) }); n != 0 {
		t.Errorf("TooDeep allocates %v times per call, want 0", n)
	}
}
