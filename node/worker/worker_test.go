package worker_test

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/zooai/gym/devnet/localcluster"
	"github.com/zooai/gym/internal/promdoc"
	"github.com/zooai/gym/model/peft"
	"github.com/zooai/gym/node/worker"
	"github.com/zooai/gym/orchestrator/state"
	"github.com/zooai/gym/protocol/delta"
	"github.com/zooai/gym/protocol/jobconf"
	"github.com/zooai/gym/protocol/jobspec"
)

// tinySpec is a job that trains in well under a second per epoch.
func tinySpec(epochs, stepsPerEpoch int) jobspec.Spec {
	g := jobspec.DefaultGSPO()
	g.AggregateInterval = 2
	g.GroupSize = 4
	g.LoRARank, g.LoRAAlpha = 4, 8
	g.MaxSeqLen = 12
	g.GradientAccumulationSteps = 1
	g.LearningRate = 2e-3
	g.WarmupSteps = 0
	return jobspec.Spec{Model: "builtin", Dataset: "addition", Epochs: epochs, MinNodes: 3, StepsPerEpoch: stepsPerEpoch,
		PromptsPerStep: 2, Seed: 7, GSPO: g}
}

// testGap is the least gap between a worker's heartbeats, and what hanzod
// refuses below.
const testGap = 20 * time.Millisecond

// node is one worker under test, run in process against the real hanzod
// (localcluster).
type node struct {
	*localcluster.Worker
	id string

	mu     sync.Mutex
	events []worker.Event
	on     func(worker.Event) // called after recording, on the worker's goroutine
	orch   *recorder
}

func (n *node) Events(kind string) []worker.Event {
	n.mu.Lock()
	defer n.mu.Unlock()
	var out []worker.Event
	for _, e := range n.events {
		if kind == "" || e.Kind == kind {
			out = append(out, e)
		}
	}
	return out
}

// recorder is the worker's real gRPC client to hanzod, recording what
// the worker sends and what hanzod refuses; hooks inject faults on the
// worker's side of the connection.
type recorder struct {
	worker.Orchestrator
	mu          sync.Mutex
	reports     []worker.Suspect
	lastBeat    time.Time
	tooSoon     int                                                           // heartbeats closer than testGap to the previous one
	refused     []string                                                      // heartbeats hanzod refused as too close to the node's previous request
	onHeartbeat func(ctx context.Context) (worker.Assignment, error, bool)    // when it returns true, its answer replaces hanzod's
	onSubmit    func(ctx context.Context, file []byte) (worker.Verdict, bool) // when it returns true, its answer replaces hanzod's
}

func (r *recorder) Heartbeat(ctx context.Context) (worker.Assignment, error) {
	r.mu.Lock()
	if now := time.Now(); !r.lastBeat.IsZero() && now.Sub(r.lastBeat) < testGap {
		r.tooSoon++
	}
	r.lastBeat = time.Now()
	r.mu.Unlock()
	if r.onHeartbeat != nil {
		if a, err, ok := r.onHeartbeat(ctx); ok {
			return a, err
		}
	}
	a, err := r.Orchestrator.Heartbeat(ctx)
	if status.Code(errors.Unwrap(err)) == codes.ResourceExhausted || status.Code(err) == codes.ResourceExhausted {
		r.mu.Lock()
		r.refused = append(r.refused, err.Error())
		r.mu.Unlock()
	}
	return a, err
}

func (r *recorder) SubmitDelta(ctx context.Context, file, traces []byte) (worker.Verdict, error) {
	if r.onSubmit != nil {
		if v, ok := r.onSubmit(ctx, file); ok {
			return v, ctx.Err()
		}
	}
	return r.Orchestrator.SubmitDelta(ctx, file, traces)
}

func (r *recorder) ReportSuspect(ctx context.Context, s worker.Suspect) error {
	r.mu.Lock()
	r.reports = append(r.reports, s)
	r.mu.Unlock()
	return r.Orchestrator.ReportSuspect(ctx, s)
}

// cluster is hanzod with the job under test.
type cluster struct {
	*localcluster.Cluster
	job string
}

// startNodes starts hanzod and n staked workers in process, submits spec
// and returns once hanzod accepted it; mod may change each worker's
// config.
func startNodes(t *testing.T, ctx context.Context, spec jobspec.Spec, n int, mod func(i int, c *worker.Config, nd *node)) (*cluster, []*node) {
	t.Helper()
	return startNodesWith(t, ctx, spec, n, nil, mod)
}

