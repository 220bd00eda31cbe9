package ring_test

import (
	"context"
	"crypto/ed25519"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/zooai/gym/internal/promdoc"
	"github.com/zooai/gym/protocol/ring"
	"github.com/zooai/gym/protocol/ring/memnet"
)

// keyFor returns a deterministic key for node i.
func keyFor(i int) ed25519.PrivateKey {
	seed := make([]byte, ed25519.SeedSize)
	seed[0], seed[1] = byte(i), 0x5a
	return ed25519.NewKeyFromSeed(seed)
}

func makeConfig(n int, epoch uint64) ring.Config {
	cfg := ring.Config{Job: "job-test", Epoch: epoch}
	for i := range n {
		cfg.Members = append(cfg.Members, ring.Member{
			ID: fmt.Sprintf("node%d", i), PublicKey: keyFor(i).Public().(ed25519.PublicKey), Addr: fmt.Sprintf("mem%d", i)})
	}
	return cfg
}

// evidenceLog collects evidence from every node.
type evidenceLog struct {
	mu sync.Mutex
	ev []ring.Evidence
}

func (l *evidenceLog) Report(e ring.Evidence) { l.mu.Lock(); l.ev = append(l.ev, e); l.mu.Unlock() }

func (l *evidenceLog) kinds() map[ring.Violation]int {
	l.mu.Lock()
	defer l.mu.Unlock()
	m := map[ring.Violation]int{}
	for _, e := range l.ev {
		m[e.Kind]++
	}
	return m
}

type cluster struct {
	net   *memnet.Network
	cfg   ring.Config
	comms []*ring.Comm
	log   *evidenceLog
}

func newCluster(t testing.TB, n int, mod func(*ring.Options)) *cluster {
	t.Helper()
	cl := &cluster{net: memnet.New(256), cfg: makeConfig(n, 1), log: &evidenceLog{}}
	for i := range n {
		o := ring.Options{Key: keyFor(i), Config: cl.cfg, Transport: cl.net.Transport(cl.cfg.Members[i].Addr),
			SegmentBytes: 64, MinSegmentBytes: 16, Reporter: cl.log, Timeout: 30 * time.Second}
		if mod != nil {
			mod(&o)
		}
		c, err := ring.New(o)
		if err != nil {
			t.Fatal(err)
		}
		cl.comms = append(cl.comms, c)
	}
	t.Cleanup(func() {
		for _, c := range cl.comms {
			c.Close()
		}
	})
	return cl
}

// inputs returns integer-valued vectors, so sums are exact in any order.
func inputs(n, length int, seed uint64) [][]float32 {
	r := rand.New(rand.NewPCG(seed, 7))
	out := make([][]float32, n)
	for i := range out {
		out[i] = make([]float32, length)
		for j := range out[i] {
			out[i][j] = float32(r.IntN(201) - 100)
		}
	}
	return out
}

func sumOf(bufs [][]float32, skip ...int) []float32 {
	var s []float32
	for i, b := range bufs {
		if slices.Contains(skip, i) {
			continue
		}
		if s == nil {
			s = make([]float32, len(b))
		}
		for j, v := range b {
			s[j] += v
		}
	}
	return s
}

// run calls AllReduceCall on the given nodes concurrently.
func (cl *cluster) run(ctx context.Context, nodes []int, bufs [][]float32, op ring.Op, call ring.Call) []error {
	errs := make([]error, len(cl.comms))
	var wg sync.WaitGroup
	for _, i := range nodes {
		wg.Go(func() { errs[i] = cl.comms[i].AllReduceCall(ctx, bufs[i], op, call) })
	}
	wg.Wait()
	return errs
}

func all(n int) []int {
	s := make([]int, n)
	for i := range s {
		s[i] = i
	}
	return s
}

func clone(b [][]float32) [][]float32 {
	out := make([][]float32, len(b))
	for i := range b {
		out[i] = slices.Clone(b[i])
	}
	return out
}

