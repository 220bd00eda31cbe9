// Package epoch holds the judge's decisions about an epoch's deltas as
// pure functions of their inputs.
//
// Admit judges one submitted delta against its job's standing (the sync
// its step ends, its claims, the slot — a duplicate or equivocation —, its
// sequence, the epoch and membership, shapes, finite values, the norm
// bound, a re-signed copy of the node's earlier tensors) and names the
// offence it proves, if any. Screen is its first half, which needs only
// the declared names, dtypes and shapes of the tensors: what it refuses is
// never decompressed.
//
// Evaluate decides the end of an epoch. Given the deltas accepted for it
// (decoded), the checkpoint it started from, the ring configurations the
// job went through and the job's plan, it reconstructs what an honest ring
// produced from the submitted deltas (ring.Reference, bit for bit) and
// flags the nodes whose claimed base disagrees, re-executes a keyed share
// of the deltas by deterministic replay (the re-execution is passed in)
// and every delta that stands apart from its sync's others
// (merge.Outliers: too far from the robust centre or too close to it, a
// copy of another, a norm far from the median),
// leaves every delta of a node slashed in the epoch (on submission or by a
// failed spot-check) out of the merge and its reward,
// scores every delta (q = α·ΔL + β·S + γ·C on a held-out shard), merges
// each sync's deltas with the job's rule into the checkpoint of record and
// says what follows: the slashes of failed spot-checks and the epoch's
// reward contributions.
//
// Nothing here reads files, touches the engine, a clock or a logger: the
// judge (package judge) loads the inputs, issues the commands, writes and
// publishes the checkpoint. What it computes is deterministic, so a merge
// repeated after a restart gives the same bytes.
package epoch

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"sort"

	"github.com/zooai/gym/model/basemodel"
	"github.com/zooai/gym/model/llama"
	"github.com/zooai/gym/model/rollout"
	"github.com/zooai/gym/model/trainer"
	"github.com/zooai/gym/orchestrator/ledger"
	"github.com/zooai/gym/protocol/evalpkg"
	"github.com/zooai/gym/protocol/jobconf"
	"github.com/zooai/gym/protocol/jobspec"
	"github.com/zooai/gym/protocol/merge"
)

// OffenceSpotCheck is the offence of a delta that does not replay.
const OffenceSpotCheck = "spot_check"

// OffenceTraceCheck is the offence of a delta its own traces contradict
// (tracecheck.CheckSync: prompts, rewards, log-probabilities, update or
// loss).
const OffenceTraceCheck = "trace_check"

// Delta is one delta accepted for the epoch, decoded.
type Delta struct {
	Slot        jobspec.Slot
	Node        string
	Step        uint64 // global step its sync ends at
	Digest      string // signature digest of its file
	Base        string // the base_checkpoint it claims (jobconf.Digest of its sync's start)
	ClaimedLoss float64
	Adapter     *llama.Adapter // the contribution
	// Backend is the training backend the delta's metadata claims: "go"
	// (or "") or "torch". A torch delta cannot be replayed bit for bit; it
	// is exempt from the spot-check only when the job's backend allows
	// torch (Plan.Backend torch or any): on a go job every delta is
	// replayed whatever it claims.
	Backend string
	// DType is the floating-point type the delta's metadata says it was
	// trained in (jobconf.DTypeOf: "float32" or "bfloat16"): a trace
	// check admits that type's rounding (tracecheck.Tolerances).
	DType string
	// Traces is the CID of the sync's trace bundle the delta names ("":
	// none; a torch delta is accepted only with one).
	Traces string
}

// TraceChecker checks a delta of sync k = len(starts) of node from the
// traces of the node's syncs 1..k (traces[s] the CID its sync s+1 delta
// named, "" when there is none): tracecheck.CheckSync with the tolerances
// of d's backend, from starts (the checkpoint of record, then the ring
// results).
type TraceChecker func(ctx context.Context, node string, traces []string, starts []*llama.Adapter, d Delta) (TraceCheck, error)

