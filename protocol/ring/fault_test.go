package ring_test

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"errors"
	"maps"
	"math"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/zooai/gym/protocol/ring"
	"github.com/zooai/gym/protocol/ring/memnet"
)

func hdr(t testing.TB, frame []byte) ring.Header {
	t.Helper()
	h, _, err := ring.DecodeFrame(frame, 1<<30)
	if err != nil {
		t.Fatalf("filter saw an undecodable frame: %v", err)
	}
	return h
}

func peerErr(t testing.TB, err error) *ring.PeerError {
	t.Helper()
	var pe *ring.PeerError
	if !errors.As(err, &pe) {
		t.Fatalf("error %v (%T), want a *ring.PeerError", err, err)
	}
	return pe
}

// Faults the protocol must absorb: the sum is still exact, and what was
// dropped is reported.
func TestFaultsThatStillGiveTheExactSum(t *testing.T) {
	for _, tc := range []struct {
		name   string
		filter func(t *testing.T) memnet.Filter
		want   ring.Violation // evidence expected (0: none)
	}{
		{"delay", func(t *testing.T) memnet.Filter {
			var n atomic.Int64
			return func(l memnet.Link, f []byte, deliver func([]byte)) {
				d := time.Duration(n.Add(1)%7) * time.Millisecond
				go func() { time.Sleep(d); deliver(f) }()
			}
		}, 0},
		{"reorder", func(t *testing.T) memnet.Filter {
			var mu sync.Mutex
			held := map[memnet.Link][]byte{}
			return func(l memnet.Link, f []byte, deliver func([]byte)) {
				mu.Lock()
				prev := held[l]
				if prev == nil {
					held[l] = f
					mu.Unlock()
					go func() { // flush a frame nobody swapped with
						time.Sleep(time.Millisecond)
						mu.Lock()
						if slices.Equal(held[l], f) {
							delete(held, l)
							mu.Unlock()
							deliver(f)
							return
						}
						mu.Unlock()
					}()
					return
				}
				delete(held, l)
				mu.Unlock()
				deliver(f)
				deliver(prev)
			}
		}, 0},
		{"duplicate", func(t *testing.T) memnet.Filter {
			return func(l memnet.Link, f []byte, deliver func([]byte)) {
				deliver(f)
				deliver(slices.Clone(f))
			}
		}, ring.Duplicate},
		{"corrupt copy before the original", func(t *testing.T) memnet.Filter {
			return func(l memnet.Link, f []byte, deliver func([]byte)) {
				if h := hdr(t, f); h.Count > 0 && h.Segment == 0 {
					bad := slices.Clone(f)
					bad[len(bad)-1] ^= 0x40
					deliver(bad)
				}
				deliver(f)
			}
		}, ring.Corrupt},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				const n = 4
				cl := newCluster(t, n, func(o *ring.Options) { o.MaxInvalid = 1 << 20 })
				cl.net.SetFilter(tc.filter(t))
				bufs := inputs(n, 1234, 5)
				want := sumOf(bufs)
				for i, err := range cl.run(t.Context(), all(n), bufs, ring.Sum, ring.Call{}) {
					if err != nil {
						t.Fatalf("node %d: %v", i, err)
					}
					if !slices.Equal(bufs[i], want) {
						t.Fatalf("node %d: wrong sum", i)
					}
				}
				time.Sleep(time.Second) // let delayed deliveries and flushes finish
				got := cl.log.kinds()
				if tc.want == 0 && len(got) != 0 || tc.want != 0 && (got[tc.want] == 0 || len(got) != 1) {
					t.Fatalf("evidence %v, want only %v", got, tc.want)
				}
				// The counters agree with the evidence reported.
				counted := map[ring.Violation]int{}
				for _, c := range cl.comms {
					st := c.Stats()
					if st.Calls != 1 {
						t.Fatalf("stats count %d calls, want 1", st.Calls)
					}
					for v, k := range st.Evidence {
						if k > 0 {
							counted[v] += int(k)
						}
					}
				}
				if !maps.Equal(counted, got) {
					t.Fatalf("evidence counters %v, reported %v", counted, got)
				}
			})
		})
	}
}

