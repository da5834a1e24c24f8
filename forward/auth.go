package forward

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"sync"
	"time"

	"golang.org/x/oauth2"
	"golang.org/x/oauth2/clientcredentials"

	"github.com/jethook/jethook/policy"
)

// auth adds a destination's credentials (policy.Auth) to each attempt.
// The zero value adds nothing.
type auth struct {
	headers http.Header // static headers, canonical names
	basic   *policy.Basic
	bearer  string
	tokens  *tokens // OAuth2 client credentials; nil without
}

func newAuth(a *policy.Auth, client *http.Client, now func() time.Time) *auth {
	out := &auth{}
	if a == nil {
		return out
	}
	if len(a.Headers) > 0 {
		out.headers = make(http.Header, len(a.Headers))
		for k, v := range a.Headers {
			out.headers.Set(k, string(v))
		}
	}
	out.basic, out.bearer = a.Basic, string(a.Bearer)
	if o := a.OAuth2; o != nil {
		params := url.Values{}
		for k, v := range o.Params {
			params.Set(k, v)
		}
		out.tokens = &tokens{client: client, now: now, cfg: clientcredentials.Config{
			ClientID: o.ClientID, ClientSecret: string(o.ClientSecret), TokenURL: o.TokenURL,
			Scopes: o.Scopes, EndpointParams: params,
		}}
	}
	return out
}

// apply sets the credentials on req. It returns the OAuth2 token it used,
// nil for the other modes, or a *TokenError when no token could be had.
func (a *auth) apply(ctx context.Context, req *http.Request) (*oauth2.Token, error) {
	for k, vs := range a.headers {
		req.Header[k] = vs
	}
	switch {
	case a.basic != nil:
		req.SetBasicAuth(a.basic.Username, string(a.basic.Password))
	case a.bearer != "":
		req.Header.Set("Authorization", "Bearer "+a.bearer)
	case a.tokens != nil:
		tok, err := a.tokens.get(ctx)
		if err != nil {
			return nil, err
		}
		tok.SetAuthHeader(req)
		return tok, nil
	}
	return nil, nil
}

// tokens fetches OAuth2 access tokens with the client credentials grant
// and keeps the latest until refreshAt. One fetch at a time: attempts that
// need a token meanwhile wait for that fetch's result, each no longer than
// its own deadline.
type tokens struct {
	cfg    clientcredentials.Config
	client *http.Client // egress rules, no redirects
	now    func() time.Time

	mu        sync.Mutex
	tok       *oauth2.Token
	refreshAt time.Time
	flight    *fetch // the fetch under way, nil if none
}

// fetch is one token request and, once done is closed, its result.
type fetch struct {
	done chan struct{}
	tok  *oauth2.Token
	err  error
}

// refreshShare is how much of a token's life is left when jethook fetches
// the next one: a quarter, at most a minute, so that no attempt sends a
// token about to expire on its way.
const (
	refreshShare = 4
	refreshMax   = time.Minute
)

// get returns the cached token, or fetches one when there is none or it
// is due for refresh.
func (t *tokens) get(ctx context.Context) (*oauth2.Token, error) {
	t.mu.Lock()
	if t.tok != nil && t.now().Before(t.refreshAt) {
		defer t.mu.Unlock()
		return t.tok, nil
	}
	f := t.flight
	if f == nil {
		f = &fetch{done: make(chan struct{})}
		t.flight = f
		go t.fetch(context.WithoutCancel(ctx), f, deadline(ctx))
	}
	t.mu.Unlock()
	select {
	case <-f.done:
		return f.tok, f.err
	case <-ctx.Done():
		return nil, &TokenError{Err: ctx.Err()}
	}
}