func TestAllReduceSumExact(t *testing.T) {
	for n := 2; n <= 8; n++ {
		for _, length := range []int{0, 1, n - 1, n + 1, 37, 1001, 4099} {
			t.Run(fmt.Sprintf("n%d/len%d", n, length), func(t *testing.T) {
				cl := newCluster(t, n, nil)
				bufs := inputs(n, length, uint64(n*10000+length))
				want := sumOf(bufs)
				for i, err := range cl.run(t.Context(), all(n), bufs, ring.Sum, ring.Call{Step: 3}) {
					if err != nil {
						t.Fatalf("node %d: %v", i, err)
					}
					if length > 0 && !slices.Equal(bufs[i], want) {
						t.Fatalf("node %d: got %v…, want %v…", i, bufs[i][:min(8, length)], want[:min(8, length)])
					}
				}
				if k := cl.log.kinds(); len(k) != 0 {
					t.Fatalf("evidence from an honest ring: %v", k)
				}
			})
		}
	}
}

func TestAllReduceMeanAndRepeatedCalls(t *testing.T) {
	const n = 5
	cl := newCluster(t, n, nil)
	for call := range 3 {
		bufs := inputs(n, 999, uint64(call))
		sum := sumOf(bufs)
		for i, err := range cl.run(t.Context(), all(n), bufs, ring.Mean, ring.Call{Step: uint64(call)}) {
			if err != nil {
				t.Fatal(err)
			}
			for j := range sum {
				if want := sum[j] / n; bufs[i][j] != want {
					t.Fatalf("call %d node %d [%d]: %v, want %v", call, i, j, bufs[i][j], want)
				}
			}
		}
	}
}

func TestAllReduceBF16(t *testing.T) {
	const n, length = 4, 777
	cl := newCluster(t, n, nil)
	bufs := inputs(n, length, 9) // |x| ≤ 100, sums ≤ 400: partial sums up to 256 exact in bf16
	for i := range bufs {
		for j := range bufs[i] {
			bufs[i][j] = float32(int(bufs[i][j]) / 2) // |partial sums| ≤ 200 < 256
		}
	}
	want := sumOf(bufs)
	for i, err := range cl.run(t.Context(), all(n), bufs, ring.Sum, ring.Call{}.WithWire(ring.BF16)) {
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(bufs[i], want) {
			t.Fatalf("node %d differs", i)
		}
	}
	// Non-integer data: all nodes end bit-identical, within bf16 rounding of the sum.
	r := rand.New(rand.NewPCG(1, 2))
	for i := range bufs {
		for j := range bufs[i] {
			bufs[i][j] = float32(r.NormFloat64())
		}
	}
	exact := sumOf(bufs)
	cl.run(t.Context(), all(n), bufs, ring.Sum, ring.Call{}.WithWire(ring.BF16))
	for i := range bufs {
		if !slices.Equal(bufs[i], bufs[0]) {
			t.Fatalf("node %d not identical to node 0", i)
		}
	}
	for j, v := range bufs[0] {
		if d := float64(v - exact[j]); d*d > 0.1*0.1 {
			t.Fatalf("[%d] bf16 sum %v, fp32 %v", j, v, exact[j])
		}
	}
}

func TestSingleNodeIsIdentity(t *testing.T) {
	cl := newCluster(t, 1, nil)
	buf := []float32{1, 2, 3}
	if err := cl.comms[0].AllReduce(t.Context(), buf, ring.Mean); err != nil || !slices.Equal(buf, []float32{1, 2, 3}) {
		t.Fatal(err, buf)
	}
}

