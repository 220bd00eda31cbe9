package memnet_test

import (
	"context"
	"crypto/ed25519"
	"errors"
	"testing"
	"time"

	"github.com/zooai/gym/ring"
	"github.com/zooai/gym/ring/memnet"
)

func spec(self, n int, id ring.ID) ring.LinkSpec {
	m := func(i int) ring.Member {
		return ring.Member{ID: string(rune('a' + i)), PublicKey: make(ed25519.PublicKey, 32), Addr: string(rune('a' + i))}
	}
	return ring.LinkSpec{ConfigID: id, Self: self, Me: m(self), Succ: m((self + 1) % n), SuccIdx: (self + 1) % n,
		Pred: m((self + n - 1) % n), PredIdx: (self + n - 1) % n}
}

func connect2(t *testing.T, net *memnet.Network, id ring.ID) (a, b [2]ring.Conn) {
	t.Helper()
	type res struct {
		out, in ring.Conn
		err     error
	}
	ch := make(chan res, 2)
	for i := range 2 {
		go func() {
			o, in, err := net.Transport(spec(i, 2, id).Me.Addr).Connect(t.Context(), spec(i, 2, id))
			ch <- res{o, in, err}
		}()
	}
	var rs [2]res
	for i := range 2 {
		rs[i] = <-ch
		if rs[i].err != nil {
			t.Fatal(rs[i].err)
		}
	}
	return [2]ring.Conn{rs[0].out, rs[0].in}, [2]ring.Conn{rs[1].out, rs[1].in}
}

func TestFramesFlowAndFilterApplies(t *testing.T) {
	net := memnet.New(4)
	net.SetFilter(func(l memnet.Link, f []byte, deliver func([]byte)) {
		if f[0] == 'x' {
			return // dropped
		}
		deliver(f)
		if f[0] == 'd' {
			deliver(append([]byte(nil), f...))
		}
	})
	a, b := connect2(t, net, ring.ID{1})
	for _, s := range []string{"x", "d", "k"} {
		if err := a[0].Send([]byte(s), []byte("!")); err != nil {
			t.Fatal(err)
		}
	}
	var got []string
	for range 3 {
		f, err := b[1].Recv()
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
	net := memnet.New(4)
	a, b := connect2(t, net, ring.ID{2})
	a[0].Send([]byte("q"), nil) // queued before the kill: still delivered
	net.Kill("a")
	if f, err := b[1].Recv(); err != nil || string(f) != "q" {
		t.Fatalf("%q %v", f, err)
	}
	if _, err := b[1].Recv(); !errors.Is(err, memnet.ErrClosed) {
		t.Fatalf("%v, want ErrClosed after the kill", err)
	}
	if err := b[0].Send([]byte("x"), nil); !errors.Is(err, memnet.ErrClosed) {
		t.Fatalf("%v", err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), time.Second)
	defer cancel()
	if _, _, err := net.Transport("b").Connect(ctx, spec(1, 2, ring.ID{3})); !errors.Is(err, ring.ErrNoSuccessor) {
		t.Fatalf("%v, want ErrNoSuccessor for a dead successor", err)
	}
}

func TestInjectNeedsALink(t *testing.T) {
	net := memnet.New(0)
	if err := net.Inject("a", "b", []byte("x")); err == nil {
		t.Fatal("inject without a link succeeded")
	}
}
