package catchup

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"log/slog"
	"net/http"
	"time"

	gh "github.com/google/go-github/v88/github"

	"github.com/jethook/jethook/policy"
	"github.com/jethook/jethook/store"
)

// How GitHub catch-up bounds its work.
const (
	// overlap is how far before the previous pass a pass looks again, for
	// deliveries the API listed late.
	overlap = 5 * time.Minute
	// reaskAfter is how long after a redelivery request a guid still not
	// stored is asked for again, at most maxAsks times in all.
	reaskAfter = time.Hour
	maxAsks    = 3
	// maxAsked bounds the guids waiting for their redelivery.
	maxAsked = 10_000
	perPage  = 100
)

// github asks GitHub to redeliver the deliveries of one hook that did not
// get a 2xx and whose guid (X-GitHub-Delivery, jethook's event id on a
// github route) the store lacks. The redelivery then comes through
// ingress, signed as usual. GitHub's redelivery is a new delivery with the
// same guid, so the store's dedup makes a second request harmless.
type github struct {
	route  string
	hook   *policy.GitHubCatchUp
	window time.Duration
	client *gh.Client
	store  *store.Store
	log    *slog.Logger

	// covered is when the last successful pass started: deliveries older
	// (less overlap) were seen by it.
	covered time.Time
	// asked holds the guids asked for and not yet seen stored, at most
	// maxAsked.
	asked map[string]*asked
}

// asked is one guid whose redelivery was requested.
type asked struct {
	delivery  int64     // the delivery to redeliver
	delivered time.Time // when GitHub first tried it
	at        time.Time // when it was last asked for
	n         int       // how many times it was asked for
}

func newGitHub(rt policy.Route, client *http.Client, st *store.Store, log *slog.Logger) *github {
	base := rt.CatchUp.GitHub.APIURL
	c, err := gh.NewClient(gh.WithHTTPClient(client), gh.WithAuthToken(rt.CatchUp.GitHub.Token), gh.WithURLs(&base, &base))
	if err != nil {
		// The policy checked the URL; only a bug gets here.
		panic(fmt.Sprintf("catch-up: GitHub client: %v", err))
	}
	return &github{route: rt.Name, hook: rt.CatchUp.GitHub, window: rt.CatchUp.Window, client: c, store: st, log: log,
		asked: map[string]*asked{}}
}

func (g *github) run(ctx context.Context) (recovered, requested int, err error) {
	start := time.Now()
	oldest := start.Add(-min(g.window, g.store.DedupWindow()))
	since := oldest
	if !g.covered.IsZero() {
		since = later(since, g.covered.Add(-overlap))
	}
	if recovered, err = g.confirm(ctx, oldest); err != nil {
		return recovered, 0, err
	}
	// Each guid once per pass: the list holds an event's first delivery
	// and every redelivery, newest first.
	seen := map[string]bool{}
	for d, err := range g.deliveries(ctx) {
		if err != nil {
			return recovered, requested, fmt.Errorf("list deliveries of %s: %w", g.hookName(), err)
		}
		if d.GetDeliveredAt().Before(since) {
			break
		}
		guid := d.GetGUID()
		if code := d.GetStatusCode(); code >= 200 && code < 300 || guid == "" || seen[guid] {
			continue
		}
		seen[guid] = true
		if _, ok := g.asked[guid]; ok {
			continue // confirm and reask handle it
		}
		has, err := g.store.Has(ctx, g.route, guid)
		if err != nil {
			return recovered, requested, err
		}
		if has {
			continue
		}
		if len(g.asked) >= maxAsked {
			return recovered, requested, fmt.Errorf("%d redeliveries asked for are not stored yet; asking for no more until they are", len(g.asked))
		}
		if err := g.redeliver(ctx, d.GetID()); err != nil {
			return recovered, requested, err
		}
		requested++
		g.asked[guid] = &asked{delivery: d.GetID(), delivered: d.GetDeliveredAt().Time, at: time.Now(), n: 1}
	}
	n, err := g.reask(ctx, start)
	requested += n
	if err == nil {
		g.covered = start
	}
	return recovered, requested, err
}

// confirm forgets the guids asked for that the store now has, counting
// them, and those past the window or asked for maxAsks times.
func (g *github) confirm(ctx context.Context, oldest time.Time) (recovered int, err error) {
	for guid, a := range g.asked {
		has, err := g.store.Has(ctx, g.route, guid)
		if err != nil {
			return recovered, err
		}
		switch {
		case has:
			recovered++
			delete(g.asked, guid)
		case a.delivered.Before(oldest):
			delete(g.asked, guid)
		case a.n >= maxAsks && time.Since(a.at) >= reaskAfter:
			g.log.Warn("GitHub redelivered a delivery that still did not reach the store; giving up on it",
				"event_id", guid, "asked", a.n)
			delete(g.asked, guid)
		}
	}
	return recovered, nil
}

// reask asks again for the guids asked for at least reaskAfter ago and
// still not stored: their redelivery failed too (the store refused it,
// say).
func (g *github) reask(ctx context.Context, now time.Time) (requested int, err error) {
	for _, a := range g.asked {
		if now.Sub(a.at) < reaskAfter || a.n >= maxAsks {
			continue
		}
		if err := g.redeliver(ctx, a.delivery); err != nil {
			return requested, err
		}
		requested++
		a.at, a.n = time.Now(), a.n+1
	}
	return requested, nil
}

// deliveries lists the hook's deliveries, newest first, a page at a time.
func (g *github) deliveries(ctx context.Context) iter.Seq2[*gh.HookDelivery, error] {
	opts := &gh.ListCursorOptions{PerPage: perPage}
	if g.hook.Repo == "" {
		return g.client.Organizations.ListHookDeliveriesIter(ctx, g.hook.Owner, g.hook.HookID, opts)
	}
	return g.client.Repositories.ListHookDeliveriesIter(ctx, g.hook.Owner, g.hook.Repo, g.hook.HookID, opts)
}

// redeliver asks GitHub to deliver delivery id again; GitHub answers 202.
func (g *github) redeliver(ctx context.Context, id int64) error {
	var err error
	if g.hook.Repo == "" {
		_, _, err = g.client.Organizations.RedeliverHookDelivery(ctx, g.hook.Owner, g.hook.HookID, id)
	} else {
		_, _, err = g.client.Repositories.RedeliverHookDelivery(ctx, g.hook.Owner, g.hook.Repo, g.hook.HookID, id)
	}
	if _, accepted := errors.AsType[*gh.AcceptedError](err); accepted {
		err = nil
	}
	if err != nil {
		return fmt.Errorf("redeliver delivery %d of %s: %w", id, g.hookName(), err)
	}
	return nil
}

func (g *github) hookName() string {
	if g.hook.Repo == "" {
		return fmt.Sprintf("orgs/%s/hooks/%d", g.hook.Owner, g.hook.HookID)
	}
	return fmt.Sprintf("repos/%s/%s/hooks/%d", g.hook.Owner, g.hook.Repo, g.hook.HookID)
}

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}
