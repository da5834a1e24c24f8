package provider

import (
	"errors"
	"time"
)

// GitLab's headers.
// https://docs.gitlab.com/user/project/integrations/webhooks/
const (
	headerGitLabToken     = "X-Gitlab-Token"
	headerGitLabEventUUID = "X-Gitlab-Event-UUID"
	headerIdempotencyKey  = "Idempotency-Key"
)

// gitlab checks X-Gitlab-Token, the webhook's secret token sent as it is,
// and, when the route has a signing secret, the Standard Webhooks signature
// GitLab adds with a signing token: webhook-signature over
// {webhook-id}.{webhook-timestamp}.{body}, webhook-id being the
// Idempotency-Key. The token alone protects no body; the signature does.
// https://gitlab.com/gitlab-org/gitlab/-/merge_requests/230944
type gitlab struct {
	noHandshake
	token *signed
	// signature verifies the signing token; nil without a signing secret.
	signature *signed
	// signingSecret signs for Sign.
	signingSecret string
}

var gitlabToken = Scheme{Headers: []string{headerGitLabToken}, Algorithm: "token", IDHeaders: []string{headerIdempotencyKey, headerGitLabEventUUID}}

func newGitLab(c Config, clk clock) (Provider, error) {
	token, err := compile(gitlabToken, c.Secrets, c, clk)
	if err != nil {
		return nil, err
	}
	g := &gitlab{token: token, signingSecret: c.SigningSecret}
	if c.SigningSecret == "" {
		return g, nil
	}
	if g.signature, err = compile(standardScheme("webhook-"), []string{c.SigningSecret}, c, clk); err != nil {
		if ce, ok := errors.AsType[*ConfigError](err); ok {
			err = ce.Err
		}
		return nil, &ConfigError{Key: "signing_secret", Err: err}
	}
	g.signature.newID = NewMessageID
	return g, nil
}

// Verify checks the token, then the signature when there is a signing
// secret.
func (g *gitlab) Verify(r *Request) error {
	if err := g.token.Verify(r); err != nil {
		return err
	}
	if g.signature == nil {
		return nil
	}
	return g.signature.Verify(r)
}

// EventID is the signed webhook-id when there is a signing secret (GitLab
// sets it to the Idempotency-Key), so that a captured request under a new
// Idempotency-Key is still a duplicate; else Idempotency-Key, else
// X-Gitlab-Event-UUID.
func (g *gitlab) EventID(r *Request) string {
	if g.signature != nil {
		return g.signature.EventID(r)
	}
	return g.token.EventID(r)
}

// SignedDigest is "": the token signs nothing, and the signature covers
// the id.
func (g *gitlab) SignedDigest(*Request) string { return "" }

// Sign sets the token to secret and, with a signing secret, the signature,
// under one id in Idempotency-Key and webhook-id.
func (g *gitlab) Sign(r *Request, secret string, now time.Time) error {
	if secret == "" {
		return errors.New("empty secret")
	}
	if err := g.token.Sign(r, secret, now); err != nil {
		return err
	}
	if g.signature == nil {
		return nil
	}
	r.Header.Set(HeaderWebhookID, r.Header.Get(headerIdempotencyKey))
	return g.signature.Sign(r, g.signingSecret, now)
}
