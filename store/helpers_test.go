package store_test

import (
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

func jetstreamWait() jetstream.FetchOpt { return jetstream.FetchMaxWait(5 * time.Second) }
