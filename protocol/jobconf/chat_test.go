package jobconf_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/zooai/gym/artifact/basecache"
	"github.com/zooai/gym/internal/pyenv"
	"github.com/zooai/gym/model/basemodel"
	"github.com/zooai/gym/model/heldout"
	"github.com/zooai/gym/model/reward"
	"github.com/zooai/gym/model/task"
	"github.com/zooai/gym/model/trainer"
	"github.com/zooai/gym/protocol/jobconf"
	"github.com/zooai/gym/protocol/jobspec"
)

// TestDatasetChatPrompts: a dataset whose prompt field holds conversations
// (system and user messages, as chat datasets have them) on an instruct
// model with Qwen2.5's published chat template gives a plan whose prompts
// are the template's rendering with a generation prompt — the very token
// ids transformers' apply_chat_template gives — a training step and a
// held-out evaluation; the built-in model, which has no chat template, is
// refused by name.
func TestDatasetChatPrompts(t *testing.T) {
	py := pyenv.Require(t, "torch", "transformers", "tokenizers", "safetensors")
	model := filepath.Join(t.TempDir(), "chat-model")
	if err := os.MkdirAll(model, 0o755); err != nil {
		t.Fatal(err)
	}
	script, _ := filepath.Abs(filepath.Join("testdata", "make_chat_model.py"))
	tmpl, _ := filepath.Abs(filepath.Join("..", "..", "model", "chat", "testdata", "templates", "Qwen-Qwen2.5-7B-Instruct.jinja"))
	if out, err := exec.Command(py, script, model, tmpl).CombinedOutput(); err != nil {
		t.Fatalf("make_chat_model.py: %v\n%s", err, out)
	}
	base, err := basemodel.Open(model)
	if err != nil {
		t.Fatal(err)
	}
	if base.Chat == nil {
		t.Fatalf("no chat template loaded: %v", base.ChatErr)
	}
	ctx := context.Background()
	root, err := basecache.DirCID(ctx, model)
	if err != nil {
		t.Fatal(err)
	}
	base.Name = root.String()

	data := t.TempDir()
	var rows strings.Builder
	for i := range 60 {
		a, b := (3*i)%40, (11*i)%40
		sys := ""
		if i%2 == 0 {
			sys = `{"role": "system", "content": "You are a careful calculator."}, `
		}
		fmt.Fprintf(&rows, "{\"messages\": [%s{\"role\": \"user\", \"content\": \"What is %d plus %d?\"}], \"answer\": \"%d\"}\n", sys, a, b, a+b)
	}
	if err := os.WriteFile(filepath.Join(data, "train.jsonl"), []byte(rows.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	droot, err := basecache.DirCID(ctx, data)
	if err != nil {
		t.Fatal(err)
	}
	rw, err := jobspec.NewRewards([]reward.Term{{Verifier: reward.Numeric, Weight: 1}})
	if err != nil {
		t.Fatal(err)
	}
	g := jobconf.BuiltinGSPO(2)
	g.MaxSeqLen = 96
	spec := jobspec.Spec{Model: base.Name, Dataset: droot.String(), Epochs: 1, MinNodes: 3, StepsPerEpoch: 2, PromptsPerStep: 4, Seed: 3, GSPO: g,
		Data: jobspec.Data{Prompt: "messages", Answer: "answer", HoldOutBP: 2000}, Reward: rw}
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

	// Every prompt, as the trainer tokenizes it, is apply_chat_template's ids.
	all := append(slices.Clone(d.Train), d.Eval...)
	var convs []json.RawMessage
	for _, p := range all {
		if p.Messages == "" || p.Prompt == "" {
			t.Fatalf("row %+v: not a rendered conversation", p)
		}
		convs = append(convs, json.RawMessage(p.Messages))
	}
	in, _ := json.Marshal(convs)
	cmd := exec.Command(py, script, "--ids", model)
	cmd.Stdin = bytes.NewReader(in)
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatal(err)
	}
	var want [][]int
	if err := json.Unmarshal(out, &want); err != nil || len(want) != len(all) {
		t.Fatalf("%d reference id lists for %d rows: %v", len(want), len(all), err)
	}
	for i, p := range all {
		ids, _, err := task.Tokenize(base.Tokenizer, p)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(ids, want[i]) {
			t.Fatalf("row %d %s:\n got %v\nwant %v (apply_chat_template)", i, p.Messages, ids, want[i])
		}
	}
	t.Logf("%d conversations: prompt ids equal apply_chat_template's; e.g. %q", len(all), all[0].Prompt)

	tr, err := trainer.New(base.Weights, base.Tokenizer, plan.Trainer, 0, 2)
	if err != nil {
		t.Fatal(err)
	}
	st, err := tr.Step(ctx)
	if err != nil || math.IsNaN(st.Loss) || st.RewardMean < 0 || st.RewardMean > 1 {
		t.Fatalf("step %+v %v", st, err)
	}
	split, _ := plan.Trainer.Split(10)
	ev, err := heldout.EvaluateOn(base.Weights, base.Tokenizer, tr.Adapter(), spec.Dataset, split.Eval, plan.Trainer.Reward, 2)
	if err != nil || ev.N != 10 || math.IsNaN(ev.Loss) {
		t.Fatalf("evaluation %+v %v", ev, err)
	}

	// A model without a chat template cannot take conversations.
	d2, _ := jobconf.LoadData(data, spec)
	noChat := *base
	noChat.Chat, noChat.ChatErr = nil, nil
	if _, err := jobconf.FromSpecData("j", spec, &noChat, d2); err == nil || !strings.Contains(err.Error(), "no chat template") {
		t.Fatalf("a model without a chat template: %v", err)
	}
}
