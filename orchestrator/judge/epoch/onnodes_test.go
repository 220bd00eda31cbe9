package epoch_test

import (
	"context"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/zooai/gym/model/basemodel"
	"github.com/zooai/gym/model/llama"
	"github.com/zooai/gym/model/peft"
	"github.com/zooai/gym/orchestrator/judge/epoch"
	"github.com/zooai/gym/protocol/evalpkg"
	"github.com/zooai/gym/protocol/jobconf"
	"github.com/zooai/gym/protocol/jobspec"
)

// TestEvaluateOnNodes: a judge without the base model (OnNodes, a
// ConfigOnly base, no replayer) merges the epoch, stops with the
// evaluation request, and, given the figures a validator measures from
// the package (written, read back and measured with the real base),
// reaches the very report, checkpoint and rewards of a judge that has the
// base — on the data-parallel default, where both merge with equal
// weights.
func TestEvaluateOnNodes(t *testing.T) {
	w := newWorldWith(t, func(s *jobspec.Spec) {
		s.StepsPerEpoch = 12
		s.GSPO.LearningRate = 1e-3
		s.GSPO.InnerOptimizer, s.GSPO.OuterOptimizer, s.GSPO.OuterLR = "sgd", "adam", 1.5e-3
	})
	ds := w.honest(t)
	for i := range ds {
		ds[i].Traces = fmt.Sprintf("traces-%s-%d", ds[i].Node[:8], ds[i].Step)
	}
	pass := func(_ context.Context, _ string, _ []string, _ []*llama.Adapter, d epoch.Delta) (epoch.TraceCheck, error) {
		return epoch.TraceCheck{Backend: d.Backend}, nil
	}
	var calls int
	self := w.input(ds, w.replay(&calls))
	self.CheckTraces = pass
	want, err := epoch.Evaluate(context.Background(), self)
	if err != nil {
		t.Fatal(err)
	}

	in := w.input(ds, nil)
	in.Base = &basemodel.Base{Name: w.base.Name, Weights: &llama.Weights{Cfg: w.base.Weights.Cfg}, Tokenizer: w.base.Tokenizer, ConfigOnly: true}
	in.OnNodes, in.CheckTraces = true, pass
	checked := 0
	in.CheckTraces = func(ctx context.Context, n string, c []string, s []*llama.Adapter, d epoch.Delta) (epoch.TraceCheck, error) {
		checked++
		return pass(ctx, n, c, s, d)
	}
	first, err := epoch.Evaluate(context.Background(), in)
	if err != nil {
		t.Fatal(err)
	}
	if checked != len(ds) {
		t.Errorf("%d deltas checked from traces on nodes, want every sampled one (%d): there is nothing to replay with", checked, len(ds))
	}
	req := first.Evaluation
	if req == nil || first.Merged != nil || len(first.Rewards) != 0 {
		t.Fatalf("first pass: evaluation %v, merged %v, %d rewards: want a request and a stop", req != nil, first.Merged != nil, len(first.Rewards))
	}
	if len(req.Info.Syncs) != 6 || req.Values() != 4+6*4 || req.Info.Final != jobconf.Digest(want.Merged) {
		t.Fatalf("request of %d syncs, %d values, final %s (the self judge's checkpoint is %s)", len(req.Info.Syncs), req.Values(), req.Info.Final, jobconf.Digest(want.Merged))
	}

	// What a validator does: the package as files, read back, measured.
	dir := t.TempDir()
	if err := evalpkg.Write(dir, req, peft.Card{BaseModel: w.base.Name}); err != nil {
		t.Fatal(err)
	}
	got, err := evalpkg.Read(dir, w.base.Weights.Cfg)
	if err != nil {
		t.Fatal(err)
	}
	if got.Digest() != req.Digest() {
		t.Fatalf("package read back as %s, written as %s", got.Digest(), req.Digest())
	}
	figs, err := evalpkg.Measure(w.plan, w.base, got, 1)
	if err != nil {
		t.Fatal(err)
	}
	again, err := evalpkg.Measure(w.plan, w.base, got, 3)
	if err != nil {
		t.Fatal(err)
	}
	d1, _ := figs.Digest()
	d2, _ := again.Digest()
	if d1 != d2 {
		t.Fatalf("figures differ between 1 and 3 threads: two honest validators would disagree")
	}

	in.Measured = &figs
	res, err := epoch.Evaluate(context.Background(), in)
	if err != nil {
		t.Fatal(err)
	}
	if res.Evaluation != nil || res.Merged == nil {
		t.Fatal("second pass did not finish")
	}
	if jobconf.Digest(res.Merged) != jobconf.Digest(want.Merged) {
		t.Fatal("checkpoint on nodes differs from the self judge's")
	}
	// The self judge replayed the go deltas; on nodes they were checked
	// from their traces. Everything else is the same.
	if res.Report.AccuracyBefore == 0 {
		t.Error("the first epoch's start accuracy was not measured")
	}
	if len(res.Report.TraceChecks) != len(ds) || calls == 0 {
		t.Fatalf("%d trace checks on nodes, %d replays by the self judge", len(res.Report.TraceChecks), calls)
	}
	sameRep := want.Report
	sameRep.TraceChecks = res.Report.TraceChecks
	if !reflect.DeepEqual(res.Report, sameRep) || !reflect.DeepEqual(res.Rewards, want.Rewards) {
		t.Fatalf("report on nodes differs: accuracy %v (want %v), quality %v (want %v), loss %v → %v (want %v → %v)",
			res.Report.Accuracy, want.Report.Accuracy, res.Report.Quality, want.Report.Quality,
			res.Report.LossBefore, res.Report.LossAfter, want.Report.LossBefore, want.Report.LossAfter)
	}

	// Figures for another request are refused, not scored.
	bad := figs
	bad.Syncs = bad.Syncs[1:]
	in.Measured = &bad
	if _, err := epoch.Evaluate(context.Background(), in); err == nil || !strings.Contains(err.Error(), "do not answer") {
		t.Fatalf("figures of 5 syncs for 6: %v", err)
	}

	// No figures to be had: merged and published unscored.
	in.Measured, in.Unmeasured = nil, "no 2 of 5 validators agreed"
	res, err = epoch.Evaluate(context.Background(), in)
	if err != nil {
		t.Fatal(err)
	}
	if res.Merged == nil || jobconf.Digest(res.Merged) != jobconf.Digest(want.Merged) || res.Report.Unmeasured == "" || res.Report.Quality != 0 {
		t.Fatalf("unmeasured epoch: merged %v, report %+v", res.Merged != nil, res.Report)
	}
	for _, sc := range res.Report.Scores {
		if !sc.Unscored {
			t.Fatalf("unmeasured epoch scored %+v", sc)
		}
	}
}