// startNodesWith is startNodes with setup applied to the cluster's
// configuration first.
func startNodesWith(t *testing.T, ctx context.Context, spec jobspec.Spec, n int, setup func(*localcluster.Config), mod func(i int, c *worker.Config, nd *node)) (*cluster, []*node) {
	t.Helper()
	cfg := localcluster.TestConfig(t.TempDir(), n)
	if setup != nil {
		setup(&cfg)
	}
	cfg.Threads = 1
	cfg.MinGap, cfg.MinHeartbeatGap = testGap, testGap
	// Fixed keys: a worker's data is a function of its key, so runs are
	// reproducible.
	cfg.Key = func(i int) ed25519.PrivateKey {
		seed := sha256.Sum256(fmt.Appendf(nil, "%s/%d", t.Name(), i))
		return ed25519.NewKeyFromSeed(seed[:])
	}
	nodes := make([]*node, n)
	for i := range nodes {
		nodes[i] = &node{}
	}
	cfg.Worker = func(w *localcluster.Worker, c *worker.Config) {
		i, nd := w.Index, nodes[w.Index]
		c.Heartbeat, c.MaxBackoff = 50*time.Millisecond, 200*time.Millisecond
		c.ProbeBytes, c.ProbeTimeout = 64<<10, 2*time.Second
		nd.orch = &recorder{Orchestrator: c.Orchestrator}
		c.Orchestrator = nd.orch
		record := c.OnEvent
		c.OnEvent = func(e worker.Event) {
			record(e)
			nd.mu.Lock()
			nd.events = append(nd.events, e)
			on := nd.on
			nd.mu.Unlock()
			if testing.Verbose() {
				t.Logf("w%d %s", i, e)
			}
			if on != nil {
				on(e)
			}
		}
		if mod != nil {
			mod(i, c, nd)
		}
	}
	cl, err := localcluster.Start(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cl.Close() })
	for i, w := range cl.Workers() {
		nodes[i].Worker, nodes[i].id = w, w.ID
	}
	if err := cl.StartWorkers(ctx); err != nil {
		t.Fatal(err)
	}
	if err := cl.WaitRegistered(ctx); err != nil {
		t.Fatal(err)
	}
	job, err := cl.Submit(ctx, spec)
	if err != nil {
		t.Fatal(err)
	}
	return &cluster{Cluster: cl, job: job}, nodes
}

// long skips an end-to-end test under -short. scripts/test.sh runs this
// package under the race detector with -short: TestRingOfThree stands there
// for the whole system (each end-to-end run takes minutes under the
// detector); the full suite runs every test without it.
func long(t *testing.T) {
	t.Helper()
	if testing.Short() {
		t.Skip("an end-to-end run of hanzod and four workers; the suite runs it without -short")
	}
}

func waitDone(t *testing.T, ctx context.Context, nodes ...*node) {
	t.Helper()
	for i, nd := range nodes {
		select {
		case <-nd.Done():
			if err := nd.Err(); err != nil {
				t.Errorf("worker %d: Run: %v", i, err)
			}
		case <-ctx.Done():
			t.Fatalf("worker %d did not finish: %v", i, ctx.Err())
		}
	}
}

type slot struct{ epoch, sync int }

// checkReduced checks that every node reports the same adapter after each
// ring sync and returns the slots seen.
func checkReduced(t *testing.T, nodes ...*node) map[slot]string {
	t.Helper()
	got := map[slot]string{}
	for i, nd := range nodes {
		for _, e := range nd.Events(worker.EventRingReduced) {
			s := slot{e.Epoch, e.Sync}
			if prev, ok := got[s]; ok && prev != e.Adapter {
				t.Errorf("worker %d: adapter after epoch %d sync %d is %s, another worker has %s", i, e.Epoch, e.Sync, e.Adapter, prev)
			}
			got[s] = e.Adapter
		}
	}
	return got
}

// log is hanzod's event log.
func (c *cluster) log(t *testing.T) []state.Event {
	t.Helper()
	var out []state.Event
	for next := uint64(1); ; {
		recs, _, err := c.Engine().Read(context.Background(), next, 1000)
		if err != nil {
			t.Fatal(err)
		}
		if len(recs) == 0 {
			return out
		}
		for _, r := range recs {
			ev, err := state.DecodeEvent(r.Data)
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, ev)
			next = r.Index + 1
		}
	}
}

// deltas returns, per slot, the nodes whose delta hanzod accepted, and
// lists the rejections ("NODE REASON").
func (c *cluster) deltas(t *testing.T) (map[slot][]string, []string) {
	t.Helper()
	acc := map[slot][]string{}
	var rej []string
	for _, ev := range c.log(t) {
		if b, ok := ev.Body.(state.DeltaJudged); ok && b.Job == c.job {
			if b.Accepted {
				acc[slot{b.Epoch, b.Sync}] = append(acc[slot{b.Epoch, b.Sync}], b.Node)
			} else {
				rej = append(rej, b.Node+" "+b.Reason)
			}
		}
	}
	return acc, rej
}

// state returns the job's state.
func (c *cluster) state(t *testing.T) state.Job {
	t.Helper()
	j, ok := c.Job(c.job)
	if !ok {
		t.Fatalf("no job %s", c.job)
	}
	return j
}