// A dropped frame is never replaced: the receiver gives up after exactly
// the timeout and names the sender; its buffer is untouched.
func TestDroppedFrameTimesOutNamingTheSender(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const n = 4
		cl := newCluster(t, n, nil)
		cl.net.SetFilter(func(l memnet.Link, f []byte, deliver func([]byte)) {
			if h := hdr(t, f); h.Sender == 1 && h.Phase == ring.AllGather && h.Round == 0 && h.Segment == 1 {
				return // dropped
			}
			deliver(f)
		})
		bufs := inputs(n, 1000, 1)
		orig := clone(bufs)
		start := time.Now()
		var end time.Time
		errs := make([]error, n)
		var wg sync.WaitGroup
		for i := range n {
			wg.Go(func() {
				if i == 2 { // out of place: src must stay as it was too
					errs[i] = cl.comms[i].AllReduceInto(t.Context(), make([]float32, len(bufs[i])), bufs[i], ring.Sum, ring.Call{})
					end = time.Now()
					return
				}
				errs[i] = cl.comms[i].AllReduce(t.Context(), bufs[i], ring.Sum)
			})
		}
		wg.Wait()
		pe := peerErr(t, errs[2])
		if pe.Suspect != 1 || !errors.Is(pe, ring.ErrTimeout) || pe.Phase != ring.AllGather {
			t.Fatalf("node 2: %v, want a timeout naming node 1 in all-gather", pe)
		}
		if st := cl.comms[2].Stats(); st.Calls != 0 || st.Failures["timeout"] != 1 || st.Failures["other"] != 0 {
			t.Fatalf("node 2 stats: %d calls, failures %v; want one timeout", st.Calls, st.Failures)
		}
		if d := end.Sub(start); d != 30*time.Second {
			t.Fatalf("gave up after %v, want the 30 s timeout", d)
		}
		for i, err := range errs {
			if err != nil && !slices.Equal(bufs[i], orig[i]) {
				t.Fatalf("node %d failed but its buffer changed", i)
			}
		}
	})
}

// A neighbour that connected but does nothing (a paused process): its
// successor times out receiving, its predecessor times out sending; both
// name it.
func TestSilentNeighbourIsNamedByBothSides(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const n = 3
		cl := newCluster(t, n, func(o *ring.Options) { o.Timeout = 5 * time.Second })
		_, id, _ := cl.comms[2].Config()
		// Node 2 connects its links and then freezes.
		tr := cl.net.Transport("mem2")
		go tr.Connect(t.Context(), ring.LinkSpec{ConfigID: id, Self: 2, Me: cl.cfg.Members[2],
			Succ: cl.cfg.Members[0], SuccIdx: 0, Pred: cl.cfg.Members[1], PredIdx: 1})
		bufs := inputs(n, 100000, 2) // more than the links hold
		start := time.Now()
		errs := cl.run(t.Context(), []int{0, 1}, bufs, ring.Sum, ring.Call{})
		if d := time.Since(start); d != 5*time.Second {
			t.Fatalf("took %v, want the 5 s timeout", d)
		}
		for _, i := range []int{0, 1} {
			pe := peerErr(t, errs[i])
			if pe.Suspect != 2 || pe.SuspectID != "node2" || !errors.Is(pe, ring.ErrTimeout) {
				t.Fatalf("node %d: %v, want a timeout naming node 2", i, pe)
			}
		}
	})
}

