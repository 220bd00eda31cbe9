package epoch_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/zooai/gym/model/basemodel"
	"github.com/zooai/gym/model/llama"
	"github.com/zooai/gym/orchestrator/judge/epoch"
	"github.com/zooai/gym/orchestrator/ledger"
	"github.com/zooai/gym/protocol/attack"
	"github.com/zooai/gym/protocol/jobconf"
	"github.com/zooai/gym/protocol/jobspec"
	"github.com/zooai/gym/protocol/merge"
	"github.com/zooai/gym/protocol/ring"
)

var testBase = sync.OnceValues(basemodel.Builtin)

// world is a job of one epoch of two syncs (the first all-reduced) over
// three nodes, with a fake replayer: node i's "training" of sync k adds a
// fixed seeded contribution to the sync's start. Everything honest is
// derived from the replayer, so an honest delta replays bit for bit.
type world struct {
	base   *basemodel.Base
	plan   jobconf.Plan
	start  *llama.Adapter
	nodes  []string       // ids, in node order
	order  []string       // the ring order
	groups []int          // the ring's groups (two-level), nil: flat
	loss   float64        // what the replayer's steps report
	outer  *jobconf.Outer // the outer state the epoch starts from (nil: fresh)
	// scale multiplies a node's contributions (nil or absent: 1): an
	// honest node whose deltas stand apart and replay.
	scale map[string]float64
}

// startOuter is a copy of the outer optimiser the epoch starts with.
func (w *world) startOuter() *jobconf.Outer {
	if w.outer != nil {
		return w.outer.Clone()
	}
	return w.plan.NewOuter()
}

func newWorld(t *testing.T) *world {
	t.Helper()
	return newWorldWith(t, nil)
}

// newWorldWith is newWorld with the spec edited by edit (nil: none).
func newWorldWith(t *testing.T, edit func(*jobspec.Spec)) *world {
	t.Helper()
	base, err := testBase()
	if err != nil {
		t.Fatal(err)
	}
	g := jobspec.DefaultGSPO()
	g.AggregateInterval = 1
	g.GroupSize = 4
	g.LoRARank, g.LoRAAlpha = 2, 4
	g.MaxSeqLen = 12
	g.GradientAccumulationSteps = 1
	g.LearningRate = 2e-3
	g.WarmupSteps = 0
	g.WeightDecay = 0
	spec := jobspec.Spec{Model: jobconf.BuiltinModel, Dataset: "addition", Epochs: 1, MinNodes: 3, MaxNodes: 3,
		StepsPerEpoch: 2, PromptsPerStep: 2, Seed: 11, GSPO: g}
	if edit != nil {
		edit(&spec)
	}
	plan, err := jobconf.FromSpec("job-00000001", spec, base)
	if err != nil {
		t.Fatal(err)
	}
	start, err := plan.InitialAdapter(base.Weights.Cfg)
	if err != nil {
		t.Fatal(err)
	}
	w := &world{base: base, plan: plan, start: start, loss: 0.5}
	for i := range 3 {
		s := sha256.Sum256(fmt.Appendf(nil, "epoch-test-node-%d", i))
		w.nodes = append(w.nodes, hex.EncodeToString(s[:]))
	}
	w.order = []string{w.nodes[1], w.nodes[0], w.nodes[2]}
	return w
}

// contribution is node's seeded contribution to sync k, well below the
// clip bound.
func (w *world) contribution(node string, k int) *llama.Adapter {
	seed := sha256.Sum256(fmt.Appendf(nil, "%s/%d", node, k))
	r := rand.New(rand.NewPCG(uint64(seed[0])<<8|uint64(seed[1]), uint64(k)))
	a := w.start.Zeroed()
	f := 1.0
	if s, ok := w.scale[node]; ok {
		f = s
	}
	for _, t := range a.Views() {
		for j := range t.Data {
			t.Data[j] = float32(f * 1e-4 * (2*r.Float64() - 1))
		}
	}
	return a
}

// replay is the fake re-execution: the start of sync k plus node's
// contribution. It counts its calls.
func (w *world) replay(calls *int) epoch.Replayer {
	return func(ctx context.Context, node string, k int, starts []*llama.Adapter) (epoch.Replayed, error) {
		*calls++
		if len(starts) != k {
			return epoch.Replayed{}, fmt.Errorf("replay of sync %d given %d starts", k, len(starts))
		}
		a := starts[k-1].Clone()
		if err := jobconf.AddFlat(a, jobconf.Flatten(w.contribution(node, k))); err != nil {
			return epoch.Replayed{}, err
		}
		return epoch.Replayed{Adapter: a, Losses: []float64{w.loss}}, nil
	}
}

