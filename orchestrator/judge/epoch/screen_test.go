package epoch_test

import (
	"context"
	"slices"
	"testing"

	"github.com/zooai/gym/model/llama"
	"github.com/zooai/gym/orchestrator/judge/epoch"
	"github.com/zooai/gym/protocol/jobconf"
	"github.com/zooai/gym/protocol/jobspec"
	"github.com/zooai/gym/protocol/merge"
	"github.com/zooai/gym/protocol/ring"
)

// fourSyncs is a world of four syncs of one step each.
func fourSyncs(t *testing.T) *world {
	t.Helper()
	return newWorldWith(t, func(s *jobspec.Spec) { s.StepsPerEpoch = 4 })
}

// upTo returns the deltas of ds of syncs 1..k (one step a sync, epoch 1).
func upTo(ds []epoch.Delta, k int) []epoch.Delta {
	var out []epoch.Delta
	for _, d := range ds {
		if d.Step <= uint64(k) {
			out = append(out, d)
		}
	}
	return out
}

// The screening of a sync replays the sync's outliers as soon as its
// deltas are in: a delta far larger than its sync's others is proven
// wrong at sync 1, the honest ones are not, and nothing of later syncs is
// needed.
func TestScreenSyncCatchesOutlier(t *testing.T) {
	w := fourSyncs(t)
	c := w.nodes[2]
	ds := upTo(w.honest(t), 1)
	i := find(ds, c, 1)
	bad := ds[i].Adapter.Clone()
	v := jobconf.Flatten(bad)
	for j := range v {
		v[j] *= 8
	}
	bad = w.start.Zeroed()
	if err := jobconf.AddFlat(bad, v); err != nil {
		t.Fatal(err)
	}
	ds[i].Adapter = bad
	var calls int
	in := w.input(ds, w.replay(&calls))
	in.SpotCheckBP, in.SpotKey = 1, []byte("a key sampling none of these digests")
	for _, d := range ds {
		if epoch.Sampled(in.SpotKey, d.Digest, in.SpotCheckBP) {
			t.Fatalf("%s is sampled: pick another key", d.Digest)
		}
	}
	res, err := epoch.ScreenSync(context.Background(), in, 1)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Slashes) != 1 || res.Slashes[0].Node != c || res.Slashes[0].Offence != epoch.OffenceSpotCheck {
		t.Fatalf("slashes %+v; want %s's spot-check", res.Slashes, c[:8])
	}
	if res.Outliers[ds[i].Slot] == "" || len(res.Checks) != calls {
		t.Fatalf("outliers %v, %d checks, %d replays", res.Outliers, len(res.Checks), calls)
	}
	for _, ch := range res.Checks {
		if ch.Failed != (ch.Slot.Node == c) {
			t.Fatalf("check of %s: failed %v", ch.Slot.Node[:8], ch.Failed)
		}
	}
	// Without the outlier tests and the share nothing is checked: the
	// screening proves only what it replays.
	in.Outliers = merge.OutlierConfig{Far: -1, Near: -1, Twin: -1, Small: -1, Large: -1}
	calls = 0
	if res, err = epoch.ScreenSync(context.Background(), in, 1); err != nil || len(res.Slashes) != 0 || calls != 0 {
		t.Fatalf("without outlier tests: slashes %+v, %d replays, %v", res, calls, err)
	}
}