func TestContextCancelEndsTheCall(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cl := newCluster(t, 2, nil)
		ctx, cancel := context.WithTimeout(t.Context(), time.Second)
		defer cancel()
		go cl.net.Transport("mem1").Connect(t.Context(), ring.LinkSpec{ConfigID: cl.cfg.ID(), Self: 1,
			Me: cl.cfg.Members[1], Succ: cl.cfg.Members[0], Pred: cl.cfg.Members[0]})
		buf := []float32{1, 2, 3}
		err := cl.comms[0].AllReduce(ctx, buf, ring.Sum)
		if !errors.Is(err, context.DeadlineExceeded) || !slices.Equal(buf, []float32{1, 2, 3}) {
			t.Fatalf("%v %v", err, buf)
		}
	})
}

// signFrame builds a frame for h and payload signed with key.
func signFrame(job string, key ed25519.PrivateKey, h ring.Header, payload []byte) []byte {
	f := ring.EncodeFrame(h, payload)
	sig := ed25519.Sign(key, ring.SignedBytes(job, f))
	copy(h.Sig[:], sig)
	return ring.EncodeFrame(h, payload)
}

// Forged, replayed and malformed frames injected on a link are dropped,
// reported with the right kind and evidence that verifies, and the sum is
// still exact.
func TestForgedAndReplayedFramesAreDropped(t *testing.T) {
	const n = 4
	cl := newCluster(t, n, nil)
	// Call 1: record what node 1 sends to node 2.
	var mu sync.Mutex
	var recorded [][]byte
	cl.net.SetFilter(func(l memnet.Link, f []byte, deliver func([]byte)) {
		if l.From == "mem1" && l.To == "mem2" {
			mu.Lock()
			recorded = append(recorded, slices.Clone(f))
			mu.Unlock()
		}
		deliver(f)
	})
	bufs := inputs(n, 500, 3)
	for _, err := range cl.run(t.Context(), all(n), bufs, ring.Sum, ring.Call{Step: 7}) {
		if err != nil {
			t.Fatal(err)
		}
	}
	cl.net.SetFilter(nil)
	job := cl.cfg.Job
	good := hdr(t, recorded[0])
	_, payload, _ := ring.DecodeFrame(recorded[0], 1<<30)
	good.Seq, good.Step = 1, 8 // a frame of call 2, step 0
	inject := func(f []byte) {
		if err := cl.net.Inject("mem1", "mem2", f); err != nil {
			t.Fatal(err)
		}
	}
	// Replays of call 1 (every frame node 1 sent).
	for _, f := range recorded {
		inject(f)
	}
	// Node 3 signs with its own key: not the predecessor.
	h := good
	h.Sender = 3
	inject(signFrame(job, keyFor(3), h, payload))
	// Claims to be node 1 but signed by node 3.
	inject(signFrame(job, keyFor(3), good, payload))
	// Signed by node 1 but outside the schedule, the wrong size, the wrong receiver.
	h = good
	h.Round = n - 1
	inject(signFrame(job, keyFor(1), h, payload))
	h = good
	h.Total++
	inject(signFrame(job, keyFor(1), h, payload))
	h = good
	h.Receiver = 3
	inject(signFrame(job, keyFor(1), h, payload))
	// A frame bound to another configuration (an old epoch of this ring).
	old := makeConfig(n, 0)
	h = good
	h.ConfigID = old.ID()
	inject(signFrame(job, keyFor(1), h, payload))
	// Truncated.
	inject(recorded[0][:ring.HeaderSize-1])
	// Signed over the right header but the payload changed in flight.
	bad := signFrame(job, keyFor(1), good, payload)
	bad[len(bad)-1] ^= 1
	inject(bad)

	bufs = inputs(n, 500, 4)
	want := sumOf(bufs)
	for i, err := range cl.run(t.Context(), all(n), bufs, ring.Sum, ring.Call{Step: 8}) {
		if err != nil {
			t.Fatalf("node %d: %v", i, err)
		}
		if !slices.Equal(bufs[i], want) {
			t.Fatalf("node %d: wrong sum", i)
		}
	}
	got := cl.log.kinds()
	wantKinds := map[ring.Violation]int{ring.WrongCall: len(recorded), ring.WrongSender: 1, ring.BadSignature: 1,
		ring.WrongRound: 1, ring.WrongSize: 1, ring.WrongReceiver: 1, ring.StaleConfig: 1, ring.Malformed: 1, ring.Corrupt: 1}
	if len(got) != len(wantKinds) {
		t.Fatalf("evidence %v, want %v", got, wantKinds)
	}
	for k, v := range wantKinds {
		if got[k] != v {
			t.Fatalf("evidence %v, want %v", got, wantKinds)
		}
	}
	for _, e := range cl.log.ev {
		if e.Suspect != 1 {
			t.Fatalf("%v names %d, want the link's peer 1", e.Kind, e.Suspect)
		}
		if e.Signed {
			if e.Claimed < 0 || !ed25519.Verify(keyFor(e.Claimed).Public().(ed25519.PublicKey), e.SignedBytes, e.Signature) {
				t.Fatalf("%v: evidence marked signed does not verify", e.Kind)
			}
		}
		if (e.Kind == ring.WrongCall || e.Kind == ring.WrongRound || e.Kind == ring.WrongSender) != e.Signed && e.Kind != ring.WrongSize && e.Kind != ring.WrongReceiver && e.Kind != ring.Corrupt {
			t.Fatalf("%v: signed=%v", e.Kind, e.Signed)
		}
	}
}