// honest returns the epoch's honest deltas: what the replayer makes of
// each node's sync, the base of sync k+1 being the ring's all-reduce of
// sync k in w.order, stepped by the job's outer optimiser.
func (w *world) honest(t *testing.T) []epoch.Delta {
	t.Helper()
	outer := w.startOuter()
	var calls int
	rp := w.replay(&calls)
	starts := []*llama.Adapter{w.start}
	var out []epoch.Delta
	for k := 1; k <= w.plan.Syncs(); k++ {
		by := map[string]*llama.Adapter{}
		for _, n := range w.nodes {
			r, err := rp(context.Background(), n, k, starts)
			if err != nil {
				t.Fatal(err)
			}
			got, losses := r.Adapter, r.Losses
			d := jobconf.Sub(got, starts[k-1])
			if f := jobconf.Clip(d, w.plan.ClipNorm(d.NumParams())); f != 1 {
				t.Fatalf("honest contribution clipped by %g", f)
			}
			by[n] = d
			step := uint64(w.plan.SyncStep(1, k))
			out = append(out, epoch.Delta{Slot: jobspec.Slot{Epoch: 1, Step: step, Node: n}, Node: n, Step: step, Digest: fmt.Sprintf("digest-%s-%d", n[:8], k),
				Base: jobconf.Digest(starts[k-1]), ClaimedLoss: jobconf.ClaimedLoss(losses), Adapter: d})
		}
		var vecs [][]float32
		for _, n := range w.order {
			vecs = append(vecs, jobconf.Flatten(by[n]))
		}
		mean, err := ring.ReferenceGroups(vecs, w.groups, ring.Mean, ring.FP32)
		if err != nil {
			t.Fatal(err)
		}
		s := starts[k-1].Clone()
		if err := outer.Apply(s, mean); err != nil {
			t.Fatal(err)
		}
		starts = append(starts, s)
	}
	return out
}

func (w *world) input(deltas []epoch.Delta, replay epoch.Replayer) epoch.Input {
	return epoch.Input{Job: w.plan.Job, Epoch: 1, Plan: w.plan, Rule: merge.Mean, SpotCheckBP: 10000, SpotKey: []byte("key"),
		Start: w.start, Deltas: deltas, Rings: [][]string{w.order}, RingGroups: [][]int{w.groups}, Base: w.base, ShardSize: 8, EvalSize: 8, Threads: 2,
		Weights: [3]float64{0.5, 0.3, 0.2}, Replay: replay, StartOuter: w.outer}
}

// record is the checkpoint of record the honest deltas ds make: every
// sync's mean merge of the nodes' deltas, each weighted by quality(node,
// sync), stepped from the start by the job's outer rule.
func (w *world) record(t *testing.T, ds []epoch.Delta, quality func(node string, k int) float64) *llama.Adapter {
	t.Helper()
	T, o := w.start.Clone(), w.startOuter()
	for k := 1; k <= w.plan.Syncs(); k++ {
		var mi []merge.Input
		for _, n := range w.nodes {
			mi = append(mi, merge.Input{Node: n, Vec: jobconf.Flatten(ds[find(ds, n, k)].Adapter), Quality: quality(n, k)})
		}
		u, _, err := merge.Merge(merge.Config{Rule: merge.Mean}, mi)
		if err != nil {
			t.Fatal(err)
		}
		if err := o.Apply(T, u); err != nil {
			t.Fatal(err)
		}
	}
	return T
}

// find returns the index of node n's delta of sync k.
func find(ds []epoch.Delta, n string, k int) int {
	for i, d := range ds {
		if d.Node == n && d.Step == uint64(k) { // one step a sync, epoch 1
			return i
		}
	}
	panic("no such delta")
}