// check is what every run must satisfy: no refused heartbeat, no delta
// rejected, no zero bandwidth measured, and the deltas of one slot built
// on the same checkpoint.
func (c *cluster) check(t *testing.T, nodes ...*node) {
	t.Helper()
	ids := map[string]bool{}
	for i, nd := range nodes {
		ids[nd.id] = true
		nd.orch.mu.Lock()
		if nd.orch.tooSoon > 0 {
			t.Errorf("worker %d: %d heartbeats closer than %v", i, nd.orch.tooSoon, testGap)
		}
		// hanzod counts any signed request as the node's previous one (a
		// suspect report too), the worker only its heartbeats: a heartbeat
		// right after a report may be refused, and is retried.
		for _, r := range nd.orch.refused {
			t.Logf("worker %d: hanzod refused a heartbeat: %s", i, r)
		}
		nd.orch.mu.Unlock()
	}
	_, rej := c.deltas(t)
	for _, r := range rej {
		if ids[strings.Fields(r)[0]] {
			t.Errorf("hanzod rejected a delta: %s", r)
		}
	}
	for _, ev := range c.log(t) {
		if b, ok := ev.Body.(state.BandwidthReported); ok && ids[b.Node] {
			for _, l := range b.Links {
				if l.Kbps == 0 {
					t.Errorf("%s measured 0 kbit/s to %s", b.Node[:8], l.Peer[:8])
				}
			}
		}
	}
	files, _ := filepath.Glob(filepath.Join(c.Dir(), "hanzod", "deltas", c.job, "*.delta"))
	bases := map[slot]map[string]string{}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		d, err := delta.Read(context.Background(), bytes.NewReader(b), delta.DefaultLimits())
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		m, err := d.Info.Metadata.Fields()
		if err != nil {
			t.Fatal(err)
		}
		var k int
		raw, _ := d.Info.Metadata.Get(jobconf.KeySync)
		json.Unmarshal(raw, &k)
		s := slot{int(m.Epoch), k}
		if bases[s] == nil {
			bases[s] = map[string]string{}
		}
		bases[s][m.Node] = m.BaseCheckpoint
	}
	if len(files) == 0 {
		t.Error("hanzod kept no delta")
	}
	for s, m := range bases {
		var first string
		for _, b := range m {
			if first != "" && b != first {
				t.Errorf("epoch %d sync %d: deltas name different bases: %v", s.epoch, s.sync, m)
				break
			}
			first = b
		}
	}
}