// Too many invalid frames end the call naming the predecessor.
func TestFloodOfInvalidFramesEndsTheCall(t *testing.T) {
	cl := newCluster(t, 2, func(o *ring.Options) { o.MaxInvalid = 3 })
	cl.net.SetFilter(func(l memnet.Link, f []byte, deliver func([]byte)) {
		if l.From == "mem0" {
			for range 4 {
				bad := slices.Clone(f)
				bad[ring.HeaderSize-1] ^= 1 // signature
				deliver(bad)
			}
		}
		deliver(f)
	})
	bufs := inputs(2, 64, 1)
	errs := cl.run(t.Context(), all(2), bufs, ring.Sum, ring.Call{})
	pe := peerErr(t, errs[1])
	if pe.Suspect != 0 || !errors.Is(pe, ring.ErrMisbehaved) {
		t.Fatalf("%v", pe)
	}
}

func TestNormCheck(t *testing.T) {
	const n, length, C = 4, 400, 10.0
	clip := func(b []float32, c float64) {
		var s float64
		for _, v := range b {
			s += float64(v) * float64(v)
		}
		if f := c / math.Sqrt(s); f < 1 {
			for i := range b {
				b[i] *= float32(f)
			}
		}
	}
	cl := newCluster(t, n, func(o *ring.Options) { o.ClipNorm = C })
	bufs := inputs(n, length, 11)
	for i := range bufs {
		clip(bufs[i], C)
	}
	for i, err := range cl.run(t.Context(), all(n), bufs, ring.Sum, ring.Call{}) {
		if err != nil {
			t.Fatalf("honest clipped inputs: node %d: %v", i, err)
		}
	}
	// Node 1 sends a contribution 3× over the bound everywhere.
	bufs = inputs(n, length, 12)
	for i := range bufs {
		clip(bufs[i], C)
	}
	for j := range bufs[1] {
		bufs[1][j] = 3 * C / float32(math.Sqrt(length)) * 2
	}
	errs := cl.run(t.Context(), all(n), bufs, ring.Sum, ring.Call{})
	pe := peerErr(t, errs[2])
	if pe.Suspect != 1 || !errors.Is(pe, ring.ErrMisbehaved) {
		t.Fatalf("node 2: %v, want node 1 named for misbehaving", pe)
	}
	if cl.log.kinds()[ring.NormExceeded] == 0 {
		t.Fatal("no NormExceeded evidence")
	}
	for _, e := range cl.log.ev {
		if e.Kind == ring.NormExceeded && (!e.Signed || len(e.Payload) == 0) {
			t.Fatal("norm evidence must carry the signed frame and its payload")
		}
		if e.Kind == ring.NormExceeded {
			// A third party can check it: the signature covers the signed
			// bytes, which end with the payload's hash.
			sb := e.SignedBytes
			h := ring.PayloadHash(e.Payload)
			if !ed25519.Verify(keyFor(e.Claimed).Public().(ed25519.PublicKey), sb, e.Signature) || !bytes.Equal(sb[len(sb)-32:], h[:]) {
				t.Fatal("norm evidence does not verify: signature or payload hash")
			}
			// OpenEvidence does the same checks and reads the signed header.
			signer := keyFor(1).Public().(ed25519.PublicKey)
			f, err := ring.OpenEvidence(signer, sb, e.Signature, e.Payload)
			if err != nil {
				t.Fatal(err)
			}
			if f.Job != cl.cfg.Job || f.Header.Sender != 1 || f.Header.Epoch != cl.cfg.Epoch || f.Header.Phase != ring.ScatterReduce ||
				math.Sqrt(f.NormSq) <= float64(f.Header.Round+1)*C {
				t.Fatalf("opened evidence %+v, norm %.3g: want node 1's scatter frame above (round+1)·C", f.Header, math.Sqrt(f.NormSq))
			}
			// Anything altered is refused.
			other := keyFor(2).Public().(ed25519.PublicKey)
			bad := slices.Clone(e.Payload)
			bad[0] ^= 1
			badSig := slices.Clone(e.Signature)
			badSig[5] ^= 1
			badHdr := slices.Clone(sb)
			badHdr[len(badHdr)-40] ^= 1
			for name, args := range map[string][3][]byte{
				"payload":   {sb, e.Signature, bad},
				"signature": {sb, badSig, e.Payload},
				"header":    {badHdr, e.Signature, e.Payload},
				"truncated": {sb[:len(sb)-1], e.Signature, e.Payload},
				"short":     {sb, e.Signature, e.Payload[:len(e.Payload)-4]},
			} {
				if _, err := ring.OpenEvidence(signer, args[0], args[1], args[2]); !errors.Is(err, ring.ErrEvidence) {
					t.Errorf("%s altered: %v, want ErrEvidence", name, err)
				}
			}
			if _, err := ring.OpenEvidence(other, sb, e.Signature, e.Payload); !errors.Is(err, ring.ErrEvidence) {
				t.Errorf("another signer: %v, want ErrEvidence", err)
			}
		}
	}
}

