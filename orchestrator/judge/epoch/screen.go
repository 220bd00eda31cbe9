package epoch

import (
	"context"
	"fmt"
	"slices"
	"sort"

	"github.com/zooai/gym/model/llama"
	"github.com/zooai/gym/protocol/jobconf"
	"github.com/zooai/gym/protocol/jobspec"
	"github.com/zooai/gym/protocol/merge"
	"github.com/zooai/gym/protocol/ring"
)

// Rebase is a state the epoch's honest members were told to continue
// from in place of the ring's result of one sync, after a member was
// proven to cheat while the epoch ran (docs/byzantine.md): at sync Sync's
// all-reduce every member set its adapter to Adapter and its outer
// optimiser to Outer. The ring reconstruction takes S[Sync] from here.
type Rebase struct {
	Sync    int
	Adapter *llama.Adapter
	Outer   *jobconf.Outer // nil for a plan without an outer optimiser
}

// Check is the outcome of checking one delta, by replay or from its
// traces. The epoch's screening (ScreenSync) makes checks while the epoch
// runs; Evaluate takes them back through Input.Screened instead of making
// them again.
type Check struct {
	Slot   jobspec.Slot
	Sync   int
	Digest string // the delta file's
	// Start is jobconf.Digest of the start the delta was checked from:
	// a screened check stands only where Evaluate reconstructs the same.
	Start string
	// Outlier is why merge.Outliers named the delta ("": sampled).
	Outlier string
	// Traced says the delta was checked from its traces (else replayed).
	Traced bool
	// NoChecker: a delta that only traces can check, with no checker.
	NoChecker bool
	// Missing is the first sync of the node whose traces are missing
	// (0: none): the delta cannot be checked.
	Missing int
	// Failed says the check proved the delta wrong (Offence, Detail).
	Failed  bool
	Offence string
	Detail  string
	// Trace is the trace check's outcome (Traced only). Trace.Pending:
	// validators' verdicts are awaited.
	Trace TraceCheck
}

// OutlierBudget is the most deltas of one node an epoch replays (or
// trace-checks) because the outlier tests named them, beyond those the
// keyed share samples: max(4, K/4) for an epoch of K syncs. A node cannot
// make hanzod check without bound by sending deltas that look odd but
// replay; every delta the key samples is checked whatever the budget.
func OutlierBudget(syncs int) int { return max(4, syncs/4) }

// due reports whether en is to be checked: sampled by the key at its
// node's share, or an outlier within its node's budget (used counts the
// node's outlier checks so far and is advanced), while its start is known
// and agreed.
func due(in Input, k int, en *entry, S []*llama.Adapter, used map[string]int) bool {
	bp := in.SpotCheckBP
	if in.Watched[en.Node] {
		bp = WatchedShare(bp)
	}
	if en.a == nil || S[k-1] == nil || en.Base != jobconf.Digest(S[k-1]) {
		return false
	}
	if Sampled(in.SpotKey, en.Digest, bp) {
		return true
	}
	if en.outlier == "" || used[en.Node] >= OutlierBudget(in.Plan.Syncs()) {
		return false
	}
	used[en.Node]++
	return true
}

// checkDelta checks en (of sync k, start S[k−1]): by replay, or from the
// traces of its node's syncs 1..k. A check in Input.Screened from the
// same start is taken as it is.
func checkDelta(ctx context.Context, in Input, k int, en *entry, syncs [][]*entry, S []*llama.Adapter) (Check, error) {
	start := jobconf.Digest(S[k-1])
	if c, ok := in.Screened[en.Slot]; ok && c.Start == start && !c.Trace.Pending {
		c.Outlier = en.outlier
		return c, nil
	}
	c := Check{Slot: en.Slot, Sync: k, Digest: en.Digest, Start: start, Outlier: en.outlier}
	if in.OnNodes || fromTraces(in.Plan, en.Delta) {
		c.Traced = true
		if in.CheckTraces == nil {
			c.NoChecker = true
			return c, nil
		}
		traces := make([]string, k)
		for s := 1; s <= k; s++ {
			for _, o := range syncs[s] {
				if o.Node == en.Node {
					traces[s-1] = o.Traces
				}
			}
			if traces[s-1] == "" && c.Missing == 0 {
				c.Missing = s
			}
		}
		if c.Missing > 0 {
			return c, nil
		}
		tc, err := in.CheckTraces(ctx, en.Node, traces, S[:k], en.Delta)
		if err != nil {
			return c, err
		}
		tc.Slot = en.Slot.String()
		c.Trace = tc
		if tc.Failed != "" {
			c.Failed, c.Offence, c.Detail = true, OffenceTraceCheck, tc.Failed+": "+tc.Detail
		}
		return c, nil
	}
	ok, detail, err := spotCheck(ctx, in, k, en, S)
	if err != nil {
		return c, err
	}
	if !ok {
		c.Failed, c.Offence, c.Detail = true, OffenceSpotCheck, detail
	}
	return c, nil
}