// TraceCheck is the outcome of checking one delta from its traces, with
// the measured differences (docs/traces.md has the tolerances).
type TraceCheck struct {
	Slot    string `json:"slot"`
	Backend string `json:"backend"`
	DType   string `json:"dtype,omitempty"` // the delta's, jobconf.DTypeOf
	// Pending says the check is not decided yet (validators' verdicts
	// awaited); the rest is empty.
	Pending bool `json:"-"`
	// Validators are the validators whose verdicts decided the check
	// ("hanzod" when hanzod checked it itself for a job with validators);
	// empty when hanzod checked a job without validators.
	Validators []string `json:"validators,omitempty"`
	// Failed names the check that failed ("" passed); Detail says how.
	Failed string `json:"failed,omitempty"`
	Detail string `json:"detail,omitempty"`
	// Unverifiable says why the delta could not be checked through nobody's
	// proven fault (an environment server that failed too often): it is
	// left out of the merge, unpunished.
	Unverifiable string `json:"unverifiable,omitempty"`
	// EnvFailed and CheckerEnvFailed count the rewards the node's server
	// calls and the checker's failed to get.
	EnvFailed        int `json:"env_failed,omitempty"`
	CheckerEnvFailed int `json:"checker_env_failed,omitempty"`
	// The measured differences (−1: not a finite number).
	Steps      int     `json:"steps"`
	Tokens     int     `json:"tokens"`
	LogProbMax float64 `json:"logprob_max"`
	RelL2      float64 `json:"update_rel_l2"`
	Cosine     float64 `json:"update_cosine"`
	LossDiff   float64 `json:"loss_diff"`
	// Scale is the delta's length along the recomputed update (1 for
	// the update itself, 1.5 for it ×1.5; tracecheck.SyncReport.Scale);
	// absent where the check stopped before the update, or a validator's
	// verdict did not give it.
	Scale float64 `json:"update_scale,omitempty"`
}

// Replayer re-executes node's training of syncs 1..k of the epoch exactly
// as a worker does: from starts[0] at the epoch's first step, Interval
// steps a sync, continuing after sync s < k from starts[s] with the
// optimiser state kept. It returns the adapter at the end of sync k, the
// losses of sync k's steps and, where it can, their samples. len(starts)
// is k.
type Replayer func(ctx context.Context, node string, k int, starts []*llama.Adapter) (Replayed, error)

// Replayed is what a replay of one sync gives.
type Replayed struct {
	Adapter *llama.Adapter
	Losses  []float64
	// Samples are the completions each of the sync's steps sampled, in
	// order (nil: the replayer does not say).
	Samples [][]Sample
}

// Sample is one sampled completion as a trace records it: what a replay
// compares a delta's traces with.
type Sample struct {
	PromptIDs, CompletionIDs []int
	Reward                   float64
}

// SampleReader reads the samples a delta's trace bundle claims, step by
// step (Input.ClaimedSamples).
type SampleReader func(ctx context.Context, d Delta) ([][]Sample, error)

// Input is everything an epoch's evaluation depends on.
type Input struct {
	Job         string
	Epoch       int
	Plan        jobconf.Plan
	Rule        merge.Rule
	Byzantine   int    // the f the job declared
	SpotCheckBP int    // share of deltas replayed, in basis points
	SpotKey     []byte // secret keying which deltas are replayed (hanzod's key seed)
	// Outliers says which deltas are replayed besides the keyed share
	// (merge.Outliers over each sync's deltas; zero: the defaults). They
	// are replayed only when SpotCheckBP > 0.
	Outliers merge.OutlierConfig

	Start *llama.Adapter // the checkpoint of record the epoch started from
	// StartOuter is the outer optimiser's state the epoch started from:
	// the previous checkpoint of record's (jobconf.OuterFile) when the
	// plan carries it across epochs, nil for a fresh one (plan.NewOuter).
	// Evaluate does not change it.
	StartOuter *jobconf.Outer
	Deltas     []Delta // accepted for the epoch, in any order
	// Offenders are the nodes proven to cheat on submission during the
	// epoch (equivocation, a replayed copy, a norm above the bound), with
	// the offence: like a node whose delta fails its spot-check, they
	// forfeit every delta of the epoch and its reward.
	Offenders map[string]string
	Rings     [][]string // the distinct ring orders the job was configured with, newest first
	// RingGroups, parallel to Rings, are the group sizes of a two-level
	// ring (ring.Config.Groups); nil or a missing entry: a flat ring. The
	// reconstruction sums in the order that ring did (ring.ReferenceGroups).
	RingGroups [][]int

	Base      *basemodel.Base // the base model scores and accuracy are measured with
	ShardSize int             // held-out problems ΔL is measured on
	EvalSize  int             // held-out problems the checkpoint's accuracy is measured on
	Threads   int
	Weights   [3]float64 // α, β, γ of the quality score
	Replay    Replayer   // re-executes a spot-checked delta
	// Watched are the nodes checked at WatchedShare instead of
	// SpotCheckBP (after a failed or missing check in an earlier epoch).
	Watched map[string]bool
	// ClaimedSamples reads the samples a replayed delta's traces claim,
	// to compare with the replay's (nil: not compared).
	ClaimedSamples SampleReader
	// CheckTraces checks a sampled delta that cannot be replayed bit for
	// bit (a torch delta on a job that allows torch) from its traces; nil:
	// such deltas are not checked (Report.NotReplayed).
	CheckTraces TraceChecker

	// OnNodes says that the caller has no model to compute with (a hanzod
	// that never loads a base, docs/validators.md "Evaluations"): every
	// sampled delta is checked from its traces (CheckTraces), the syncs
	// are merged with equal weights (the quality score pays rewards, it
	// does not weigh the merge), and the held-out figures come from
	// Measured. Base may then be a ConfigOnly base.
	OnNodes bool
	// Measured are the figures validators measured for this evaluation's
	// Result.Evaluation; nil: not measured yet (Evaluate returns the
	// request and stops before scoring). Only with OnNodes.
	Measured *evalpkg.Results
	// Unmeasured, with OnNodes, says why no figures can be had (the
	// validators did not agree): the epoch is merged and published
	// unscored, its rewards paid by compute and participation only.
	Unmeasured string

	// Rebases are the states the members were told to continue from
	// while the epoch ran, after a cheater's ejection (docs/byzantine.md):
	// the reconstruction takes S[Sync] from them.
	Rebases []Rebase
	// Screened are the checks the epoch's screening made while it ran
	// (ScreenSync), by slot: a delta due for a check whose screened check was
	// made from the start Evaluate reconstructs is not checked again.
	Screened map[jobspec.Slot]Check
}