// TestRingOfThree: three workers train a two-epoch job to its end with
// the real hanzod; one of them is told once that hanzod does not know it
// (as after hanzod lost its state) and registers again; one serves its
// metrics.
func TestRingOfThree(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	spec := tinySpec(2, 4) // 2 syncs per epoch: one ring sync, one merge
	var forgot atomic.Bool
	scraped := make(chan string, 1)
	cl, nodes := startNodes(t, ctx, spec, 3, func(i int, c *worker.Config, nd *node) {
		if i == 1 { // its first heartbeat is answered "unknown node"
			nd.orch.onHeartbeat = func(context.Context) (worker.Assignment, error, bool) {
				if forgot.CompareAndSwap(false, true) {
					return worker.Assignment{}, fmt.Errorf("test: hanzod forgot the node: %w", worker.ErrUnknownNode), true
				}
				return worker.Assignment{}, nil, false
			}
		}
		if i == 2 { // serves its ring metrics: scrape them when the job is done
			c.MetricsAddr = "127.0.0.1:0"
			var addr string
			nd.on = func(e worker.Event) {
				if _, a, ok := strings.Cut(e.Detail, " metrics "); ok && e.Kind == worker.EventRegistered {
					addr, _, _ = strings.Cut(a, " ")
				}
				if e.Kind == worker.EventJobDone {
					resp, err := http.Get("http://" + addr + "/metrics")
					if err != nil {
						scraped <- err.Error()
						return
					}
					b, _ := io.ReadAll(resp.Body)
					resp.Body.Close()
					scraped <- string(b)
				}
			}
		}
	})
	waitDone(t, ctx, nodes...)
	var metrics string
	select {
	case metrics = <-scraped:
	default:
		t.Fatal("worker 2 was not scraped at job_done")
	}
	reduced := len(nodes[2].Events(worker.EventRingReduced))
	for _, line := range []string{
		fmt.Sprintf("gym_ring_calls_total %d\n", reduced),
		`gym_ring_evidence_total{kind="corrupt"} 0` + "\n",
		"gym_ring_last_busbw_bytes_per_second ",
		fmt.Sprintf("gym_worker_events_total{kind=%q} %d\n", worker.EventStep, len(nodes[2].Events(worker.EventStep))),
		`gym_worker_deltas_total{verdict="accepted"} 4` + "\n",
		"gym_worker_step 8\n",
		"gym_worker_epoch 2\n",
	} {
		if reduced == 0 || !strings.Contains(metrics, line) {
			t.Errorf("worker 2 metrics (after %d ring syncs) lack %q:\n%s", reduced, line, metrics)
		}
	}
	// docs/metrics.md lists exactly the worker's series, with their types.
	doc, err := os.ReadFile("../../docs/metrics.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range promdoc.Compare([]byte(metrics), doc, "gym_worker_") {
		t.Error("worker:", d)
	}
	if st := cl.state(t).State; st != state.Published {
		t.Fatalf("job is %s, want published", st)
	}
	cl.check(t, nodes...)
	deltas, _ := cl.deltas(t)
	for e := 1; e <= 2; e++ {
		for k := 1; k <= 2; k++ {
			if got := len(deltas[slot{e, k}]); got != 3 {
				t.Errorf("epoch %d sync %d: %d deltas, want 3", e, k, got)
			}
		}
	}
	if len(deltas) != 4 {
		t.Errorf("deltas for %d slots, want 4", len(deltas))
	}
	red := checkReduced(t, nodes...)
	if len(red) != 2 {
		t.Errorf("ring syncs %v, want epoch 1 and 2 sync 1", red)
	}
	// Epoch 2 starts from hanzod's merge of epoch 1, on every worker.
	cp, _, err := peft.Read(cl.Daemon().Judge().CheckpointDir(cl.job, 1), cl.Base().Weights.Cfg)
	if err != nil {
		t.Fatalf("checkpoint of epoch 1: %v", err)
	}
	for i, nd := range nodes {
		loaded := nd.Events(worker.EventCheckpointLoaded)
		if len(loaded) != 1 || loaded[0].Adapter != jobconf.Digest(cp) {
			t.Errorf("worker %d: checkpoint_loaded %+v, want one with adapter %s", i, loaded, jobconf.Digest(cp))
		}
		if d := nd.Events(worker.EventJobDone); len(d) != 1 || d[0].State != "published" {
			t.Errorf("worker %d: job_done events %+v", i, d)
		}
		if got := len(nd.Events(worker.EventStep)); got != 8 {
			t.Errorf("worker %d: %d steps, want 8", i, got)
		}
		if got := len(nd.Events(worker.EventBandwidth)); got != 1 {
			t.Errorf("worker %d: %d bandwidth reports, want 1", i, got)
		}
	}
	regs := 0
	for _, ev := range cl.log(t) {
		if b, ok := ev.Body.(state.NodeRegistered); ok && b.Node == nodes[1].id {
			regs++
		}
	}
	if !forgot.Load() || regs != 2 || len(nodes[1].Events(worker.EventRegistered)) != 2 {
		t.Errorf("forgotten worker registered %d times (%d events), want 2", regs, len(nodes[1].Events(worker.EventRegistered)))
	}
	// Worker 0 kept its accepted deltas and its sequence counter.
	files, _ := filepath.Glob(filepath.Join(nodes[0].Dir, "deltas", "*.delta"))
	if len(files) != 4 {
		t.Errorf("%d delta files in the data dir, want 4", len(files))
	}
	if _, err := os.Stat(filepath.Join(nodes[0].Dir, "sequence")); err != nil {
		t.Error(err)
	}
}

