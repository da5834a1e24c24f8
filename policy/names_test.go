package policy

import (
	"errors"
	"fmt"
	"strconv"
	"testing"
)

// Route and destination names become NATS subject tokens
// (webhooks.<route>.<token>, dlq.<route>.<destination>.<token>), so any
// character that would split a token or match others is refused at load,
// with the file, the line and the key.
func TestNamesThatWouldBreakASubjectTokenAreRejectedWithTheirLineAndKey(t *testing.T) {
	t.Parallel()
	bad := []string{"a.b", ".", "*", ">", "a.>", "a*", "my app", " ", "a\tb", "", "a\nb", "ünïcode", "a/b"}
	for _, name := range bad {
		q := strconv.Quote(name)
		t.Run("route name "+q, func(t *testing.T) {
			t.Parallel()
			yaml := "routes:\n  - path: /a\n    name: " + q + "\n    destinations: [{name: app, url: 'http://a'}]\n"
			wantOnly(t, yaml, fmt.Sprintf(`p.yaml:3: routes[0].name: invalid name %s: use only letters, digits, "_" and "-" (it becomes a NATS subject token)`, q))
		})
		t.Run("destination name "+q, func(t *testing.T) {
			t.Parallel()
			yaml := "routes:\n  - name: a\n    path: /a\n    destinations:\n      - url: 'http://a'\n        name: " + q + "\n"
			wantOnly(t, yaml, fmt.Sprintf(`p.yaml:6: routes[0].destinations[0].name: invalid name %s: use only letters, digits, "_" and "-" (it becomes a NATS subject token)`, q))
		})
	}
}

// wantOnly parses yaml and wants exactly one error, with the text want.
func wantOnly(t *testing.T, yaml, want string) {
	t.Helper()
	cfg, err := Parse("p.yaml", []byte(yaml), nil)
	if err == nil {
		t.Fatalf("accepted: %+v", cfg.Routes)
	}
	var e *Error
	if !errors.As(err, &e) || err.Error() != want {
		t.Fatalf("error:\n got %v\nwant %s", err, want)
	}
}

// A destination's durable consumer is named <route>__<destination>, so
// route "a" with destination "b__c" and route "a__b" with destination "c"
// would share one: each would get some of the other's webhooks and lose
// some of its own. The second is refused.
func TestRoutesAndDestinationsWhoseNamesJoinAlikeAreRejected(t *testing.T) {
	t.Parallel()
	yaml := "routes:\n" +
		"  - name: a\n    path: /a\n    destinations: [{name: b__c, url: 'http://a'}, {name: d, url: 'http://a'}]\n" +
		"  - name: a__b\n    path: /ab\n    destinations: [{name: c, url: 'http://a'}]\n" +
		"  - name: a__b__c\n    path: /abc\n    destinations: [{name: d, url: 'http://a'}]\n"
	wantOnly(t, yaml, `p.yaml:5: routes[1].name: route "a__b" destination "c" and route "a" destination "b__c" (line 2) would share one queue, "a__b__c"; rename one`)
}