// TestEvaluate runs the evaluation on sets of deltas, each with one kind
// of misbehaviour the end of an epoch can catch, and checks the verdicts:
// what is excluded, slashed, flagged, scored and paid.
func TestEvaluate(t *testing.T) {
	w := newWorld(t)
	a, b, c := w.nodes[0], w.nodes[1], w.nodes[2]
	type want struct {
		scores     int
		checks     int
		excluded   []string // slot prefixes
		slashed    []string // node: detail prefix
		disagree   []string // prefixes
		unknown    []int
		shortfalls int
		forfeited  []string // nodes with no score and no reward
	}
	cases := []struct {
		name  string
		edit  func(ds []epoch.Delta, in *epoch.Input)
		want  want
		extra func(t *testing.T, r *epoch.Result)
	}{
		{"honest", func([]epoch.Delta, *epoch.Input) {}, want{scores: 6, checks: 6}, func(t *testing.T, r *epoch.Result) {
			if len(r.Rewards) != 3 {
				t.Errorf("rewards %+v, want one contribution per node", r.Rewards)
			}
			for _, cn := range r.Rewards {
				if cn.Compute != 2*w.plan.Samples() || cn.Participation != 2 {
					t.Errorf("contribution %+v, want 2 syncs of %d samples", cn, w.plan.Samples())
				}
			}
			if r.Report.Accuracy < 0 || r.Report.Accuracy > 1 || r.Report.LossBefore == 0 {
				t.Errorf("report %+v", r.Report)
			}
		}},
		{"spot-check mismatch", func(ds []epoch.Delta, in *epoch.Input) {
			i := find(ds, b, 2)
			d := ds[i].Adapter.Clone()
			d.Views()[0].Data[0] += 1e-5
			ds[i].Adapter = d
		}, want{scores: 4, checks: 6, excluded: []string{slotKey(1, 2, b), slotKey(1, 1, b) + " (node slashed this epoch: spot_check)"},
			slashed: []string{b + ": replay differs in 1 of"}, forfeited: []string{b}}, nil},
		{"claimed loss", func(ds []epoch.Delta, in *epoch.Input) {
			ds[find(ds, c, 1)].ClaimedLoss = w.loss + 0.1
		}, want{scores: 4, checks: 5, excluded: []string{slotKey(1, 1, c), slotKey(1, 2, c) + " (node slashed this epoch: spot_check)"},
			slashed: []string{c + ": claimed loss 0.6, replay gives 0.5"}, forfeited: []string{c}}, nil},
		{"slashed on submission", func(ds []epoch.Delta, in *epoch.Input) {
			in.Offenders = map[string]string{a: "equivocation"}
		}, want{scores: 4, checks: 4, excluded: []string{slotKey(1, 1, a) + " (node slashed this epoch: equivocation)", slotKey(1, 2, a) + " (node slashed"},
			forfeited: []string{a}}, nil},
		{"slashed on submission and by a spot-check", func(ds []epoch.Delta, in *epoch.Input) {
			in.Offenders = map[string]string{a: "replay"}
			i := find(ds, b, 2)
			d := ds[i].Adapter.Clone()
			d.Views()[0].Data[0] += 1e-5
			ds[i].Adapter = d
		}, want{scores: 2, checks: 4, excluded: []string{slotKey(1, 1, a) + " (node slashed this epoch: replay)", slotKey(1, 2, a) + " (node slashed",
			slotKey(1, 2, b), slotKey(1, 1, b) + " (node slashed this epoch: spot_check)"},
			slashed: []string{b + ": replay differs"}, forfeited: []string{a, b}}, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ds := w.honest(t)
			var calls int
			in := w.input(ds, w.replay(&calls))
			tc.edit(ds, &in)
			r, err := epoch.Evaluate(context.Background(), in)
			if err != nil {
				t.Fatal(err)
			}
			rep := r.Report
			if len(rep.Scores) != tc.want.scores || rep.SpotChecks != tc.want.checks || calls != tc.want.checks {
				t.Errorf("%d scores, %d spot-checks (%d replays); want %d and %d", len(rep.Scores), rep.SpotChecks, calls, tc.want.scores, tc.want.checks)
			}
			if !prefixes(rep.Excluded, tc.want.excluded) {
				t.Errorf("excluded %q, want %q", rep.Excluded, tc.want.excluded)
			}
			var slashed []string
			for _, s := range r.Slashes {
				if s.Offence != epoch.OffenceSpotCheck || s.Digest == "" || s.Slot.Epoch != 1 {
					t.Errorf("slash %+v", s)
				}
				slashed = append(slashed, s.Node+": "+s.Detail)
			}
			if !prefixes(slashed, tc.want.slashed) {
				t.Errorf("slashed %q, want %q", slashed, tc.want.slashed)
			}
			if !prefixes(rep.RingDisagreements, tc.want.disagree) {
				t.Errorf("ring disagreements %q, want %q", rep.RingDisagreements, tc.want.disagree)
			}
			if !slices.Equal(rep.RingUnknown, tc.want.unknown) {
				t.Errorf("ring unknown %v, want %v", rep.RingUnknown, tc.want.unknown)
			}
			if !slices.Equal(rep.Forfeited, tc.want.forfeited) {
				t.Errorf("forfeited %q, want %q", rep.Forfeited, tc.want.forfeited)
			}
			for _, n := range tc.want.forfeited {
				for _, sc := range rep.Scores {
					if sc.Node == n {
						t.Errorf("a delta of %s, slashed this epoch, was scored (sync %d)", n[:8], sc.Sync)
					}
				}
				for _, cn := range r.Rewards {
					if cn.ID == n {
						t.Errorf("%s, slashed this epoch, earns %+v", n[:8], cn)
					}
				}
			}
			if len(r.Shortfalls) != tc.want.shortfalls {
				t.Errorf("shortfalls %+v, want %d", r.Shortfalls, tc.want.shortfalls)
			}
			for _, s := range r.Slashes {
				for _, sc := range rep.Scores {
					if sc.Node == s.Node && sc.Sync == s.Sync {
						t.Errorf("the slashed delta of %s sync %d was scored", s.Node[:8], s.Sync)
					}
				}
			}
			if r.Merged == nil || r.Merged.NumParams() != w.start.NumParams() {
				t.Fatal("no merged adapter of the job's shape")
			}
			if tc.extra != nil {
				tc.extra(t, r)
			}
		})
	}
}

