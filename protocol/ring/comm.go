package ring

import (
	"context"
	"crypto/ed25519"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"
)

// Op is the reduction.
type Op uint8

const (
	Sum  Op = iota // element-wise sum
	Mean           // element-wise sum divided by the ring size
)

func (o Op) String() string {
	switch o {
	case Sum:
		return "sum"
	case Mean:
		return "mean"
	}
	return fmt.Sprintf("op(%d)", uint8(o))
}

// Defaults.
const (
	DefaultTimeout         = 30 * time.Second
	DefaultSegmentBytes    = 1 << 20  // largest segment payload (fp32 bytes)
	DefaultMinSegmentBytes = 64 << 10 // smallest, so small vectors still pipeline
	DefaultMaxInvalid      = 64

	maxStash = 256 << 20 // bytes of next-call frames kept across a call boundary
)

// Transports must say which side of the ring failed to connect by wrapping
// one of these, so the communicator can name a suspect.
var (
	ErrNoSuccessor   = errors.New("ring: cannot reach the successor")
	ErrNoPredecessor = errors.New("ring: the predecessor did not connect")
)

// Options configures a Comm. Key, Config and Transport are required.
type Options struct {
	Key       ed25519.PrivateKey
	Config    Config
	Transport Transport

	// Timeout is how long a neighbour may stay silent (no valid frame from
	// the predecessor, or a send to the successor blocked) before the call
	// fails naming it. It also bounds connecting. Default 30 s.
	Timeout time.Duration
	// SegmentBytes and MinSegmentBytes bound the fp32 payload of one
	// signed segment; a call uses a quarter of a chunk, clamped to them.
	// Every node of a ring must use the same values.
	SegmentBytes    int
	MinSegmentBytes int
	// Wire is the default element type on the wire (Call.Wire overrides).
	Wire Wire
	// ClipNorm, when > 0, is the bound C every honest contribution was
	// clipped to: a partial sum of r contributions with norm above r·C is
	// refused and its sender reported (NormExceeded ends the call).
	ClipNorm float64
	// Insecure switches hashing, signing and verification off. For
	// measuring their cost only: any peer can then inject data.
	Insecure bool
	// MaxInvalid is how many invalid frames one call tolerates before it
	// ends with ErrMisbehaved naming the predecessor. Default 64.
	MaxInvalid int
	Reporter   Reporter // nil: evidence is dropped
	Clock      Clock    // nil: SystemClock
}

// Call holds per-call options.
type Call struct {
	Step uint64 // the caller's training step, bound into every signature
	Wire Wire   // FP32 or BF16; zero value FP32 unless Options.Wire says otherwise
	wire bool   // Wire was set explicitly
}

// WithWire returns c with its wire format set.
func (c Call) WithWire(w Wire) Call { c.Wire, c.wire = w, true; return c }

// Comm is one node's ring communicator. Calls are serialised; a Comm may be
// reused for any number of calls and configurations.
type Comm struct {
	mu     sync.Mutex
	opt    Options
	pub    ed25519.PublicKey
	cfg    Config
	id     ID
	self   int
	seq    uint64
	prefix []byte // SignTag ‖ len(job) ‖ job
	out    Conn
	in     Conn
	work   []float32
	sbuf   []byte // bf16 send scratch

	stash      [][]byte // frames of the next call received early
	stashBytes int
	closed     bool

	st  *stats    // shared with the sub-rings of a two-level call
	sub bool      // a sub-ring's Comm: its calls are counted by the parent
	two *twoLevel // the sub-rings, when the configuration has groups
}

