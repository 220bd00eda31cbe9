package tracecheck

import (
	"context"
	"fmt"
	"math"
	"slices"

	"github.com/zooai/gym/model/llama"
	"github.com/zooai/gym/model/reward"
	"github.com/zooai/gym/model/rollout"
	"github.com/zooai/gym/model/task"
	"github.com/zooai/gym/model/tokenizer"
	"github.com/zooai/gym/model/trainer"
	"github.com/zooai/gym/protocol/jobconf"
	"github.com/zooai/gym/protocol/trace"
)

// The checks of a sync, in the order CheckSync runs them (docs/traces.md).
const (
	CheckShape    = "traces"   // the bundle has the sets and headers the sync needs
	CheckPrompts  = "prompts"  // (1) the prompts the job seed assigns to the node and step
	CheckRewards  = "rewards"  // (2) rewards recomputed from the completions, exactly
	CheckLogProbs = "logprobs" // (3) sampled tokens' log-probabilities under the claimed policy
	CheckUpdate   = "update"   // (4) the GSPO update recomputed from the traces
	CheckLoss     = "loss"     // (5) the claimed loss
)

// Tolerance is how far a recomputation may differ from what a node
// claims. The Go engine's traces and updates recompute exactly; another
// engine's (PyTorch, a GPU, bf16) differ by its rounding, which the
// tolerances admit with a margin (calibrated in docs/traces.md).
type Tolerance struct {
	// LogProbMax bounds |recorded − recomputed| of one sampled token's
	// log-probability, in nats.
	LogProbMax float64
	// UpdateRelL2 bounds ‖delta − recomputed‖ / ‖recomputed‖, and
	// UpdateCosine is the least cosine between them. UpdateScale bounds
	// |⟨delta, recomputed⟩ / ‖recomputed‖² − 1|: how far the delta's
	// length along the recomputed update is from it (an update ×1.5 is
	// 0.5 off), which another engine's rounding, mostly across the
	// update, moves far less than the other two.
	UpdateRelL2, UpdateCosine, UpdateScale float64
	// Loss bounds |claimed − recomputed| of the sync's mean loss (the
	// seeds' 0.05; 0.1 for bf16, whose honest spread reaches 0.021).
	Loss float64
	// Small, when set, replaces these tolerances for a job whose steps
	// hold fewer than SmallBelow sequences (prompts × group size): fewer
	// sequences leave more of the gradient to another engine's rounding.
	Small      *Tolerance
	SmallBelow int
}

// For is the tolerance for a job of seqs sequences a step.
func (t Tolerance) For(seqs int) Tolerance {
	if t.Small != nil && seqs < t.SmallBelow {
		return *t.Small
	}
	return t
}

// Tolerances for a backend's deltas trained in dtype (jobconf.KeyDType;
// "" is float32): exact for "go" (what the Go engine sampled and trained
// recomputes bit for bit), and for "torch" margins over the honest spread
// measured on the CPU against the Go engine's float32 replay
// (docs/traces.md, TestTorchTracesCalibration and TestTorchSyncCalibration).
// GPU runs have not been measured here (no GPU): their spread must be
// measured before a job trains that way. An unknown dtype, or a go delta
// claiming anything but float32, is an error: the judge refuses such a
// delta at submission.
func Tolerances(backend, dtype string) (Tolerance, error) {
	if dtype == "" {
		dtype = jobconf.Float32
	}
	switch {
	case (backend == "" || backend == "go") && dtype == jobconf.Float32:
		return Tolerance{LogProbMax: 0, UpdateRelL2: 0, UpdateCosine: 1 - 1e-12, UpdateScale: 0, Loss: 0.05}, nil
	case backend == "" || backend == "go":
		return Tolerance{}, fmt.Errorf("tracecheck: the go backend trains in float32 only, not %s", dtype)
	case dtype == jobconf.Float32:
		return torchFloat32, nil
	case dtype == jobconf.BFloat16:
		return torchBFloat16, nil
	}
	return Tolerance{}, fmt.Errorf("tracecheck: no tolerances for %s deltas in %s (measured: float32, bfloat16)", backend, dtype)
}

// torchFloat32 are the tolerances of PyTorch float32 on the CPU: the
// honest spread measured is at most 8.3e-6 nats per token, an update
// relative L2 error up to 1.2e-4 and a cosine above 0.99999999 (over syncs
// with process restarts).
var torchFloat32 = Tolerance{LogProbMax: 1e-3, UpdateRelL2: 1e-2, UpdateCosine: 0.9999, UpdateScale: 1e-2, Loss: 0.05}