func prefixes(got, want []string) bool {
	if len(got) != len(want) {
		return false
	}
	for i := range got {
		if !strings.HasPrefix(got[i], want[i]) {
			return false
		}
	}
	return true
}

// TestEvaluateDeterministic: the same inputs in another order give the
// same merged bytes and report.
func TestEvaluateDeterministic(t *testing.T) {
	w := newWorld(t)
	var calls int
	ds := w.honest(t)
	r1, err := epoch.Evaluate(context.Background(), w.input(ds, w.replay(&calls)))
	if err != nil {
		t.Fatal(err)
	}
	rev := slices.Clone(ds)
	slices.Reverse(rev)
	r2, err := epoch.Evaluate(context.Background(), w.input(rev, w.replay(&calls)))
	if err != nil {
		t.Fatal(err)
	}
	if jobconf.Digest(r1.Merged) != jobconf.Digest(r2.Merged) || fmt.Sprint(r1.Report) != fmt.Sprint(r2.Report) {
		t.Fatalf("the order of the deltas changed the result:\n%+v\n%+v", r1.Report, r2.Report)
	}
	if jobconf.Digest(r1.Merged) == jobconf.Digest(w.start) {
		t.Fatal("the merge did not move the adapter")
	}
}

// TestEvaluateReplayError: a replay that fails (not a mismatch: the
// judge's own failure) fails the evaluation rather than slashing.
func TestEvaluateReplayError(t *testing.T) {
	w := newWorld(t)
	boom := errors.New("out of memory")
	_, err := epoch.Evaluate(context.Background(), w.input(w.honest(t), func(context.Context, string, int, []*llama.Adapter) (epoch.Replayed, error) {
		return epoch.Replayed{}, boom
	}))
	if !errors.Is(err, boom) {
		t.Fatalf("err %v, want %v", err, boom)
	}
}

func TestSampled(t *testing.T) {
	n := 0
	for i := range 10000 {
		if epoch.Sampled([]byte("k"), fmt.Sprint(i), 1000) {
			n++
		}
	}
	if n < 850 || n > 1150 {
		t.Fatalf("%d of 10000 sampled at 10%%", n)
	}
	for i := range 100 {
		d := fmt.Sprint(i)
		if epoch.Sampled([]byte("k"), d, 0) || !epoch.Sampled([]byte("k"), d, 10000) {
			t.Fatal("0 and 10000 basis points are none and all")
		}
	}
}

func slotKey(epoch int, step uint64, node string) string {
	return jobspec.Slot{Epoch: epoch, Step: step, Node: node}.String()
}