func TestNewRejectsBadOptions(t *testing.T) {
	cfg := makeConfig(3, 1)
	tr := memnet.New(0).Transport("mem0")
	for name, o := range map[string]ring.Options{
		"no key":        {Config: cfg, Transport: tr},
		"not a member":  {Key: keyFor(9), Config: cfg, Transport: tr},
		"no transport":  {Key: keyFor(0), Config: cfg},
		"dup member":    {Key: keyFor(0), Config: ring.Config{Members: []ring.Member{cfg.Members[0], cfg.Members[0]}}, Transport: tr},
		"bad segment":   {Key: keyFor(0), Config: cfg, Transport: tr, SegmentBytes: 2},
		"negative clip": {Key: keyFor(0), Config: cfg, Transport: tr, ClipNorm: -1},
	} {
		if _, err := ring.New(o); !errors.Is(err, ring.ErrConfig) {
			t.Errorf("%s: %v, want ErrConfig", name, err)
		}
	}
}

func TestConfigID(t *testing.T) {
	a := makeConfig(4, 1)
	b := makeConfig(4, 2)
	c := makeConfig(4, 1)
	c.Job = "other"
	d := makeConfig(4, 1)
	d.Members[1], d.Members[2] = d.Members[2], d.Members[1]
	e := a.Without(2)
	f := makeConfig(4, 1) // a re-sync: the same members, the next generation
	f.Generation++
	ids := map[ring.ID]string{}
	for name, cfg := range map[string]ring.Config{"a": a, "epoch": b, "job": c, "order": d, "without": e, "generation": f} {
		id := cfg.ID()
		if prev, ok := ids[id]; ok {
			t.Fatalf("%s and %s share an id", name, prev)
		}
		ids[id] = name
	}
	if want := makeConfig(4, 1); a.ID() != want.ID() {
		t.Fatal("id not deterministic")
	}
	if len(e.Members) != 3 || e.Index(a.Members[2].PublicKey) != -1 || e.Generation != a.Generation+1 {
		t.Fatal("Without did not remove the member")
	}
}

// AllReduceInto gives the same bits as the in-place call, leaves src as it
// was, and is exact for every ring size and odd lengths.
func TestAllReduceIntoExact(t *testing.T) {
	maxN := 8
	if testing.Short() { // the race step: rings of 2 to 4 (30 rings, not 70)
		maxN = 4
	}
	for n := 2; n <= maxN; n++ {
		for _, length := range []int{1, n - 1, n + 1, 1001, 4099} {
			for _, op := range []ring.Op{ring.Sum, ring.Mean} {
				t.Run(fmt.Sprintf("n%d/len%d/%s", n, length, op), func(t *testing.T) {
					cl := newCluster(t, n, nil)
					src := inputs(n, length, uint64(n*777+length))
					orig := clone(src)
					dst := make([][]float32, n)
					for i := range dst {
						dst[i] = make([]float32, length)
						for j := range dst[i] {
							dst[i][j] = float32(j) * 1e30 // garbage the call must overwrite
						}
					}
					errs := make([]error, n)
					var wg sync.WaitGroup
					for i := range n {
						wg.Go(func() { errs[i] = cl.comms[i].AllReduceInto(t.Context(), dst[i], src[i], op, ring.Call{Step: 9}) })
					}
					wg.Wait()
					// The in-place call on the same inputs, for the reference bits.
					inplace := clone(orig)
					for i, err := range cl.run(t.Context(), all(n), inplace, op, ring.Call{Step: 10}) {
						if err != nil {
							t.Fatalf("in place, node %d: %v", i, err)
						}
					}
					want := sumOf(orig)
					for i, err := range errs {
						if err != nil {
							t.Fatalf("node %d: %v", i, err)
						}
						if !slices.Equal(src[i], orig[i]) {
							t.Fatalf("node %d: src changed", i)
						}
						if !slices.Equal(dst[i], inplace[i]) {
							t.Fatalf("node %d: into %v…, in place %v…", i, dst[i][:min(8, length)], inplace[i][:min(8, length)])
						}
						if op == ring.Sum && !slices.Equal(dst[i], want) {
							t.Fatalf("node %d: %v…, want %v…", i, dst[i][:min(8, length)], want[:min(8, length)])
						}
					}
				})
			}
		}
	}
}