// The checks the screening made are not made again at the epoch's end,
// and the evaluation comes out as it does when it makes them itself.
func TestEvaluateTakesScreenedChecks(t *testing.T) {
	w := fourSyncs(t)
	ds := w.honest(t)
	K := w.plan.Syncs()
	var screenCalls int
	screened := map[jobspec.Slot]epoch.Check{}
	for k := 1; k <= K; k++ {
		in := w.input(upTo(ds, k), w.replay(&screenCalls))
		in.Screened = screened
		res, err := epoch.ScreenSync(context.Background(), in, k)
		if err != nil {
			t.Fatal(err)
		}
		if res.Unknown || len(res.Slashes) > 0 {
			t.Fatalf("sync %d of honest nodes: unknown %v, slashes %+v", k, res.Unknown, res.Slashes)
		}
		for _, c := range res.Checks {
			screened[c.Slot] = c
		}
	}
	if screenCalls != 3*K || len(screened) != 3*K {
		t.Fatalf("the screening replayed %d deltas (%d checks) at a share of all; want %d", screenCalls, len(screened), 3*K)
	}
	var calls, fresh int
	in := w.input(ds, w.replay(&calls))
	in.Screened = screened
	got, err := epoch.Evaluate(context.Background(), in)
	if err != nil {
		t.Fatal(err)
	}
	want, err := epoch.Evaluate(context.Background(), w.input(ds, w.replay(&fresh)))
	if err != nil {
		t.Fatal(err)
	}
	if calls != 0 || fresh != 3*K {
		t.Fatalf("the evaluation replayed %d deltas with the screened checks, %d without; want 0 and %d", calls, fresh, 3*K)
	}
	if got.Report.SpotChecks != want.Report.SpotChecks || jobconf.Digest(got.Merged) != jobconf.Digest(want.Merged) || len(got.Slashes) != 0 {
		t.Fatalf("with screened checks: %d checks, merged %s, slashes %+v; without: %d, %s",
			got.Report.SpotChecks, jobconf.Digest(got.Merged)[:12], got.Slashes, want.Report.SpotChecks, jobconf.Digest(want.Merged)[:12])
	}
	// A screened check made from another start than the one the
	// evaluation reconstructs does not stand: the delta is replayed.
	for sl, c := range screened {
		c.Start = "another start"
		screened[sl] = c
		break
	}
	calls = 0
	if _, err := epoch.Evaluate(context.Background(), in); err != nil || calls != 1 {
		t.Fatalf("one screened check from another start: %d replays, %v; want 1", calls, err)
	}
}

// After a cheater's ejection the members continue from the rebase state:
// the honest deltas of syncs 1..j merged and stepped from the start. The
// judge's reconstruction takes S[j] from it, so the deltas trained from it
// agree with the ring and replay; without the rebase they would disagree.
func TestRebaseState(t *testing.T) {
	for _, outer := range []string{"plain", "adam"} {
		t.Run(outer, func(t *testing.T) {
			w := newWorldWith(t, func(s *jobspec.Spec) {
				s.StepsPerEpoch = 4
				if outer == "adam" {
					s.GSPO.OuterOptimizer, s.GSPO.OuterLR = "adam", 1e-3
				}
			})
			a, b, c := w.nodes[0], w.nodes[1], w.nodes[2]
			const j = 2 // the rebase's sync
			ds := upTo(w.honest(t), j)
			var calls int
			in := w.input(ds, w.replay(&calls))
			in.Offenders = map[string]string{c: "spot_check"}
			R, o, err := epoch.RebaseState(in, j)
			if err != nil {
				t.Fatal(err)
			}
			// By hand: the mean of a's and b's deltas of each sync,
			// stepped by the outer rule.
			T, ot := w.start.Clone(), w.startOuter()
			for k := 1; k <= j; k++ {
				u, _, err := merge.Merge(merge.Config{Rule: merge.Mean}, []merge.Input{
					{Node: a, Vec: jobconf.Flatten(ds[find(ds, a, k)].Adapter), Quality: 1},
					{Node: b, Vec: jobconf.Flatten(ds[find(ds, b, k)].Adapter), Quality: 1}})
				if err != nil {
					t.Fatal(err)
				}
				if err := ot.Apply(T, u); err != nil {
					t.Fatal(err)
				}
			}
			if jobconf.Digest(R) != jobconf.Digest(T) {
				t.Fatal("the rebase state is not the honest deltas' merge")
			}
			if _, _, err := epoch.RebaseState(in, w.plan.Syncs()); err == nil {
				t.Fatal("a rebase at the last sync (not all-reduced) was computed")
			}
			// Syncs j+1.. trained from R by a and b (c is gone), the ring
			// all-reducing the two.
			starts := []*llama.Adapter{nil, nil, R}
			on := o.Clone()
			order := []string{w.order[0], w.order[2]}
			if !slices.Contains(order, a) || !slices.Contains(order, b) {
				order = []string{b, a}
			}
			rp := w.replay(new(int))
			for k := j + 1; k <= w.plan.Syncs(); k++ {
				by := map[string]*llama.Adapter{}
				for _, n := range []string{a, b} {
					full := make([]*llama.Adapter, k)
					full[k-1] = starts[k-1]
					r, err := rp(context.Background(), n, k, full)
					if err != nil {
						t.Fatal(err)
					}
					got, losses := r.Adapter, r.Losses
					d := jobconf.Sub(got, starts[k-1])
					by[n] = d
					step := uint64(w.plan.SyncStep(1, k))
					ds = append(ds, epoch.Delta{Slot: jobspec.Slot{Epoch: 1, Step: step, Node: n}, Node: n, Step: step, Digest: "after-" + n[:8] + string(rune('0'+k)),
						Base: jobconf.Digest(starts[k-1]), ClaimedLoss: jobconf.ClaimedLoss(losses), Adapter: d})
				}
				mean, err := ring.ReferenceGroups([][]float32{jobconf.Flatten(by[order[0]]), jobconf.Flatten(by[order[1]])}, nil, ring.Mean, ring.FP32)
				if err != nil {
					t.Fatal(err)
				}
				s := starts[k-1].Clone()
				if err := on.Apply(s, mean); err != nil {
					t.Fatal(err)
				}
				starts = append(starts, s)
			}
			in = w.input(ds, w.replay(&calls))
			in.Offenders = map[string]string{c: "spot_check"}
			in.Rings = [][]string{order, w.order}
			in.Rebases = []epoch.Rebase{{Sync: j, Adapter: R, Outer: o}}
			res, err := epoch.Evaluate(context.Background(), in)
			if err != nil {
				t.Fatal(err)
			}
			rep := res.Report
			if len(rep.RingDisagreements) > 0 || len(rep.RingUnknown) > 0 || len(res.Slashes) > 0 {
				t.Fatalf("with the rebase: disagreements %q, unknown %v, slashes %+v", rep.RingDisagreements, rep.RingUnknown, res.Slashes)
			}
			if len(rep.Scores) != 2*w.plan.Syncs() {
				t.Fatalf("%d deltas merged, want a's and b's %d", len(rep.Scores), 2*w.plan.Syncs())
			}
			in.Rebases = nil
			if res, err = epoch.Evaluate(context.Background(), in); err != nil {
				t.Fatal(err)
			}
			if len(res.Report.RingDisagreements) == 0 && !slices.Contains(res.Report.RingUnknown, j) {
				t.Fatalf("without the rebase the deltas trained from its state agree with the ring (unknown %v)", res.Report.RingUnknown)
			}
		})
	}
}