// TestOutliersReplayed: the in-bound attacks of the literature, mounted on
// the last sync by node c from the honest updates of a and b, with a
// keyed spot-check share too small to sample any delta: each attack makes
// c's delta an outlier of its sync (merge.Outliers), so it is replayed,
// does not replay, and c is slashed and forfeits the epoch. With the
// outlier replays switched off nothing is replayed and the attacker is
// paid: the defence is what catches them.
func TestOutliersReplayed(t *testing.T) {
	w := newWorld(t)
	a, b, c := w.nodes[0], w.nodes[1], w.nodes[2]
	K := w.plan.Syncs()
	vec := func(ds []epoch.Delta, n string) []float32 { return jobconf.Flatten(ds[find(ds, n, K)].Adapter) }
	bound := w.plan.ClipNorm(w.start.NumParams())
	z, err := attack.ALIEZ(3, 1)
	if err != nil {
		t.Fatal(err)
	}
	attacks := map[string]func(ds []epoch.Delta) []float32{
		"alie": func(ds []epoch.Delta) []float32 {
			v, _ := attack.ALIE([][]float32{vec(ds, a), vec(ds, b)}, z)
			return v
		},
		"ipm": func(ds []epoch.Delta) []float32 {
			v, _ := attack.IPM([][]float32{vec(ds, a), vec(ds, b)}, attack.DefaultIPMEpsilon)
			return v
		},
		"mimic": func(ds []epoch.Delta) []float32 {
			v, _ := attack.Mimic([][]float32{vec(ds, a), vec(ds, b)})
			return v
		},
		"noise": func(ds []epoch.Delta) []float32 {
			v := attack.Noise(rand.New(rand.NewPCG(1, 2)), w.start.NumParams(), 0.9*bound)
			for i, x := range vec(ds, c) {
				v[i] += x
			}
			attack.Clip(v, bound)
			return v
		},
	}
	for _, name := range []string{"alie", "ipm", "mimic", "noise"} {
		for _, on := range []bool{true, false} {
			t.Run(fmt.Sprintf("%s/outlier replays %v", name, on), func(t *testing.T) {
				ds := w.honest(t)
				i := find(ds, c, K)
				d := w.start.Zeroed()
				if err := jobconf.AddFlat(d, attacks[name](ds)); err != nil {
					t.Fatal(err)
				}
				ds[i].Adapter = d
				var calls int
				in := w.input(ds, w.replay(&calls))
				in.SpotCheckBP, in.SpotKey = 1, []byte("a key sampling none of these digests")
				for _, d := range ds {
					if epoch.Sampled(in.SpotKey, d.Digest, in.SpotCheckBP) {
						t.Fatalf("%s is sampled: pick another key", d.Digest)
					}
				}
				if !on {
					in.Outliers = merge.OutlierConfig{Far: -1, Near: -1, Twin: -1, Small: -1, Large: -1}
				}
				r, err := epoch.Evaluate(context.Background(), in)
				if err != nil {
					t.Fatal(err)
				}
				rep := r.Report
				paid := slices.ContainsFunc(r.Rewards, func(cn ledger.Contribution) bool { return cn.ID == c })
				if !on {
					if calls != 0 || len(r.Slashes) != 0 || !paid {
						t.Fatalf("without outlier replays: %d replays, slashes %+v, attacker paid %v; want none, none, paid", calls, r.Slashes, paid)
					}
					return
				}
				if len(r.Slashes) != 1 || r.Slashes[0].Node != c || r.Slashes[0].Sync != K {
					t.Fatalf("slashes %+v, want c's sync %d; targeted %q", r.Slashes, K, rep.Targeted)
				}
				if !slices.Equal(rep.Forfeited, []string{c}) || paid {
					t.Fatalf("forfeited %q, attacker paid %v", rep.Forfeited, paid)
				}
				for _, s := range r.Slashes {
					if s.Node != c {
						t.Fatalf("honest %s slashed", s.Node[:8])
					}
				}
				// The attacker's delta is among the targeted ones; an honest
				// twin of a mimic may be too (it replays and is kept).
				if !slices.ContainsFunc(rep.Targeted, func(s string) bool { return strings.HasPrefix(s, slotKey(1, uint64(K), c)) }) {
					t.Fatalf("targeted %q does not name the attacker's slot", rep.Targeted)
				}
				t.Logf("%d replays; targeted %q", calls, rep.Targeted)
			})
		}
	}
}

// TestEvaluateOuter: with an outer optimiser (Nesterov momentum over four
// syncs, three all-reduced) the judge rebuilds the ring's results as the
// workers stepped them, so every honest delta replays bit for bit; the
// checkpoint of record is the merged updates stepped by the same rule; and
// deltas whose bases follow the plain average (a worker ignoring the
// rule) disagree with the ring from sync 2 on.
func TestEvaluateOuter(t *testing.T) {
	w := newWorldWith(t, func(s *jobspec.Spec) {
		s.StepsPerEpoch = 4
		s.GSPO.OuterLR, s.GSPO.OuterMomentum = 0.7, 0.9
	})
	if w.plan.Syncs() != 4 || w.plan.NewOuter() == nil {
		t.Fatalf("plan %+v", w.plan)
	}
	var calls int
	ds := w.honest(t)
	r, err := epoch.Evaluate(context.Background(), w.input(ds, w.replay(&calls)))
	if err != nil {
		t.Fatal(err)
	}
	rep := r.Report
	if len(r.Slashes) != 0 || len(rep.RingDisagreements) != 0 || len(rep.RingUnknown) != 0 || len(rep.Excluded) != 0 ||
		rep.SpotChecks != 12 || calls != 12 || len(rep.Scores) != 12 {
		t.Fatalf("honest run under the outer rule: slashes %+v, report %+v", r.Slashes, rep)
	}
	// The checkpoint of record: start + the outer steps of the merged
	// updates. Replaying the merge with the weights the report gives must
	// land on the same bits.
	quality := func(node string, k int) float64 {
		for _, sc := range rep.Scores {
			if sc.Node == node && sc.Sync == k {
				return sc.Quality
			}
		}
		panic("no score")
	}
	if T := w.record(t, ds, quality); jobconf.Digest(T) != jobconf.Digest(r.Merged) {
		t.Fatal("the checkpoint of record is not the merged updates stepped by the outer rule")
	}
	// Deltas made under the plain average: sync 2's bases are no ring
	// result under the job's rule, so the ring is unknown from sync 1 on
	// (and nothing later is compared with it).
	plain := newWorld(t)
	plain.plan.StepsPerEpoch = 4
	pds := plain.honest(t)
	r2, err := epoch.Evaluate(context.Background(), w.input(pds, w.replay(&calls)))
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(r2.Report.RingUnknown, []int{1}) {
		t.Fatalf("plain-average bases under the outer rule: ring unknown %v, disagreements %q", r2.Report.RingUnknown, r2.Report.RingDisagreements)
	}
}

