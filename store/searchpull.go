package store

import (
	"context"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
)

// pull reads a search's consumer through a subscription of its own,
// asking for a batch at a time with up to two asks outstanding: the server
// sends the next batch while the scan reads this one, and never more than
// was asked for, so a slow scan makes it wait, not drop messages.
type pull struct {
	ingest  *ingestSeen // yielded to between batches
	last    time.Time   // when the last batch was asked for
	nc      *nats.Conn
	sub     *nats.Subscription
	subject string // where asks go
	asked   int    // messages asked for
	got     int    // messages received
	idle    int    // asks expired since the last message
}

// pullAsk asks for the next batch. Asks that wait (not no_wait) queue
// behind each other; a scan ends at its window's end or when the server
// says nothing is left, so an ask expires only when the machine is too
// busy to send a batch in time (then the scan asks again) or the server
// stopped sending.
var pullAsk = []byte(fmt.Sprintf(`{"batch":%d,"expires":%d}`, scanBatch, pullExpires))

const pullExpires = 2 * time.Second

func pullFrom(nc *nats.Conn, ingest *ingestSeen, consumer string) (*pull, error) {
	p := &pull{nc: nc, ingest: ingest, last: time.Now(), subject: "$JS.API.CONSUMER.MSG.NEXT." + StreamName + "." + consumer}
	var err error
	if p.sub, err = nc.SubscribeSync(nc.NewInbox()); err != nil {
		return nil, fmt.Errorf("%w: search: %w", ErrUnavailable, err)
	}
	return p, p.ask()
}

// ask keeps two batches asked for.
func (p *pull) ask() error {
	for p.asked-p.got < 2*scanBatch {
		p.asked += scanBatch
		if err := p.nc.PublishRequest(p.subject, p.sub.Subject, pullAsk); err != nil {
			return fmt.Errorf("%w: search: %w", ErrUnavailable, err)
		}
	}
	return nil
}

// next is the next message the consumer delivers. Asks that expire with
// nothing delivered after the scan asked again end it with an error:
// the consumer counted messages the server does not send, and a search
// must not end as if it had read them.
func (p *pull) next(ctx context.Context) (*nats.Msg, error) {
	for {
		m, err := p.sub.NextMsgWithContext(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			return nil, fmt.Errorf("%w: search: %w", ErrUnavailable, err)
		}
		if m.Reply != "" {
			p.got, p.idle = p.got+1, 0
			if p.asked-p.got >= scanBatch {
				return m, nil
			}
			// A batch read: rest before asking for the next.
			if err := p.ingest.yield(ctx, time.Since(p.last)); err != nil {
				return nil, err
			}
			p.last = time.Now()
			return m, p.ask()
		}
		// A status: only an expired ask (408) is expected.
		if code := m.Header.Get("Status"); code != "408" {
			return nil, fmt.Errorf("%w: search: the server answered %s %s", ErrUnavailable, code, m.Header.Get("Description"))
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

func (p *pull) stop() { _ = p.sub.Unsubscribe() }
