package policy

import "testing"

func TestExpand(t *testing.T) {
	t.Parallel()
	lookup := env(map[string]string{"A": "1", "EMPTY": "", "B_2": "two", "Y": "x: [1]"})
	tests := []struct {
		name, in, want, err string
	}{
		{name: "text without variables is kept", in: "plain $text", want: "plain $text"},
		{name: "a variable is replaced", in: "a=${A}", want: "a=1"},
		{name: "several variables are replaced", in: "${A}-${B_2}-${A}", want: "1-two-1"},
		{name: "a variable may be set and empty", in: "[${EMPTY}]", want: "[]"},
		{name: "YAML in a value stays text", in: "${Y}", want: "x: [1]"},
		{name: "$${ is a literal ${", in: "$${A}", want: "${A}"},
		{name: "an escape next to a variable", in: "$${A}${A}", want: "${A}1"},
		{name: "a default stands in for a missing variable", in: "${NOPE:-http://127.0.0.1:3000}/hook", want: "http://127.0.0.1:3000/hook"},
		{name: "a default stands in for an empty variable", in: "${EMPTY:-d}", want: "d"},
		{name: "a set variable wins over its default", in: "${A:-d}", want: "1"},
		{name: "a default may be empty", in: "[${NOPE:-}]", want: "[]"},
		{name: "a missing variable is named", in: "${NOPE}", err: `environment variable "NOPE" is not set`},
		{name: "an unterminated reference is an error", in: "${A", err: `unterminated "${"; write "$${" for a literal`},
		{name: "a bad name is an error", in: "${A-B}", err: `invalid variable name "A-B" in "${...}"`},
		{name: "an empty name is an error", in: "${}", err: `invalid variable name "" in "${...}"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := expand(tt.in, lookup)
			if tt.err != "" {
				if err == nil || err.Error() != tt.err {
					t.Fatalf("expand(%q) error = %v, want %q", tt.in, err, tt.err)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Fatalf("expand(%q) = %q, %v; want %q", tt.in, got, err, tt.want)
			}
		})
	}
}