// TestNodeLostMidEpoch: a worker dies right after the first ring sync;
// hanzod takes it out of the ring and the three others finish the job. It
// leaves one of two ways, and which comes first depends on how fast the
// survivors train: both its ring neighbours report it when their next ring
// call breaks, or hanzod's heartbeat timeout fails it before they call. On
// a loaded machine either can win, so the test accepts both and checks what
// each implies: reports from the neighbours and a recovered ring for the
// first, nothing for the second.
func TestNodeLostMidEpoch(t *testing.T) {
	long(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	spec := tinySpec(2, 6) // 3 syncs per epoch: two ring syncs
	spec.MinNodes = 4
	const victim = 2
	cl, nodes := startNodes(t, ctx, spec, 4, func(i int, c *worker.Config, nd *node) {
		if i == victim { // dies right after the first ring sync
			nd.on = func(e worker.Event) {
				if e.Kind == worker.EventRingReduced {
					nd.Kill()
				}
			}
		}
	})
	survivors := slices.Delete(slices.Clone(nodes), victim, victim+1)
	waitDone(t, ctx, nodes[victim])
	waitDone(t, ctx, survivors...)
	if st := cl.state(t).State; st != state.Published {
		t.Fatalf("job is %s, want published", st)
	}
	cl.check(t, survivors...)
	named, removed := 0, ""
	for _, ev := range cl.log(t) {
		switch b := ev.Body.(type) {
		case state.SuspectReported:
			if b.Suspect == nodes[victim].id {
				named++
			}
		case state.RingConfigured: // a running job's repair names its cause
			if removed == "" && strings.Contains(b.Cause, "removed "+nodes[victim].id) {
				removed = b.Cause
			}
		}
	}
	byReports := strings.HasPrefix(removed, "reported by both ring neighbours")
	t.Logf("the lost node left the ring: %q", removed)
	switch {
	case removed == "":
		t.Errorf("the lost node never left the ring")
	case byReports && named < 2:
		t.Errorf("removed on reports, but only %d suspect reports name it", named)
	}
	j := cl.state(t)
	if slices.Contains(j.Ring, nodes[victim].id) || len(j.Ring) != 3 || j.Generation < 2 {
		t.Errorf("ring after the loss: %d members (gen %d), victim in it: %v", len(j.Ring), j.Generation, slices.Contains(j.Ring, nodes[victim].id))
	}
	red := checkReduced(t, survivors...)
	for _, s := range []slot{{1, 1}, {1, 2}, {2, 1}, {2, 2}} {
		if red[s] == "" {
			t.Errorf("no ring sync for epoch %d sync %d", s.epoch, s.sync)
		}
	}
	recovered := 0
	for _, nd := range survivors {
		for _, e := range nd.Events(worker.EventRingRecovered) {
			recovered++
			if e.Epoch != 1 || e.Sync != 2 || e.Seconds <= 0 {
				t.Errorf("ring_recovered %+v, want epoch 1 sync 2 with a duration", e)
			}
			t.Logf("recovered in %.2fs", e.Seconds)
		}
	}
	if byReports && recovered == 0 {
		t.Error("the neighbours' reports removed the node, but no survivor reported a recovered ring")
	}
	deltas, _ := cl.deltas(t)
	if got := len(deltas[slot{1, 1}]); got != 4 {
		t.Errorf("epoch 1 sync 1: %d deltas, want 4", got)
	}
	for _, s := range []slot{{1, 2}, {1, 3}, {2, 1}, {2, 3}} {
		if got := len(deltas[s]); got != 3 {
			t.Errorf("epoch %d sync %d: %d deltas, want 3", s.epoch, s.sync, got)
		}
	}
}

// attackRun runs a one-epoch job on four workers (a ring continues only
// with three) of which worker 0 mounts attack.
func attackRun(t *testing.T, attack string) (*cluster, []*node) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	spec := tinySpec(1, 4)
	spec.PromptsPerStep = 4 // so that the attacker's change is not zero
	spec.MinNodes = 4
	cl, nodes := startNodes(t, ctx, spec, 4, func(i int, c *worker.Config, nd *node) {
		if i == 0 {
			c.Attack = attack
		}
	})
	waitDone(t, ctx, nodes[1:]...)
	bad := nodes[0].id
	if j := cl.state(t); slices.Contains(j.Ring, bad) || len(j.Ring) != 3 || j.State != state.Published {
		t.Errorf("after the attack: ring %v, job %s; want the three others, published", j.Ring, j.State)
	}
	slashed := false
	for _, ev := range cl.log(t) {
		if b, ok := ev.Body.(state.Slashed); ok && b.Account == bad && strings.HasPrefix(b.Reason, "norm") {
			slashed = true
		}
	}
	if !slashed {
		t.Error("hanzod did not slash the attacker for its norm")
	}
	checkReduced(t, nodes[1:]...)
	return cl, nodes
}

// TestSignFlipDetected: a worker sends its contribution ×(−1000) in its
// delta and into the ring. Whichever sees it first, hanzod's norm check of
// the delta or the ring's of the frames, the attacker is slashed and
// ejected and the others finish.
func TestSignFlipDetected(t *testing.T) {
	long(t)
	_, nodes := attackRun(t, worker.AttackSignFlip)
	for _, e := range append(nodes[0].Events(worker.EventDeltaSubmitted), nodes[0].Events(worker.EventDeltaRejected)...) {
		if e.Attack != worker.AttackSignFlip {
			t.Errorf("attacker's delta event %+v does not name the attack", e)
		}
	}
}