// A node dies during scatter-reduce or all-gather. Its neighbours name it,
// nobody's buffer changes on failure, and after the survivors install the
// configuration without it, frames of the old ring (a paused node waking
// up) are refused and the retry gives the exact sum of the survivors.
func TestKillRetryWithNewConfig(t *testing.T) {
	for _, killAt := range []ring.Phase{ring.ScatterReduce, ring.AllGather} {
		t.Run(killAt.String(), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				const n, victim = 5, 2
				cl := newCluster(t, n, func(o *ring.Options) { o.MaxInvalid = 1000 })
				var once sync.Once
				var stale [][]byte
				var smu sync.Mutex
				cl.net.SetFilter(func(l memnet.Link, f []byte, deliver func([]byte)) {
					h := hdr(t, f)
					if l.From == "mem2" {
						smu.Lock()
						stale = append(stale, slices.Clone(f))
						smu.Unlock()
					}
					if int(h.Sender) == victim && h.Phase == killAt && h.Round == 1 {
						once.Do(func() { cl.net.Kill("mem2") })
						return
					}
					deliver(f)
				})
				bufs := inputs(n, 3001, 21)
				orig := clone(bufs)
				survivors := []int{0, 1, 3, 4}
				errs := cl.run(t.Context(), all(n), bufs, ring.Sum, ring.Call{Step: 1})
				if errs[victim] == nil {
					t.Fatal("the killed node's call succeeded")
				}
				full := sumOf(orig)
				named := 0 // aborts cascade round the ring: some name a survivor
				for _, i := range survivors {
					if errs[i] == nil {
						if !slices.Equal(bufs[i], full) {
							t.Fatalf("node %d succeeded with a wrong sum", i)
						}
						continue
					}
					if pe := peerErr(t, errs[i]); pe.Suspect == victim {
						named++
					}
					if !slices.Equal(bufs[i], orig[i]) {
						t.Fatalf("node %d: aborted call changed the buffer", i)
					}
				}
				if named == 0 {
					t.Fatal("no survivor named the killed node")
				}
				// The orchestrator removes the victim; survivors retry.
				newCfg := cl.cfg.Without(victim)
				for _, i := range survivors {
					if err := cl.comms[i].Reconfigure(newCfg); err != nil {
						t.Fatal(err)
					}
				}
				cl.net.SetFilter(nil)
				cl.net.Revive("mem2")
				bufs = clone(orig)
				want := sumOf(orig, victim)
				var wg sync.WaitGroup
				var injected atomic.Int64
				// The victim wakes up and injects its old frames into the new ring.
				wg.Go(func() {
					smu.Lock()
					defer smu.Unlock()
					// Wait for the new link (fake time: the bubble's clock
					// moves only when every goroutine is blocked).
					for deadline := time.Now().Add(time.Minute); cl.net.Inject("mem1", "mem3", stale[0]) != nil; time.Sleep(time.Millisecond) {
						if time.Now().After(deadline) {
							t.Error("the survivors never opened the link mem1 → mem3")
							return
						}
					}
					injected.Add(1)
					for _, f := range stale {
						g := slices.Clone(f)
						if cl.net.Inject("mem1", "mem3", g) == nil { // as if relayed onto the new link
							injected.Add(1)
						}
					}
				})
				errs = cl.run(t.Context(), survivors, bufs, ring.Sum, ring.Call{Step: 1})
				wg.Wait()
				// A second call drains whatever stale frames are still queued.
				bufs2 := clone(orig)
				errs2 := cl.run(t.Context(), survivors, bufs2, ring.Sum, ring.Call{Step: 2})
				if got := cl.log.kinds()[ring.StaleConfig]; got != int(injected.Load()) {
					t.Fatalf("%d stale-config reports, want one per replayed frame (%d)", got, injected.Load())
				}
				for _, i := range survivors {
					if errs2[i] != nil || !slices.Equal(bufs2[i], want) {
						t.Fatalf("second call: node %d: %v", i, errs2[i])
					}
				}
				for _, i := range survivors {
					if errs[i] != nil {
						t.Fatalf("retry: node %d: %v", i, errs[i])
					}
					if !slices.Equal(bufs[i], want) {
						t.Fatalf("retry: node %d: not the survivors' sum", i)
					}
				}
			})
		})
	}
}