// torchBFloat16 are the tolerances of PyTorch bfloat16 on the CPU, over
// the honest spread measured against the float32 replay (docs/traces.md:
// 30 job seeds × 2 workers, syncs 1 and 2, under AdamW with LoRA on every
// projection or on q_proj and v_proj alone, under SGD, and the localcluster
// tests' end-to-end runs). bfloat16's rounding moves an honest update
// mostly across itself and less along it: with 16 sequences a step or
// more, relative L2 error up to 0.48, cosine down to 0.88, scale along the
// update 0.833 to 1.119, so the scale catches an update ×1.5 (1.405 or
// more measured) and the cosine a delta from other traces (at most 0.36).
// With fewer sequences a step (the localcluster tests' 2 prompts × 4) the
// honest update can move a third of the way (scale down to 0.59, cosine
// 0.58): torchBFloat16Small admits that, and an update ×1.5 passes it.
// The log-probability tolerance is the earlier one (0.23 nats measured):
// completions sampled from the base of a policy still near it
// (0.005–1.8 nats) still hide under it.
var torchBFloat16 = Tolerance{LogProbMax: 1, UpdateRelL2: 0.7, UpdateCosine: 0.6, UpdateScale: 0.25, Loss: 0.1,
	Small: &torchBFloat16Small, SmallBelow: 16}

// torchBFloat16Small are bfloat16's tolerances for jobs of fewer than 16
// sequences a step: over the honest spread of 2 prompts × 4 (relative L2
// up to 0.93, cosine down to 0.58, scale 0.59 to 1.10); a delta from
// other traces (cosine at most 0.19) is still caught, an update ×1.5 is
// not.
var torchBFloat16Small = Tolerance{LogProbMax: 1, UpdateRelL2: 2, UpdateCosine: 0.3, UpdateScale: 0.6, Loss: 0.1}

// SyncInput is one node's sync k of an epoch, with everything needed to
// check it from its traces: the traces of every sync of the epoch up to
// k (the optimiser's moments carry across a sync, so the update of sync k
// depends on the steps before it).
type SyncInput struct {
	Weights   *llama.Weights
	Tokenizer *tokenizer.Tokenizer
	Config    trainer.Config // the job's (trainer.Config of its plan)
	Worker    uint64         // the node's index in the job (jobconf.Worker)
	FirstStep int            // steps of the job before the epoch
	Interval  int            // local steps per sync
	// Starts[s] is the adapter sync s+1 started from: the checkpoint of
	// record, then each ring result (after the job's outer optimiser).
	Starts []*llama.Adapter
	// Traces[s] are the node's traces of sync s+1, a set per local step.
	Traces [][]*trace.Set
	// Delta is what the node submitted for sync k = len(Starts), clipped
	// to ClipNorm as every contribution is; ClaimedLoss its claimed loss.
	Delta       *llama.Adapter
	ClipNorm    float64
	ClaimedLoss float64
	Threads     int
}

// SyncReport is what CheckSync measured. Failed names the first check
// that failed ("" when all passed) and Detail says how.
type SyncReport struct {
	Steps, Sequences, Tokens int
	// LogProbMax and LogProbMean are |recorded − recomputed| over every
	// sampled token of every step checked.
	LogProbMax, LogProbMean float64
	// RelL2 and Cosine compare the delta with the recomputed update.
	RelL2, Cosine float64
	// Scale is ⟨delta, recomputed⟩ / ‖recomputed‖²: 1 for the update
	// itself, 1.5 for the update ×1.5.
	Scale float64
	// Loss is the recomputed mean loss of sync k; LossDiff its distance
	// from the claim.
	Loss, LossDiff float64
	Failed, Detail string
	// Unverifiable says why the sync could not be checked, through nobody's
	// proven fault (its environment server failed too often, for the node
	// or for the checker); "" when it could.
	Unverifiable string
	// EnvFailed counts the rewards the node's traces say its environment
	// server failed to give, and CheckerEnvFailed those the checker's
	// own calls could not re-ask.
	EnvFailed, CheckerEnvFailed int
}

// MaxEnvFailures is the share of a sync's rewards that may stand in for
// failed environment server calls, the node's or the checker's, for the
// sync still to be checked: a node cannot choose which rewards to zero
// beyond it, and a flaky server does not get honest nodes slashed.
const MaxEnvFailures = 0.25

