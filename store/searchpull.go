package store

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
)

// link is a search's own connection to the server: it publishes asks and
// receives what the server answers on one inbox at a time.
type link interface {
	// listen makes a new inbox the one next reads from, instead of the
	// last, and returns its subject.
	listen() (string, error)
	publish(subject, reply string, data []byte) error
	// next is the next message to the inbox; it and what it holds are
	// valid until the following call.
	next(ctx context.Context) (*scanMsg, error)
	close()
}

// scanMsg is one message a link received.
type scanMsg struct {
	subject, reply string
	data           []byte
	size           int         // subject, reply, headers and data, in bytes
	raw            []byte      // the header block as sent, until h is decoded
	h              nats.Header // nil until decoded from raw
}

// header is the message's headers, decoded as nats.go decodes them.
func (m *scanMsg) header() nats.Header {
	if m.h == nil && m.raw != nil {
		m.h, _ = nats.DecodeHeadersMsg(m.raw)
		m.raw = nil
	}
	return m.h
}

// factKeys are the headers facts reads, without their "Jethook-".
var factKeys = [...]string{hdrEventID[len("Jethook-"):], hdrMethod[len("Jethook-"):], hdrJSON[len("Jethook-"):]}

// facts are the three jethook headers a scan gives Match, as
// header().Get gives them (the first value of each), but read in one
// pass over the header block as sent when it is not decoded.
func (m *scanMsg) facts() (eventID, method string, json bool) {
	if m.raw == nil {
		return m.h.Get(hdrEventID), m.h.Get(hdrMethod), m.h.Get(hdrJSON) != ""
	}
	var vals [len(factKeys)][]byte
	var seen [len(factKeys)]bool
	_, rest, _ := bytes.Cut(m.raw, []byte("\r\n"))
	for len(rest) > 0 {
		var line []byte
		line, rest, _ = bytes.Cut(rest, []byte("\r\n"))
		kv, ok := bytes.CutPrefix(line, []byte("Jethook-"))
		if !ok {
			continue
		}
		k, v, ok := bytes.Cut(kv, []byte(":"))
		if i := slices.Index(factKeys[:], string(k)); ok && i >= 0 && !seen[i] {
			vals[i], seen[i] = bytes.TrimLeft(v, " \t"), true
		}
	}
	return string(vals[0]), methodName(vals[1]), len(vals[2]) > 0
}

// methodName is m as a string, without a copy for the usual methods.
func methodName(m []byte) string {
	for _, known := range [...]string{http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodGet, http.MethodDelete} {
		if string(m) == known {
			return known
		}
	}
	return string(m)
}

// origHeaders puts the webhook's own headers (those under hdrOrigPrefix)
// into h, as decodeEnvelope does, reading the header block as sent when it
// is not decoded: one copy of it, not a map of every header.
func (m *scanMsg) origHeaders(h map[string][]string) {
	if m.raw == nil {
		for k, vs := range m.h {
			if name, ok := strings.CutPrefix(k, hdrOrigPrefix); ok {
				h[name] = vs
			}
		}
		return
	}
	_, rest, _ := strings.Cut(string(m.raw), "\r\n")
	for rest != "" {
		var line string
		line, rest, _ = strings.Cut(rest, "\r\n")
		kv, ok := strings.CutPrefix(line, hdrOrigPrefix)
		if !ok {
			continue
		}
		if k, v, ok := strings.Cut(kv, ":"); ok && k != "" {
			h[k] = append(h[k], strings.TrimLeft(v, " \t"))
		}
	}
}

// clientLink is a link on a nats.go connection: the one a search has
// when NATS is not embedded.
type clientLink struct {
	nc  *nats.Conn
	sub *nats.Subscription
	m   scanMsg
}

func (l *clientLink) listen() (string, error) {
	if l.sub != nil {
		_ = l.sub.Unsubscribe()
	}
	var err error
	if l.sub, err = l.nc.SubscribeSync(l.nc.NewInbox()); err != nil {
		return "", err
	}
	return l.sub.Subject, nil
}

func (l *clientLink) publish(subject, reply string, data []byte) error {
	return l.nc.PublishRequest(subject, reply, data)
}

func (l *clientLink) next(ctx context.Context) (*scanMsg, error) {
	m, err := l.sub.NextMsgWithContext(ctx)
	if err != nil {
		return nil, err
	}
	l.m = scanMsg{subject: m.Subject, reply: m.Reply, data: m.Data, size: m.Size(), h: m.Header}
	return &l.m, nil
}

func (l *clientLink) close() { l.nc.Close() }

// pull reads a search's consumer through a link, asking for a batch at a
// time (scanBatch or shortBatch) with up to two asks outstanding: the
// server sends the next batch while the scan reads this one, and never
// more than was asked for, so a slow scan makes it wait, not drop
// messages.
type pull struct {
	pace    *pace // rested between batches
	link    link
	inbox   string
	subject string // where asks go
	asked   int    // messages asked for
	got     int    // messages received
	idle    int    // asks expired since the last message
	batch   int    // messages an ask asks for
	ask1    []byte // the ask
}

// pullAsk asks for the next batch. Asks that wait (not no_wait) queue
// behind each other; a scan ends at its window's end or when the server
// says nothing is left, so an ask expires only when the machine is too
// busy to send a batch in time (then the scan asks again) or the server
// stopped sending.
func pullAsk(batch int) []byte {
	return []byte(fmt.Sprintf(`{"batch":%d,"expires":%d}`, batch, pullExpires))
}

const pullExpires = 2 * time.Second

func pullFrom(l link, pace *pace, consumer string, batch int) (*pull, error) {
	p := &pull{link: l, pace: pace, subject: "$JS.API.CONSUMER.MSG.NEXT." + StreamName + "." + consumer, batch: batch, ask1: pullAsk(batch)}
	var err error
	if p.inbox, err = l.listen(); err != nil {
		return nil, fmt.Errorf("%w: search: %w", ErrUnavailable, err)
	}
	return p, p.ask()
}

// ask keeps two batches asked for.
func (p *pull) ask() error {
	for p.asked-p.got < 2*p.batch {
		p.asked += p.batch
		if err := p.link.publish(p.subject, p.inbox, p.ask1); err != nil {
			return fmt.Errorf("%w: search: %w", ErrUnavailable, err)
		}
	}
	return nil
}

// next is the next message the consumer delivers. Asks that expire with
// nothing delivered after the scan asked again end it with an error:
// the consumer counted messages the server does not send, and a search
// must not end as if it had read them.
func (p *pull) next(ctx context.Context) (*scanMsg, error) {
	for {
		m, err := p.link.next(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			return nil, fmt.Errorf("%w: search: %w", ErrUnavailable, err)
		}
		if m.reply != "" {
			p.got, p.idle = p.got+1, 0
			if p.asked-p.got >= p.batch {
				return m, nil
			}
			// A batch read: rest before asking for the next.
			if err := p.pace.rest(ctx); err != nil {
				return nil, err
			}
			return m, p.ask()
		}
		// A status: only an expired ask (408) is expected.
		if code := m.header().Get("Status"); code != "408" {
			return nil, fmt.Errorf("%w: search: the server answered %s %s", ErrUnavailable, code, m.header().Get("Description"))
		}
		// Two asks are out at most before the first expiry: the third in a
		// row is of an ask made after the first, which found nothing either.
		if p.idle++; p.idle == 3 {
			return nil, fmt.Errorf("%w: search: the server sent nothing for %s", ErrUnavailable, 2*pullExpires)
		}
		p.asked = p.got
		if err := p.ask(); err != nil {
			return nil, err
		}
	}
}