// fakeClock is a Clock the test moves by hand; its timers fire only when
// the test says.
type fakeClock struct {
	mu     sync.Mutex
	now    time.Time
	timers chan *fakeTimer
}

type fakeTimer struct {
	c     chan time.Time
	armed chan time.Duration // every NewTimer and Reset: the duration asked for
}

func (f *fakeClock) Now() time.Time { f.mu.Lock(); defer f.mu.Unlock(); return f.now }
func (f *fakeClock) advance(d time.Duration) {
	f.mu.Lock()
	f.now = f.now.Add(d)
	f.mu.Unlock()
}
func (f *fakeClock) NewTimer(d time.Duration) ring.Timer {
	t := &fakeTimer{c: make(chan time.Time, 1), armed: make(chan time.Duration, 8)}
	t.armed <- d
	f.timers <- t
	return t
}
func (t *fakeTimer) C() <-chan time.Time        { return t.c }
func (t *fakeTimer) Reset(d time.Duration) bool { t.armed <- d; return true }
func (t *fakeTimer) Stop() bool                 { return true }

// A node whose own process did not run (its watchdog fires long after it
// was due) does not blame a neighbour for the silence: for half the timeout
// or more it ends with ErrStalled, which is not a PeerError; a shorter
// stall gives the neighbours a fresh timeout instead of counting against
// them.
func TestOwnStallBlamesNobody(t *testing.T) {
	const n, timeout = 3, 20 * time.Second
	for _, tc := range []struct {
		name   string
		stall  time.Duration // how late the first tick is
		broken bool          // instead of the late tick, a broken link arrives first
	}{{"long", 3 * timeout, false}, {"half the timeout", timeout / 2, false}, {"short", timeout * 3 / 8, false},
		{"long, then a broken link", 3 * timeout, true}} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				clk := &fakeClock{now: time.Unix(1000, 0), timers: make(chan *fakeTimer, 4)}
				start := clk.Now()
				cl := newCluster(t, n, func(o *ring.Options) {
					o.Timeout = timeout
					if string(o.Key) == string(keyFor(0)) {
						o.Clock = clk
					}
				})
				// Node 2 never reaches node 0: node 0 waits on its predecessor.
				cl.net.SetFilter(func(l memnet.Link, f []byte, deliver func([]byte)) {
					if hdr(t, f).Sender != 2 {
						deliver(f)
					}
				})
				ctx, cancel := context.WithCancel(t.Context())
				defer cancel()
				errs := make([]error, n)
				done0 := make(chan struct{})
				var wg sync.WaitGroup
				for i := range n {
					wg.Go(func() {
						errs[i] = cl.comms[i].AllReduce(ctx, make([]float32, 100), ring.Sum)
						if i == 0 {
							close(done0)
							cancel() // release the others
						}
					})
				}
				tm := <-clk.timers // node 0's watchdog
				late := tc.stall
				var failedAt time.Duration
			ticks:
				for range 100 {
					// Fake time moves only when every node has done what it
					// can: a node's goroutine that has not run yet must not
					// see the clock jump past its send.
					synctest.Wait()
					select {
					case d := <-tm.armed: // fire when due, the first time late
						clk.advance(d + late)
						if late > 0 && tc.broken {
							// The neighbours gave up and closed their links
							// while this node was frozen: that error reaches
							// it before its overdue watchdog does.
							late = 0
							cl.net.Kill("mem2")
							continue
						}
						late = 0
						tm.c <- clk.Now()
					case <-done0:
						failedAt = clk.Now().Sub(start)
						break ticks
					case <-time.After(10 * time.Second): // fake time: fires only when every goroutine is stuck
						t.Fatal("node 0 neither re-armed its watchdog nor returned")
					}
				}
				wg.Wait()
				err0 := errs[0]
				var pe *ring.PeerError
				if tc.stall >= timeout/2 {
					if !errors.Is(err0, ring.ErrStalled) || errors.As(err0, &pe) {
						t.Fatalf("node 0: %v, want ErrStalled naming nobody", err0)
					}
					if tc.broken && !strings.Contains(err0.Error(), "broken") {
						t.Fatalf("node 0: %v, want the broken link in the message", err0)
					}
					if st := cl.comms[0].Stats(); st.Failures["stalled"] != 1 {
						t.Fatalf("stats: %v, want one stalled failure", st.Failures)
					}
					return
				}
				// The first tick was due a quarter timeout in; the predecessor
				// is named a full timeout after the stall ended, not before.
				if !errors.As(err0, &pe) || pe.Suspect != 2 || !errors.Is(err0, ring.ErrTimeout) {
					t.Fatalf("node 0: %v, want a timeout naming node 2", err0)
				}
				if want := timeout/4 + tc.stall + timeout; failedAt != want {
					t.Fatalf("named node 2 at %v, want %v (a fresh timeout after the stall)", failedAt, want)
				}
			})
		})
	}
}