func (r *SyncReport) fail(check, format string, args ...any) {
	r.Failed, r.Detail = check, fmt.Sprintf(format, args...)
}

// CheckSync replays the node's syncs 1..k from their traces instead of
// sampling: for each local step it checks the traces' shape and prompts,
// recomputes the rewards and the sampled tokens' log-probabilities under
// the policy the replay holds at that step, then trains the step on the
// traces, with the recomputed log-probabilities as π_old's (withOldLogP);
// at the end of sync k it compares the update with the delta and
// the losses with the claim. A node's cheating is a report with Failed
// set, not an error; the error is for inputs the checker itself cannot use.
func CheckSync(ctx context.Context, in SyncInput, tol Tolerance) (SyncReport, error) {
	var r SyncReport
	k := len(in.Starts)
	if k == 0 || in.Interval < 1 || in.Delta == nil {
		return r, fmt.Errorf("tracecheck: no sync to check")
	}
	if len(in.Traces) < k {
		r.fail(CheckShape, "traces of %d syncs, the check needs %d", len(in.Traces), k)
		return r, nil
	}
	c := in.Config
	tol = tol.For(c.PromptsPerStep * c.GroupSize)
	// Under AdamW the moments carry across syncs, so the check replays the
	// epoch's syncs up to k. Plain SGD carries none: sync k starts from
	// Starts[k-1] with the update count the earlier traces imply (reset
	// where a backend process restarted), and only sync k is replayed, as
	// the judge's one-sync replay does (epoch.Retrain).
	first, st := 1, trainer.State{Step: in.FirstStep, Adapter: in.Starts[0]}
	if c.SGD && k > 1 {
		first = k
		st = trainer.State{Step: in.FirstStep + (k-1)*in.Interval, Adapter: in.Starts[k-1]}
		for _, sets := range in.Traces[:k-1] {
			for _, set := range sets {
				if set.Header.OptimizerReset {
					st.Updates = 0
				}
				st.Updates += c.NumIterations
			}
		}
	}
	tr, err := trainer.Resume(in.Weights, in.Tokenizer, c, in.Worker, in.Threads, st)
	if err != nil {
		return r, err
	}
	sc := c.Scorer()
	var lpSum float64
	var seqs int
	var losses []float64
	for s := first; s <= k; s++ {
		sets := in.Traces[s-1]
		if len(sets) != in.Interval {
			r.fail(CheckShape, "sync %d has %d trace sets, want %d (one per local step)", s, len(sets), in.Interval)
			return r, nil
		}
		if s > first {
			if tr, err = tr.Rebase(in.Starts[s-1]); err != nil {
				return r, err
			}
		}
		losses = losses[:0]
		for i, set := range sets {
			if err := ctx.Err(); err != nil {
				return r, err
			}
			step := in.FirstStep + (s-1)*in.Interval + i + 1
			if !checkShape(&r, set, c, in.Tokenizer.VocabSize(), step, s, i) {
				return r, nil
			}
			if set.Header.OptimizerReset {
				// A restarted backend process: fresh moments, as at the
				// epoch's start.
				st := tr.State()
				st.Updates, st.M, st.V = 0, nil, nil
				if tr, err = trainer.Resume(in.Weights, in.Tokenizer, c, in.Worker, in.Threads, st); err != nil {
					return r, err
				}
			}
			if i == 0 {
				// The policy that sampled the sync's first step is the
				// sync's start, known exactly.
				if want := jobconf.Digest(tr.Adapter()); set.Header.Policy != want {
					r.fail(CheckShape, "step %d claims policy %.16s…, the sync started from %.16s…", step, set.Header.Policy, want)
					return r, nil
				}
			}
			if !checkPrompts(&r, set, tr.Batch(step), in.Tokenizer, step) {
				return r, nil
			}
			seqs += len(set.Seqs)
			if ok, err := checkRewards(&r, set, sc, in.Tokenizer, in.Weights.Cfg.EOS, step); err != nil || !ok {
				return r, err
			}
			md, err := llama.New(in.Weights, tr.Adapter(), in.Threads)
			if err != nil {
				return r, err
			}
			lp, own, err := logProbs(md, set, 8, true)
			if err != nil {
				return r, err
			}
			r.Steps++
			r.Sequences += len(set.Seqs)
			r.Tokens += lp.Tokens
			lpSum += lp.MeanAbs * float64(lp.Tokens)
			r.LogProbMax = max(r.LogProbMax, lp.MaxAbs)
			if r.Tokens > 0 {
				r.LogProbMean = lpSum / float64(r.Tokens)
			}
			if !(lp.MaxAbs <= tol.LogProbMax) {
				r.fail(CheckLogProbs, "step %d: a sampled token's log-probability differs by %.3g nats from the claimed policy's (sequence %d token %d; tolerance %.3g)",
					step, lp.MaxAbs, lp.WorstSeq, lp.WorstTok, tol.LogProbMax)
				return r, nil
			}
			st, err := tr.Train(ctx, withOldLogP(set, own))
			if err != nil {
				return r, err
			}
			losses = append(losses, st.Loss)
		}
	}
	if share := float64(r.EnvFailed+r.CheckerEnvFailed) / float64(seqs); share > MaxEnvFailures {
		r.Unverifiable = fmt.Sprintf("the environment server failed %d of the node's and %d of the checker's %d rewards (at most %.0f%% may fail)",
			r.EnvFailed, r.CheckerEnvFailed, seqs, 100*MaxEnvFailures)
		return r, nil
	}
	u := jobconf.Sub(tr.Adapter(), in.Starts[k-1])
	jobconf.Clip(u, in.ClipNorm)
	want, have := jobconf.Flatten(u), jobconf.Flatten(in.Delta)
	if len(want) != len(have) {
		r.fail(CheckUpdate, "the delta has %d values, the update %d", len(have), len(want))
		return r, nil
	}
	r.RelL2, r.Cosine = compare(have, want)
	r.Scale = scale(have, want)
	r.Loss = jobconf.ClaimedLoss(losses)
	r.LossDiff = math.Abs(r.Loss - in.ClaimedLoss)
	switch {
	case !(r.RelL2 <= tol.UpdateRelL2) || !(r.Cosine >= tol.UpdateCosine) || !(math.Abs(r.Scale-1) <= tol.UpdateScale):
		r.fail(CheckUpdate, "the delta is not the update its traces give: relative L2 error %.3g (tolerance %.3g), cosine %.6f (at least %.6f), scale along it %.4f (1 ± %.3g)",
			r.RelL2, tol.UpdateRelL2, r.Cosine, tol.UpdateCosine, r.Scale, tol.UpdateScale)
	case !(r.LossDiff <= tol.Loss):
		r.fail(CheckLoss, "claimed loss %.6g, the traces give %.6g (tolerance %.3g)", in.ClaimedLoss, r.Loss, tol.Loss)
	}
	return r, nil
}

