package localcluster_test

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/zooai/gym/artifact/basecache"
	"github.com/zooai/gym/devnet/localcluster"
	"github.com/zooai/gym/internal/tinyllama"
	"github.com/zooai/gym/model/llama"
	"github.com/zooai/gym/model/peft"
	"github.com/zooai/gym/protocol/jobconf"
)

// tinyQwen2Dir writes a tiny random Qwen2-style model directory
// (config.json, model.safetensors, tokenizer.json) as a user would bring
// one.
func tinyQwen2Dir(t *testing.T) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "qwen2-tiny")
	w, err := tinyllama.Weights(tinyllama.Config(), 3, 0.2)
	if err != nil {
		t.Fatal(err)
	}
	if err := llama.Save(dir, w); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "tokenizer.json"), tinyllama.TokenizerJSON(), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

// TestBaseByCID: a job names a base model by CID. The cluster publishes
// the directory into hanzod's store and gives it to nobody: every worker
// fetches it from hanzod, verifies it against the CID and caches it under
// its data directory, and so does hanzod's validator from its store. One
// worker is allowed less memory than the job needs: it refuses, the job's
// record at hanzod says why with the figures, and the three others train
// the job to a published checkpoint on which the held-out loss fell.
// NodeSummaryRef is the liar's id and slashes.
type NodeSummaryRef struct {
	id      string
	slashes []string
}

func TestBaseByCID(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	model := tinyQwen2Dir(t)
	root, err := basecache.DirCID(ctx, model)
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "up")
	cfg := localcluster.TestConfig(dir, 4)
	cfg.ModelDir = model
	cfg.MemoryLimit = []int64{64 << 10} // w0: 64 KiB
	// hanzod never decodes the base: validators check the sampled deltas
	// and measure each epoch's held-out figures, two agreeing; the third
	// lies (it reports every checkpoint 25 points better).
	cfg.Validators = []string{"", "", "verdict-flip"}
	spec := tinySpec(2, 6, 3)
	spec.MaxNodes, spec.Model, spec.PromptsPerStep, spec.GSPO = 4, root.String(), 4, jobconf.BuiltinGSPO(3)
	sum, err := localcluster.Run(ctx, cfg, spec)
	if err != nil {
		t.Fatal(err)
	}
	if sum.Status != "published" {
		t.Fatalf("job %s (%s)", sum.Status, sum.Reason)
	}
	t.Logf("held-out loss %.4f → %.4f, accuracy %.3f → %.3f", sum.LossBefore, sum.LossAfter, sum.EvalBefore, sum.EvalAfter)
	if sum.HanzodBaseLoads != 0 {
		t.Errorf("hanzod decoded %d bases; its model work runs on the validators", sum.HanzodBaseLoads)
	}
	var liar NodeSummaryRef
	for _, n := range sum.Nodes {
		if n.Attack == "verdict-flip" {
			liar = NodeSummaryRef{n.ID, n.Slashes}
		}
	}
	for _, e := range sum.Epochs {
		t.Logf("epoch %d: accuracy %.3f measured by %d validators, %d trace checks", e.Epoch, e.Accuracy, len(e.Evaluators), len(e.TraceChecks))
		if len(e.Evaluators) < 2 || e.Unmeasured != "" || slices.Contains(e.Evaluators, liar.id) {
			t.Errorf("epoch %d measured by %v (%s), want two agreeing honest validators", e.Epoch, e.Evaluators, e.Unmeasured)
		}
		for _, c := range e.TraceChecks {
			if len(c.Validators) < 2 || c.Validators[0] == "hanzod" || c.Failed != "" {
				t.Errorf("check %s by %v: failed %q", c.Slot, c.Validators, c.Failed)
			}
		}
	}
	if !(sum.LossAfter < sum.LossBefore) {
		t.Errorf("held-out loss %.4f → %.4f: training did not lower it", sum.LossBefore, sum.LossAfter)
	}
	// The liar is slashed for each answer the others contradicted (it is
	// drawn for some checks only: hanzod's key, which keys the draw, is
	// fresh each run); the honest validators never are.
	t.Logf("the lying validator's slashes: %v", liar.slashes)
	for _, r := range liar.slashes {
		if !strings.Contains(r, "false_verdict") {
			t.Errorf("the liar slashed for %q", r)
		}
	}
	for _, n := range sum.Nodes {
		if n.Role == "validator" && n.Attack == "" && len(n.Slashes) > 0 {
			t.Errorf("honest validator %s slashed: %v", n.Name, n.Slashes)
		}
	}
	w0 := sum.Nodes[0]
	t.Logf("w0 refused: %s", w0.Refused)
	for _, want := range []string{"does not fit", "this worker's limit is 0.0625 MiB", "parameters × 4 bytes"} {
		if !strings.Contains(w0.Refused, want) {
			t.Errorf("hanzod's record of w0's refusal %q does not say %q", w0.Refused, want)
		}
	}
	if w0.Accepted != 0 {
		t.Errorf("w0 refused the job and had %d deltas accepted", w0.Accepted)
	}
	for _, n := range sum.Nodes[1:] {
		if n.Role == "validator" {
			continue
		}
		if n.Refused != "" || n.Accepted != 4 {
			t.Errorf("%s: refused %q, %d deltas accepted, want 4", n.Name, n.Refused, n.Accepted)
		}
	}
	// Every worker and hanzod hold the base where their caches keep it,
	// verified; nobody was handed the directory.
	for _, d := range []string{"workers/w1", "workers/w2", "workers/w3", "hanzod"} {
		p := filepath.Join(dir, d, "bases", root.String())
		got, err := basecache.DirCID(ctx, p)
		if err != nil || !got.Equals(root) {
			t.Errorf("%s: %v %v", p, got, err)
		}
	}
	// The checkpoint names its base by CID.
	_, pc, err := peft.Read(sum.CheckpointDir, tinyllama.Config())
	if err != nil {
		t.Fatal(err)
	}
	if pc.BaseModel != root.String() {
		t.Errorf("the checkpoint's base is %q, want %s", pc.BaseModel, root)
	}
}
