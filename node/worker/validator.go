package worker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/zooai/gym/model/basemodel"
	"github.com/zooai/gym/protocol/checkpkg"
	"github.com/zooai/gym/protocol/evalpkg"
	"github.com/zooai/gym/protocol/jobconf"
	"github.com/zooai/gym/protocol/jobspec"
	"github.com/zooai/gym/protocol/tracecheck"
)

// CheckAssignment is a trace check hanzod asked this validator for
// (docs/validators.md).
type CheckAssignment struct {
	Job      string
	Epoch    int
	Step     uint64
	Node     string // the checked node
	Digest   string // the delta file's signature digest
	Package  string // CID of the check package
	Deadline time.Time
	Spec     jobspec.Spec
}

// Key names the check (its slot and digest).
func (a CheckAssignment) Key() string {
	return jobspec.Slot{Epoch: a.Epoch, Step: a.Step, Node: a.Node}.String() + "@" + a.Digest
}

// VerdictReport is a validator's answer to a check.
type VerdictReport struct {
	CheckAssignment
	Outcome string // pass, fail or unverifiable (verdict's)
	Check   string // the failed check
	Detail  string
	Figures string // JSON of the measured differences
}

// Checks is the validator's view of hanzod: its open checks, the
// packages, and its verdicts (nodeclient implements it; every call signed).
type Checks interface {
	ListChecks(ctx context.Context) ([]CheckAssignment, error)
	// FetchCheck fetches and verifies the package root and returns its
	// directory.
	FetchCheck(ctx context.Context, root string) (string, error)
	SubmitVerdict(ctx context.Context, v VerdictReport) error
}

// validate is a validator's loop: it polls for checks, runs each once and
// submits its verdict. A check it cannot run (its package does not
// verify, the base does not fit) gets no verdict: it expires and hanzod
// asks another validator.
func (w *Worker) validate(ctx context.Context) error {
	checks, ok := w.c.Orchestrator.(Checks)
	if !ok {
		return fmt.Errorf("%w: a validator's orchestrator client does not serve checks", ErrConfig)
	}
	done := map[string]bool{}
	for {
		list, err := checks.ListChecks(ctx)
		if err != nil && ctx.Err() == nil {
			w.c.Logger.Warn("list checks failed", "err", err)
		}
		for _, a := range list {
			if done[a.Key()] {
				continue
			}
			w.emit(Event{Kind: EventCheckStarted, Job: a.Job, Epoch: a.Epoch, Detail: fmt.Sprintf("%s step %d", short(a.Node), a.Step)})
			v, err := w.runCheck(ctx, checks, a)
			if ctx.Err() != nil {
				return ctx.Err()
			}
			if err != nil {
				w.c.Logger.Warn("check not run", "job", a.Job, "node", short(a.Node), "step", a.Step, "err", err)
				w.emit(Event{Kind: EventCheck, Job: a.Job, Epoch: a.Epoch, Detail: "not run: " + err.Error()})
				if errors.Is(err, checkpkg.ErrPackage) {
					done[a.Key()] = true // it will not verify next time either
				}
				continue
			}
			if err := checks.SubmitVerdict(ctx, v); err != nil {
				w.c.Logger.Warn("verdict refused", "job", a.Job, "node", short(a.Node), "err", err)
				if ctx.Err() != nil {
					return ctx.Err()
				}
			}
			done[a.Key()] = true
			w.emit(Event{Kind: EventCheck, Job: a.Job, Epoch: a.Epoch, Detail: fmt.Sprintf("%s of %s step %d: %s %s", v.Outcome, short(a.Node), a.Step, v.Check, v.Detail)})
		}
		if w.heart.sleep(ctx, w.c.CheckPoll) != nil {
			return ctx.Err()
		}
	}
}

