package judge

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/zooai/gym/artifact"
	"github.com/zooai/gym/artifact/store"
	"github.com/zooai/gym/model/llama"
	"github.com/zooai/gym/model/peft"
	"github.com/zooai/gym/orchestrator/judge/epoch"
	"github.com/zooai/gym/orchestrator/ledger"
	"github.com/zooai/gym/orchestrator/state"
	"github.com/zooai/gym/protocol/checkpkg"
	"github.com/zooai/gym/protocol/evalpkg"
	"github.com/zooai/gym/protocol/jobconf"
	"github.com/zooai/gym/protocol/jobspec"
	"github.com/zooai/gym/protocol/verdict"
)

// OffenceFalseVerdict is the offence of a validator whose verdict the
// decided outcome of its check contradicts (docs/validators.md).
const OffenceFalseVerdict = "false_verdict"

// WatchEpochs is how many epochs after a failed or missing check a node's
// deltas are checked at the watched share (epoch.WatchedShare).
const WatchEpochs = 3

// delegation is one evaluation's view of a job's delegated checks: the
// checker Evaluate calls, and what it asked for that is not decided yet.
type delegation struct {
	j       *Judge
	job     string
	e       int
	plan    jobconf.Plan
	self    epoch.TraceChecker
	pending []need
}

// need is a check Evaluate asked for that no decision answers yet.
type need struct {
	key    string // the slot
	node   string
	traces []string
	starts []*llama.Adapter
	d      epoch.Delta
}

// check is Evaluate's TraceChecker for a job with validators: a decided
// check's outcome, hanzod's own check where no validator could be asked,
// otherwise a pending check (Evaluate stops before scoring; it runs again
// once the verdicts are in).
func (dl *delegation) check(ctx context.Context, node string, traces []string, starts []*llama.Adapter, d epoch.Delta) (epoch.TraceCheck, error) {
	key := d.Slot.String()
	dl.j.mu.Lock()
	self := dl.j.selfCheck[dl.job+"/"+key]
	dl.j.mu.Unlock()
	if self {
		tc, err := dl.self(ctx, node, traces, starts, d)
		tc.Validators = []string{"hanzod"}
		return tc, err
	}
	var ch *state.Check
	dl.j.eng.View(func(m *state.Machine) {
		if jb, ok := m.Job(dl.job); ok && jb.Checks[key] != nil {
			c := *jb.Checks[key]
			c.Asks = slices.Clone(c.Asks)
			ch = &c
		}
	})
	if ch != nil && ch.Digest == d.Digest {
		if dec := ch.Decision(); dec.Decided {
			return fromVerdicts(d.Backend, d.DType, ch, dec), nil
		}
	}
	dl.pending = append(dl.pending, need{key: key, node: node, traces: traces, starts: starts, d: d})
	return epoch.TraceCheck{Backend: d.Backend, DType: d.DType, Pending: true}, nil
}

// fromVerdicts is a decided check as a TraceCheck: the outcome, and the
// figures and detail of the first verdict that agrees with it.
func fromVerdicts(backend, dtype string, ch *state.Check, dec verdict.Decision) epoch.TraceCheck {
	tc := epoch.TraceCheck{Backend: backend, DType: dtype}
	answered := answeredAsks(ch)
	for _, i := range dec.Agree {
		tc.Validators = append(tc.Validators, answered[i].Validator)
	}
	if len(dec.Agree) == 0 {
		tc.Unverifiable = fmt.Sprintf("no %d of %d validators agreed", verdict.Quorum(ch.K), len(ch.Asks))
		return tc
	}
	v := answered[dec.Agree[0]].Verdict
	var fig checkpkg.Figures
	if json.Unmarshal([]byte(v.Figures), &fig) == nil {
		setFigures(&tc, fig)
	}
	who := "validators " + strings.Join(shortAll(tc.Validators), ", ")
	switch dec.Outcome {
	case verdict.Fail:
		tc.Failed, tc.Detail = v.Check, who+": "+v.Detail
		if tc.Failed == "" {
			tc.Failed = "validators"
		}
	case verdict.Unverifiable:
		tc.Unverifiable = who + ": " + v.Detail
	}
	return tc
}