// withOldLogP is set's rollouts with π_old's log-probabilities replaced by
// own, the replay's recomputation of them under the claimed policy (the
// tokens an episode's environment wrote, whose recorded 0 is no
// probability, keep it). GSPO's sequence ratio exp(mean(log π_θ − log
// π_old)) is clipped at 1 ± 3e-4 or so, well inside the rounding of
// another engine: against the recorded bf16 log-probabilities the replay's
// float32 ratios start that far from 1 and clip other sequences than the
// worker's did, whose ratios start at 1 under its own arithmetic, and the
// replayed update turned away from the honest one (cosine down to −0.02
// in AdamW, relative L2 error up to 3.7 under SGD; docs/traces.md). π_old
// is by definition the claimed policy, which the replay holds: with its
// own log-probabilities its ratios start at 1 as the worker's did, and the
// recorded ones, already held to the claimed policy's by check (3), no
// longer steer the update. For the go backend the two are the same bits.
func withOldLogP(set *trace.Set, own [][]float32) *rollout.Rollouts {
	ro := set.Rollouts()
	for i := range ro.OldLogP {
		if len(own[i]) != len(ro.OldLogP[i]) {
			continue
		}
		lp := own[i]
		if m := set.Seqs[i].Mask; m != nil {
			lp = append([]float32(nil), lp...)
			for k, model := range m {
				if !model && k < len(lp) {
					lp[k] = ro.OldLogP[i][k]
				}
			}
		}
		ro.OldLogP[i] = lp
	}
	return ro
}

