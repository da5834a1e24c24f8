package store

import (
	"context"
	"errors"
	"fmt"

	"github.com/nats-io/nats.go/jetstream"
)

// recordSource is a selection of parked or due records to read through.
type recordSource struct {
	st  jetstream.Stream
	cfg jetstream.OrderedConsumerConfig
}

// each calls fn on every record the source selects, in stream order.
//
// An empty batch is the end only if the consumer had nothing pending when
// it was made for that batch (each fetch of an ordered consumer makes it
// anew, from after the last record read). nats.go ends a FetchNoWait on
// its own clock a second after asking: with the server or this process
// stalled for that long, the batch comes back empty (or short, and the
// next one starts after what arrived) though records are left, and the
// records read so far are not all of them. A TakeOver or a purge that
// took them for all would lose the rest. So an empty batch with records
// pending is asked again, up to emptyBatches times, then each fails.
func (src recordSource) each(ctx context.Context, fn func(jetstream.Msg)) error {
	c, err := src.st.OrderedConsumer(ctx, src.cfg)
	if err != nil {
		return err
	}
	empty := 0
	for {
		batch, err := c.FetchNoWait(1024)
		if err != nil {
			return err
		}
		n := 0
		for m := range batch.Messages() {
			n++
			fn(m)
		}
		if err := batch.Error(); err != nil && !errors.Is(err, jetstream.ErrNoMessages) {
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

// emptyBatches is how many empty batches in a row each takes, with records
// pending, before it gives up: each is a fetch that ended before the
// server answered, a second at least.
const emptyBatches = 10
