package main

import (
	"encoding/json"
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
	"github.com/zooai/gym/model/llama"
	"github.com/zooai/gym/model/peft"
)

// TestUpModelDir brings a model as a user would: a tiny random Qwen2 saved
// by transformers with a tokenizer built by tokenizers
// (testdata/make_qwen2.py). gym up --model DIR publishes it into hanzod's
// store as a base-model artifact and submits a job naming its CID; each of
// the 4 worker processes fetches it from hanzod, verifies it and caches it
// under its data directory (none is given the directory), and they train
// it to a published checkpoint; the held-out loss of the reference
// answers falls; the checkpoint names its base by CID, and
// PeftModel.from_pretrained(AutoModelForCausalLM.from_pretrained(DIR),
// checkpoint) loads it with no missing or unexpected keys and gives the Go
// engine's adapted logits within 1e-4.
func TestUpModelDir(t *testing.T) {
	if testing.Short() {
		t.Skip("runs gym up")
	}
	py := pyenv.Require(t, "torch", "transformers", "peft", "tokenizers", "safetensors")
	model := filepath.Join(t.TempDir(), "qwen2-tiny")
	if err := os.MkdirAll(model, 0o755); err != nil {
		t.Fatal(err)
	}
	script, _ := filepath.Abs(filepath.Join("testdata", "make_qwen2.py"))
	cmd := exec.Command(py, script, model)
	cmd.Dir = t.TempDir()
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("make_qwen2.py: %v\n%s", err, out)
	}
	base, err := basemodel.Open(model)
	if err != nil {
		t.Fatal(err)
	}
	root, err := basecache.DirCID(t.Context(), model)
	if err != nil {
		t.Fatal(err)
	}
	base.Name = root.String()

	s, upOut, r := upRunJSON(t, "--model", model, "--prompts", "4")
	if r.code != 0 || s.Status != "published" {
		t.Fatalf("exit %d, status %q (%s)\nstderr:\n%s", r.code, s.Status, s.Reason, r.stderr)
	}
	t.Logf("held-out loss %.4f → %.4f, accuracy %.3f → %.3f", s.LossBefore, s.LossAfter, s.EvalBefore, s.EvalAfter)
	if !(s.LossAfter < s.LossBefore) {
		t.Errorf("held-out loss %.4f → %.4f: training did not lower it", s.LossBefore, s.LossAfter)
	}
	if !strings.Contains(r.stderr, "published into hanzod's store as "+root.String()) {
		t.Errorf("gym up did not say it published the base as %s:\n%s", root, r.stderr)
	}
	for i := range 4 {
		wdir := filepath.Join(upOut, "workers", fmt.Sprintf("w%d", i))
		if got, err := basecache.DirCID(t.Context(), filepath.Join(wdir, "bases", root.String())); err != nil || !got.Equals(root) {
			t.Errorf("w%d's cached base: %v %v", i, got, err)
		}
		ev, _ := os.ReadFile(filepath.Join(wdir, "events.jsonl"))
		if n := strings.Count(string(ev), `"kind":"base_ready"`); n != 1 {
			t.Errorf("w%d: %d base_ready events, want 1", i, n)
		}
		if log, _ := os.ReadFile(filepath.Join(wdir, "worker.log")); strings.Contains(string(log), "--model-dir") {
			t.Errorf("w%d was given the model directory:\n%s", i, log)
		}
	}
	a, cfg, err := peft.Read(s.CheckpointDir, base.Weights.Cfg)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.BaseModel != base.Name || cfg.BaseSHA3 != base.SHA3 {
		t.Errorf("checkpoint names base %q (%s), want %q (%s)", cfg.BaseModel, cfg.BaseSHA3, base.Name, base.SHA3)
	}
	card, _ := os.ReadFile(filepath.Join(s.CheckpointDir, peft.CardFile))
	if !strings.Contains(string(card), base.SHA3) || !strings.Contains(string(card), base.Name) {
		t.Errorf("the model card does not name the base %s (%s):\n%s", base.Name, base.SHA3, card)
	}

	ids := [][]int{{0, 3, 4, 11, 6, 9, 12, 2, 9}, {0, 7, 2, 9, 1, 5, 13, 1, 2}}
	peftScript, _ := filepath.Abs(filepath.Join("..", "..", "model", "peft", "testdata", "peft_logits.py"))
	idsJSON, _ := json.Marshal(ids)
	pc := exec.Command(py, peftScript, model, s.CheckpointDir, string(idsJSON))
	pc.Dir = t.TempDir()
	out, err := pc.Output()
	if err != nil {
		var stderr []byte
		if ee, ok := err.(*exec.ExitError); ok {
			stderr = ee.Stderr
		}
		t.Fatalf("peft_logits.py: %v\n%s", err, stderr)
	}
	var pr struct {
		Missing      []string  `json:"missing"`
		Unexpected   []string  `json:"unexpected"`
		FileTensors  int       `json:"file_tensors"`
		LoRAParams   int       `json:"lora_params"`
		WeightsEqual bool      `json:"weights_equal"`
		Logits       []float64 `json:"logits"`
	}
	if err := json.Unmarshal(out, &pr); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if len(pr.Missing) > 0 || len(pr.Unexpected) > 0 || !pr.WeightsEqual || pr.FileTensors != len(a.Views()) || pr.LoRAParams != len(a.Views()) {
		t.Fatalf("PEFT: missing %v, unexpected %v, weights equal %v, %d file tensors, %d LoRA parameters, want %d",
			pr.Missing, pr.Unexpected, pr.WeightsEqual, pr.FileTensors, pr.LoRAParams, len(a.Views()))
	}
	var flat []int
	for _, s := range ids {
		flat = append(flat, s...)
	}
	md, err := llama.New(base.Weights, a, 2)
	if err != nil {
		t.Fatal(err)
	}
	got, err := md.Logits(flat, len(ids), len(ids[0]))
	if err != nil {
		t.Fatal(err)
	}
	if len(pr.Logits) != len(got) {
		t.Fatalf("PEFT gave %d logits, Go %d", len(pr.Logits), len(got))
	}
	var worst float64
	for i, v := range pr.Logits {
		worst = math.Max(worst, math.Abs(v-float64(got[i])))
	}
	t.Logf("max |PEFT − Go| adapted logits = %.3g", worst)
	if worst > 1e-4 {
		t.Fatalf("max |PEFT − Go| = %g, want ≤ 1e-4", worst)
	}
}
