package judge_test

import (
	"context"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/zooai/gym/artifact/store"
	"github.com/zooai/gym/model/basemodel"
	"github.com/zooai/gym/model/llama"
	"github.com/zooai/gym/model/trainer"
	"github.com/zooai/gym/orchestrator/engine"
	"github.com/zooai/gym/orchestrator/judge"
	"github.com/zooai/gym/orchestrator/ledger"
	"github.com/zooai/gym/orchestrator/state"
	"github.com/zooai/gym/orchestrator/store/bolt"
	"github.com/zooai/gym/protocol/jobconf"
	"github.com/zooai/gym/protocol/jobspec"
	"github.com/zooai/gym/protocol/ring"
)

// clock is a fake clock: time moves only when a test says so, so the
// engine's lease never runs out and the judge's grace never passes by
// itself.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *clock) Advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

// testBase is the base model, parsed once for the whole test binary (as
// a daemon parses it once per process).
var testBase = sync.OnceValues(basemodel.Builtin)

func base(t testing.TB) *basemodel.Base {
	t.Helper()
	b, err := testBase()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// nodeKey is test node i's key; fixed, so a node's training data (a
// function of its key) is the same in every run.
func nodeKey(i int) ed25519.PrivateKey {
	seed := sha256.Sum256(fmt.Appendf(nil, "judge-test-node-%d", i))
	return ed25519.NewKeyFromSeed(seed[:])
}

func judgeKey() ed25519.PrivateKey {
	seed := sha256.Sum256([]byte("judge-test-hanzod"))
	return ed25519.NewKeyFromSeed(seed[:])
}

func nodeID(k ed25519.PrivateKey) string {
	return hex.EncodeToString(k.Public().(ed25519.PublicKey))
}

// tinySpec is a job of 2 epochs of 2 steps with a sync after every step
// (two syncs per epoch, the first all-reduced), 2 prompts of 4
// completions a step and rank-2 LoRA: a few hundred milliseconds of
// training per node and epoch.
func tinySpec() jobspec.Spec {
	g := jobspec.DefaultGSPO()
	g.AggregateInterval = 1
	g.GroupSize = 4
	g.LoRARank, g.LoRAAlpha = 2, 4
	g.MaxSeqLen = 12
	g.GradientAccumulationSteps = 1
	g.LearningRate = 2e-3
	g.WarmupSteps = 0
	g.WeightDecay = 0
	return jobspec.Spec{Model: jobconf.BuiltinModel, Dataset: "addition", Epochs: 2, MinNodes: 3, MaxNodes: 3,
		StepsPerEpoch: 2, PromptsPerStep: 2, Seed: 11, SpotCheckBP: -1, GSPO: g}
}

// env is an orchestrator (engine over bolt, fake clock) with registered,
// staked nodes, a job brought to Running and a judge over it.
type env struct {
	t     testing.TB
	ctx   context.Context
	clk   *clock
	eng   *engine.Engine
	j     *judge.Judge
	arts  *store.Store
	dir   string
	keys  []ed25519.PrivateKey // nodes 0..n-1 are registered; n is not
	ids   []string
	job   string
	spec  jobspec.Spec
	plan  jobconf.Plan
	tmpl  *llama.Adapter // the job's adapter shape (its initial adapter)
	auth  map[string]uint64
	dseq  map[string]uint64 // last delta sequence per node
	runMu sync.Mutex
	// retention is the judge's BlobRetention (replica).
	retention time.Duration
}

// newEnv registers n nodes (and keeps key n unregistered), stakes them,
// funds the treasury, submits spec and brings the job to Running.
func newEnv(t testing.TB, n int, spec jobspec.Spec) *env {
	t.Helper()
	ctx := context.Background()
	dir := t.TempDir()
	clk := &clock{now: time.Unix(1_767_225_600, 0)}
	bcfg := bolt.DefaultConfig(filepath.Join(dir, "db"))
	bcfg.Now = clk.Now
	st, err := bolt.Open(bcfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	ecfg := engine.DefaultConfig("judge-test")
	ecfg.State.MinEpochSamples = 0 // the tests' jobs are tiny, to train in well under a second
	eng, err := engine.Open(ctx, ecfg, st, clk.Now)
	if err != nil {
		t.Fatal(err)
	}
	if ok, err := eng.Campaign(ctx); err != nil || !ok {
		t.Fatalf("campaign: %v %v", ok, err)
	}
	arts, err := store.Open(store.DefaultConfig(filepath.Join(dir, "artifacts")))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { arts.Close() })
	j, err := judge.New(judge.Config{DataDir: filepath.Join(dir, "hanzod"), Key: judgeKey(), Store: arts, Threads: 2,
		ShardSize: 8, EvalSize: 8, Base: base(t), Now: clk.Now}, eng)
	if err != nil {
		t.Fatal(err)
	}
	e := &env{t: t, ctx: ctx, clk: clk, eng: eng, j: j, arts: arts, dir: dir, spec: spec,
		auth: map[string]uint64{}, dseq: map[string]uint64{}}
	for i := range n + 1 {
		e.keys = append(e.keys, nodeKey(i))
		e.ids = append(e.ids, nodeID(e.keys[i]))
	}
	for i := range n {
		r := state.Register{Auth: e.nextAuth(i), Address: fmt.Sprintf("10.0.0.%d:9560", i+1), Region: "eu", GPUModel: "L4", VRAMMiB: 24576}
		state.SignRegister(e.keys[i], &r)
		e.do(r)
		e.do(state.Deposit{Account: e.ids[i], Amount: 20_000 * ledger.GYM})
		e.do(state.Bond{Account: e.ids[i], Amount: 10_000 * ledger.GYM})
	}
	e.do(state.Deposit{Account: ledger.Treasury, Amount: 1_000 * ledger.GYM})
	evs := e.do(state.SubmitJob{Spec: spec})
	for _, ev := range evs {
		if s, ok := ev.Body.(state.JobSubmitted); ok {
			e.job = s.Job
		}
	}
	if e.job == "" {
		t.Fatalf("no job submitted: %v", evs)
	}
	members := e.jobState().Members
	if len(members) != n && len(members) != spec.MaxNodes {
		t.Fatalf("job scheduled on %d members: %v", len(members), members)
	}
	for _, m := range members {
		i := e.index(m)
		b := state.ReportBandwidth{Auth: e.nextAuth(i), Job: e.job}
		for _, p := range members {
			if p != m {
				b.Links = append(b.Links, state.Link{Peer: p, Kbps: 1000})
			}
		}
		state.SignBandwidth(e.keys[i], &b)
		e.do(b)
	}
	if jb := e.jobState(); jb.State != state.Running || jb.Epoch != 1 {
		t.Fatalf("job is %s in epoch %d, want running in epoch 1", jb.State, jb.Epoch)
	}
	if e.plan, err = jobconf.FromSpec(e.job, e.jobState().Spec, base(t)); err != nil {
		t.Fatal(err)
	}
	if e.tmpl, err = e.plan.InitialAdapter(base(t).Weights.Cfg); err != nil {
		t.Fatal(err)
	}
	return e
}

func (e *env) nextAuth(i int) state.Auth {
	e.auth[e.ids[i]]++
	return state.Auth{Seq: e.auth[e.ids[i]], Timestamp: e.clk.Now().UnixMilli()}
}

func (e *env) do(cmd state.Command) []state.Event {
	e.t.Helper()
	evs, err := e.eng.Do(e.ctx, cmd)
	if err != nil {
		e.t.Fatalf("%T: %v", cmd, err)
	}
	return evs
}

func (e *env) index(id string) int {
	for i, x := range e.ids {
		if x == id {
			return i
		}
	}
	e.t.Fatalf("unknown node %s", id)
	return -1
}

func (e *env) jobState() state.Job {
	var jb state.Job
	e.eng.View(func(m *state.Machine) { jb, _ = m.Job(e.job) })
	return jb
}

// ring is the job's ring order as node indexes.
func (e *env) ring() []int {
	var out []int
	for _, id := range e.jobState().Ring {
		out = append(out, e.index(id))
	}
	return out
}

func (e *env) inRing(i int) bool {
	for _, id := range e.jobState().Ring {
		if id == e.ids[i] {
			return true
		}
	}
	return false
}

// events decodes the whole log.
func (e *env) events() []state.Event {
	e.t.Helper()
	var out []state.Event
	for from := uint64(1); ; {
		recs, last, err := e.eng.Read(e.ctx, from, 1000)
		if err != nil {
			e.t.Fatal(err)
		}
		for _, r := range recs {
			ev, err := state.DecodeEvent(r.Data)
			if err != nil {
				e.t.Fatal(err)
			}
			out = append(out, ev)
		}
		if len(recs) == 0 || recs[len(recs)-1].Index >= last {
			return out
		}
		from = recs[len(recs)-1].Index + 1
	}
}

// verdicts returns the DeltaJudged events with the given file digest.
func (e *env) verdicts(digest string) []state.DeltaJudged {
	var out []state.DeltaJudged
	for _, ev := range e.events() {
		if v, ok := ev.Body.(state.DeltaJudged); ok && v.Digest == digest {
			out = append(out, v)
		}
	}
	return out
}

func (e *env) slashes(node string) []state.Slashed {
	var out []state.Slashed
	for _, ev := range e.events() {
		if s, ok := ev.Body.(state.Slashed); ok && s.Account == node {
			out = append(out, s)
		}
	}
	return out
}

// sd is a SyncDelta of node i for sync k of epoch ep with the next
// sequence and d as its tensors.
func (e *env) sd(i, ep, k int, d *llama.Adapter) jobconf.SyncDelta {
	e.dseq[e.ids[i]]++
	return jobconf.SyncDelta{Job: e.job, Node: e.ids[i], Epoch: ep, Sync: k, Step: uint64(e.plan.SyncStep(ep, k)),
		Sequence: e.dseq[e.ids[i]], Base: jobconf.Digest(e.tmpl), ClaimedLoss: 0.5, Samples: e.plan.Samples(),
		Time: e.clk.Now().UTC(), Delta: d}
}

// encode signs d with node i's key.
func (e *env) encode(i int, d jobconf.SyncDelta) []byte {
	e.t.Helper()
	return encodeWith(e.t, e.keys[i], d)
}

// encodeWith signs d with key; the job binding is the test hanzod's
// (judgeKey) unless d has one.
func encodeWith(t testing.TB, key ed25519.PrivateKey, d jobconf.SyncDelta) []byte {
	t.Helper()
	if d.Binding == "" {
		d.Binding = jobconf.Binding(judgeKey().Public().(ed25519.PublicKey), d.Job)
	}
	b, err := jobconf.Encode(context.Background(), key, d)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func (e *env) submit(file []byte) judge.Verdict {
	e.t.Helper()
	resp, err := e.j.Submit(e.ctx, file, nil)
	if err != nil {
		e.t.Fatalf("Submit: %v", err)
	}
	return resp
}

// small returns an adapter of the job's shape with values of magnitude
// scale (seeded), as a stand-in for a trained contribution.
func (e *env) small(seed uint64, scale float64) *llama.Adapter {
	r := rand.New(rand.NewPCG(seed, 7))
	a := e.tmpl.Zeroed()
	for _, t := range a.Views() {
		for j := range t.Data {
			t.Data[j] = float32(scale * (2*r.Float64() - 1))
		}
	}
	return a
}

// bound is the job's clip norm.
func (e *env) bound() float64 { return e.plan.ClipNorm(e.tmpl.NumParams()) }

// honest holds what honest workers submitted for one epoch: files[k][i]
// is node i's delta for sync k (1-based; nil when node i is not in the
// ring), contrib[k][i] the contribution it encodes.
type honest struct {
	files   [][][]byte
	contrib [][]*llama.Adapter
	ring    []int
}

// trainEpoch trains epoch ep from start for the nodes of ring (in ring
// order) exactly as worker.runEpoch does: resume at the epoch's first
// step, Interval steps per sync, the contribution is the change since the
// sync began clipped to the plan's bound, signed and encoded; after every
// sync but the last the ring all-reduce (ring.Reference over the ring
// order) is added to the sync's start and training resumes from it with
// the optimiser moments kept. The sequence of a delta is its global step.
func trainEpoch(t testing.TB, plan jobconf.Plan, ep int, start *llama.Adapter, keys []ed25519.PrivateKey, order []int, outer *jobconf.Outer) *honest {
	t.Helper()
	ctx := context.Background()
	base := base(t)
	K := plan.Syncs()
	h := &honest{files: make([][][]byte, K+1), contrib: make([][]*llama.Adapter, K+1), ring: order}
	trs := make([]*trainer.Trainer, len(keys))
	for _, i := range order {
		w, err := jobconf.Worker(nodeID(keys[i]))
		if err != nil {
			t.Fatal(err)
		}
		if trs[i], err = trainer.Resume(base.Weights, base.Tokenizer, plan.Trainer, w, 2, trainer.State{Step: plan.FirstStep(ep), Adapter: start}); err != nil {
			t.Fatal(err)
		}
	}
	clip := plan.ClipNorm(start.NumParams())
	for k := 1; k <= K; k++ {
		h.files[k] = make([][]byte, len(keys))
		h.contrib[k] = make([]*llama.Adapter, len(keys))
		starts := make([]*llama.Adapter, len(keys))
		var inputs [][]float32
		for _, i := range order {
			s := trs[i].Adapter().Clone()
			starts[i] = s
			var lossSum float64
			for range plan.Interval {
				st, err := trs[i].Step(ctx)
				if err != nil {
					t.Fatal(err)
				}
				lossSum += st.Loss
			}
			d := jobconf.Sub(trs[i].Adapter(), s)
			if f := jobconf.Clip(d, clip); f != 1 {
				t.Logf("node %d sync %d: honest contribution clipped by %g", i, k, f)
			}
			h.contrib[k][i] = d
			h.files[k][i] = encodeWith(t, keys[i], jobconf.SyncDelta{Job: plan.Job, Node: nodeID(keys[i]), Epoch: ep, Sync: k,
				Step: uint64(plan.SyncStep(ep, k)), Sequence: uint64(plan.SyncStep(ep, k)), Base: jobconf.Digest(s),
				ClaimedLoss: lossSum / float64(plan.Interval), Samples: plan.Samples(), Time: time.Unix(1_767_225_600, 0).UTC(), Delta: d})
			inputs = append(inputs, jobconf.Flatten(d))
		}
		if k == K {
			break
		}
		mean, err := ring.Reference(inputs, ring.Mean)
		if err != nil {
			t.Fatal(err)
		}
		u, err := outer.Step(mean) // the job's outer rule (nil: the plain mean)
		if err != nil {
			t.Fatal(err)
		}
		for _, i := range order {
			s := starts[i]
			if err := jobconf.AddFlat(s, u); err != nil {
				t.Fatal(err)
			}
			st := trs[i].State()
			st.Adapter = s
			w, _ := jobconf.Worker(nodeID(keys[i]))
			if trs[i], err = trainer.Resume(base.Weights, base.Tokenizer, plan.Trainer, w, 2, st); err != nil {
				t.Fatal(err)
			}
		}
	}
	return h
}

// jdir is the judge's data directory.
func (e *env) jdir() string { return filepath.Join(e.dir, "hanzod") }

// advance moves the clock and renews the engine's lease, as the daemon
// does every second (no Tick: nodes do not time out meanwhile).
func (e *env) advance(d time.Duration) {
	e.t.Helper()
	e.clk.Advance(d)
	if ok, err := e.eng.Campaign(e.ctx); err != nil || !ok {
		e.t.Fatalf("campaign: %v %v", ok, err)
	}
}

// long skips a test that trains and replays whole epochs under -short.
// scripts/test.sh runs this package under the race detector with -short,
// where the replays (single-threaded arithmetic, ten times slower under the
// detector) would take a quarter of an hour and find no race; the full
// suite runs every test without it.
func long(t *testing.T) {
	t.Helper()
	if testing.Short() {
		t.Skip("trains and replays whole epochs; the suite runs it without -short")
	}
}