// TestTraceChecks: on a job that allows torch, the torch deltas are not
// replayed but checked from their traces (the checker is given the node's
// trace CIDs of syncs 1..k and the starts); one that fails is excluded and
// slashed for trace_check with everything its node sent that epoch; one
// whose earlier sync has no traces is left out unpunished; without a
// checker they are merged unchecked, as before.
func TestTraceChecks(t *testing.T) {
	w := newWorldWith(t, func(s *jobspec.Spec) { s.Backend = "any" })
	honest := w.honest(t)
	torchNode, liar, gap := w.nodes[0], w.nodes[1], w.nodes[2]
	for i := range honest {
		d := &honest[i]
		d.Backend = "torch"
		d.Traces = fmt.Sprintf("traces-%s-%d", d.Node[:8], d.Step)
		if d.Node == gap && d.Step == 1 {
			d.Traces = "" // its first sync's traces never came
		}
	}
	var replays int
	type call struct {
		node   string
		traces []string
		starts int
	}
	var calls []call
	in := w.input(honest, w.replay(&replays))
	in.CheckTraces = func(_ context.Context, node string, traces []string, starts []*llama.Adapter, d epoch.Delta) (epoch.TraceCheck, error) {
		calls = append(calls, call{node, traces, len(starts)})
		if node == liar && d.Step == 2 {
			return epoch.TraceCheck{Backend: d.Backend, Failed: "update", Detail: "relative L2 error 0.5"}, nil
		}
		return epoch.TraceCheck{Backend: d.Backend, Steps: int(d.Step)}, nil
	}
	res, err := epoch.Evaluate(context.Background(), in)
	if err != nil {
		t.Fatal(err)
	}
	rep := res.Report
	if replays != 0 {
		t.Errorf("%d exact replays of torch deltas", replays)
	}
	for _, c := range calls {
		if len(c.traces) != c.starts {
			t.Errorf("checker of %s given %d trace CIDs and %d starts", c.node[:8], len(c.traces), c.starts)
		}
		for s, cid := range c.traces {
			if want := fmt.Sprintf("traces-%s-%d", c.node[:8], s+1); cid != want {
				t.Errorf("checker of %s: sync %d traces %q, want %q", c.node[:8], s+1, cid, want)
			}
		}
		if c.node == gap && c.starts == 2 {
			t.Errorf("the delta whose first sync has no traces was checked")
		}
	}
	if len(res.Slashes) != 1 || res.Slashes[0].Node != liar || res.Slashes[0].Offence != epoch.OffenceTraceCheck || !strings.Contains(res.Slashes[0].Detail, "update") {
		t.Fatalf("slashes %+v, want one trace_check of %s", res.Slashes, liar[:8])
	}
	if !slices.Contains(rep.Forfeited, liar) || slices.Contains(rep.Forfeited, gap) || slices.Contains(rep.Forfeited, torchNode) {
		t.Errorf("forfeited %v", rep.Forfeited)
	}
	var gapOut bool
	for _, x := range rep.Excluded {
		gapOut = gapOut || strings.Contains(x, gap) && strings.Contains(x, "no traces of sync 1")
	}
	if !gapOut {
		t.Errorf("excluded %v: the delta without its first sync's traces is not left out", rep.Excluded)
	}
	for _, tc := range rep.TraceChecks {
		if tc.Slot == "" || tc.Backend != "torch" {
			t.Errorf("trace check %+v", tc)
		}
	}
	// The liar (failed) and the node whose traces went missing are watched
	// from now on; the honest torch node is not.
	if want := slices.Sorted(slices.Values([]string{liar, gap})); !slices.Equal(res.Watch, want) {
		t.Errorf("watch %v, want %v", res.Watch, want)
	}
	// Without a checker: merged unchecked, listed as not replayed.
	in.CheckTraces = nil
	res, err = epoch.Evaluate(context.Background(), in)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Slashes) != 0 || len(res.Report.TraceChecks) != 0 || len(res.Report.NotReplayed) != len(honest) {
		t.Errorf("without a checker: slashes %v, checks %v, not replayed %v", res.Slashes, res.Report.TraceChecks, res.Report.NotReplayed)
	}
}

