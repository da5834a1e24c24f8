package store_test

import (
	"context"
	"errors"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/jethook/jethook/internal/testkit"
	"github.com/jethook/jethook/store"
	"github.com/jethook/jethook/store/storetest"
)

// The embedded server's client port takes only clients that present the
// token; jethook's own connection presents it and works as before.
func TestTheClientPortWantsTheToken(t *testing.T) {
	t.Parallel()
	addr := testkit.FreeAddr(t)
	const token = "s3cret-nats-token-for-this-test"
	st := storetest.Open(t, store.Options{ClientListen: addr, ClientToken: token})
	ctx := context.Background()
	if _, err := st.Publish(ctx, envelope("evt-1", `{}`)); err != nil {
		t.Fatalf("jethook's own connection: %v", err)
	}

	for name, opts := range map[string][]nats.Option{
		"no credential": nil,
		"a wrong token": {nats.Token("guess")},
	} {
		nc, err := nats.Connect("nats://"+addr, opts...)
		if err == nil {
			nc.Close()
			t.Errorf("%s: connected to the client port", name)
			continue
		}
		if !errors.Is(err, nats.ErrAuthorization) && !strings.Contains(strings.ToLower(err.Error()), "authorization") {
			t.Errorf("%s: %v; want an authorization error", name, err)
		}
	}

	nc, err := nats.Connect("nats://"+addr, nats.Token(token))
	if err != nil {
		t.Fatalf("with the token: %v", err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	s, err := js.Stream(ctx, store.StreamName)
	if err != nil {
		t.Fatalf("with the token: %v", err)
	}
	testkit.Eventually(t, 5*time.Second, "the stored webhook is visible with the token", func() bool {
		info, err := s.Info(ctx)
		return err == nil && info.State.Msgs == 1
	})
}

// A client port other machines can reach needs a token: without one, Open
// refuses to start rather than expose every webhook to the network.
func TestAnOpenClientPortOffLoopbackIsRefused(t *testing.T) {
	t.Parallel()
	_, port, err := net.SplitHostPort(testkit.FreeAddr(t))
	if err != nil {
		t.Fatal(err)
	}
	for _, host := range []string{"0.0.0.0", "", "::"} {
		listen := net.JoinHostPort(host, port)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		st, err := store.Open(ctx, store.Options{DataDir: t.TempDir(), ClientListen: listen})
		cancel()
		if err == nil {
			st.Close()
			t.Errorf("ClientListen %q without a token: Open succeeded", listen)
			continue
		}
		if !errors.Is(err, store.ErrOpenClientPort) {
			t.Errorf("ClientListen %q without a token: %v; want ErrOpenClientPort", listen, err)
		}
	}
}