// New validates o, finds this node in o.Config and returns a Comm. It does
// not connect; the first AllReduce does.
func New(o Options) (*Comm, error) {
	if len(o.Key) != ed25519.PrivateKeySize {
		return nil, fmt.Errorf("%w: node key has %d bytes", ErrConfig, len(o.Key))
	}
	if o.Transport == nil {
		return nil, fmt.Errorf("%w: no transport", ErrConfig)
	}
	if o.Timeout == 0 {
		o.Timeout = DefaultTimeout
	}
	if o.SegmentBytes == 0 {
		o.SegmentBytes = DefaultSegmentBytes
	}
	if o.MinSegmentBytes == 0 {
		o.MinSegmentBytes = min(DefaultMinSegmentBytes, o.SegmentBytes)
	}
	if o.MaxInvalid == 0 {
		o.MaxInvalid = DefaultMaxInvalid
	}
	if o.Clock == nil {
		o.Clock = SystemClock{}
	}
	switch {
	case o.Timeout < 0:
		return nil, fmt.Errorf("%w: negative timeout", ErrConfig)
	case o.SegmentBytes < 4 || o.MinSegmentBytes < 4 || o.MinSegmentBytes > o.SegmentBytes || o.SegmentBytes > 1<<30:
		return nil, fmt.Errorf("%w: segment bytes %d..%d, want 4 ≤ min ≤ max ≤ 1 GiB", ErrConfig, o.MinSegmentBytes, o.SegmentBytes)
	case o.Wire.Size() == 0:
		return nil, fmt.Errorf("%w: unknown wire %d", ErrConfig, o.Wire)
	case o.ClipNorm < 0 || math.IsNaN(o.ClipNorm):
		return nil, fmt.Errorf("%w: clip norm %v", ErrConfig, o.ClipNorm)
	}
	if binary.NativeEndian.Uint16([]byte{1, 0}) != 1 {
		return nil, fmt.Errorf("%w: big-endian hosts are not supported", ErrConfig)
	}
	c := &Comm{opt: o, pub: o.Key.Public().(ed25519.PublicKey), st: &stats{}}
	if err := c.install(o.Config); err != nil {
		return nil, err
	}
	return c, nil
}

func (c *Comm) install(cfg Config) error {
	if err := cfg.Validate(); err != nil {
		return err
	}
	self := cfg.Index(c.pub)
	if self < 0 {
		return fmt.Errorf("%w: this node's key is not a member", ErrConfig)
	}
	cfg.Members = append([]Member(nil), cfg.Members...)
	var two *twoLevel
	if cfg.TwoLevel() {
		var err error
		if two, err = newTwoLevel(c, cfg, self); err != nil {
			return err
		}
	}
	c.closeLinks()
	c.two = two
	c.cfg, c.id, c.self, c.seq = cfg, cfg.ID(), self, 0
	c.stash, c.stashBytes = nil, 0
	c.prefix = signingPrefix(cfg.Job)
	return nil
}

// Reconfigure installs a new ring configuration: the links of the old one
// are closed, and frames bound to it are refused from now on.
func (c *Comm) Reconfigure(cfg Config) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return ErrClosed
	}
	return c.install(cfg)
}

// Config returns the installed configuration, its id and this node's index.
func (c *Comm) Config() (Config, ID, int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.cfg, c.id, c.self
}

// Close closes the links. Later calls fail with ErrClosed.
func (c *Comm) Close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.closed = true
	c.closeLinks()
	return nil
}

func (c *Comm) closeLinks() {
	if c.two != nil {
		c.two.closeLinks()
	}
	if c.out != nil {
		c.out.Close()
		c.in.Close()
		c.out, c.in = nil, nil
	}
}

func (c *Comm) pred() int { return (c.self + len(c.cfg.Members) - 1) % len(c.cfg.Members) }
func (c *Comm) succ() int { return (c.self + 1) % len(c.cfg.Members) }

// maxFrame is the largest frame this configuration's calls send.
func (c *Comm) maxFrame() int { return HeaderSize + c.opt.SegmentBytes }

func (c *Comm) peerErr(idx int, ph Phase, round int, err error) *PeerError {
	return &PeerError{Suspect: idx, SuspectID: c.cfg.Members[idx].ID, Part: c.cfg.Part, Phase: ph, Round: round, Err: err}
}

func (c *Comm) connect(ctx context.Context) error {
	cctx, cancel := context.WithTimeout(ctx, c.opt.Timeout)
	defer cancel()
	s := LinkSpec{
		ConfigID: c.id, Self: c.self, Me: c.cfg.Members[c.self],
		Succ: c.cfg.Members[c.succ()], SuccIdx: c.succ(),
		Pred: c.cfg.Members[c.pred()], PredIdx: c.pred(),
		MaxFrame: c.maxFrame(),
	}
	out, in, err := c.opt.Transport.Connect(cctx, s)
	if err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		kind := ErrBroken
		if errors.Is(err, context.DeadlineExceeded) {
			kind = ErrTimeout
		}
		switch {
		case errors.Is(err, ErrNoSuccessor):
			return c.peerErr(c.succ(), ScatterReduce, 0, fmt.Errorf("%w: %w", kind, err))
		case errors.Is(err, ErrNoPredecessor):
			return c.peerErr(c.pred(), ScatterReduce, 0, fmt.Errorf("%w: %w", kind, err))
		}
		return fmt.Errorf("ring: connect: %w", err)
	}
	c.out, c.in = out, in
	return nil
}