// counted reports whether the check was made (not skipped for want of a
// checker or of traces, not pending).
func (c Check) counted() bool { return !c.NoChecker && c.Missing == 0 }

// watch reports whether the node is to be watched after this check
// without being slashed: its traces were missing or the check could not
// be made through nobody's proven fault.
func (c Check) watch() bool {
	return c.Missing > 0 || (c.Trace.Failed == "" && c.Trace.Unverifiable != "" && !c.Trace.Pending)
}

// apply records the check of en in res and takes en out of the merge
// where it must be; it returns the offence when the check proved one (the
// caller forfeits the node's epoch).
func (c Check) apply(res *Result, k int, en *entry) string {
	rep := &res.Report
	switch {
	case c.NoChecker:
		rep.NotReplayed = append(rep.NotReplayed, en.Slot.String()+" ("+en.Backend+" backend; no trace checker)")
		return ""
	case c.Missing > 0:
		// Without the traces of every sync before it the update cannot be
		// recomputed (the optimiser's moments carry): the delta stays out
		// of the merge, unpunished.
		rep.NotReplayed = append(rep.NotReplayed, fmt.Sprintf("%s (%s backend; no traces of sync %d)", en.Slot, en.Backend, c.Missing))
		rep.Excluded = append(rep.Excluded, fmt.Sprintf("%s (not checkable: no traces of sync %d)", en.Slot, c.Missing))
		en.a = nil
		return ""
	}
	rep.SpotChecks++
	if en.outlier != "" {
		rep.Targeted = append(rep.Targeted, en.Slot.String()+" ("+en.outlier+")")
	}
	en.checked = true
	if c.Traced {
		if c.Trace.Pending {
			// Not decided yet (its validators' verdicts are awaited):
			// counted as passed for now, the evaluation stops before
			// scoring.
			res.Pending++
			return ""
		}
		rep.TraceChecks = append(rep.TraceChecks, c.Trace)
		if !c.Failed && c.Trace.Unverifiable != "" {
			rep.Excluded = append(rep.Excluded, fmt.Sprintf("%s (not checkable: %s)", en.Slot, c.Trace.Unverifiable))
			en.a = nil
			return ""
		}
	}
	if !c.Failed {
		return ""
	}
	rep.Excluded = append(rep.Excluded, en.Slot.String())
	res.Slashes = append(res.Slashes, Slash{Node: en.Node, Slot: en.Slot, Sync: k, Digest: en.Digest, Offence: c.Offence, Detail: c.Detail})
	en.a = nil
	// It loses every other delta of the epoch too (they are not checked:
	// one proof is enough): a cheater must not keep what it cheated for.
	return c.Offence
}

// bySync groups the deltas of in by sync (1..K), each sync's by node.
func bySync(in Input) [][]*entry {
	K := in.Plan.Syncs()
	syncs := make([][]*entry, K+1)
	for _, d := range in.Deltas {
		_, k, ok := in.Plan.SyncOf(d.Step)
		if !ok {
			continue
		}
		syncs[k] = append(syncs[k], &entry{Delta: d, a: d.Adapter})
	}
	for k := range syncs {
		sort.Slice(syncs[k], func(a, b int) bool { return syncs[k][a].Node < syncs[k][b].Node })
	}
	return syncs
}