// Score is how one accepted delta fared in the merge.
type Score struct {
	Node    string  `json:"node"`
	Sync    int     `json:"sync"`
	Quality float64 `json:"quality"`
	DeltaL  float64 `json:"delta_l"`
	S       float64 `json:"s"`
	C       float64 `json:"c"`
	Norm    float64 `json:"norm"`
	Weight  float64 `json:"weight,omitempty"`
	Checked bool    `json:"spot_checked,omitempty"`
	// Unscored says the delta's sync was not scored (no held-out loss:
	// Quality, DeltaL, S and C are zero); it is merged with weight alike
	// and earns compute and participation, not quality.
	Unscored bool `json:"unscored,omitempty"`
	// Outlier says why the delta stood apart from its sync's others
	// (merge.Outliers), which had it replayed.
	Outlier string `json:"outlier,omitempty"`
}

// Report is what the merge of one epoch found; the judge writes it next to
// the checkpoint (merge-NNNN.json) and summarises it in the publication
// record. Evaluate fills everything up to Accuracy and Quality; the
// publication fields are the judge's.
type Report struct {
	Job      string   `json:"job"`
	Epoch    int      `json:"epoch"`
	Rule     string   `json:"rule"`
	Scores   []Score  `json:"scores"`
	Excluded []string `json:"excluded,omitempty"` // slots dropped by a failed spot-check
	// Forfeited lists the nodes slashed in the epoch (on submission or by
	// a spot-check): all their deltas of the epoch are left out of the
	// merge and they earn nothing for it.
	Forfeited []string `json:"forfeited,omitempty"`
	// RingDisagreements lists nodes whose claimed base for a sync differs
	// from what the ring should have produced from the submitted deltas.
	RingDisagreements []string `json:"ring_disagreements,omitempty"`
	// RingUnknown lists syncs whose ring result matched no configuration.
	RingUnknown []int `json:"ring_unknown,omitempty"`
	SpotChecks  int   `json:"spot_checks"`
	// NotReplayed lists the slots a spot-check would have replayed but
	// that a torch backend made (on a job that allows it) and that could
	// not be checked from traces (no checker, or an earlier sync's traces
	// missing): they get the norm checks and the robust merge only.
	NotReplayed []string `json:"not_replayed,omitempty"`
	// TraceChecks are the sampled torch deltas checked from their traces,
	// with what each check measured.
	TraceChecks []TraceCheck `json:"trace_checks,omitempty"`
	// Targeted lists the slots replayed because they stood apart from
	// their sync's others, and why (merge.Outliers).
	Targeted []string `json:"targeted,omitempty"`
	// Unmeasured says why the epoch's held-out figures could not be had
	// (on nodes, when its validators did not agree): it was merged and
	// published unscored.
	Unmeasured string `json:"unmeasured,omitempty"`
	// Ejections are the cheaters proven, slashed and ejected while the
	// epoch ran (the judge's screening, docs/byzantine.md); Rebases the
	// syncs at which the members continued from a rebuilt state.
	Ejections []Ejection `json:"ejections,omitempty"`
	Rebases   []int      `json:"rebases,omitempty"`
	// Evaluators are the validators whose agreeing figures scored the
	// epoch (on nodes; empty where hanzod measured them itself).
	Evaluators []string `json:"evaluators,omitempty"`
	// AccuracyBefore is the start's held-out accuracy (the base's),
	// measured in the first epoch (0 in the others).
	AccuracyBefore float64 `json:"accuracy_before,omitempty"`
	LossBefore     float64 `json:"loss_before"`
	LossAfter      float64 `json:"loss_after"`
	Accuracy       float64 `json:"accuracy"`
	Quality        float64 `json:"quality"` // mean over accepted deltas
	CID            string  `json:"cid"`
	WeightsCID     string  `json:"weights_cid"`
	MergeSeconds   float64 `json:"merge_seconds"`
	CheckpointDir  string  `json:"checkpoint_dir"`
}

