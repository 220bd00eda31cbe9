package memnet_test

import (
	"context"
	"crypto/ed25519"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/zooai/gym/protocol/ring"
	"github.com/zooai/gym/protocol/ring/memnet"
	"github.com/zooai/gym/protocol/ring/transporttest"
)

// network returns a memnet network of n nodes m0, m1, … as the transport
// suite sees it.
func network(n int) (*memnet.Network, *transporttest.Net) {
	net := memnet.New(4)
	tn := &transporttest.Net{}
	for i := range n {
		addr := fmt.Sprint("m", i)
		tn.Transports = append(tn.Transports, net.Transport(addr))
		tn.Members = append(tn.Members, ring.Member{ID: addr, PublicKey: make(ed25519.PublicKey, 32), Addr: addr})
	}
	return net, tn
}

// TestTransport: memnet passes the transport suite (frames, close,
// cancellation and pairing are checked there, not here).
func TestTransport(t *testing.T) {
	transporttest.Run(t, func(t *testing.T, n int) *transporttest.Net {
		_, tn := network(n)
		return tn
	})
}

func TestFramesFlowAndFilterApplies(t *testing.T) {
	net, tn := network(2)
	net.SetFilter(func(l memnet.Link, f []byte, deliver func([]byte)) {
		if f[0] == 'x' {
			return // dropped
		}
		deliver(f)
		if f[0] == 'd' {
			deliver(append([]byte(nil), f...))
		}
	})
	links := transporttest.Connect(t, tn, []int{0, 1}, ring.ID{1})
	for _, s := range []string{"x", "d", "k"} {
		if err := links[0].Out.Send([]byte(s), []byte("!")); err != nil {
			t.Fatal(err)
		}
	}
	var got []string
	for range 3 {
		f, err := links[1].In.Recv()
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, string(f))
	}
	if got[0] != "d!" || got[1] != "d!" || got[2] != "k!" {
		t.Fatalf("got %q", got)
	}
}

func TestKillBreaksLinksAndRefusesConnect(t *testing.T) {
	net, tn := network(2)
	links := transporttest.Connect(t, tn, []int{0, 1}, ring.ID{2})
	links[0].Out.Send([]byte("q"), nil) // queued before the kill: still delivered
	net.Kill("m0")
	if f, err := links[1].In.Recv(); err != nil || string(f) != "q" {
		t.Fatalf("%q %v", f, err)
	}
	if _, err := links[1].In.Recv(); !errors.Is(err, memnet.ErrClosed) {
		t.Fatalf("%v, want ErrClosed after the kill", err)
	}
	if err := links[1].Out.Send([]byte("x"), nil); !errors.Is(err, memnet.ErrClosed) {
		t.Fatalf("%v", err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), time.Second)
	defer cancel()
	if _, _, err := net.Transport("m1").Connect(ctx, transporttest.Spec(tn.Members, 1, ring.ID{3}, 0)); !errors.Is(err, ring.ErrNoSuccessor) {
		t.Fatalf("%v, want ErrNoSuccessor for a dead successor", err)
	}
}

func TestInjectNeedsALink(t *testing.T) {
	net := memnet.New(0)
	if err := net.Inject("a", "b", []byte("x")); err == nil {
		t.Fatal("inject without a link succeeded")
	}
}