// fetch requests a token, by the deadline of the attempt that asked for
// it, and hands it to the attempts waiting for it.
func (t *tokens) fetch(ctx context.Context, f *fetch, by time.Time) {
	ctx, cancel := context.WithDeadline(ctx, by)
	defer cancel()
	start := t.now()
	tok, err := t.cfg.Token(context.WithValue(ctx, oauth2.HTTPClient, t.client))
	t.mu.Lock()
	defer t.mu.Unlock()
	t.flight = nil
	if err != nil {
		f.err = tokenError(err, t.cfg.TokenURL)
		close(f.done)
		return
	}
	t.tok, t.refreshAt = tok, time.Time{}.Add(1<<63-1)
	if !tok.Expiry.IsZero() {
		t.refreshAt = tok.Expiry.Add(-min(tok.Expiry.Sub(start)/refreshShare, refreshMax))
	}
	f.tok = tok
	close(f.done)
}

// deadline is ctx's deadline, or a minute from now if it has none.
func deadline(ctx context.Context) time.Time {
	if d, ok := ctx.Deadline(); ok {
		return d
	}
	return time.Now().Add(time.Minute)
}

// revoke forgets tok, which the backend refused, so that the next get
// fetches a new one; a token fetched meanwhile by another attempt stays.
func (t *tokens) revoke(tok *oauth2.Token) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.tok == tok {
		t.tok = nil
	}
}

// TokenError is a failed OAuth2 token request: the destination cannot be
// called, and the attempt fails with this as its error. Its message names
// the token endpoint's status and error code, never its response body or
// the URL's query or user info, where credentials may be.
type TokenError struct {
	Status int    // the token endpoint's status, 0 if none came
	Code   string // its "error" field (invalid_client…), if any
	Err    error  // a network error, if no answer came
}

func (e *TokenError) Error() string {
	switch {
	case e.Status != 0 && e.Code != "":
		return fmt.Sprintf("oauth2 token endpoint: status %d, error %q", e.Status, e.Code)
	case e.Status != 0:
		return fmt.Sprintf("oauth2 token endpoint: status %d", e.Status)
	}
	return "oauth2 token endpoint: " + errText(e.Err)
}

func (e *TokenError) Unwrap() error { return e.Err }

// tokenError is err as a *TokenError; the oauth2 package's own errors
// quote the endpoint's response body, which may echo a credential.
func tokenError(err error, tokenURL string) *TokenError {
	if re, ok := errors.AsType[*oauth2.RetrieveError](err); ok {
		code := re.ErrorCode
		if len(code) > 64 {
			code = code[:64]
		}
		te := &TokenError{Code: code}
		if re.Response != nil {
			te.Status = re.Response.StatusCode
		}
		return te
	}
	if _, ok := errors.AsType[*url.Error](err); ok {
		return &TokenError{Err: err}
	}
	// Anything else (a malformed answer) may quote the answer: say only
	// that it could not be read.
	return &TokenError{Err: fmt.Errorf("no usable token from %s", policy.RedactURL(tokenURL))}
}

// tokenClient is the HTTP client token requests go through: the
// destination's transport, so the egress rules and its TLS settings hold,
// and no redirect followed.
func tokenClient(rt http.RoundTripper) *http.Client {
	return &http.Client{Transport: rt, CheckRedirect: func(*http.Request, []*http.Request) error {
		return http.ErrUseLastResponse
	}}
}

// roundTrip sends req with the destination's credentials. When the
// backend answers 401 to an OAuth2 token, the token is dropped, a new one
// fetched and the request sent once more, within the same attempt: a
// token revoked or expired early costs no attempt.
func (d *destination) roundTrip(ctx context.Context, req *http.Request) (*http.Response, error) {
	tok, err := d.auth.apply(ctx, req)
	if err != nil {
		return nil, err
	}
	resp, err := d.rt.RoundTrip(req)
	if err != nil || tok == nil || resp.StatusCode != http.StatusUnauthorized || req.GetBody == nil {
		return resp, err
	}
	drain(resp.Body)
	resp.Body.Close()
	d.auth.tokens.revoke(tok)
	again := req.Clone(ctx)
	if again.Body, err = req.GetBody(); err != nil {
		return nil, err
	}
	if _, err := d.auth.apply(ctx, again); err != nil {
		return nil, err
	}
	return d.rt.RoundTrip(again)
}