// Ejection is a cheater proven while its epoch ran: the sync of the
// delta that proved it, the node's first sync of the epoch and the sync
// the epoch had reached (the highest any member had submitted) when it
// was ejected; Seconds from its first accepted delta of the epoch to the
// ejection (the lag from its first possible bad contribution).
type Ejection struct {
	Node      string  `json:"node"`
	Offence   string  `json:"offence"`
	Sync      int     `json:"proven_sync"`
	FirstSync int     `json:"first_sync"`
	Reached   int     `json:"reached_sync"`
	Syncs     int     `json:"lag_syncs"`
	Seconds   float64 `json:"lag_seconds"`
}

// Slash is a proven offence to punish: the node is slashed, with its
// delta file as evidence, and ejected.
type Slash struct {
	Node    string
	Slot    jobspec.Slot
	Sync    int
	Digest  string // of the delta file the evidence keeps
	Offence string
	Detail  string // what the replay found
}

// Shortfall is a sync merged with fewer deltas than the declared f needs:
// the rule defended what it still could (Byzantine lowered).
type Shortfall struct {
	Sync   int
	Deltas int
	Err    error
}

// Result is the evaluation of an epoch: the report, the checkpoint of
// record and the commands that follow from it.
type Result struct {
	Report Report
	Merged *llama.Adapter
	// Outer is the outer optimiser's state after the epoch's merges into
	// the checkpoint of record: what the next epoch starts from when the
	// plan carries it (jobconf.Plan.CarriesOuter).
	Outer      *jobconf.Outer
	Slashes    []Slash               // in the order found
	Rewards    []ledger.Contribution // the epoch's contributions by node, sorted; empty: none
	Shortfalls []Shortfall
	// Evaluation, with Input.OnNodes and no Measured figures, is what
	// validators must measure before the epoch can be scored: the
	// evaluation stopped after merging, and the caller evaluates again
	// with Input.Measured once the figures are decided.
	Evaluation *evalpkg.Request
	// Pending counts the trace checks the checker could not decide yet
	// (TraceCheck.Pending): the evaluation stopped before scoring and
	// merging, and only Slashes, Watch and the report's checks so far are
	// filled; the caller evaluates again once they are decided.
	Pending int
	// Watch lists the nodes, sorted, whose check failed, was unverifiable
	// or could not be made (traces missing) this epoch: the judge checks
	// their next epochs' deltas at WatchedShare.
	Watch []string
}

// WatchedShare is the share, in basis points, at which a watched node's
// deltas are checked when the job's share is bp: four times it, at least
// half of them, at most all (0 stays 0: a job that checks nothing).
func WatchedShare(bp int) int {
	if bp <= 0 {
		return 0
	}
	return min(10_000, max(4*bp, 5_000))
}

// Sampled reports whether the delta with file digest digest is
// spot-checked at a share of bp basis points: a hash keyed by key below
// the share, so a worker cannot predict it.
func Sampled(key []byte, digest string, bp int) bool {
	h := sha256.New()
	h.Write([]byte("zoo-gym/spot-check/v1\x00"))
	h.Write(key)
	h.Write([]byte(digest))
	return int(binary.BigEndian.Uint64(h.Sum(nil))%10000) < bp
}

type entry struct {
	Delta
	a       *llama.Adapter // nil: left out of the merge
	checked bool
	outlier string // why merge.Outliers named it
}