// TestWatchedShare: a watched node's deltas are checked at WatchedShare of
// the job's share (here 25 % → all of them), the others' at the job's
// share (here, with a key sampling none of them, none).
func TestWatchedShare(t *testing.T) {
	for bp, want := range map[int]int{0: 0, 1: 5000, 1000: 5000, 2000: 8000, 2500: 10000, 9000: 10000} {
		if got := epoch.WatchedShare(bp); got != want {
			t.Errorf("WatchedShare(%d) = %d, want %d", bp, got, want)
		}
	}
	w := newWorld(t)
	ds := w.honest(t)
	var calls int
	in := w.input(ds, w.replay(&calls))
	in.SpotCheckBP = 2500
	for i := 0; ; i++ {
		in.SpotKey = []byte(fmt.Sprintf("key %d", i))
		if !slices.ContainsFunc(ds, func(d epoch.Delta) bool { return epoch.Sampled(in.SpotKey, d.Digest, in.SpotCheckBP) }) {
			break
		}
	}
	in.Outliers = merge.OutlierConfig{Far: -1, Near: -1, Twin: -1, Small: -1, Large: -1}
	watched := w.nodes[1]
	in.Watched = map[string]bool{watched: true}
	res, err := epoch.Evaluate(context.Background(), in)
	if err != nil {
		t.Fatal(err)
	}
	mine := 0
	for _, d := range ds {
		if d.Node == watched {
			mine++
		}
	}
	if calls != mine || res.Report.SpotChecks != mine {
		t.Errorf("%d replays (%d spot-checks), want the watched node's %d deltas", calls, res.Report.SpotChecks, mine)
	}
	if len(res.Watch) != 0 {
		t.Errorf("honest deltas put %v under watch", res.Watch)
	}
}

// TestPendingChecks: a checker that cannot decide a check yet (its
// validators' verdicts awaited) makes Evaluate stop before scoring and
// merging, with the pending count; decided checks' results stand.
func TestPendingChecks(t *testing.T) {
	w := newWorldWith(t, func(s *jobspec.Spec) { s.Backend = "any" })
	honest := w.honest(t)
	for i := range honest {
		honest[i].Backend = "torch"
		honest[i].Traces = fmt.Sprintf("traces-%s-%d", honest[i].Node[:8], honest[i].Step)
	}
	var replays int
	in := w.input(honest, w.replay(&replays))
	waiting := w.nodes[2]
	in.CheckTraces = func(_ context.Context, node string, _ []string, _ []*llama.Adapter, d epoch.Delta) (epoch.TraceCheck, error) {
		if node == waiting {
			return epoch.TraceCheck{Pending: true}, nil
		}
		return epoch.TraceCheck{Backend: d.Backend}, nil
	}
	res, err := epoch.Evaluate(context.Background(), in)
	if err != nil {
		t.Fatal(err)
	}
	mine := 0
	for _, d := range honest {
		if d.Node == waiting {
			mine++
		}
	}
	if res.Pending != mine || res.Merged != nil || len(res.Report.Scores) != 0 || len(res.Rewards) != 0 {
		t.Fatalf("pending %d (want %d), merged %v, %d scores, %d rewards: want a stop before scoring", res.Pending, mine, res.Merged != nil, len(res.Report.Scores), len(res.Rewards))
	}
	if len(res.Report.TraceChecks) != len(honest)-mine {
		t.Errorf("%d decided checks reported, want %d", len(res.Report.TraceChecks), len(honest)-mine)
	}
}

// TestEvaluateDataParallel: a job of plain SGD inside and Adam outside
// (synchronous data parallelism), twelve syncs. The ring is reconstructed
// under Adam; every delta is merged with the same weight, as the ring
// merges; only every second sync (12/6) is scored, the others are marked
// unscored and earn compute and participation but no quality; the
// checkpoint of record is the Adam steps of the plain means.
func TestEvaluateDataParallel(t *testing.T) {
	w := newWorldWith(t, func(s *jobspec.Spec) {
		s.StepsPerEpoch = 12
		s.GSPO.LearningRate = 1e-3
		s.GSPO.InnerOptimizer, s.GSPO.OuterOptimizer, s.GSPO.OuterLR = "sgd", "adam", 1.5e-3
	})
	if !w.plan.Trainer.SGD || !w.plan.OuterAdam || w.plan.Syncs() != 12 {
		t.Fatalf("plan %+v", w.plan)
	}
	var calls int
	ds := w.honest(t)
	r, err := epoch.Evaluate(context.Background(), w.input(ds, w.replay(&calls)))
	if err != nil {
		t.Fatal(err)
	}
	rep := r.Report
	if len(r.Slashes) != 0 || len(rep.RingDisagreements) != 0 || len(rep.RingUnknown) != 0 || len(rep.Excluded) != 0 || len(rep.Scores) != 36 {
		t.Fatalf("honest data-parallel run: slashes %+v, report %+v", r.Slashes, rep)
	}
	var qSum float64
	for _, sc := range rep.Scores {
		if sc.Unscored != (sc.Sync%2 == 1) {
			t.Fatalf("sync %d scored %v", sc.Sync, !sc.Unscored)
		}
		if sc.Unscored && (sc.Quality != 0 || sc.DeltaL != 0) {
			t.Fatalf("unscored sync %d has quality %v", sc.Sync, sc.Quality)
		}
		if math.Abs(sc.Weight-1.0/3) > 1e-12 {
			t.Fatalf("sync %d node %s weight %v, want 1/3", sc.Sync, sc.Node[:8], sc.Weight)
		}
		qSum += sc.Quality
	}
	if math.Abs(rep.Quality-qSum/18) > 1e-12 {
		t.Fatalf("mean quality %v, want the scored deltas' %v", rep.Quality, qSum/18)
	}
	for _, c := range r.Rewards {
		if c.Participation != 12 || c.Compute != 12*w.plan.Samples() {
			t.Fatalf("contribution %+v", c)
		}
	}
	if T := w.record(t, ds, func(string, int) float64 { return 1 }); jobconf.Digest(T) != jobconf.Digest(r.Merged) {
		t.Fatal("the checkpoint of record is not the plain means stepped by Adam")
	}
}

