package store

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// StallOldPace is TEMPORARY: rest between batches alone, as before.
var StallOldPace atomic.Bool

// StallStep is TEMPORARY: one step of a part of a search, run alone, to
// see what of a search slows ingest beside it.
func (s *Store) StallStep(ctx context.Context, kind, route string, since time.Time) error {
	info, err := s.main.Info(ctx)
	if err != nil {
		return err
	}
	last := info.State.LastSeq + 1
	switch kind {
	case "info":
		return nil
	case "consumer", "consumer-nofilter", "consumer-mid", "consumer-mid-nofilter":
		cfg := jetstream.ConsumerConfig{Description: "jethook: search", AckPolicy: jetstream.AckNonePolicy,
			FilterSubject: "webhooks." + route + ".*", DeliverPolicy: jetstream.DeliverByStartSequencePolicy,
			OptStartSeq: last - 1000, InactiveThreshold: 30 * time.Second, MemoryStorage: true}
		if kind == "consumer-nofilter" || kind == "consumer-mid-nofilter" {
			cfg.FilterSubject = ""
		}
		if kind == "consumer-mid" || kind == "consumer-mid-nofilter" {
			cfg.OptStartSeq = info.State.FirstSeq + (last-info.State.FirstSeq)/3
		}
		c, err := s.main.CreateConsumer(ctx, cfg)
		if err != nil {
			return err
		}
		return s.main.DeleteConsumer(ctx, c.CachedInfo().Name)
	case "seqat":
		_, err := s.seqAt(ctx, since, last)
		return err
	case "link":
		l, err := s.searchLink(ctx)
		if err != nil {
			return err
		}
		l.close()
		return nil
	case "gaps":
		_, err := s.idx.valueGaps([]string{"evt_none"}, info.Created, since, 1, last)
		return err
	case "read":
		l, err := s.searchLink(ctx)
		if err != nil {
			return err
		}
		defer l.close()
		sc := &scanner{s: s, link: l, q: Scan{Limit: 1}, subject: "webhooks." + route + ".*"}
		_, _, _, err = sc.read(ctx, last-734, last, false, func(Hit) bool { return true })
		return err
	}
	return fmt.Errorf("no step %q", kind)
}