// Evaluate reconstructs the ring, spot-checks, scores and merges every
// sync of the epoch.
func Evaluate(ctx context.Context, in Input) (*Result, error) {
	if in.Start == nil || in.Base == nil || (in.Replay == nil && !in.OnNodes) {
		return nil, errors.New("epoch: Evaluate needs the start checkpoint, the base model and a replayer")
	}
	if in.OnNodes && in.CheckTraces == nil {
		return nil, errors.New("epoch: Evaluate on nodes needs a trace checker: there is no model to replay with")
	}
	plan, e := in.Plan, in.Epoch
	res := &Result{Report: Report{Job: in.Job, Epoch: e, Rule: string(in.Rule)}}
	rep := &res.Report
	K := plan.Syncs()
	syncs := bySync(in)
	S, err := reconstruct(in, syncs, K, rep)
	if err != nil {
		return nil, err
	}

	// A node proven to cheat on submission this epoch loses its deltas
	// before any is replayed (the ring results above were still rebuilt
	// with them: the ring did add them).
	forfeit := func(node, why string) {
		if slices.Contains(rep.Forfeited, node) {
			return
		}
		rep.Forfeited = append(rep.Forfeited, node)
		for k := 1; k <= K; k++ {
			for _, en := range syncs[k] {
				if en.Node == node && en.a != nil {
					en.a = nil
					rep.Excluded = append(rep.Excluded, en.Slot.String()+" (node slashed this epoch: "+why+")")
				}
			}
		}
	}
	watch := func(node string) {
		if !slices.Contains(res.Watch, node) {
			res.Watch = append(res.Watch, node)
			slices.Sort(res.Watch)
		}
	}
	offenders := make([]string, 0, len(in.Offenders))
	for n := range in.Offenders {
		offenders = append(offenders, n)
	}
	sort.Strings(offenders)
	for _, n := range offenders {
		forfeit(n, in.Offenders[n])
	}

	// Spot-checks: re-execute the sampled deltas and the outliers whose
	// start is known. A delta that stands apart from its sync's others is
	// replayed whether or not the keyed share samples it: the in-bound
	// attacks of the literature (ALIE, IPM, mimic, noise within the bound)
	// are all outliers of one kind or another, and none replays. Outliers
	// are found sync by sync among the deltas still in, so a node already
	// caught no longer makes its twin an outlier. A check the epoch's
	// screening already made from the same start (Input.Screened) is not
	// made again: its outcome stands.
	used := map[string]int{} // each node's outlier checks (OutlierBudget)
	for k := 1; k <= K; k++ {
		if in.SpotCheckBP > 0 {
			if err := markOutliers(in.Outliers, syncs[k]); err != nil {
				return nil, fmt.Errorf("epoch: outliers of sync %d: %w", k, err)
			}
		}
		for _, en := range syncs[k] {
			if !due(in, k, en, S, used) {
				continue
			}
			c, err := checkDelta(ctx, in, k, en, syncs, S)
			if err != nil {
				return nil, err
			}
			if sl := c.apply(res, k, en); sl != "" {
				forfeit(en.Node, sl)
				watch(en.Node)
			} else if c.watch() {
				watch(en.Node)
			}
		}
	}

	if res.Pending > 0 {
		return res, nil
	}

	if err := scoreAndMerge(in, syncs, res); err != nil {
		return nil, err
	}
	return res, nil
}