// reconstruct rebuilds what the ring produced, S[0..upTo−1]: S[k] is the
// adapter every member held after sync k's all-reduce, rebuilt from the
// submitted deltas in the order of a ring configuration of the job; the
// right configuration is the one whose result the next sync's deltas name
// as their base (nil: unknown). Where the members were told to continue
// from a rebase state (Input.Rebases), S[k] is that state. A delta whose
// claimed start differs from what the ring produced (when that is known)
// is not comparable with the others, and could be dodging the spot-check
// by naming a false base: it is left out of the merge (not slashed: a
// corrupted ring would make honest nodes disagree too, and then no
// configuration matches at all).
func reconstruct(in Input, syncs [][]*entry, upTo int, rep *Report) ([]*llama.Adapter, error) {
	S := make([]*llama.Adapter, upTo)
	if upTo == 0 {
		return S, nil
	}
	S[0] = in.Start
	outer := in.startOuter() // the workers' outer optimiser along S
	if d := jobconf.Digest(in.Start); len(syncs) > 1 {
		for _, en := range syncs[1] {
			if en.Base != d {
				rep.RingDisagreements = append(rep.RingDisagreements, fmt.Sprintf("%s sync 1 (did not start from the checkpoint of record)", short(en.Node)))
			}
		}
	}
	rebases := map[int]Rebase{}
	for _, r := range in.Rebases {
		rebases[r.Sync] = r
	}
	for k := 1; k < upTo; k++ {
		if S[k-1] == nil {
			break
		}
		if r, ok := rebases[k]; ok {
			S[k], outer = r.Adapter, r.Outer.Clone()
		} else {
			claims := map[string]int{}
			for _, en := range syncs[k+1] {
				claims[en.Base]++
			}
			var best *llama.Adapter
			var bestOuter *jobconf.Outer
			bestVotes := 0
			for ri, order := range in.Rings {
				vecs, ok := ringInputs(order, syncs[k])
				if !ok {
					continue
				}
				var groups []int
				if ri < len(in.RingGroups) {
					groups = in.RingGroups[ri]
				}
				mean, err := ring.ReferenceGroups(vecs, groups, ring.Mean, ring.FP32)
				if err != nil {
					continue
				}
				c, o := S[k-1].Clone(), outer.Clone()
				if err := o.Apply(c, mean); err != nil {
					return nil, err
				}
				if v := claims[jobconf.Digest(c)]; v > bestVotes {
					best, bestOuter, bestVotes = c, o, v
				}
			}
			if best == nil {
				rep.RingUnknown = append(rep.RingUnknown, k)
				break
			}
			S[k], outer = best, bestOuter
		}
		d := jobconf.Digest(S[k])
		for _, en := range syncs[k+1] {
			if en.Base != d {
				rep.RingDisagreements = append(rep.RingDisagreements, fmt.Sprintf("%s sync %d", short(en.Node), k+1))
			}
		}
	}
	for k := 1; k <= upTo && k < len(syncs); k++ {
		if S[k-1] == nil {
			continue
		}
		d := jobconf.Digest(S[k-1])
		for _, en := range syncs[k] {
			if en.Base != d {
				en.a = nil
				rep.Excluded = append(rep.Excluded, en.Slot.String()+" (base disagrees with the ring)")
			}
		}
	}
	return S, nil
}

// startOuter is a copy of the outer optimiser the epoch starts with.
func (in Input) startOuter() *jobconf.Outer {
	if in.StartOuter != nil {
		return in.StartOuter.Clone()
	}
	return in.Plan.NewOuter()
}

// mergeConfig is the merge of a sync of n deltas: the job's rule and f,
// or, when n is too few for the declared f, what the rule can still
// defend, with the reason (nil: none).
func (in Input) mergeConfig(n int) (merge.Config, error) {
	c := merge.Config{Rule: in.Rule, Byzantine: in.Byzantine}
	f := merge.CheckDefensible(in.Rule, n, c.Byzantine)
	if f != nil {
		c.Byzantine = max(0, (n-1)/3)
		if in.Rule == merge.Mean {
			c.Byzantine = 0
		}
	}
	return c, f
}

// Screened is what screening one sync found.
type Screened struct {
	Sync   int
	Checks []Check // the checks made, in node order
	// Slashes are the offences the checks proved (one per node at most).
	Slashes []Slash
	// Outliers: slot → why merge.Outliers named the delta.
	Outliers map[jobspec.Slot]string
	// Unknown says the sync's start could not be reconstructed (no ring
	// configuration gives what its deltas name): nothing was checked.
	Unknown bool
}

