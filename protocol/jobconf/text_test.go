package jobconf_test

import (
	"context"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/zooai/gym/artifact/basecache"
	"github.com/zooai/gym/internal/pyenv"
	"github.com/zooai/gym/model/basemodel"
	"github.com/zooai/gym/model/heldout"
	"github.com/zooai/gym/model/reward"
	"github.com/zooai/gym/model/trainer"
	"github.com/zooai/gym/protocol/jobconf"
	"github.com/zooai/gym/protocol/jobspec"
)

// TestDatasetTextPrompts: a dataset of English word problems on a model
// whose tokenizer was trained by the test (byte-level BPE, tokenizers)
// gives a plan whose prompts are the templated text, a training step whose
// rewards come from the job's verifiers and stay in their range, and a
// held-out evaluation; a row longer than max_seq_len is refused by name.
func TestDatasetTextPrompts(t *testing.T) {
	py := pyenv.Require(t, "torch", "transformers", "tokenizers", "safetensors")
	model := filepath.Join(t.TempDir(), "text-model")
	if err := os.MkdirAll(model, 0o755); err != nil {
		t.Fatal(err)
	}
	script, _ := filepath.Abs(filepath.Join("testdata", "make_text_model.py"))
	if out, err := exec.Command(py, script, model).CombinedOutput(); err != nil {
		t.Fatalf("make_text_model.py: %v\n%s", err, out)
	}
	base, err := basemodel.Open(model)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	root, err := basecache.DirCID(ctx, model)
	if err != nil {
		t.Fatal(err)
	}
	base.Name = root.String()

	data := t.TempDir()
	var rows strings.Builder
	for i := range 200 {
		a, b := (3*i)%40, (11*i)%40
		fmt.Fprintf(&rows, "{\"question\": \"Lee has %d coins and gets %d more. How many coins does Lee have?\", \"answer\": \"%d + %d = %d. #### %d\"}\n", a, b, a, b, a+b, a+b)
	}
	if err := os.WriteFile(filepath.Join(data, "train.jsonl"), []byte(rows.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	droot, err := basecache.DirCID(ctx, data)
	if err != nil {
		t.Fatal(err)
	}
	rw, err := jobspec.NewRewards([]reward.Term{{Verifier: reward.Numeric, Weight: 1}, {Verifier: reward.Format, Pattern: `^\s*[0-9]+`, Weight: 0.2}, {Verifier: reward.Length, MaxChars: 4, Weight: 0.1}})
	if err != nil {
		t.Fatal(err)
	}
	g := jobconf.BuiltinGSPO(2)
	g.MaxSeqLen = 64
	spec := jobspec.Spec{Model: base.Name, Dataset: droot.String(), Epochs: 1, MinNodes: 3, StepsPerEpoch: 2, PromptsPerStep: 4, Seed: 3, GSPO: g,
		Data:   jobspec.Data{Template: "Question: {question}\nAnswer:", Answer: "answer", Extract: "numeric", HoldOutBP: 2000},
		Reward: rw}
	if err := spec.Normalise(); err != nil {
		t.Fatal(err)
	}
	d, err := jobconf.LoadData(data, spec)
	if err != nil {
		t.Fatal(err)
	}
	plan, err := jobconf.FromSpecData("j", spec, base, d)
	if err != nil {
		t.Fatal(err)
	}
	p := d.Train[0]
	ids, err := base.Tokenizer.Encode(p.Prompt, false)
	if err != nil {
		t.Fatal(err)
	}
	if back, err := base.Tokenizer.Decode(ids, false); err != nil || back != p.Prompt || len(ids) >= len(p.Prompt) {
		t.Fatalf("prompt %q: %d tokens decode to %q (%v)", p.Prompt, len(ids), back, err)
	}
	t.Logf("prompt %q → %d tokens, answer %q", p.Prompt, len(ids), p.Answer)

	tr, err := trainer.New(base.Weights, base.Tokenizer, plan.Trainer, 0, 2)
	if err != nil {
		t.Fatal(err)
	}
	st, err := tr.Step(ctx)
	if err != nil {
		t.Fatal(err)
	}
	set, _ := spec.RewardSet()
	lo, hi := set.Range()
	if math.IsNaN(st.RewardMean) || st.RewardMean < lo || st.RewardMean > hi || math.IsNaN(st.Loss) {
		t.Fatalf("step %+v: reward outside [%v, %v]", st, lo, hi)
	}
	split, _ := plan.Trainer.Split(20)
	ev, err := heldout.EvaluateOn(base.Weights, base.Tokenizer, tr.Adapter(), spec.Dataset, split.Eval, plan.Trainer.Reward, 2)
	if err != nil || ev.N != 20 || math.IsNaN(ev.Loss) {
		t.Fatalf("evaluation %+v %v", ev, err)
	}
	t.Logf("one step: reward %.3f (range [%v, %v]), held-out loss %.3f", st.RewardMean, lo, hi, ev.Loss)

	spec.GSPO.MaxSeqLen = 8
	if _, err := jobconf.FromSpecData("j", spec, base, d); err == nil || !strings.Contains(err.Error(), "gspo.max_seq_len is 8") {
		t.Fatalf("a row longer than max_seq_len: %v", err)
	}
}