func answeredAsks(ch *state.Check) []state.Ask {
	var out []state.Ask
	for _, a := range ch.Asks {
		if a.Verdict != nil {
			out = append(out, a)
		}
	}
	return out
}

func shortAll(ids []string) []string {
	out := make([]string, len(ids))
	for i, id := range ids {
		out[i] = short(id)
	}
	return out
}

// awaiting reports whether the checks an earlier evaluation of job's epoch
// e found pending still wait for verdicts; it asks validators for those
// that need more (an assignment expired, two verdicts disagree).
func (j *Judge) awaiting(ctx context.Context, job string, e int) (bool, error) {
	k := fmt.Sprintf("%s/%d", job, e)
	j.mu.Lock()
	needs := j.pendingChecks[k]
	j.mu.Unlock()
	if len(needs) == 0 {
		return false, nil
	}
	waiting := false
	for _, n := range needs {
		w, err := j.ask(ctx, job, n.key, n.d.Digest, n.pkg)
		if err != nil {
			return true, err
		}
		waiting = waiting || w
	}
	if !waiting {
		j.mu.Lock()
		delete(j.pendingChecks, k)
		j.mu.Unlock()
	}
	return waiting, nil
}

// pendingCheck is a need with its package published.
type pendingCheck struct {
	need
	pkg string
}

// delegate publishes the packages of the pending checks and asks
// validators for them; the merge waits (awaiting) until they are decided.
func (j *Judge) delegate(ctx context.Context, jb state.Job, plan jobconf.Plan, needs []need) error {
	var list []pendingCheck
	for _, n := range needs {
		pkg, err := j.checkPackage(ctx, jb.ID, jb.Epoch, plan, n)
		if err != nil {
			return err
		}
		if _, err := j.ask(ctx, jb.ID, n.key, n.d.Digest, pkg); err != nil {
			return err
		}
		list = append(list, pendingCheck{need: n, pkg: pkg})
	}
	j.mu.Lock()
	j.pendingChecks[fmt.Sprintf("%s/%d", jb.ID, jb.Epoch)] = list
	j.mu.Unlock()
	return nil
}

// ask asks as many validators as the check of slot key needs (a draw
// keyed by hanzod's secret, verdict.Draw). It reports whether the check
// still waits for verdicts. When nobody can be asked and no assignment is
// open, hanzod checks it itself.
func (j *Judge) ask(ctx context.Context, job, key, digest, pkg string) (bool, error) {
	var ch *state.Check
	var candidates []string
	k := 0
	onNodes := false
	j.eng.View(func(m *state.Machine) {
		jb, _ := m.Job(job)
		k, onNodes = j.checkK(jb.Spec), j.OnNodes(jb.Spec.Model)
		if c := jb.Checks[key]; c != nil {
			cc := *c
			cc.Asks = slices.Clone(c.Asks)
			ch = &cc
		}
		candidates = m.Validators(job)
	})
	j.mu.Lock()
	self := j.selfCheck[job+"/"+key]
	j.mu.Unlock()
	if self {
		return false, nil
	}
	var asked []string
	dec := verdict.Decide(k, nil, 0, 0)
	if ch != nil {
		asked, dec = ch.Asked(), ch.Decision()
	}
	if dec.Decided {
		return false, nil
	}
	open := 0
	if ch != nil {
		_, _, open, _ = ch.Tally()
	}
	drawn := verdict.Draw(j.cfg.Key.Seed(), job, key, digest, len(asked), dec.Need, candidates, asked)
	for _, v := range drawn {
		sl, err := jobspec.ParseSlot(key)
		if err != nil {
			return false, err
		}
		if _, err := j.eng.Do(ctx, state.AssignCheck{Job: job, Slot: sl, Digest: digest, Package: pkg, Validator: v, K: k}); err != nil {
			if errors.Is(err, state.ErrPrecondition) {
				continue // the validator went away between the view and the command
			}
			return true, err
		}
		open++
		j.log.Info("validator asked for a check", "job", job, "slot", key, "validator", short(v), "round", len(asked))
		asked = append(asked, v)
	}
	if open == 0 && onNodes {
		// hanzod has no model to check with: the merge waits for a
		// validator to register (or for one to come back).
		j.mu.Lock()
		first := !j.starved[job+"/"+key]
		j.starved[job+"/"+key] = true
		j.mu.Unlock()
		if first {
			j.log.Warn("no validator can be asked and hanzod has no model to check with: the merge waits for a validator "+
				"(gym worker --role validator, bonded; docs/validators.md)", "job", job, "slot", key, "asked_before", len(asked))
		}
		return true, nil
	}
	if open == 0 {
		j.log.Warn("no validator can be asked for a check: hanzod checks it", "job", job, "slot", key, "asked_before", len(asked))
		j.mu.Lock()
		j.selfCheck[job+"/"+key] = true
		j.mu.Unlock()
		return false, nil
	}
	return true, nil
}

