package main

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/zooai/gym/internal/tinyllama"
	"github.com/zooai/gym/keys/nodekey"
	"github.com/zooai/gym/model/basemodel"
	"github.com/zooai/gym/model/heldout"
	"github.com/zooai/gym/model/llama"
	"github.com/zooai/gym/model/peft"
	"github.com/zooai/gym/model/task"
	"github.com/zooai/gym/model/trainer"
)

// evalFixture trains an adapter on sort for a few steps and writes it in
// the forms gym eval reads: a PEFT directory, and gym train's
// checkpoint/ and signed adapter.delta.
func evalFixture(t *testing.T) (ad *llama.Adapter, peftDir, trainDir string) {
	t.Helper()
	base, err := basemodel.Builtin()
	if err != nil {
		t.Fatal(err)
	}
	cfg := trainer.DefaultConfig()
	cfg.Task, cfg.Steps, cfg.PromptsPerStep, cfg.GroupSize, cfg.EvalSize = "sort", 3, 4, 4, 50
	tr, err := trainer.New(base.Weights, base.Tokenizer, cfg, 0, 2)
	if err != nil {
		t.Fatal(err)
	}
	var last trainer.StepStats
	for range cfg.Steps {
		if last, err = tr.Step(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	ad = tr.Adapter()
	dir := t.TempDir()
	peftDir = filepath.Join(dir, "ckpt")
	acc := 0.5
	card := peft.Card{BaseModel: base.Name, BaseSHA3: base.SHA3, Job: "job-eval", Epoch: 1, Quality: 0.5,
		Accuracy: &acc, WeightsCID: "bafk-test", Extra: map[string]string{peft.ExtraTask: "sort"}}
	if err := peft.Write(peftDir, ad, card); err != nil {
		t.Fatal(err)
	}
	trainDir = filepath.Join(dir, "train")
	os.MkdirAll(trainDir, 0o755)
	key, _ := nodekey.Generate(nil)
	h := llama.Digest(ad.Views())
	if _, err := trainWriteOutputs(context.Background(), trainDir, key, ad, cfg, last, base, hex.EncodeToString(h[:]),
		[]float64{1}, []float64{0.5}, []trainEvalMark{{Step: 0, Accuracy: 0.1}}); err != nil {
		t.Fatal(err)
	}
	return ad, peftDir, trainDir
}

func TestEval(t *testing.T) {
	ad, peftDir, trainDir := evalFixture(t)
	base, _ := basemodel.Builtin()
	want, err := heldout.Evaluate(base.Weights, base.Tokenizer, ad, "sort", 60, 1)
	if err != nil {
		t.Fatal(err)
	}
	wantBase, err := heldout.Evaluate(base.Weights, base.Tokenizer, nil, "sort", 60, 1)
	if err != nil {
		t.Fatal(err)
	}
	if want == wantBase {
		t.Fatal("the trained adapter scores exactly as the base: the fixture does not test anything")
	}
	h := llama.Digest(ad.Views())
	for _, tc := range []struct{ path, format string }{
		{peftDir, "peft"},
		{filepath.Join(trainDir, "checkpoint"), "peft"},
		{filepath.Join(trainDir, "adapter.delta"), "delta"},
	} {
		out := mustGym(t, "eval", "--checkpoint", tc.path, "--n", "60", "--json", "--threads", "2")
		var got map[string]any
		if err := json.Unmarshal([]byte(out), &got); err != nil {
			t.Fatalf("%s: %v\n%s", tc.format, err, out)
		}
		if strings.Count(out, "\n") != 1 {
			t.Fatalf("%s: more than one line:\n%s", tc.format, out)
		}
		for k, v := range map[string]any{
			"task": "sort", "n": 60.0, "format": tc.format, "adapter_sha3": hex.EncodeToString(h[:]), "base_sha3": base.SHA3,
			"accuracy": want.Accuracy, "reward": want.Reward, "loss": want.Loss,
			"base_accuracy": wantBase.Accuracy, "base_reward": wantBase.Reward, "base_loss": wantBase.Loss,
		} {
			if got[k] != v {
				t.Errorf("%s: %s = %v, want %v", tc.format, k, got[k], v)
			}
		}
		if s, ok := got["seconds"].(float64); !ok || s <= 0 {
			t.Errorf("%s: seconds %v", tc.format, got["seconds"])
		}
	}
	// --k adds pass@k, the same for any thread count, and says so.
	sortTask, _ := task.Lookup("sort")
	wantPass, err := heldout.PassAtK(base.Weights, base.Tokenizer, ad, task.NewSplit(sortTask, 60).Eval, 4, nil, 5, 1, nil)
	if err != nil {
		t.Fatal(err)
	}
	var got struct {
		K       int
		PassAtK float64 `json:"pass_at_k"`
		Seed    uint64
	}
	out := mustGym(t, "eval", "--checkpoint", peftDir, "--n", "60", "--k", "4", "--seed", "5", "--json", "--threads", "2")
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatal(err)
	}
	if got.K != 4 || got.Seed != 5 || got.PassAtK != wantPass {
		t.Errorf("--k 4 --seed 5: %+v, want pass@4 %v", got, wantPass)
	}
	if out := mustGym(t, "eval", "--checkpoint", peftDir, "--n", "20", "--k", "3"); !strings.Contains(out, "pass@3") {
		t.Errorf("the summary lacks pass@3:\n%s", out)
	}
	// --task overrides the recorded task; the human summary names it.
	out = mustGym(t, "eval", "--checkpoint", peftDir, "--n", "20", "--task", "addition")
	for _, s := range []string{"addition", "20 held-out problems", "accuracy", "reward", "loss", "nats/token"} {
		if !strings.Contains(out, s) {
			t.Errorf("summary lacks %q:\n%s", s, out)
		}
	}
}

func TestEvalRefuses(t *testing.T) {
	ad, _, trainDir := evalFixture(t)
	trainCheckpoint := filepath.Join(trainDir, "checkpoint")
	dir := t.TempDir()
	wrongBase := filepath.Join(dir, "wrongbase")
	if err := peft.Write(wrongBase, ad, peft.Card{BaseSHA3: strings.Repeat("0", 64)}); err != nil {
		t.Fatal(err)
	}
	other := tinyOtherBase(t)
	junk := filepath.Join(dir, "junk.safetensors")
	os.WriteFile(junk, []byte("not an adapter"), 0o644)
	for _, tc := range []struct {
		args []string
		code int
		say  string
	}{
		{[]string{"eval"}, 2, "--checkpoint is required"},
		{[]string{"eval", "--checkpoint", dir, "--task", "chess"}, 2, "unknown task"},
		{[]string{"eval", "--checkpoint", dir, "--n", "0"}, 2, "--n 0"},
		{[]string{"eval", "--checkpoint", dir}, 1, "has no adapter_model.safetensors: pass the directory gym up/hanzod published"},
		{[]string{"eval", "--checkpoint", filepath.Join(dir, "missing")}, 1, "no such file"},
		{[]string{"eval", "--checkpoint", filepath.Dir(trainCheckpoint)}, 1, "pass --checkpoint " + trainCheckpoint},
		{[]string{"eval", "--checkpoint", wrongBase}, 1, "pass --model"},
		{[]string{"eval", "--checkpoint", junk}, 1, "is not a signed delta"},
		{[]string{"eval", "--model", other, "--checkpoint", trainCheckpoint}, 1, "pass --model"},
		{[]string{"eval", "--model", filepath.Join(dir, "nomodel"), "--checkpoint", trainCheckpoint}, 1, "--model " + filepath.Join(dir, "nomodel")},
	} {
		r := gym(t, tc.args...)
		if r.code != tc.code || !strings.Contains(r.stderr, tc.say) {
			t.Errorf("gym %v: exit %d, stderr %q; want exit %d saying %q", tc.args, r.code, r.stderr, tc.code, tc.say)
		}
	}
}

// tinyOtherBase saves a random model of another shape than the built-in
// base, with the built-in tokenizer, as a Hugging Face directory.
func tinyOtherBase(t *testing.T) string {
	t.Helper()
	c := tinyllama.Config()
	c.Hidden, c.Intermediate = 16, 24
	w, err := tinyllama.Weights(c, 3, 0.3)
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "other")
	if err := llama.Save(dir, w); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "tokenizer.json"), tinyllama.TokenizerJSON(), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}
