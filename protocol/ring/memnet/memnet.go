// Package memnet is an in-memory ring.Transport for tests: nodes are
// addresses on a Network, links are bounded queues of frames, and a Filter
// can drop, delay, duplicate, reorder, corrupt or replace frames in flight.
// Tests can also inject forged or replayed frames and kill a node, which
// breaks its links the way a crashed process breaks its TCP connections.
package memnet

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/zooai/gym/protocol/ring"
)

// ErrClosed is returned by Send and Recv on a closed link.
var ErrClosed = errors.New("memnet: link closed")

// ErrDead is returned when connecting to or from a killed node.
var ErrDead = errors.New("memnet: node is dead")

// ErrFrameSize is returned by Recv for a frame above LinkSpec.MaxFrame; the
// link is closed, as a TCP receiver drops a stream it can no longer parse.
var ErrFrameSize = errors.New("memnet: frame above the cap")

// Link names one direction of a link.
type Link struct {
	From, To string
	Config   ring.ID
}

// Filter sees every frame sent on the network, in the sender's goroutine.
// It calls deliver zero or more times (possibly later, from another
// goroutine) with the frames the receiver should get instead. It may
// modify or keep frame: it is a private copy.
type Filter func(l Link, frame []byte, deliver func([]byte))

// Network connects Transports in one process.
type Network struct {
	mu      sync.Mutex
	depth   int
	filter  Filter
	pipes   map[Link]*pipe
	current map[[2]string]*pipe
	dead    map[string]bool
}

// New returns a network whose links hold up to depth frames (default 16).
func New(depth int) *Network {
	if depth <= 0 {
		depth = 16
	}
	return &Network{depth: depth, pipes: map[Link]*pipe{}, current: map[[2]string]*pipe{}, dead: map[string]bool{}}
}

// SetFilter installs f (nil: deliver everything as sent).
func (n *Network) SetFilter(f Filter) {
	n.mu.Lock()
	n.filter = f
	n.mu.Unlock()
}

// Kill marks addr dead and closes every link to or from it.
func (n *Network) Kill(addr string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.dead[addr] = true
	for l, p := range n.pipes {
		if l.From == addr || l.To == addr {
			p.close()
		}
	}
}

// Revive lets a killed address connect again.
func (n *Network) Revive(addr string) {
	n.mu.Lock()
	delete(n.dead, addr)
	n.mu.Unlock()
}

// Inject delivers frame on the most recent link from → to, as if the
// sender had sent it (bypassing the filter). It is how tests forge and
// replay frames.
func (n *Network) Inject(from, to string, frame []byte) error {
	n.mu.Lock()
	p := n.current[[2]string{from, to}]
	n.mu.Unlock()
	if p == nil {
		return fmt.Errorf("memnet: no link %s → %s", from, to)
	}
	p.deliver(append([]byte(nil), frame...))
	return nil
}

// Transport returns the transport of the node at addr.
func (n *Network) Transport(addr string) *Transport { return &Transport{net: n, addr: addr} }

type pipe struct {
	link     Link
	ch       chan []byte
	done     chan struct{}
	once     sync.Once
	sendSide chan struct{} // closed when the sender attached
	recvSide chan struct{}
	sendOnce sync.Once
	recvOnce sync.Once
}

func (p *pipe) close() { p.once.Do(func() { close(p.done) }) }

func (p *pipe) deliver(f []byte) {
	select {
	case <-p.done:
	case p.ch <- f:
	}
}

func (n *Network) pipe(l Link) *pipe {
	p := n.pipes[l]
	if p != nil {
		select {
		case <-p.done: // a link of an aborted call: connect afresh
			p = nil
		default:
		}
	}
	if p == nil {
		p = &pipe{link: l, ch: make(chan []byte, n.depth), done: make(chan struct{}),
			sendSide: make(chan struct{}), recvSide: make(chan struct{})}
		n.pipes[l] = p
	}
	return p
}

