package ring

import (
	"context"
	"time"
)

// Transport connects a node to its ring neighbours. Implementations:
// protocol/ring/memnet (tests) and protocol/ring/tcp; both pass the suite in protocol/ring/transporttest.
type Transport interface {
	// Connect opens this node's two links in a configuration: out to the
	// successor, in from the predecessor (for N = 2 both are the other
	// node, over two distinct links). It returns once both are up or ctx
	// ends. A transport must only hand out an in link whose peer it has
	// authenticated as Spec.Pred (or document that it does not).
	Connect(ctx context.Context, s LinkSpec) (out, in Conn, err error)
}

// LinkSpec is what a transport needs to know to connect.
type LinkSpec struct {
	ConfigID ID
	Self     int
	Succ     Member
	SuccIdx  int
	Pred     Member
	PredIdx  int
	Me       Member
	MaxFrame int // the largest frame (length prefix included) the ring sends
}

// Conn is one direction of a link carrying whole frames (length prefix
// included). Send is called from one goroutine and Recv from one other;
// Close may be called at any time from any goroutine and makes pending and
// later Send and Recv fail.
type Conn interface {
	// Send transmits the frame hdr ‖ payload. It may return before the peer
	// received it but must not retain hdr or payload after it returns.
	Send(hdr, payload []byte) error
	// Recv returns the next frame. The slice stays valid until the next
	// Recv or Close. Frames longer than the cap are an error.
	Recv() ([]byte, error)
	Close() error
}

// Clock is the time source of the timeouts: production uses the monotonic
// system clock; tests may inject another or run under testing/synctest.
type Clock interface {
	Now() time.Time
	NewTimer(d time.Duration) Timer
}

// Timer is the part of *time.Timer a Clock hands out.
type Timer interface {
	C() <-chan time.Time
	Reset(d time.Duration) bool
	Stop() bool
}

// SystemClock is the real, monotonic clock.
type SystemClock struct{}

// Now returns time.Now (with its monotonic reading).
func (SystemClock) Now() time.Time { return time.Now() }

// NewTimer wraps time.NewTimer.
func (SystemClock) NewTimer(d time.Duration) Timer { return sysTimer{time.NewTimer(d)} }

type sysTimer struct{ t *time.Timer }

func (s sysTimer) C() <-chan time.Time        { return s.t.C }
func (s sysTimer) Reset(d time.Duration) bool { return s.t.Reset(d) }
func (s sysTimer) Stop() bool                 { return s.t.Stop() }