// checkK is how many agreeing verdicts a check of a job with spec s asks:
// the job's validators, or verdict.MinK for a job that asks none but whose
// model work runs on nodes (OnNodes); 0: hanzod checks it itself.
func (j *Judge) checkK(s jobspec.Spec) int {
	switch {
	case s.Validators >= verdict.MinK:
		return s.Validators
	case j.OnNodes(s.Model):
		return verdict.MinK
	}
	return 0
}

// measured returns the figures validators measured for the evaluation
// req of jb's epoch, who agreed on them, or why none can be had (the
// check decided without agreeing figures: the epoch is published
// unscored). Neither: the evaluation is not decided; its package is
// published and validators asked as it needs (the merge waits).
func (j *Judge) measured(ctx context.Context, jb state.Job, plan jobconf.Plan, req *evalpkg.Request) (*evalpkg.Results, []string, string, error) {
	dg := req.Digest()
	key := jobspec.EvalSlot(jb.Epoch, dg).String()
	var ch *state.Check
	j.eng.View(func(m *state.Machine) {
		if cur, ok := m.Job(jb.ID); ok && cur.Checks[key] != nil {
			ch = cur.Clone().Checks[key]
		}
	})
	if ch != nil {
		if dec := ch.Decision(); dec.Decided {
			answered := answeredAsks(ch)
			var who []string
			for _, i := range dec.Agree {
				who = append(who, answered[i].Validator)
			}
			want, ok := verdict.MeasuredDigest(dec.Outcome)
			if !ok || len(dec.Agree) == 0 {
				return nil, who, fmt.Sprintf("no %d of %d validators agreed on the held-out figures", verdict.Quorum(ch.K), len(ch.Asks)), nil
			}
			r, err := evalpkg.ParseResults(answered[dec.Agree[0]].Verdict.Figures, req.Info)
			if err == nil {
				var got string
				if got, err = r.Digest(); err == nil && got != want {
					err = fmt.Errorf("figures of digest %s under an answer naming %s", got, want)
				}
			}
			if err != nil {
				return nil, who, "the figures validators agreed on do not answer the evaluation: " + err.Error(), nil
			}
			return &r, who, "", nil
		}
	}
	pkg, err := j.evalPackage(ctx, jb, plan, req)
	if err != nil {
		return nil, nil, "", err
	}
	if _, err := j.ask(ctx, jb.ID, key, dg, pkg); err != nil {
		return nil, nil, "", err
	}
	return nil, nil, "", nil
}

// evalPackage writes and publishes the package of an evaluation (once per
// process and request; the same request gives the same CID on any
// replica).
func (j *Judge) evalPackage(ctx context.Context, jb state.Job, plan jobconf.Plan, req *evalpkg.Request) (string, error) {
	dg := req.Digest()
	k := jb.ID + "/" + dg
	j.mu.Lock()
	pkg, ok := j.evalPkgs[k]
	j.mu.Unlock()
	if ok {
		return pkg, nil
	}
	dir := filepath.Join(j.cfg.DataDir, "evals", jb.ID, dg)
	if err := os.RemoveAll(dir); err != nil {
		return "", err
	}
	if err := evalpkg.Write(dir, req, peft.Card{BaseModel: plan.Base.Name, BaseSHA3: plan.Base.SHA3, Job: jb.ID, Epoch: jb.Epoch}); err != nil {
		return "", err
	}
	rec, err := j.cfg.Store.Publish(ctx, dir, store.Meta{Kind: artifact.KindCheck, Name: jb.ID + "/eval-" + dg[:16]}, j.cfg.Key, j.cfg.Now())
	if err != nil {
		return "", fmt.Errorf("judge: publish the evaluation package of epoch %d of %s: %w", jb.Epoch, jb.ID, err)
	}
	j.log.Info("held-out evaluation asked of validators", "job", jb.ID, "epoch", jb.Epoch, "package", rec.Root, "figures", req.Values())
	j.mu.Lock()
	j.evalPkgs[k] = rec.Root
	j.mu.Unlock()
	return rec.Root, nil
}

