package forward

import (
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/jethook/jethook/policy"
)

func TestAReloadKeepsAddsRestartsAndRemovesByWhatTheLoopsUse(t *testing.T) {
	t.Parallel()
	dest := func(name, url string) policy.Destination {
		return policy.Destination{Name: name, URL: url, Concurrency: 4, Timeout: 10 * time.Second}
	}
	route := func(name string, ds ...policy.Destination) policy.Route {
		return policy.Route{Name: name, Path: "/hooks/" + name, Timeout: 10 * time.Second,
			Retry: policy.Retry{MaxAttempts: 5}, Destinations: ds}
	}
	running := []settings{
		{route("shop", dest("app", "http://a")), dest("app", "http://a")},
		{route("shop", dest("crm", "http://c")), dest("crm", "http://c")},
		{route("git", dest("ci", "http://ci")), dest("ci", "http://ci")},
	}
	shop := route("shop", dest("app", "http://a"), dest("crm", "http://c2"), dest("erp", "http://e"))
	shop.Path = "/hooks/shop-renamed" // the ingress's business
	retried := route("git", dest("ci", "http://ci"))
	retried.Retry.MaxAttempts = 9
	for _, tc := range []struct {
		name string
		cfg  *policy.Config
		want []string // kind:route/dest@was
	}{
		{"the same configuration keeps every loop", &policy.Config{Routes: []policy.Route{
			route("shop", dest("app", "http://a"), dest("crm", "http://c")), route("git", dest("ci", "http://ci"))}},
			[]string{"kept:shop/app@0", "kept:shop/crm@1", "kept:git/ci@2"}},
		{"a changed URL restarts, a new destination starts, a missing one stops; the path changes nothing", &policy.Config{Routes: []policy.Route{shop}},
			[]string{"kept:shop/app@0", "changed:shop/crm@1", "added:shop/erp@-1", "removed:git/ci@2"}},
		{"the route's retry policy restarts its destinations", &policy.Config{Routes: []policy.Route{
			route("shop", dest("app", "http://a"), dest("crm", "http://c")), retried}},
			[]string{"kept:shop/app@0", "kept:shop/crm@1", "changed:git/ci@2"}},
		{"an empty configuration stops every loop", &policy.Config{},
			[]string{"removed:shop/app@0", "removed:shop/crm@1", "removed:git/ci@2"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got []string
			for _, c := range diff(running, tc.cfg) {
				got = append(got, [...]string{"kept", "added", "changed", "removed"}[c.kind]+":"+c.key.route+"/"+c.key.dest+"@"+strconv.Itoa(c.was))
				if (c.kind == added || c.kind == changed) != (c.now.dest.Name != "") {
					t.Errorf("%+v: new settings only for an added or changed destination", c)
				}
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("diff:\n got %v\nwant %v", got, tc.want)
			}
		})
	}
}