// TestRingAttackDetected: a worker submits honest deltas but sends its
// contribution ×(−1000) into the ring; its neighbours' ring calls fail
// with the norm violation, they report it with its signed frames as
// evidence, and hanzod slashes and ejects it.
func TestRingAttackDetected(t *testing.T) {
	long(t)
	_, nodes := attackRun(t, worker.AttackRing)
	bad := nodes[0].id
	var found bool
	for i, nd := range nodes {
		nd.orch.mu.Lock()
		reports := slices.Clone(nd.orch.reports)
		nd.orch.mu.Unlock()
		for _, r := range reports {
			if r.Node != bad || r.Kind != "norm" {
				continue
			}
			found = true
			if i == 0 {
				t.Errorf("the attacker reported itself")
			}
			var rep worker.SuspectReport
			if err := json.Unmarshal(r.Evidence, &rep); err != nil {
				t.Fatalf("evidence: %v", err)
			}
			if len(rep.Evidence) == 0 || rep.Evidence[0].Kind != "norm-exceeded" || rep.Evidence[0].SuspectID != bad ||
				!rep.Evidence[0].Signed || len(rep.Evidence[0].Payload) == 0 {
				t.Errorf("evidence %+v, want signed norm-exceeded frames from the attacker", rep.Evidence)
			}
		}
	}
	if !found {
		t.Fatal("no norm report against the attacker")
	}
	blamed := false
	for _, nd := range nodes[1:] {
		for _, e := range nd.Events(worker.EventRingFailed) {
			if e.Suspect == bad && e.Reason == "norm" {
				blamed = true
			}
		}
	}
	if !blamed {
		t.Error("no honest worker's ring call failed with norm evidence against the attacker")
	}
	if rej := nodes[0].Events(worker.EventDeltaRejected); len(rej) > 0 && rej[0].Reason != "not_member" {
		t.Errorf("the ring attacker's honest delta was rejected: %+v", rej[0])
	}
}

// TestEquivocationRejected: a worker that submits two different deltas
// for a slot has the second one rejected as equivocation; hanzod slashes
// it and takes it out of the ring (four workers: a ring continues only with
// three), and the others finish the job.
func TestEquivocationRejected(t *testing.T) {
	long(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	spec := tinySpec(1, 4)
	spec.MinNodes = 4
	cl, nodes := startNodes(t, ctx, spec, 4, func(i int, c *worker.Config, nd *node) {
		if i == 0 {
			c.Attack = worker.AttackEquivocate
		}
	})
	honest := nodes[1:]
	waitDone(t, ctx, honest...)
	bad := nodes[0].id
	rej := nodes[0].Events(worker.EventDeltaRejected)
	if len(rej) == 0 || rej[0].Reason != "equivocation" || rej[0].Epoch != 1 || rej[0].Sync != 1 {
		t.Fatalf("equivocating worker's rejections %+v, want the second delta of sync 1 rejected as equivocation", rej)
	}
	for _, e := range rej[1:] {
		if e.Reason != "equivocation" && e.Reason != "not_member" {
			t.Errorf("rejection %+v, want equivocation, or not_member once out of the ring", e)
		}
	}
	slashed := false
	for _, ev := range cl.log(t) {
		if b, ok := ev.Body.(state.Slashed); ok && b.Account == bad && strings.HasPrefix(b.Reason, "equivocation") {
			slashed = true
		}
	}
	j := cl.state(t)
	if !slashed || slices.Contains(j.Ring, bad) || j.State != state.Published {
		t.Errorf("equivocator slashed %v, in the ring %v; job %s", slashed, slices.Contains(j.Ring, bad), j.State)
	}
	checkReduced(t, honest...)
}

// TestRefusesMismatchedJob: a worker whose operator allows only LoRA rank
// 16 refuses a rank-4 job and measures nothing for it; hanzod has the
// refusal in the job's record (its status) before the event is emitted.
func TestRefusesMismatchedJob(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	spec := tinySpec(1, 2)
	refused := make(chan worker.Event, 1)
	cl, nodes := startNodes(t, ctx, spec, 3, func(i int, c *worker.Config, nd *node) {
		if i != 0 {
			return
		}
		c.Constraints.LoRARank = 16
		nd.on = func(e worker.Event) {
			if e.Kind == worker.EventJobRefused {
				refused <- e
			}
		}
	})
	select {
	case e := <-refused:
		if !strings.Contains(e.Reason, "lora_rank") || e.Detail != "reported to hanzod" {
			t.Errorf("refusal %q (%s) does not say why", e.Reason, e.Detail)
		}
		if got := cl.state(t).Refusals[nodes[0].ID]; got != e.Reason {
			t.Errorf("hanzod recorded refusal %q, the worker said %q", got, e.Reason)
		}
	case <-ctx.Done():
		t.Fatal("the job was not refused")
	}
	nodes[0].Kill()
	waitDone(t, ctx, nodes[0])
	if st := cl.state(t).State; st != state.Provisioning {
		t.Errorf("job is %s: the worker took part", st)
	}
	if got := len(nodes[0].Events(worker.EventBandwidth)); got != 0 {
		t.Errorf("refusing worker reported bandwidth %d times", got)
	}
}

// TestRefusesJobTooBig: a worker allowed less memory than the job's
// estimate refuses it, naming both figures, and hanzod's record of the job
// says so.
func TestRefusesJobTooBig(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	refused := make(chan worker.Event, 1)
	cl, nodes := startNodes(t, ctx, tinySpec(1, 2), 3, func(i int, c *worker.Config, nd *node) {
		if i != 0 {
			return
		}
		c.MemoryLimit = 1 << 20
		nd.on = func(e worker.Event) {
			if e.Kind == worker.EventJobRefused {
				refused <- e
			}
		}
	})
	select {
	case e := <-refused:
		for _, want := range []string{"does not fit", "this worker's limit is 1 MiB", "parameters × 4 bytes"} {
			if !strings.Contains(e.Reason, want) {
				t.Errorf("refusal %q does not say %q", e.Reason, want)
			}
		}
		if got := cl.state(t).Refusals[nodes[0].ID]; got != e.Reason {
			t.Errorf("hanzod recorded refusal %q, the worker said %q", got, e.Reason)
		}
	case <-ctx.Done():
		t.Fatal("the job was not refused")
	}
}

func TestConstraints(t *testing.T) {
	beta := 0.1
	spec := tinySpec(1, 2)
	for _, tc := range []struct {
		c    worker.Constraints
		want string
	}{
		{worker.Constraints{}, ""},
		{worker.Constraints{Model: "builtin", Beta: &beta, LoRARank: 4, ImportanceSamplingLevel: "sequence"}, ""},
		{worker.Constraints{Model: "qwen"}, "model"},
		{worker.Constraints{Beta: new(0.2)}, "beta"},
		{worker.Constraints{LoRARank: 8}, "lora_rank"},
		{worker.Constraints{ImportanceSamplingLevel: "token"}, "importance_sampling_level"},
	} {
		err := tc.c.Check(spec)
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%+v: %v", tc.c, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%+v: error %v, want one about %s", tc.c, err, tc.want)
		}
	}
}