// ScreenSync checks the deltas of sync k while the epoch runs (docs/byzantine.md):
// the model-free tests of merge.Outliers over the sync's deltas still in,
// and a check (replay or traces) of every outlier and every delta the key
// samples, from the ring's reconstructed start S[k−1]. in holds the
// epoch's deltas of syncs 1..k (later ones are ignored), the offenders
// known so far and the rebases told so far; in.Screened, the checks made
// before (they are not made again). The caller slashes and ejects what
// Slashes names at once, and passes every Check back to Evaluate through
// Input.Screened.
func ScreenSync(ctx context.Context, in Input, k int) (*Screened, error) {
	if in.Start == nil || (in.Replay == nil && !in.OnNodes) {
		return nil, fmt.Errorf("epoch: Screen needs the start checkpoint and a replayer")
	}
	if k < 1 || k > in.Plan.Syncs() {
		return nil, fmt.Errorf("epoch: Screen of sync %d of %d", k, in.Plan.Syncs())
	}
	syncs := bySync(in)
	var rep Report
	S, err := reconstruct(in, syncs, k, &rep)
	if err != nil {
		return nil, err
	}
	out := &Screened{Sync: k, Outliers: map[jobspec.Slot]string{}}
	if S[k-1] == nil {
		out.Unknown = true
		return out, nil
	}
	for s := 1; s <= k; s++ {
		for _, en := range syncs[s] {
			if _, ok := in.Offenders[en.Node]; ok {
				en.a = nil
			}
		}
	}
	if in.SpotCheckBP > 0 {
		if err := markOutliers(in.Outliers, syncs[k]); err != nil {
			return nil, fmt.Errorf("epoch: outliers of sync %d: %w", k, err)
		}
	}
	// The outlier checks of each node's earlier syncs count against its
	// budget.
	used := map[string]int{}
	for _, c := range in.Screened {
		if c.Sync < k && c.Outlier != "" && !Sampled(in.SpotKey, c.Digest, in.SpotCheckBP) {
			used[c.Slot.Node]++
		}
	}
	for _, en := range syncs[k] {
		if en.outlier != "" {
			out.Outliers[en.Slot] = en.outlier
		}
		if !due(in, k, en, S, used) {
			continue
		}
		c, err := checkDelta(ctx, in, k, en, syncs, S)
		if err != nil {
			return nil, err
		}
		out.Checks = append(out.Checks, c)
		if c.Failed && !slices.ContainsFunc(out.Slashes, func(s Slash) bool { return s.Node == en.Node }) {
			out.Slashes = append(out.Slashes, Slash{Node: en.Node, Slot: en.Slot, Sync: k, Digest: en.Digest, Offence: c.Offence, Detail: c.Detail})
		}
	}
	return out, nil
}

// RebaseState is the state the members continue from at sync j after a
// cheater was ejected (docs/byzantine.md): the epoch's start stepped sync
// by sync through 1..j by the outer rule on the merge (the job's rule,
// every share weighing alike) of the deltas still in — none of a node in
// in.Offenders, none whose base disagrees with the ring. Every value is a
// function of the epoch's start, the accepted deltas and the offenders, so
// anyone holding them reaches the same bytes; the judge logs the state's
// digest and the members check what they fetch against it.
func RebaseState(in Input, j int) (*llama.Adapter, *jobconf.Outer, error) {
	if j < 1 || j >= in.Plan.Syncs() {
		return nil, nil, fmt.Errorf("epoch: a rebase at sync %d of %d", j, in.Plan.Syncs())
	}
	syncs := bySync(in)
	var rep Report
	if _, err := reconstruct(in, syncs, j, &rep); err != nil {
		return nil, nil, err
	}
	T, outer := in.Start.Clone(), in.startOuter()
	for k := 1; k <= j; k++ {
		var mi []merge.Input
		for _, en := range syncs[k] {
			if _, bad := in.Offenders[en.Node]; bad || en.a == nil {
				continue
			}
			mi = append(mi, merge.Input{Node: en.Node, Vec: jobconf.Flatten(en.a), Quality: 1})
		}
		if len(mi) == 0 {
			continue
		}
		c, _ := in.mergeConfig(len(mi))
		u, _, err := merge.Merge(c, mi)
		if err != nil {
			return nil, nil, fmt.Errorf("epoch: rebase merge of sync %d: %w", k, err)
		}
		if err := outer.Apply(T, u); err != nil {
			return nil, nil, err
		}
	}
	return T, outer, nil
}
