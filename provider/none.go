package provider

import "time"

// none accepts every request unverified, for routes whose sender does not
// sign, or that sit behind something that already verified them.
type none struct{ noHandshake }

// Verify accepts every request.
func (none) Verify(*Request) error { return nil }

// EventID is always "": unsigned senders have no id jethook can trust.
func (none) EventID(*Request) string { return "" }

// SignedDigest is "": nothing is signed, and the event id is a hash of the
// body.
func (none) SignedDigest(*Request) string { return "" }

// Sign sets nothing.
func (none) Sign(*Request, string, time.Time) error { return nil }