// someOrchestrator is a non-nil orchestrator for configuration checks.
type someOrchestrator struct{ worker.Orchestrator }

func TestConfigValidate(t *testing.T) {
	_, key, _ := ed25519.GenerateKey(rand.Reader)
	for _, tc := range []struct {
		name string
		mod  func(*worker.Config)
	}{
		{"no key", func(c *worker.Config) { c.Key = nil }},
		{"no orchestrator", func(c *worker.Config) { c.Orchestrator = nil }},
		{"negative heartbeat", func(c *worker.Config) { c.Heartbeat = -time.Second }},
		{"attack", func(c *worker.Config) { c.Attack = "bitflip" }},
		{"threads", func(c *worker.Config) { c.Threads = -1 }},
	} {
		c := worker.DefaultConfig()
		c.Key, c.Orchestrator = key, someOrchestrator{}
		tc.mod(&c)
		if err := c.Validate(); !errors.Is(err, worker.ErrConfig) {
			t.Errorf("%s: %v, want ErrConfig", tc.name, err)
		}
	}
	c := worker.DefaultConfig()
	c.Key, c.Orchestrator = key, someOrchestrator{}
	if err := c.Validate(); err != nil {
		t.Error(err)
	}
}

func TestEventJSON(t *testing.T) {
	e := worker.Event{Time: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC), Kind: worker.EventRingReduced, Node: "ab",
		Job: "j", Epoch: 1, Sync: 2, Seconds: 0.5, Adapter: "cd"}
	b, err := json.Marshal(e)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"time":"2026-01-02T03:04:05Z","kind":"ring_reduced","node":"ab","job":"j","epoch":1,"sync":2,"seconds":0.5,"adapter":"cd"}`
	if string(b) != want {
		t.Errorf("got  %s\nwant %s", b, want)
	}
	if s := fmt.Sprint(e); !strings.Contains(s, "ring_reduced") || !strings.Contains(s, "epoch=1") {
		t.Errorf("String: %q", s)
	}
}

// TestRingSuperseded: a member falls silent before its ring call (its
// delta submission and heartbeats hang) and hanzod fails it while the
// others are inside the call, waiting for it. They must drop the call at
// once and finish on the new configuration, not wait for the ring timeout
// (set far above the test's bound here).
func TestRingSuperseded(t *testing.T) {
	long(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	spec := tinySpec(1, 4) // 2 syncs: one ring sync
	spec.MinNodes = 4
	const victim = 3
	var silent atomic.Bool
	cl, nodes := startNodes(t, ctx, spec, 4, func(i int, c *worker.Config, nd *node) {
		c.RingTimeout = 40 * time.Second
		if i != victim {
			return
		}
		hang := func(ctx context.Context) { <-ctx.Done() }
		nd.orch.onSubmit = func(ctx context.Context, file []byte) (worker.Verdict, bool) {
			silent.Store(true)
			hang(ctx)
			return worker.Verdict{}, true
		}
		nd.orch.onHeartbeat = func(ctx context.Context) (worker.Assignment, error, bool) {
			if !silent.Load() {
				return worker.Assignment{}, nil, false
			}
			hang(ctx)
			return worker.Assignment{}, ctx.Err(), true
		}
	})
	victimID := nodes[victim].id
	if err := cl.WaitJob(ctx, cl.job, func(j state.Job) bool { return j.Generation > 1 && !slices.Contains(j.Ring, victimID) }); err != nil {
		t.Fatalf("hanzod never removed the silent member: %v", err)
	}
	removed := time.Now()
	survivors := nodes[:victim]
	waitDone(t, ctx, survivors...)
	// Each survivor's ring call of the first sync ended soon after the
	// removal (not after the 40 s ring timeout).
	for i, nd := range survivors {
		var ended time.Time
		for _, e := range nd.Events("") {
			if (e.Kind == worker.EventRingFailed || e.Kind == worker.EventRingReduced) && e.Epoch == 1 && e.Sync == 1 && ended.IsZero() {
				ended = e.Time
			}
		}
		if took := ended.Sub(removed); ended.IsZero() || took > 10*time.Second {
			t.Errorf("worker %d: its first ring call ended %v after the removal: it waited for the ring timeout", i, took)
		}
	}
	if st := cl.state(t).State; st != state.Published {
		t.Fatalf("job is %s, want published", st)
	}
	// The first survivor to hear of the new configuration drops its call;
	// its neighbours may see that as a broken link before they hear of
	// it themselves. Either way nobody waits for the timeout (above).
	superseded := 0
	for _, nd := range survivors {
		for _, e := range nd.Events(worker.EventRingFailed) {
			if e.Reason == "superseded" {
				superseded++
			}
		}
	}
	if superseded == 0 {
		t.Error("no survivor's ring call was superseded by the new configuration")
	}
}

// TestRemovedNodeRejoins: a member that hanzod took out of the ring while
// it was alive (its heartbeats stopped reaching hanzod while a neighbour
// died) comes back as the standby of the paused ring mid-epoch, joins the
// two members waiting in the sync, and the three finish the job. In "late"
// it reaches the sync only after the others' ring calls timed out waiting
// for it (as when the standby must train the epoch's first steps again on
// a loaded machine): the ring must still come together.
func TestRemovedNodeRejoins(t *testing.T) {
	long(t)
	for _, late := range []bool{false, true} {
		t.Run(map[bool]string{false: "prompt", true: "late"}[late], func(t *testing.T) { removedRejoins(t, late) })
	}
}

func removedRejoins(t *testing.T, late bool) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	spec := tinySpec(1, 4) // 2 syncs: one ring sync
	spec.MinNodes = 4
	const lost, dead = 1, 2
	const ringTimeout = 3 * time.Second
	var cut atomic.Bool // the lost node's heartbeats fail
	// The lost node was down for FailAfter: with the default uptime rule
	// it would wait a minute and more before it may stand by.
	setup := func(c *localcluster.Config) { c.State = func(s *state.Config) { s.MinUptimeBP = 0 } }
	cl, nodes := startNodesWith(t, ctx, spec, 4, setup, func(i int, c *worker.Config, nd *node) {
		c.RingTimeout = ringTimeout
		switch i {
		case dead:
			nd.on = func(e worker.Event) {
				if e.Kind == worker.EventDeltaSubmitted && e.Sync == 1 {
					nd.Kill()
				}
			}
		case lost:
			nd.on = func(e worker.Event) {
				if e.Kind == worker.EventDeltaSubmitted && e.Sync == 1 && len(nd.Events(worker.EventEpochStarted)) == 1 {
					cut.Store(true)
				}
			}
			nd.orch.onHeartbeat = func(ctx context.Context) (worker.Assignment, error, bool) {
				if cut.Load() {
					return worker.Assignment{}, status.Error(codes.Unavailable, "test: cut off from hanzod"), true
				}
				return worker.Assignment{}, nil, false
			}
			if late {
				// After rejoining, its first submission (the sync it
				// trained again) waits out two of the others' ring calls.
				nd.orch.onSubmit = func(ctx context.Context, file []byte) (worker.Verdict, bool) {
					if len(nd.Events(worker.EventEpochStarted)) == 2 && len(nd.Events(worker.EventDeltaSubmitted)) == 1 {
						select {
						case <-time.After(2*ringTimeout + time.Second):
						case <-ctx.Done():
						}
					}
					return worker.Verdict{}, false
				}
			}
		}
	})
	lostID := nodes[lost].id
	if err := cl.WaitJob(ctx, cl.job, func(j state.Job) bool { return j.Paused && !slices.Contains(j.Ring, lostID) }); err != nil {
		t.Fatalf("the ring never paused without the cut-off member: %v", err)
	}
	cut.Store(false)
	survivors := []*node{nodes[0], nodes[lost], nodes[3]}
	waitDone(t, ctx, survivors...)
	j := cl.state(t)
	if j.State != state.Published || !slices.Contains(j.Ring, lostID) || len(j.Ring) != 3 {
		t.Fatalf("job %s (%s), ring %v: want published by the three, the rejoined member among them", j.State, j.Reason, j.Ring)
	}
	checkReduced(t, survivors...)
	if n := len(nodes[lost].Events(worker.EventRingReduced)); n != 1 {
		t.Errorf("the rejoined member reduced %d times, want 1", n)
	}
}