// scoreAndMerge scores every delta still in and merges sync by sync along
// the orchestrator's own trajectory T: the checkpoint of record, its
// held-out figures (from the meter where a base is at hand, or from what
// validators measured), the report's scores and the epoch's rewards. On
// nodes without figures yet it stops after the merge with the request in
// res.Evaluation.
func scoreAndMerge(in Input, syncs [][]*entry, res *Result) error {
	plan, e, K := in.Plan, in.Epoch, in.Plan.Syncs()
	rep := &res.Report
	var err error
	// Score and merge sync by sync along the orchestrator's own
	// trajectory T. The held-out figures come from the meter (a base at
	// hand) or, on nodes, from what validators measured.
	var meter *evalpkg.Meter
	if !in.OnNodes {
		if meter, err = evalpkg.NewMeter(plan, in.Base, in.ShardSize, in.EvalSize, in.Threads); err != nil {
			return err
		}
	}
	lives := make([][]*entry, K+1)
	for k := 1; k <= K; k++ {
		for _, en := range syncs[k] {
			if en.a != nil {
				lives[k] = append(lives[k], en)
			}
		}
	}
	// scoreEvery: which syncs' deltas get a held-out loss (every one, but
	// under plain SGD, whose syncs come every step: there one step's loss
	// change is mostly the shard's noise, and scoring all of them cost
	// more than the training, so about six syncs an epoch are scored, as
	// a job syncing every five of thirty steps has). On nodes the figures
	// of one evaluation are bounded (evalpkg.MaxValues): fewer syncs are
	// scored when a wide ring's would exceed it.
	scoreEvery := 1
	if plan.Trainer.SGD {
		scoreEvery = max(1, K/6)
	}
	scoreNone := false
	scored := func(k int) bool { return !scoreNone && len(lives[k]) > 0 && (k%scoreEvery == 0 || k == K) }
	scoredSyncs := func() []evalpkg.Sync {
		var out []evalpkg.Sync
		for k := 1; k <= K; k++ {
			if scored(k) {
				sy := evalpkg.Sync{Sync: k}
				for _, en := range lives[k] {
					sy.Nodes = append(sy.Nodes, en.Node)
				}
				out = append(out, sy)
			}
		}
		return out
	}
	for in.OnNodes && evalpkg.Values(scoredSyncs()) > evalpkg.MaxValues {
		if scoreEvery > K {
			scoreNone = true
			break
		}
		scoreEvery *= 2
	}
	m := in.Measured
	if !in.OnNodes || in.Unmeasured != "" {
		m = nil
	}
	if m != nil {
		if err := m.Fits(evalpkg.Info{Syncs: scoredSyncs(), StartAccuracy: e == 1}); err != nil {
			return fmt.Errorf("epoch: the measured figures do not answer this evaluation: %w", err)
		}
	}
	measuring := meter != nil || m != nil
	if in.OnNodes && !measuring {
		rep.Unmeasured = in.Unmeasured
	}
	// On nodes the first epoch also asks for the start's accuracy (the
	// base's), so that nobody needs the model to say what training gained.
	req := &evalpkg.Request{Info: evalpkg.Info{Job: in.Job, Epoch: e, ShardSize: in.ShardSize, EvalSize: in.EvalSize, Syncs: scoredSyncs(), StartAccuracy: e == 1},
		Start: in.Start}
	T := in.Start.Clone()
	outerT := in.startOuter() // the same outer optimiser along T, on the merged updates
	switch {
	case meter != nil:
		if rep.LossBefore, err = meter.Loss(T); err != nil {
			return err
		}
	case m != nil:
		rep.LossBefore = m.LossStart
	}
	var prevU []float32
	var normSum float64
	var normN int
	var qSum float64
	var qN int
	si := -1 // index of the scored sync among the measured
	w := merge.Weights{Alpha: in.Weights[0], Beta: in.Weights[1], Gamma: in.Weights[2]}
	for k := 1; k <= K; k++ {
		live := lives[k]
		if len(live) == 0 {
			continue
		}
		isScored := scored(k)
		var before float64
		if isScored {
			si++
			if in.OnNodes {
				req.Befores = append(req.Befores, T.Clone())
				ds := make([]*llama.Adapter, len(live))
				for i, en := range live {
					ds[i] = en.a
				}
				req.Deltas = append(req.Deltas, ds)
			}
			switch {
			case meter != nil:
				if before, err = meter.Loss(T); err != nil {
					return err
				}
			case m != nil:
				before = m.Syncs[si].Before
			}
		}
		for _, en := range live {
			normSum += jobconf.Norm(en.a)
			normN++
		}
		nbar := normSum / float64(normN)
		var mi []merge.Input
		var scores []Score
		for i, en := range live {
			v := jobconf.Flatten(en.a)
			n := merge.Norm(v)
			score := Score{Node: en.Node, Sync: k, Unscored: !isScored || !measuring, Norm: n, Checked: en.checked, Outlier: en.outlier}
			// Under plain SGD every share of the batch weighs alike, as
			// the ring merges them: one SGD step's loss change on a shard
			// is mostly the shard's noise, and weighting by it would make
			// the merge a randomly weighted mean. The scores still pay the
			// rewards. (Only SGD jobs leave syncs unscored.) On nodes the
			// merge does not wait on the figures: equal weights too.
			weight := 1.0
			if isScored && measuring {
				var la float64
				if meter != nil {
					if la, err = meter.Loss(evalpkg.AfterUpdate(T, en.a)); err != nil {
						return err
					}
				} else {
					la = m.Syncs[si].After[i]
				}
				cos := 0.0
				if prevU != nil {
					cos = merge.Cosine(v, prevU)
				}
				sc := merge.Quality(w, before, la, n, nbar, cos)
				score.Quality, score.DeltaL, score.S, score.C = sc.Q, sc.DeltaL, sc.S, sc.C
				qSum += sc.Q
				qN++
				if !plan.Trainer.SGD && !in.OnNodes {
					weight = sc.Q
				}
			}
			mi = append(mi, merge.Input{Node: en.Node, Vec: v, Quality: weight})
			scores = append(scores, score)
		}
		c, f := in.mergeConfig(len(mi))
		if f != nil {
			// Fewer contributors than the declared f needs: merge what the
			// rule can still defend and say so.
			res.Shortfalls = append(res.Shortfalls, Shortfall{Sync: k, Deltas: len(mi), Err: f})
		}
		u, mr, err := merge.Merge(c, mi)
		if err != nil {
			return fmt.Errorf("judge: merge of sync %d: %w", k, err)
		}
		for i := range scores {
			for _, ct := range mr.Contributions {
				if ct.Node == scores[i].Node {
					scores[i].Weight = ct.Weight
				}
			}
		}
		rep.Scores = append(rep.Scores, scores...)
		if err := outerT.Apply(T, u); err != nil {
			return err
		}
		prevU = u
	}
	if in.OnNodes && m == nil && in.Unmeasured == "" {
		// The merge is done; its figures are the validators' to measure.
		req.Final = T
		req.Seal()
		res.Evaluation = req
		return nil
	}
	if qN > 0 {
		rep.Quality = qSum / float64(qN)
	}
	switch {
	case meter != nil:
		if rep.LossAfter, err = meter.Loss(T); err != nil {
			return err
		}
		if rep.Accuracy, err = meter.Accuracy(T); err != nil {
			return err
		}
		if e == 1 {
			if rep.AccuracyBefore, err = meter.Accuracy(in.Start); err != nil {
				return err
			}
		}
	case m != nil:
		rep.LossAfter, rep.Accuracy, rep.AccuracyBefore = m.LossFinal, m.Accuracy, m.AccuracyStart
	}
	res.Merged, res.Outer = T, outerT
	res.Rewards = Rewards(plan, rep.Scores)
	return nil
}