// A node whose every delta stands apart but replays (an odd honest node,
// or one trying to make hanzod work) is checked for at most its outlier
// budget an epoch, beyond the keyed sample; the screening and the end of
// the epoch keep one count.
func TestOutlierBudget(t *testing.T) {
	w := newWorldWith(t, func(s *jobspec.Spec) { s.StepsPerEpoch = 24 })
	c := w.nodes[2]
	w.scale = map[string]float64{c: 6}
	ds := w.honest(t)
	K := w.plan.Syncs()
	budget := epoch.OutlierBudget(K)
	if budget != 6 {
		t.Fatalf("budget %d for %d syncs, want 6", budget, K)
	}
	var calls int
	by := map[string]int{}
	counted := func() epoch.Replayer {
		rp := w.replay(&calls)
		return func(ctx context.Context, node string, k int, starts []*llama.Adapter) (epoch.Replayed, error) {
			by[node]++
			return rp(ctx, node, k, starts)
		}
	}
	in := w.input(ds, counted())
	in.SpotCheckBP, in.SpotKey = 1, []byte("a key sampling none of these digests")
	for _, d := range ds {
		if epoch.Sampled(in.SpotKey, d.Digest, in.SpotCheckBP) {
			t.Fatalf("%s is sampled: pick another key", d.Digest)
		}
	}
	res, err := epoch.Evaluate(context.Background(), in)
	if err != nil {
		t.Fatal(err)
	}
	if by[c] != budget || len(res.Slashes) != 0 || slices.ContainsFunc(w.nodes, func(n string) bool { return by[n] > budget }) {
		t.Fatalf("replays by node %v, slashes %+v; want the budget's %d of %s's and no more of anyone's", by, res.Slashes, budget, c[:8])
	}
	calls, by = 0, map[string]int{}
	screened := map[jobspec.Slot]epoch.Check{}
	for k := 1; k <= K; k++ {
		sin := w.input(upTo(ds, k), counted())
		sin.SpotCheckBP, sin.SpotKey, sin.Screened = in.SpotCheckBP, in.SpotKey, screened
		r, err := epoch.ScreenSync(context.Background(), sin, k)
		if err != nil {
			t.Fatal(err)
		}
		for _, ch := range r.Checks {
			screened[ch.Slot] = ch
		}
	}
	if by[c] != budget || slices.ContainsFunc(w.nodes, func(n string) bool { return by[n] > budget }) {
		t.Fatalf("the screening's replays by node: %v; want the budget's %d of %s's and no more of anyone's", by, budget, c[:8])
	}
	calls = 0
	in.Screened = screened
	if _, err := epoch.Evaluate(context.Background(), in); err != nil || calls != 0 {
		t.Fatalf("after the screening the evaluation replayed %d deltas (%v), want none", calls, err)
	}
}
