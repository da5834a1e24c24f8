package store

import (
	"context"
	"errors"
	"fmt"

	"github.com/nats-io/nats.go/jetstream"
)

// recordSource is a selection of a stream's records to read through: parked
// or due records, dead letters.
type recordSource struct {
	st  jetstream.Stream
	cfg jetstream.OrderedConsumerConfig
}

// each calls fn on every record the source selects, in stream order.
func (src recordSource) each(ctx context.Context, fn func(jetstream.Msg)) error {
	return src.while(ctx, 1024, func(m jetstream.Msg) bool {
		fn(m)
		return true
	})
}

// while calls fn on the records the source selects, in stream order, until
// fn returns false or none is left. It fetches batch records at a time:
// records read with their payloads want fewer than headers alone.
//
// An empty batch is the end only if the consumer had nothing pending when
// it was made for that batch (each fetch of an ordered consumer makes it
// anew, from after the last record read). nats.go ends a FetchNoWait on
// its own clock a second after asking: with the server or this process
// stalled for that long, the batch comes back empty (or short, and the
// next one starts after what arrived) though records are left, and the
// records read so far are not all of them. A TakeOver or a purge that
// took them for all would lose the rest; a listing would end early. So an
// empty batch with records pending is asked again, up to emptyBatches
// times, then while fails.
//
// Each fetch makes the consumer anew, and nats.go tries that again and
// again, without end unless told, whatever the context: on a closed
// connection a fetch would never return. While tries it resets times,
// then fails, and its caller says the store is unavailable.
func (src recordSource) while(ctx context.Context, batch int, fn func(jetstream.Msg) bool) error {
	cfg := src.cfg
	if cfg.MaxResetAttempts == 0 {
		cfg.MaxResetAttempts = resets
	}
	c, err := src.st.OrderedConsumer(ctx, cfg)
	if err != nil {
		return err
	}
	// nats.go deletes an ordered consumer when it makes it anew, but not
	// the last: it would stay on the server until its inactive threshold
	// (5 minutes), and the server goes through every consumer of the
	// stream for each message stored. Every call makes one.
	defer func() {
		if info := c.CachedInfo(); info != nil {
			_ = src.st.DeleteConsumer(context.WithoutCancel(ctx), info.Name)
		}
	}()
	empty := 0
	for {
		b, err := c.FetchNoWait(batch)
		if err != nil {
			return err
		}
		n := 0
		for m := range b.Messages() {
			n++
			if !fn(m) {
				return nil
			}
		}
		if err := b.Error(); err != nil && !errors.Is(err, jetstream.ErrNoMessages) {
			return err
		}
		if n > 0 {
			empty = 0
			continue
		}
		info := c.CachedInfo()
		if info == nil || info.NumPending == 0 {
			return nil
		}
		if empty++; empty == emptyBatches || ctx.Err() != nil {
			return fmt.Errorf("%d records pending, but %d fetches in a row brought none", info.NumPending, empty)
		}
	}
}

// resets is how many times while tries to make its consumer anew for a
// fetch: a second, then two, pass between tries, and each waits up to
// ten seconds for the server's answer.
const resets = 3

// emptyBatches is how many empty batches in a row while takes, with
// records pending, before it gives up: each is a fetch that ended before
// the server answered, a second at least.
const emptyBatches = 10