// Rewards are the epoch's contributions by node: compute by accepted
// samples, quality by summed quality (in millionths), participation by
// syncs contributed; sorted by node.
func Rewards(plan jobconf.Plan, scores []Score) []ledger.Contribution {
	type acc struct{ samples, quality, syncs uint64 }
	by := map[string]*acc{}
	for _, s := range scores {
		a := by[s.Node]
		if a == nil {
			a = &acc{}
			by[s.Node] = a
		}
		a.samples += plan.Samples()
		a.quality += uint64(s.Quality * 1e6)
		a.syncs++
	}
	var cs []ledger.Contribution
	for node, a := range by {
		cs = append(cs, ledger.Contribution{ID: node, Compute: a.samples, Quality: a.quality, Participation: a.syncs})
	}
	sort.Slice(cs, func(a, b int) bool { return cs[a].ID < cs[b].ID })
	return cs
}

// markOutliers sets the outlier reason of the live entries of one sync
// that merge.Outliers names.
func markOutliers(c merge.OutlierConfig, es []*entry) error {
	var mi []merge.Input
	by := map[string]*entry{}
	for _, en := range es {
		if en.a != nil {
			mi = append(mi, merge.Input{Node: en.Node, Vec: jobconf.Flatten(en.a)})
			by[en.Node] = en
		}
	}
	out, err := merge.Outliers(c, mi)
	for _, o := range out {
		by[o.Node].outlier = o.Reason
	}
	return err
}

// ringInputs returns the members' deltas in ring order, if every member of
// the configuration submitted one for the sync.
func ringInputs(order []string, es []*entry) ([][]float32, bool) {
	by := map[string]*entry{}
	for _, en := range es {
		by[en.Node] = en
	}
	var out [][]float32
	for _, id := range order {
		en := by[id]
		if en == nil || en.a == nil {
			return nil, false
		}
		out = append(out, jobconf.Flatten(en.a))
	}
	return out, len(out) > 0
}

// spotCheck replays en's sync k from the start of the epoch, the
// reconstructed ring results applied between syncs, and compares the
// delta bit for bit and the claimed loss within 0.05.
func spotCheck(ctx context.Context, in Input, k int, en *entry, S []*llama.Adapter) (bool, string, error) {
	if _, err := jobconf.Worker(en.Node); err != nil {
		return false, err.Error(), nil
	}
	rp, err := in.Replay(ctx, en.Node, k, S[:k])
	if err != nil {
		return false, "", err
	}
	got, losses := rp.Adapter, rp.Losses
	d := jobconf.Sub(got, S[k-1])
	jobconf.Clip(d, in.Plan.ClipNorm(d.NumParams()))
	want, have := jobconf.Flatten(d), jobconf.Flatten(en.a)
	if len(want) != len(have) {
		return false, fmt.Sprintf("replay has %d values, the delta %d", len(want), len(have)), nil
	}
	diff := 0
	for i := range want {
		if want[i] != have[i] {
			diff++
		}
	}
	if diff > 0 {
		return false, fmt.Sprintf("replay differs in %d of %d values (claimed loss %.6g, replayed %.6g)", diff, len(want), en.ClaimedLoss, jobconf.ClaimedLoss(losses)), nil
	}
	if cl := jobconf.ClaimedLoss(losses); abs(cl-en.ClaimedLoss) > 0.05 {
		return false, fmt.Sprintf("claimed loss %.6g, replay gives %.6g", en.ClaimedLoss, cl), nil
	}
	if in.ClaimedSamples != nil && en.Traces != "" && rp.Samples != nil {
		// The traces the delta names are a signed statement of what it
		// sampled and was rewarded: they must be the replay's.
		claimed, err := in.ClaimedSamples(ctx, en.Delta)
		if err != nil {
			return false, "", err
		}
		if why := sameSamples(claimed, rp.Samples); why != "" {
			return false, "traces: " + why, nil
		}
	}
	return true, "", nil
}

