package main

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/zooai/gym/basemodel"
	"github.com/zooai/gym/heldout"
	"github.com/zooai/gym/model"
	"github.com/zooai/gym/nodekey"
	"github.com/zooai/gym/peft"
	"github.com/zooai/gym/trainer"
)

// evalFixture trains an adapter on sort for a few steps and writes it in
// all three forms gym eval reads: a PEFT directory, gym train's
// adapter.safetensors and its signed adapter.delta.
func evalFixture(t *testing.T) (ad *model.Adapter, peftDir, trainDir string) {
	t.Helper()
	base, err := basemodel.Load()
	if err != nil {
		t.Fatal(err)
	}
	cfg := trainer.DefaultConfig()
	cfg.Task, cfg.Steps, cfg.PromptsPerStep, cfg.GroupSize, cfg.EvalSize = "sort", 3, 4, 4, 50
	tr, err := trainer.New(base, cfg, 0, 2)
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
	card := peft.Card{BaseModel: "zooai/gym-base", BaseSHA3: basemodel.SHA3(), Job: "job-eval", Epoch: 1, Quality: 0.5,
		Accuracy: &acc, WeightsCID: "bafk-test", Extra: map[string]string{peft.ExtraTask: "sort"}}
	if err := peft.Write(peftDir, ad, card); err != nil {
		t.Fatal(err)
	}
	trainDir = filepath.Join(dir, "train")
	os.MkdirAll(trainDir, 0o755)
	key, _ := nodekey.Generate(nil)
	h := model.Digest(ad.Tensors())
	if _, err := trainWriteOutputs(context.Background(), trainDir, key, ad, cfg, last, basemodel.SHA3(), hex.EncodeToString(h[:]),
		[]float64{1}, []float64{0.5}, []trainEvalMark{{Step: 0, Accuracy: 0.1}}); err != nil {
		t.Fatal(err)
	}
	return ad, peftDir, trainDir
}

func TestEval(t *testing.T) {
	ad, peftDir, trainDir := evalFixture(t)
	base, _ := basemodel.Load()
	want, err := heldout.Evaluate(base, ad, "sort", 60, 1)
	if err != nil {
		t.Fatal(err)
	}
	wantBase, err := heldout.Evaluate(base, nil, "sort", 60, 1)
	if err != nil {
		t.Fatal(err)
	}
	if want == wantBase {
		t.Fatal("the trained adapter scores exactly as the base: the fixture does not test anything")
	}
	h := model.Digest(ad.Tensors())
	for _, tc := range []struct{ path, format string }{
		{peftDir, "peft"},
		{filepath.Join(trainDir, "adapter.safetensors"), "safetensors"},
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
			"task": "sort", "n": 60.0, "format": tc.format, "adapter_sha3": hex.EncodeToString(h[:]), "base_sha3": basemodel.SHA3(),
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
	// --task overrides the recorded task; the human summary names it.
	out := mustGym(t, "eval", "--checkpoint", peftDir, "--n", "20", "--task", "addition")
	for _, s := range []string{"addition", "20 held-out problems", "accuracy", "reward", "loss", "nats/token"} {
		if !strings.Contains(out, s) {
			t.Errorf("summary lacks %q:\n%s", s, out)
		}
	}
}

func TestEvalRefuses(t *testing.T) {
	ad, _, trainDir := evalFixture(t)
	trainSafetensors := filepath.Join(trainDir, "adapter.safetensors")
	dir := t.TempDir()
	wrongBase := filepath.Join(dir, "wrongbase")
	if err := peft.Write(wrongBase, ad, peft.Card{BaseSHA3: strings.Repeat("0", 64)}); err != nil {
		t.Fatal(err)
	}
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
		{[]string{"eval", "--checkpoint", filepath.Dir(trainSafetensors)}, 1, "pass --checkpoint " + trainSafetensors},
		{[]string{"eval", "--checkpoint", wrongBase}, 1, "pass --base"},
		{[]string{"eval", "--checkpoint", junk}, 1, "neither a signed delta nor an adapter.safetensors"},
	} {
		r := gym(t, tc.args...)
		if r.code != tc.code || !strings.Contains(r.stderr, tc.say) {
			t.Errorf("gym %v: exit %d, stderr %q; want exit %d saying %q", tc.args, r.code, r.stderr, tc.code, tc.say)
		}
	}
}