// AllReduce reduces buf across the ring in place with op, with the
// default call options (step 0, Options.Wire).
func (c *Comm) AllReduce(ctx context.Context, buf []float32, op Op) error {
	return c.AllReduceCall(ctx, buf, op, Call{})
}

// AllReduceCall reduces buf across the ring in place. Every member must
// call it with a buffer of the same length, the same op and call options.
// On error buf is untouched and the links of this configuration are
// closed; a *PeerError names the neighbour to blame. Other members may have
// finished the same call, so retry only after Reconfigure with the
// configuration the orchestrator publishes (a new epoch or membership):
// calls are numbered per configuration and must stay in step.
//
// The call works in a private buffer and copies the result into buf once it
// has succeeded: one pass over the vector that AllReduceInto avoids.
func (c *Comm) AllReduceCall(ctx context.Context, buf []float32, op Op, call Call) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if cap(c.work) < len(buf) {
		c.work = make([]float32, len(buf))
	}
	work := c.work[:len(buf)]
	ok, err := c.reduce(ctx, work, buf, op, call)
	if err == nil && ok {
		copy(buf, work)
	}
	return err
}

// AllReduceInto reduces src across the ring and writes the result to dst,
// which must have src's length and must not overlap it. src is only read:
// on error it is untouched (dst then holds unspecified values), so the call
// can be retried from it as AllReduceCall's can. Writing to a separate
// buffer saves the final copy of an in-place call, one pass over the whole
// vector; on machines bound by memory bandwidth that is a quarter of the
// call's cost. The rules of AllReduceCall apply otherwise.
func (c *Comm) AllReduceInto(ctx context.Context, dst, src []float32, op Op, call Call) error {
	if len(dst) != len(src) {
		return fmt.Errorf("%w: dst has %d elements, src %d", ErrBuffers, len(dst), len(src))
	}
	if overlap(dst, src) {
		return fmt.Errorf("%w (use AllReduceCall for in place)", ErrBuffers)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	ok, err := c.reduce(ctx, dst, src, op, call)
	if err == nil && !ok {
		copy(dst, src) // a ring of one: the sum and the mean are the input
	}
	return err
}

func overlap(a, b []float32) bool {
	if len(a) == 0 || len(b) == 0 {
		return false
	}
	a0 := uintptr(unsafe.Pointer(unsafe.SliceData(a)))
	b0 := uintptr(unsafe.Pointer(unsafe.SliceData(b)))
	return a0 < b0+4*uintptr(len(b)) && b0 < a0+4*uintptr(len(a))
}

// reduce runs one call, flat or two-level, reading src and writing work;
// c.mu is held. It reports ran = false when there was nothing to do (a
// ring of one), in which case work was not written.
func (c *Comm) reduce(ctx context.Context, work, src []float32, op Op, call Call) (bool, error) {
	if c.two == nil {
		return c.allReduce(ctx, work, src, op, call, part{})
	}
	if c.closed {
		return false, ErrClosed
	}
	start := c.opt.Clock.Now()
	err := c.two.allReduce(ctx, work, src, op, call)
	if err != nil {
		c.closeLinks()
		c.st.fail(err)
		return false, err
	}
	c.st.done(len(c.cfg.Members), len(src), c.opt.Clock.Now().Sub(start))
	return true, nil
}

// part is how a sub-call of a two-level call differs from a flat call
// (the zero value: a flat all-reduce).
type part struct {
	scatterOnly, gatherOnly bool  // run one phase
	bounds                  []int // chunk boundaries (nil: balanced)
	cross                   bool  // a shard ring: CrossScatter/CrossGather
	weight                  []int // contributions of each member's input (nil: 1)
	whole                   int   // contributions of a finished chunk (0: n)
	div                     int   // Mean's divisor (0: n)
}

// allReduce runs one flat call (or the part of one that pt says) reading
// src and writing work; c.mu is held. It reports ran = false when there
// was nothing to do (a ring of one), in which case work was not written.
// work and src may be the same slice when pt runs no step 0 or is a
// shard ring's call (every element is read before it is written, and a
// gathered chunk only overwrites one this node has sent).
func (c *Comm) allReduce(ctx context.Context, work, src []float32, op Op, call Call, pt part) (ran bool, err error) {
	if c.closed {
		return false, ErrClosed
	}
	if op > Mean {
		return false, fmt.Errorf("ring: unknown op %d", op)
	}
	wire := c.opt.Wire
	if call.wire {
		wire = call.Wire
	}
	if wire.Size() == 0 {
		return false, fmt.Errorf("ring: unknown wire %d", wire)
	}
	n := len(c.cfg.Members)
	if n == 1 {
		return false, nil // sum and mean of one contribution
	}
	if uint64(len(src)) > math.MaxUint32*uint64(n) {
		return false, ErrSize
	}
	if err := ctx.Err(); err != nil {
		return false, err
	}
	seq := c.seq
	c.seq++
	if c.out == nil {
		if err := c.connect(ctx); err != nil {
			c.st.fail(err)
			return false, err
		}
	}
	maxChunk := (len(src) + n - 1) / n
	for i := range len(pt.bounds) - 1 {
		maxChunk = max(maxChunk, pt.bounds[i+1]-pt.bounds[i])
	}
	chunkBytes := 4 * maxChunk
	segBytes := min(max(chunkBytes/4, c.opt.MinSegmentBytes), c.opt.SegmentBytes)
	p := newPlanBounds(n, c.self, len(src), max(segBytes/4, 1), pt.bounds)
	switch {
	case pt.scatterOnly:
		p.end = n - 1
	case pt.gatherOnly:
		p.first = n - 1
	}
	p.cross, p.weight = pt.cross, pt.weight
	if pt.whole > 0 {
		p.whole = pt.whole
	}
	div := n
	if pt.div > 0 {
		div = pt.div
	}
	// The call reads src and writes only work: every element of work is
	// written before it is read (reduced chunks as received + own, the rest
	// while gathering), so no copy-in is needed.
	if wire == BF16 && len(c.sbuf) < 2*(segBytes/4+1) {
		c.sbuf = make([]byte, 2*(segBytes/4+1))
	}
	k := &callState{c: c, p: p, op: op, div: float32(div), wire: wire, step: call.Step, seq: seq, own: src, work: work,
		ready: make(chan int32, p.frames()), abort: make(chan struct{}),
		recvd: make([]bool, p.frames()), sent: make([]atomic.Bool, p.frames()), sentNote: make(chan struct{}, 1),
		normSq: make([]float64, p.steps()), pred: c.pred(), succ: c.succ(),
		start: c.opt.Clock.Now()}
	if !c.opt.Insecure && wire == FP32 {
		k.hashes = make([][32]byte, p.frames())
	}
	if err := k.run(ctx); err != nil {
		c.closeLinks()
		if !c.sub {
			c.st.fail(err)
		}
		return false, err
	}
	if !c.sub {
		c.st.done(n, len(src), c.opt.Clock.Now().Sub(k.start))
	}
	return true, nil
}

// callState is one call in flight: a receive goroutine (read, check,
// verify, reduce) and a send goroutine (hash, sign, write) joined by the
// ready queue, watched by the caller's goroutine for timeouts.
type callState struct {
	c          *Comm
	p          plan
	op         Op
	div        float32 // Mean's divisor
	wire       Wire
	step, seq  uint64
	own        []float32 // the caller's buffer: read only
	work       []float32
	ready      chan int32 // frame indices the sender may send, in readiness order
	abort      chan struct{}
	recvd      []bool        // receiver only
	sent       []atomic.Bool // written by the sender, read by the receiver
	sentNote   chan struct{} // a send completed
	hashes     [][32]byte    // received payload hashes, reused when forwarding fp32 gathers
	normSq     []float64     // receiver only: squared norm so far of each step's chunk
	pred, succ int
	invalid    int

	start     time.Time
	lastRecv  atomic.Int64 // clock offset of the last valid frame
	sendSince atomic.Int64 // clock offset+1 at which a blocked Send began, 0 if none
	received  atomic.Int64
	recvDone  atomic.Bool
}

func (k *callState) now() int64 { return int64(k.c.opt.Clock.Now().Sub(k.start)) }

func (k *callState) where() (Phase, int) {
	t := k.p.first + int(k.received.Load())/k.p.segs
	t = min(t, k.p.end-1)
	return k.p.phaseRound(t)
}

func (k *callState) fail(idx int, err error) *PeerError {
	ph, r := k.where()
	return k.c.peerErr(idx, ph, r, err)
}

func (k *callState) run(ctx context.Context) error {
	for s := range k.p.segs {
		k.ready <- int32(k.p.first*k.p.segs + s) // the first step: this node's own chunk
	}
	errc := make(chan error, 2)
	go func() { errc <- k.recvLoop() }()
	go func() { errc <- k.sendLoop() }()
	timeout := k.c.opt.Timeout
	timer := k.c.opt.Clock.NewTimer(timeout / 4)
	defer timer.Stop()
	due := int64(timeout / 4) // clock offset at which the timer should fire
	done := ctx.Done()
	tick := timer.C()
	var first error
	stop := func(err error) {
		if first == nil {
			first = err
			close(k.abort)
			k.c.out.Close()
			k.c.in.Close()
			done, tick = nil, nil
		}
	}
	// stalled reports how long past its due time the watchdog is: when the
	// timer is overdue by more than the slack, this process did not run
	// (SIGSTOP, a paused VM, a starved machine) and the silence it would
	// see is its own, not a neighbour's. The timer is never armed for more
	// than a period of a quarter timeout, so a stall of S shows as at least
	// S − period: stalls above half the timeout are always seen. Floors keep
	// a loaded machine's late timers from passing for stalls with short
	// timeouts.
	period := int64(timeout) / 4
	slack := max(int64(timeout)/4, int64(250*time.Millisecond))
	stallAt := max(int64(timeout)/2, int64(500*time.Millisecond))
	stalled := func() int64 {
		if late := k.now() - due; tick != nil && late > slack {
			return late
		}
		return 0
	}
	for pending := 2; pending > 0; {
		select {
		case err := <-errc:
			pending--
			if err != nil {
				if late := stalled(); late >= stallAt {
					// Frozen for half the timeout or more: the neighbours
					// have given up on this node or soon will. Blame nobody.
					err = fmt.Errorf("%w for %v (then: %v)", ErrStalled, time.Duration(late), err) // %v: not a PeerError
				}
				stop(err)
			}
		case <-done:
			stop(ctx.Err())
		case <-tick:
			if late := stalled(); late >= stallAt {
				stop(fmt.Errorf("%w for %v", ErrStalled, time.Duration(late)))
				continue
			} else if late > 0 {
				// A shorter stall: the silence was partly this node's own.
				// Restart the neighbours' clocks from now.
				// A compare-and-swap: a send that ended between the load
				// and the store must not be left marked as blocked from
				// now on (it would be blamed on the successor a timeout
				// later).
				now := k.now()
				k.lastRecv.Store(now)
				if s := k.sendSince.Load(); s > 0 {
					k.sendSince.CompareAndSwap(s, now+1)
				}
			}
			now := k.now()
			next := int64(timeout)
			// A send blocked on the successor is direct evidence against
			// it; a silent predecessor may itself be starved upstream.
			if s := k.sendSince.Load(); s > 0 {
				blocked := now - (s - 1)
				if blocked >= int64(timeout) {
					stop(k.fail(k.succ, fmt.Errorf("%w: send blocked for %v", ErrTimeout, time.Duration(blocked))))
					continue
				}
				next = min(next, int64(timeout)-blocked)
			}
			if !k.recvDone.Load() {
				idle := now - k.lastRecv.Load()
				if idle >= int64(timeout) {
					stop(k.fail(k.pred, fmt.Errorf("%w: no valid frame for %v", ErrTimeout, time.Duration(idle))))
					continue
				}
				next = min(next, int64(timeout)-idle)
			}
			next = max(min(next, period), int64(time.Millisecond))
			due = now + next
			timer.Reset(time.Duration(next))
		}
	}
	return first
}

func (k *callState) sendLoop() error {
	c, p := k.c, k.p
	var hdr [HeaderSize]byte
	bind := make([]byte, 0, len(c.prefix)+signedEnd-signedStart)
	bind = append(bind, c.prefix...)
	h := Header{Wire: k.wire, Sender: uint32(c.self), Receiver: uint32(k.succ),
		Epoch: c.cfg.Epoch, Step: k.step, Seq: k.seq, Total: uint64(p.total), ConfigID: c.id}
	for range p.runFrames() {
		var idx int
		select {
		case i := <-k.ready:
			idx = int(i)
		case <-k.abort:
			return nil
		}
		t, seg := idx/p.segs, idx%p.segs
		chunk := p.sendChunk(t)
		lo, hi := p.segment(chunk, seg)
		ph, r := p.phaseRound(t)
		src := k.work[lo:hi]
		if t == 0 {
			src = k.own[lo:hi]
		}
		var payload []byte
		if k.wire == FP32 {
			payload = f32bytes(src)
		} else {
			payload = c.sbuf[:2*(hi-lo)]
			for i, v := range src {
				binary.LittleEndian.PutUint16(payload[2*i:], toBF16(v))
			}
		}
		h.Phase, h.Round, h.Chunk, h.Segment = ph, uint32(r), uint32(chunk), uint32(seg)
		h.Count, h.Offset = uint32(hi-lo), uint64(lo)
		if !c.opt.Insecure {
			if k.hashes != nil && t >= p.n {
				// Forwarding an all-gather segment: the bytes are the ones
				// received (and verified) at step t-1, so is their hash.
				h.Hash = k.hashes[idx-p.segs]
			} else {
				h.Hash = PayloadHash(payload)
			}
			putHeader(hdr[:], &h, len(payload))
			bind = append(bind[:len(c.prefix)], hdr[signedStart:signedEnd]...)
			copy(hdr[offSig:], ed25519.Sign(c.opt.Key, bind))
		} else {
			putHeader(hdr[:], &h, len(payload))
		}
		k.sendSince.Store(k.now() + 1)
		err := c.out.Send(hdr[:], payload)
		k.sendSince.Store(0)
		if err != nil {
			return k.fail(k.succ, fmt.Errorf("%w: send: %w", ErrBroken, err))
		}
		k.sent[idx].Store(true)
		c.st.framesSent.Add(1)
		c.st.bytesSent.Add(uint64(HeaderSize + len(payload)))
		select {
		case k.sentNote <- struct{}{}:
		default:
		}
	}
	return nil
}

func (k *callState) recvLoop() error {
	c := k.c
	bind := make([]byte, 0, len(c.prefix)+signedEnd-signedStart)
	bind = append(bind, c.prefix...)
	// Frames of this call that arrived during the previous one (possible
	// with several streams per link, which do not keep order).
	stash := c.stash
	c.stash, c.stashBytes = nil, 0
	for got := 0; got < k.p.runFrames(); {
		var fr []byte
		if len(stash) > 0 {
			fr, stash = stash[0], stash[1:]
		} else {
			var err error
			if fr, err = c.in.Recv(); err != nil {
				return k.fail(k.pred, fmt.Errorf("%w: receive: %w", ErrBroken, err))
			}
		}
		ok, err := k.accept(fr, &bind)
		if err != nil {
			return err
		}
		if ok {
			got++
			c.st.framesReceived.Add(1)
			c.st.bytesReceived.Add(uint64(len(fr)))
			k.received.Store(int64(got))
			k.lastRecv.Store(k.now())
		}
	}
	k.recvDone.Store(true)
	return nil
}

// accept checks one frame and applies it. It returns ok when the frame was
// applied, and an error when the call must end.
func (k *callState) accept(fr []byte, bind *[]byte) (bool, error) {
	c, p := k.c, k.p
	h, payload, err := DecodeFrame(fr, c.maxFrame())
	if err != nil {
		return false, k.reject(Malformed, nil, fr, false, err.Error())
	}
	if h.ConfigID != c.id {
		return false, k.reject(StaleConfig, &h, fr, false, fmt.Sprintf("configuration %s, want %s", h.ConfigID, c.id))
	}
	verify := func(idx uint32) bool {
		if c.opt.Insecure || idx >= uint32(p.n) {
			return false
		}
		*bind = append((*bind)[:len(c.prefix)], fr[signedStart:signedEnd]...)
		return ed25519.Verify(c.cfg.Members[idx].PublicKey, *bind, h.Sig[:])
	}
	if h.Sender != uint32(k.pred) {
		return false, k.reject(WrongSender, &h, fr, verify(h.Sender), fmt.Sprintf("sender %d, want the predecessor %d", h.Sender, k.pred))
	}
	signed := verify(h.Sender)
	if !c.opt.Insecure && !signed {
		return false, k.reject(BadSignature, &h, fr, false, "signature does not verify under the predecessor's key")
	}
	if h.Receiver != uint32(c.self) {
		return false, k.reject(WrongReceiver, &h, fr, signed, fmt.Sprintf("receiver %d, this node is %d", h.Receiver, c.self))
	}
	if h.Seq == k.seq+1 && h.Epoch == c.cfg.Epoch && (signed || c.opt.Insecure) && c.stashBytes+len(fr) <= maxStash {
		// The next call's frame, overtaking this call's on another stream:
		// keep it (verified again when that call starts).
		c.stash = append(c.stash, append([]byte(nil), fr...))
		c.stashBytes += len(fr)
		return false, nil
	}
	if h.Epoch != c.cfg.Epoch || h.Step != k.step || h.Seq != k.seq {
		return false, k.reject(WrongCall, &h, fr, signed, fmt.Sprintf("epoch/step/seq %d/%d/%d, want %d/%d/%d", h.Epoch, h.Step, h.Seq, c.cfg.Epoch, k.step, k.seq))
	}
	t, ok := p.step(h.Phase, h.Round)
	if !ok || h.Segment >= uint32(p.segs) || h.Chunk != uint32(p.recvChunk(t)) {
		return false, k.reject(WrongRound, &h, fr, signed, fmt.Sprintf("%s round %d chunk %d segment %d is not in this call's schedule", h.Phase, h.Round, h.Chunk, h.Segment))
	}
	chunk, seg := int(h.Chunk), int(h.Segment)
	lo, hi := p.segment(chunk, seg)
	if h.Wire != k.wire || h.Total != uint64(p.total) || h.Offset != uint64(lo) || h.Count != uint32(hi-lo) {
		return false, k.reject(WrongSize, &h, fr, signed, fmt.Sprintf("%s [%d,+%d) of %d, want %s [%d,+%d) of %d", h.Wire, h.Offset, h.Count, h.Total, k.wire, lo, hi-lo, p.total))
	}
	idx := t*p.segs + seg
	if k.recvd[idx] {
		return false, k.reject(Duplicate, &h, fr, signed, fmt.Sprintf("%s round %d segment %d already applied", h.Phase, h.Round, seg))
	}
	if t >= p.n-1 {
		// An all-gather segment overwrites what this node sends at step
		// t+1-N. It cannot honestly arrive before that send was at least
		// ready (it has gone round the ring since); if the send is ready
		// but still in flight, wait for it to finish reading the buffer.
		// (An all-gather alone, a two-level call's third phase, sent
		// nothing at that step: nothing to wait for.)
		j := idx - (p.n-1)*p.segs
		if j-p.segs >= p.first*p.segs && !k.recvd[j-p.segs] {
			return false, k.reject(WrongRound, &h, fr, signed, fmt.Sprintf("all-gather round %d segment %d arrived before this node could send its part: from the future", h.Round, seg))
		}
		for j >= p.first*p.segs && !k.sent[j].Load() {
			select {
			case <-k.sentNote:
			case <-k.abort:
				return false, k.fail(k.pred, ErrClosed)
			}
		}
	}
	if !c.opt.Insecure && PayloadHash(payload) != h.Hash {
		return false, k.reject(Corrupt, &h, fr, signed, "payload does not match the signed hash")
	}
	if C := c.opt.ClipNorm; C > 0 {
		k.normSq[t] += SumSquares(k.wire, payload)
		if NormExceeds(k.normSq[t], p.contributions(t), C, k.wire) {
			err := k.reject(NormExceeded, &h, fr, signed, fmt.Sprintf("%s round %d: chunk norm so far %.6g > %d × %g", h.Phase, h.Round, math.Sqrt(k.normSq[t]), p.contributions(t), C))
			if err == nil {
				err = k.fail(k.pred, fmt.Errorf("%w: partial sum norm above the clip bound", ErrMisbehaved))
			}
			return false, err
		}
	}
	k.apply(t, k.work[lo:hi], k.own[lo:hi], payload)
	k.recvd[idx] = true
	if k.hashes != nil {
		k.hashes[idx] = h.Hash
	}
	if t+1 < p.end {
		k.ready <- int32(idx + p.segs)
	}
	return true, nil
}

// SumSquares is the squared L2 norm of a payload's elements (fp32 or
// bf16, little-endian), accumulated in float64.
func SumSquares(w Wire, payload []byte) float64 {
	var s float64
	if w == BF16 {
		for i := 0; i+1 < len(payload); i += 2 {
			v := float64(fromBF16(binary.LittleEndian.Uint16(payload[i:])))
			s += v * v
		}
		return s
	}
	for i := 0; i+3 < len(payload); i += 4 {
		v := float64(math.Float32frombits(binary.LittleEndian.Uint32(payload[i:])))
		s += v * v
	}
	return s
}

// Contributions is how many nodes' clipped contributions a partial sum of
// phase ph and round holds in a ring of n: round + 1 while scattering, all
// n once gathered.
//
// A third party (the judge) cannot tell how many contributions a shard
// ring's partial sum holds without the groups' sizes, so for CrossScatter
// and CrossGather it is n, the whole ring: a bound that never blames an
// honest sender (the ring's own receivers use the exact count).
func Contributions(ph Phase, round uint32, n int) int {
	if ph == ScatterReduce {
		return int(round) + 1
	}
	return n
}

// NormExceeds reports whether a partial sum of that many contributions,
// each clipped to clip, with squared norm normSq, is above what honest
// contributions can reach: contributions × clip, with the slack the wire's
// rounding needs (bf16 rounds every element to 8 bits of mantissa). NaN
// exceeds. The ring's receivers and a third party checking evidence
// (judge.RingEvidence) apply the same rule.
func NormExceeds(normSq float64, contributions int, clip float64, w Wire) bool {
	slack := 1 + 1e-5
	if w == BF16 {
		slack = 1 + 1.0/64
	}
	bound := float64(contributions) * clip * slack
	return normSq > bound*bound || math.IsNaN(normSq)
}

// apply reduces (scatter-reduce: dst = received + own) or stores
// (all-gather) a verified payload.
func (k *callState) apply(t int, dst, own []float32, payload []byte) {
	p := k.p
	scatter := t < p.n-1
	switch {
	case k.wire == FP32 && scatter:
		own = own[:len(dst)]
		if src, ok := bytesF32(payload); ok {
			src = src[:len(dst)]
			for i := range dst {
				dst[i] = src[i] + own[i]
			}
		} else {
			for i := range dst {
				dst[i] = math.Float32frombits(binary.LittleEndian.Uint32(payload[4*i:])) + own[i]
			}
		}
	case k.wire == FP32:
		if src, ok := bytesF32(payload); ok {
			copy(dst, src)
		} else {
			for i := range dst {
				dst[i] = math.Float32frombits(binary.LittleEndian.Uint32(payload[4*i:]))
			}
		}
	case scatter:
		for i := range dst {
			dst[i] = fromBF16(binary.LittleEndian.Uint16(payload[2*i:])) + own[i]
		}
	default:
		for i := range dst {
			dst[i] = fromBF16(binary.LittleEndian.Uint16(payload[2*i:]))
		}
	}
	if t == p.n-2 && p.end > p.n-1 { // this chunk is now fully reduced here: finish it (a reduce-scatter alone leaves it as it is)
		if k.op == Mean {
			d := k.div
			for i := range dst {
				dst[i] /= d
			}
		}
		if k.wire == BF16 { // what every other node will receive
			for i := range dst {
				dst[i] = RoundBF16(dst[i])
			}
		}
	}
}

// reject drops a frame: it reports evidence and counts it against the
// predecessor; past MaxInvalid the call ends.
func (k *callState) reject(v Violation, h *Header, fr []byte, signed bool, detail string) error {
	c := k.c
	if v <= NormExceeded {
		c.st.evidence[v].Add(1)
	}
	if r := c.opt.Reporter; r != nil {
		e := Evidence{Kind: v, Suspect: k.pred, SuspectID: c.cfg.Members[k.pred].ID, Claimed: -1,
			Signed: signed, ConfigID: c.id, Part: c.cfg.Part, Seq: k.seq, Detail: detail}
		if h != nil {
			e.Claimed = int(h.Sender)
			e.SignedBytes = SignedBytes(c.cfg.Job, fr)
			e.Signature = append([]byte(nil), h.Sig[:]...)
			if v == NormExceeded {
				e.Payload = append([]byte(nil), fr[HeaderSize:]...)
			}
		}
		r.Report(e)
	}
	k.invalid++
	if k.invalid > c.opt.MaxInvalid {
		return k.fail(k.pred, fmt.Errorf("%w: %d invalid frames, last %s: %s", ErrMisbehaved, k.invalid, v, detail))
	}
	return nil
}

func f32bytes(f []float32) []byte {
	if len(f) == 0 {
		return nil
	}
	return unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(f))), 4*len(f))
}

// bytesF32 views b as float32s when it is suitably aligned.
func bytesF32(b []byte) ([]float32, bool) {
	if len(b) == 0 {
		return nil, true
	}
	p := unsafe.Pointer(unsafe.SliceData(b))
	if uintptr(p)%4 != 0 {
		return nil, false
	}
	return unsafe.Slice((*float32)(p), len(b)/4), true
}