// Under the outer Adam the state carries from one epoch into the next:
// the judge continues the previous checkpoint's state (Input.StartOuter)
// along both the ring's trajectory and the checkpoint of record's, and
// hands on the state after the epoch (Result.Outer). A judge that started
// the second epoch fresh would not reconstruct the workers' ring.
func TestEvaluateCarriedOuter(t *testing.T) {
	w := newWorldWith(t, func(s *jobspec.Spec) {
		s.StepsPerEpoch = 3
		s.GSPO.LearningRate = 1e-3
		s.GSPO.InnerOptimizer, s.GSPO.OuterOptimizer, s.GSPO.OuterLR = "sgd", "adam", 1.5e-3
	})
	if !w.plan.CarriesOuter() {
		t.Fatal("the data-parallel plan does not carry its outer state")
	}
	var calls int
	ds := w.honest(t)
	r1, err := epoch.Evaluate(context.Background(), w.input(ds, w.replay(&calls)))
	if err != nil {
		t.Fatal(err)
	}
	if r1.Outer.Steps() != 3 {
		t.Fatalf("outer state after one epoch of 3 syncs: %d steps", r1.Outer.Steps())
	}
	// Epoch 2 from the checkpoint of record and its outer state.
	w.start, w.outer = r1.Merged, r1.Outer
	ds = w.honest(t)
	fresh := w.input(ds, w.replay(&calls))
	fresh.StartOuter = nil
	rf, err := epoch.Evaluate(context.Background(), fresh)
	if err != nil {
		t.Fatal(err)
	}
	if len(rf.Report.RingDisagreements) == 0 && len(rf.Report.RingUnknown) == 0 {
		t.Fatal("a judge starting the outer Adam afresh reconstructed a ring that continued it")
	}
	r2, err := epoch.Evaluate(context.Background(), w.input(ds, w.replay(&calls)))
	if err != nil {
		t.Fatal(err)
	}
	rep := r2.Report
	if len(r2.Slashes) != 0 || len(rep.RingDisagreements) != 0 || len(rep.RingUnknown) != 0 || len(rep.Excluded) != 0 {
		t.Fatalf("carried state: slashes %+v, report %+v", r2.Slashes, rep)
	}
	if T := w.record(t, ds, func(string, int) float64 { return 1 }); jobconf.Digest(T) != jobconf.Digest(r2.Merged) {
		t.Fatal("the checkpoint of record is not the means stepped by the carried Adam")
	}
	if r2.Outer.Steps() != 6 || r1.Outer.Steps() != 3 {
		t.Fatalf("outer steps %d after two epochs (the first's state now %d)", r2.Outer.Steps(), r1.Outer.Steps())
	}
}

// A two-level ring (groups of 2 and 1) sums in another order than the flat
// ring: the judge rebuilds it bit for bit when told the ring's groups
// (every delta's base agrees), and does not when it takes the ring for a
// flat one.
func TestEvaluateTwoLevelRing(t *testing.T) {
	w := newWorld(t)
	w.groups = []int{2, 1}
	deltas := w.honest(t)
	var calls int
	res, err := epoch.Evaluate(context.Background(), w.input(deltas, w.replay(&calls)))
	if err != nil {
		t.Fatal(err)
	}
	if r := res.Report; len(r.RingDisagreements) != 0 || len(r.RingUnknown) != 0 || len(r.Excluded) != 0 {
		t.Fatalf("groups known: disagreements %v, unknown %v, excluded %v", r.RingDisagreements, r.RingUnknown, r.Excluded)
	}
	in := w.input(deltas, w.replay(&calls))
	in.RingGroups = nil
	res, err = epoch.Evaluate(context.Background(), in)
	if err != nil {
		t.Fatal(err)
	}
	if r := res.Report; len(r.RingDisagreements) == 0 && len(r.RingUnknown) == 0 {
		t.Fatal("the two-level ring's result rebuilt as a flat ring's: the orders should differ in some bit")
	}
}