func TestAllReduceIntoRefusesBadBuffers(t *testing.T) {
	cl := newCluster(t, 2, nil)
	b := make([]float32, 10)
	for name, args := range map[string][2][]float32{
		"lengths":  {b[:4], make([]float32, 5)},
		"same":     {b[:5], b[:5]},
		"overlap":  {b[:5], b[3:8]},
		"overlap2": {b[4:9], b[:5]},
	} {
		if err := cl.comms[0].AllReduceInto(t.Context(), args[0], args[1], ring.Sum, ring.Call{}); !errors.Is(err, ring.ErrBuffers) {
			t.Errorf("%s: %v, want ErrBuffers", name, err)
		}
	}
	// Adjacent halves of one array do not overlap; a ring of one copies.
	one := newCluster(t, 1, nil)
	src, dst := b[:5], b[5:]
	copy(src, []float32{1, 2, 3, 4, 5})
	if err := one.comms[0].AllReduceInto(t.Context(), dst, src, ring.Mean, ring.Call{}); err != nil || !slices.Equal(dst, src) {
		t.Fatal(err, dst)
	}
}

// The counters add up: every payload byte crosses N−1 links twice, every
// frame sent is received once, and the exposition has every series.
func TestStats(t *testing.T) {
	const n, length = 3, 1001
	cl := newCluster(t, n, nil)
	for call := range 2 {
		if errs := cl.run(t.Context(), all(n), inputs(n, length, uint64(call)), ring.Sum, ring.Call{Step: uint64(call)}); errors.Join(errs...) != nil {
			t.Fatal(errs)
		}
	}
	var total ring.Stats
	for _, c := range cl.comms {
		st := c.Stats()
		if st.Calls != 2 || st.VectorBytes != 2*4*length || st.FramesSent == 0 || st.FramesSent != st.FramesReceived ||
			st.Seconds <= 0 || st.LastSeconds <= 0 || st.LastBusBW <= 0 {
			t.Fatalf("stats %+v", st)
		}
		total = total.Add(st)
	}
	if total.BytesSent != total.BytesReceived {
		t.Fatalf("%d bytes sent, %d received", total.BytesSent, total.BytesReceived)
	}
	if payload := total.BytesSent - ring.HeaderSize*total.FramesSent; payload != 2*2*(n-1)*4*length {
		t.Fatalf("payload bytes sent %d, want 2 calls × 2(N−1) × %d", payload, 4*length)
	}
	if total.Calls != 2*n || len(total.Failures) != len(ring.FailureCauses) {
		t.Fatalf("sum %+v", total)
	}
	var b strings.Builder
	if err := total.WritePrometheus(&b); err != nil {
		t.Fatal(err)
	}
	for _, line := range []string{
		fmt.Sprintf("gym_ring_calls_total %d\n", 2*n),
		`gym_ring_call_failures_total{cause="timeout"} 0` + "\n",
		`gym_ring_evidence_total{kind="norm-exceeded"} 0` + "\n",
		fmt.Sprintf("gym_ring_frames_total{direction=\"sent\"} %d\n", total.FramesSent),
		fmt.Sprintf("gym_ring_vector_bytes_total %d\n", 2*n*4*length),
	} {
		if !strings.Contains(b.String(), line) {
			t.Fatalf("exposition lacks %q:\n%s", line, b.String())
		}
	}
}

// docs/metrics.md documents exactly the gym_ring_* series, with their types.
func TestMetricsDoc(t *testing.T) {
	var b strings.Builder
	if err := (ring.Stats{}).Add(ring.Stats{}).WritePrometheus(&b); err != nil {
		t.Fatal(err)
	}
	doc, err := os.ReadFile("../../docs/metrics.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range promdoc.Compare([]byte(b.String()), doc, "gym_ring_") {
		t.Error(d)
	}
}