// Transport is one node's view of the Network; it implements ring.Transport.
type Transport struct {
	net  *Network
	addr string
}

// Connect implements ring.Transport. A link is identified by its two
// addresses and the configuration id, so a new configuration gets new links.
func (t *Transport) Connect(ctx context.Context, s ring.LinkSpec) (out, in ring.Conn, err error) {
	n := t.net
	n.mu.Lock()
	if n.dead[t.addr] {
		n.mu.Unlock()
		return nil, nil, ErrDead
	}
	po := n.pipe(Link{From: t.addr, To: s.Succ.Addr, Config: s.ConfigID})
	pi := n.pipe(Link{From: s.Pred.Addr, To: t.addr, Config: s.ConfigID})
	po.sendOnce.Do(func() { close(po.sendSide) })
	pi.recvOnce.Do(func() { close(pi.recvSide) })
	n.current[[2]string{t.addr, s.Succ.Addr}] = po
	deadSucc, deadPred := n.dead[s.Succ.Addr], n.dead[s.Pred.Addr]
	n.mu.Unlock()
	fail := func(err error) (ring.Conn, ring.Conn, error) {
		po.close()
		pi.close()
		return nil, nil, err
	}
	if deadSucc {
		return fail(fmt.Errorf("%w: %w", ring.ErrNoSuccessor, ErrDead))
	}
	if deadPred {
		return fail(fmt.Errorf("%w: %w", ring.ErrNoPredecessor, ErrDead))
	}
	select {
	case <-po.recvSide:
	case <-po.done:
		return fail(fmt.Errorf("%w: %w", ring.ErrNoSuccessor, ErrClosed))
	case <-ctx.Done():
		return fail(fmt.Errorf("%w: %w", ring.ErrNoSuccessor, ctx.Err()))
	}
	select {
	case <-pi.sendSide:
	case <-pi.done:
		return fail(fmt.Errorf("%w: %w", ring.ErrNoPredecessor, ErrClosed))
	case <-ctx.Done():
		return fail(fmt.Errorf("%w: %w", ring.ErrNoPredecessor, ctx.Err()))
	}
	return &sender{net: n, p: po}, &receiver{p: pi, maxFrame: s.MaxFrame}, nil
}

type sender struct {
	net *Network
	p   *pipe
}

func (s *sender) Send(hdr, payload []byte) error {
	select {
	case <-s.p.done:
		return ErrClosed
	default:
	}
	f := make([]byte, len(hdr)+len(payload))
	copy(f, hdr)
	copy(f[len(hdr):], payload)
	s.net.mu.Lock()
	filter := s.net.filter
	s.net.mu.Unlock()
	if filter == nil {
		s.p.deliver(f)
	} else {
		filter(s.p.link, f, s.p.deliver)
	}
	select {
	case <-s.p.done:
		return ErrClosed
	default:
		return nil
	}
}

func (s *sender) Recv() ([]byte, error) { return nil, errors.New("memnet: Recv on a send link") }
func (s *sender) Close() error          { s.p.close(); return nil }

// receiver is the in side of a link; maxFrame ≤ 0 means no cap.
type receiver struct {
	p        *pipe
	maxFrame int
}

func (r *receiver) Send(hdr, payload []byte) error {
	return errors.New("memnet: Send on a receive link")
}

// Recv returns queued frames even after the link closed, like a socket
// buffer, then ErrClosed. A frame above the cap closes the link.
func (r *receiver) Recv() ([]byte, error) {
	var f []byte
	select {
	case f = <-r.p.ch:
	default:
		select {
		case f = <-r.p.ch:
		case <-r.p.done:
			return nil, ErrClosed
		}
	}
	if r.maxFrame > 0 && len(f) > r.maxFrame {
		r.p.close()
		return nil, fmt.Errorf("%w: %d bytes, cap %d", ErrFrameSize, len(f), r.maxFrame)
	}
	return f, nil
}

func (r *receiver) Close() error { r.p.close(); return nil }