// checkShape checks set is step's batch of the job: its place in the
// job, the job's sampling settings and batch shape.
func checkShape(r *SyncReport, set *trace.Set, c trainer.Config, vocab, step, s, i int) bool {
	h := set.Header
	switch {
	case h.Step != step:
		r.fail(CheckShape, "sync %d's set %d is step %d, want %d", s, i+1, h.Step, step)
	case h.Prompts != c.PromptsPerStep || h.GroupSize != c.GroupSize:
		r.fail(CheckShape, "step %d: %d prompts × %d, the job samples %d × %d", step, h.Prompts, h.GroupSize, c.PromptsPerStep, c.GroupSize)
	case h.Temperature != c.Temperature || h.TopK != c.TopK:
		r.fail(CheckShape, "step %d: sampled at temperature %v top-k %d, the job's are %v and %d", step, h.Temperature, h.TopK, c.Temperature, c.TopK)
	case h.Vocab != vocab:
		r.fail(CheckShape, "step %d: vocabulary %d, the base model's is %d", step, h.Vocab, vocab)
	default:
		return true
	}
	return false
}

// checkPrompts is check (1): every group's prompt is the problem the job
// seed assigns to the node at step, tokenized as the trainer does.
func checkPrompts(r *SyncReport, set *trace.Set, want []task.Problem, tok *tokenizer.Tokenizer, step int) bool {
	G := set.Header.GroupSize
	for p, pr := range want {
		q := &set.Seqs[p*G]
		ids, _, err := task.Tokenize(tok, pr)
		if err != nil || q.PromptText != pr.Prompt || q.Answer != pr.Answer || !slices.Equal(q.PromptIDs, ids) {
			r.fail(CheckPrompts, "step %d prompt %d is %q, the job assigns %q to this node", step, p, q.PromptText, pr.Prompt)
			return false
		}
	}
	return true
}

// checkRewards is check (2): each completion's text is its ids decoded and
// its reward is the job's reward of that text, bit for bit.
func checkRewards(r *SyncReport, set *trace.Set, sc reward.Scorer, tok *tokenizer.Tokenizer, eos []int, step int) (bool, error) {
	for i := range set.Seqs {
		q := &set.Seqs[i]
		text, err := rollout.CompletionText(tok, q.CompletionIDs, eos)
		if err != nil {
			r.fail(CheckRewards, "step %d sequence %d: completion ids do not decode: %v", step, i, err)
			return false, nil
		}
		if text != q.Completion {
			r.fail(CheckRewards, "step %d sequence %d: completion %q, its ids decode to %q", step, i, q.Completion, text)
			return false, nil
		}
		x := reward.Sample{Prompt: q.PromptText, Answer: q.Answer, Completion: text}
		set, env := sc.(*reward.Set)
		env = env && set.HasEnv()
		var got float64
		switch {
		case q.RewardFailed && !env:
			r.fail(CheckRewards, "step %d sequence %d: a failed reward claimed, and the job's reward calls no server", step, i)
			return false, nil
		case q.RewardFailed:
			// The server failed the node: its env terms count 0, the
			// rest must be exact.
			r.EnvFailed++
			got = set.ScoreFailed(x)
		default:
			got = sc.Score(x)
			if env && set.Failed(x) {
				// The server failed the checker: this reward cannot be
				// re-asked; it is taken as claimed (bounded in share).
				r.CheckerEnvFailed++
				continue
			}
		}
		if math.Float64bits(got) != math.Float64bits(q.Reward) {
			r.fail(CheckRewards, "step %d sequence %d: reward %v claimed, the job's reward gives %v", step, i, q.Reward, got)
			return false, nil
		}
	}
	return true, nil
}

// compare returns ‖have − want‖/‖want‖ and the cosine of have and want
// (both 0 and 1 when both are zero).
func compare(have, want []float32) (relL2, cosine float64) {
	var dd, ww, hh, hw float64
	for i := range want {
		h, w := float64(have[i]), float64(want[i])
		dd += (h - w) * (h - w)
		ww += w * w
		hh += h * h
		hw += h * w
	}
	switch {
	case ww == 0 && hh == 0:
		return 0, 1
	case ww == 0 || hh == 0:
		return math.Inf(1), 0
	}
	return math.Sqrt(dd / ww), hw / math.Sqrt(hh*ww)
}

// scale returns ⟨have, want⟩/‖want‖², have's length along want in
// want's units (1 when both are zero, +Inf when only want is).
func scale(have, want []float32) float64 {
	var ww, hw, hh float64
	for i := range want {
		h, w := float64(have[i]), float64(want[i])
		ww += w * w
		hw += h * w
		hh += h * h
	}
	switch {
	case ww == 0 && hh == 0:
		return 1
	case ww == 0:
		return math.Inf(1)
	}
	return hw / ww
}