// checkPackage writes and publishes the package of a pending check
// (checkpkg); the same inputs give the same CID, so a replica that takes
// over publishes the same package.
func (j *Judge) checkPackage(ctx context.Context, job string, e int, plan jobconf.Plan, n need) (string, error) {
	file, _, err := j.readDelta(ctx, job, n.d.Slot, n.d.Digest)
	if err != nil {
		return "", err
	}
	in := checkpkg.Inputs{Info: checkpkg.Info{Job: job, Epoch: e, Step: n.d.Step, Node: n.node, Sync: len(n.starts), Digest: n.d.Digest, Traces: n.traces},
		Delta: file, Starts: n.starts, Card: peft.Card{BaseModel: plan.Base.Name, BaseSHA3: plan.Base.SHA3, Job: job, Epoch: e}}
	for _, c := range n.traces {
		b, err := j.cfg.Blobs.Get(ctx, tracesBlob(job, c))
		if err != nil {
			return "", fmt.Errorf("judge: traces %s for a check package: %w", c, err)
		}
		in.Bundles = append(in.Bundles, b)
	}
	dir := filepath.Join(j.cfg.DataDir, "checks", job, n.d.Digest)
	if err := os.RemoveAll(dir); err != nil {
		return "", err
	}
	if err := checkpkg.Write(dir, in); err != nil {
		return "", err
	}
	rec, err := j.cfg.Store.Publish(ctx, dir, store.Meta{Kind: artifact.KindCheck, Name: job + "/" + n.d.Digest[:16]}, j.cfg.Key, j.cfg.Now())
	if err != nil {
		return "", fmt.Errorf("judge: publish the check package of %s: %w", n.key, err)
	}
	return rec.Root, nil
}

// settleChecks acts on the decided checks of job's epoch e once the merge
// no longer waits: a validator whose verdict the decision contradicts is
// slashed (OffenceFalseVerdict), and each that agreed earns one
// participation unit, added to the epoch's contributions.
func (j *Judge) settleChecks(ctx context.Context, job string, e int, cs []ledger.Contribution) []ledger.Contribution {
	var checks map[string]*state.Check
	j.eng.View(func(m *state.Machine) {
		if jb, ok := m.Job(job); ok {
			checks = jb.Clone().Checks
		}
	})
	units := map[string]uint64{}
	for _, key := range slices.Sorted(maps.Keys(checks)) {
		ch := checks[key]
		if ch.Epoch != e {
			continue
		}
		dec := ch.Decision()
		if !dec.Decided {
			continue
		}
		answered := answeredAsks(ch)
		for _, i := range dec.Agree {
			units[answered[i].Validator]++
		}
		for _, i := range dec.False {
			a := answered[i]
			detail := fmt.Sprintf("slot %s (digest %s, package %s): verdict %s %s contradicted by %d validators (%s)",
				key, ch.Digest, ch.Package, a.Verdict.Outcome, a.Verdict.Check, len(dec.Agree), dec.Outcome)
			j.log.Warn("false validation report", "job", job, "validator", short(a.Validator), "detail", detail)
			// Not Job and Epoch: those make a ring member forfeit the epoch.
			ev := Evidence{Offence: OffenceFalseVerdict, Detail: detail}
			ev.Verdicts = answered
			j.penalize(ctx, job, a.Validator, ev, nil)
		}
	}
	for _, v := range slices.Sorted(maps.Keys(units)) {
		i := slices.IndexFunc(cs, func(c ledger.Contribution) bool { return c.ID == v })
		if i < 0 {
			cs = append(cs, ledger.Contribution{ID: v})
			i = len(cs) - 1
		}
		cs[i].Participation += units[v]
	}
	slices.SortFunc(cs, func(a, b ledger.Contribution) int { return strings.Compare(a.ID, b.ID) })
	return cs
}