// runCheck fetches a check's package, the job's base and dataset, and
// checks the delta from its traces (checkpkg.Run).
func (w *Worker) runCheck(ctx context.Context, checks Checks, a CheckAssignment) (VerdictReport, error) {
	if strings.HasPrefix(a.Node, jobspec.EvalSubject) {
		return w.runEval(ctx, checks, a)
	}
	v := VerdictReport{CheckAssignment: a}
	base, plan, dir, err := w.checkInputs(ctx, checks, a)
	if err != nil {
		return v, err
	}
	l, err := checkpkg.Read(ctx, dir, base.Weights.Cfg)
	if err != nil {
		return v, err
	}
	if l.Info.Job != a.Job || l.Info.Node != a.Node || l.Info.Step != a.Step || l.Info.Digest != a.Digest {
		return v, fmt.Errorf("%w: package %s holds %s/%d/%s@%s, not the check asked for", checkpkg.ErrPackage, a.Package, l.Info.Job, l.Info.Step, l.Info.Node, l.Info.Digest)
	}
	r, err := checkpkg.Run(ctx, plan, l, w.c.Threads)
	if err != nil {
		return v, err
	}
	switch {
	case r.Failed != "":
		v.Outcome, v.Check, v.Detail = "fail", r.Failed, r.Detail
	case r.Unverifiable != "":
		v.Outcome, v.Detail = "unverifiable", r.Unverifiable
	default:
		v.Outcome = "pass"
	}
	f := checkpkg.FiguresOf(r)
	switch w.c.Attack {
	case AttackVerdictPass:
		v.Outcome, v.Check, v.Detail = "pass", "", ""
	case AttackVerdictFail:
		v.Outcome, v.Check, v.Detail = "fail", tracecheck.CheckUpdate, "the update does not follow from the traces"
	case AttackVerdictFlip:
		if v.Outcome == "pass" {
			v.Outcome, v.Check, v.Detail = "fail", tracecheck.CheckUpdate, "the update does not follow from the traces"
		} else {
			v.Outcome, v.Check, v.Detail = "pass", "", ""
		}
	}
	b, _ := json.Marshal(f)
	v.Figures = string(b)
	if len(v.Detail) > 1024 {
		v.Detail = v.Detail[:1024]
	}
	return v, nil
}

// checkInputs fetches what a check or an evaluation computes from: the
// job's base with its weights (both run the Go engine) and dataset, the
// job's plan, and the package's verified directory.
func (w *Worker) checkInputs(ctx context.Context, checks Checks, a CheckAssignment) (*basemodel.Base, jobconf.Plan, string, error) {
	base, err := w.baseFor(ctx, a.Spec, true)
	if err != nil {
		return nil, jobconf.Plan{}, "", err
	}
	data, err := w.dataFor(ctx, a.Spec)
	if err != nil {
		return nil, jobconf.Plan{}, "", err
	}
	plan, err := jobconf.FromSpecData(a.Job, a.Spec, base, data)
	if err != nil {
		return nil, jobconf.Plan{}, "", err
	}
	dir, err := checks.FetchCheck(ctx, a.Package)
	if err != nil {
		return nil, jobconf.Plan{}, "", err
	}
	return base, plan, dir, nil
}

// runEval measures an epoch's held-out figures (an evaluation, package
// evalpkg): it fetches the package, verifies that it is the request the
// assignment names, measures it with the Go engine and answers pass with
// the figures and their digest (the verdict's check), on which the
// validators asked must agree.
func (w *Worker) runEval(ctx context.Context, checks Checks, a CheckAssignment) (VerdictReport, error) {
	v := VerdictReport{CheckAssignment: a}
	base, plan, dir, err := w.checkInputs(ctx, checks, a)
	if err != nil {
		return v, err
	}
	req, err := evalpkg.Read(dir, base.Weights.Cfg)
	if err != nil {
		return v, fmt.Errorf("%w: %w", checkpkg.ErrPackage, err)
	}
	if got := req.Digest(); req.Info.Job != a.Job || req.Info.Epoch != a.Epoch || a.Node != jobspec.EvalSubject+got || a.Digest != got {
		return v, fmt.Errorf("%w: package %s holds the evaluation %s of %s epoch %d, not the one asked for", checkpkg.ErrPackage, a.Package, got, req.Info.Job, req.Info.Epoch)
	}
	r, err := evalpkg.Measure(plan, base, req, w.c.Threads)
	if err != nil {
		return v, err
	}
	if w.c.Attack == AttackVerdictPass || w.c.Attack == AttackVerdictFail || w.c.Attack == AttackVerdictFlip {
		// A lying validator reports the checkpoint better than it is.
		r.Accuracy = min(1, r.Accuracy+0.25)
	}
	b, err := json.Marshal(r)
	if err != nil {
		return v, err
	}
	if v.Check, err = r.Digest(); err != nil {
		return v, err
	}
	v.Outcome, v.Figures = "pass", string(b)
	v.Detail = fmt.Sprintf("held-out loss %.4f → %.4f, accuracy %.3f, %d syncs scored", r.LossStart, r.LossFinal, r.Accuracy, len(r.Syncs))
	return v, nil
}