// sameSamples says how the samples a delta's traces claim differ from
// the replay's ("": they do not).
func sameSamples(claimed, replayed [][]Sample) string {
	if len(claimed) != len(replayed) {
		return fmt.Sprintf("%d steps traced, the replay took %d", len(claimed), len(replayed))
	}
	for s := range claimed {
		if len(claimed[s]) != len(replayed[s]) {
			return fmt.Sprintf("step %d: %d completions traced, the replay sampled %d", s+1, len(claimed[s]), len(replayed[s]))
		}
		for i, c := range claimed[s] {
			r := replayed[s][i]
			switch {
			case !slices.Equal(c.PromptIDs, r.PromptIDs):
				return fmt.Sprintf("step %d completion %d: another prompt than the replay's", s+1, i)
			case !slices.Equal(c.CompletionIDs, r.CompletionIDs):
				return fmt.Sprintf("step %d completion %d: another completion than the replay's", s+1, i)
			case abs(c.Reward-r.Reward) > 1e-9:
				return fmt.Sprintf("step %d completion %d: reward %.6g traced, the replay's %.6g", s+1, i, c.Reward, r.Reward)
			}
		}
	}
	return ""
}

// Retrain is the Replayer of the built-in trainer: it trains node's data
// of the epoch on base with the job's plan, threads goroutines wide.
//
// Under AdamW a worker's state at a sync's start holds moments built over
// the epoch so far, so the replay trains from the epoch's start, the
// reconstructed ring results applied between syncs. Plain SGD
// (gspo.inner_optimizer sgd) carries no moments: a worker's state at the
// start of sync k is the ring's result starts[k−1], its step count and its
// optimiser's update count, each a function of k. The replay then trains
// sync k alone, the same bits as the whole replay (TestRetrainSGD) at
// 1/k of its cost; that is what makes a sync every step affordable to
// check.
func Retrain(base *basemodel.Base, plan jobconf.Plan, epoch, threads int) Replayer {
	return func(ctx context.Context, node string, k int, starts []*llama.Adapter) (Replayed, error) {
		worker, err := jobconf.Worker(node)
		if err != nil {
			return Replayed{}, err
		}
		if k < 1 || len(starts) < k {
			return Replayed{}, fmt.Errorf("epoch: replay of sync %d given %d ring results", k, len(starts))
		}
		first, st := 1, trainer.State{Step: plan.FirstStep(epoch), Adapter: starts[0]}
		if plan.Trainer.SGD {
			done := (k - 1) * plan.Interval
			first, st = k, trainer.State{Step: plan.FirstStep(epoch) + done, Adapter: starts[k-1], Updates: done * plan.Trainer.NumIterations}
		}
		tr, err := trainer.Resume(base.Weights, base.Tokenizer, plan.Trainer, worker, threads, st)
		if err != nil {
			return Replayed{}, err
		}
		var out Replayed
		for s := first; s <= k; s++ {
			out.Losses, out.Samples = out.Losses[:0], out.Samples[:0]
			for range plan.Interval {
				st, err := tr.Step(ctx)
				if err != nil {
					return Replayed{}, err
				}
				out.Losses = append(out.Losses, st.Loss)
				out.Samples = append(out.Samples, samplesOf(tr.Rollouts()))
			}
			if s == k {
				break
			}
			if tr, err = tr.Rebase(starts[s]); err != nil {
				return Replayed{}, err
			}
		}
		out.Adapter = tr.Adapter()
		return out, nil
	}
}

// samplesOf are a step's rollouts as a trace records them (nil for none).
func samplesOf(ro *rollout.Rollouts) []Sample {
	if ro == nil {
		return nil
	}
	out := make([]Sample, len(ro.Rewards))
	for i := range out {
		out[i] = Sample{PromptIDs: ro.Prompts[i/ro.G], CompletionIDs: ro.Completions[i], Reward: ro.Rewards[i]}
	}
	return out
}

func short(id string) string {
	if len(id) > 12 {
		return id[:12]
	}
	return id
}

func abs(x float64) float64 {
	if x < 0 {
		return -x
	}
	return x
}

// fromTraces reports whether d is checked from its traces rather than
// replayed exactly: a torch delta on a job that allows torch, and every
// delta of a job whose reward comes from an environment server (a replay
// would ask the server again, and a server that failed the node once
// cannot be made to fail the replay the same way), and every delta of a
// job whose checks validators make (they check from traces, exactly for
// the go backend: docs/validators.md).
func fromTraces(plan jobconf.Plan, d Delta) bool {
	return torchExempt(plan, d) || plan.EnvReward() || plan.Validators > 0
}

// torchExempt reports whether d is exempt from exact replay: it claims the
// torch backend and the job allows that backend.
func torchExempt(plan jobconf.Plan, d Delta) bool {
	return d.Backend == "torch" && (plan.Backend == "torch" || plan.Backend == "any")
}
