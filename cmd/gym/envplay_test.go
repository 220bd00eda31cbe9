package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/zooai/gym/internal/tinyllama"
	"github.com/zooai/gym/model/episode"
	"github.com/zooai/gym/model/llama"
)

// chatModelDir writes a tiny random instruct model: ChatConfig weights,
// ChatTokenizer, and Qwen2.5's published chat template.
func chatModelDir(t *testing.T) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "chat-model")
	w, err := tinyllama.Weights(tinyllama.ChatConfig(), 1, 0.02)
	if err != nil {
		t.Fatal(err)
	}
	if err := llama.Save(dir, w); err != nil {
		t.Fatal(err)
	}
	tmpl, err := os.ReadFile("../../model/chat/testdata/templates/Qwen-Qwen2.5-7B-Instruct.jinja")
	if err != nil {
		t.Fatal(err)
	}
	cfg, _ := json.Marshal(map[string]any{"eos_token": "<|im_end|>", "bos_token": nil, "chat_template": string(tmpl)})
	for name, b := range map[string][]byte{"tokenizer.json": tinyllama.ChatTokenizerJSON(), "tokenizer_config.json": cfg} {
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// TestEnvPlay plays episodes of a tiny chat model against the example
// server's guessing game, writes their records, and replays them without
// the server: the same seed gives the same episodes, another does not.
func TestEnvPlay(t *testing.T) {
	url := startEnvExample(t)
	model := chatModelDir(t)
	out := filepath.Join(t.TempDir(), "episodes.jsonl")
	args := []string{"--model", model, "--episodes", "6", "--turns", "3", "--max-tokens", "300", "--seed", "4", "--threads", "1"}
	text := mustGym(t, append([]string{"env", "play", url, "--out", out}, args...)...)
	if !strings.Contains(text, "6 episodes: mean reward") || !strings.Contains(text, `"Guess a whole number from 1 to 100`) {
		t.Fatalf("output:\n%s", text)
	}
	f, err := os.Open(out)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	eps, err := episode.ReadJSONL(f, 100)
	if err != nil || len(eps) != 6 {
		t.Fatalf("%d records: %v", len(eps), err)
	}
	steps := 0
	for _, e := range eps {
		for _, tn := range e.Turns {
			steps += len(tn.Steps)
		}
	}
	if steps == 0 {
		t.Fatalf("no episode reached the environment:\n%s", text)
	}
	t.Logf("%d steps over 6 episodes:\n%s", steps, text)
	if r := mustGym(t, append([]string{"env", "play", "http://127.0.0.1:9", "--replay", out}, args...)...); strings.Count(r, ": the same") != 6 {
		t.Fatalf("replay:\n%s", r)
	}
	args[len(args)-3] = "5" // another seed
	if r := gym(t, append([]string{"env", "play", "http://127.0.0.1:9", "--replay", out}, args...)...); r.code != 1 || !strings.Contains(r.stderr, "replayed differently") {
		t.Fatalf("replay with another seed: %+v", r)
	}
	if r := gym(t, "env", "play", url); r.code != 2 {
		t.Fatalf("no --model: %+v", r)
	}
}

// TestBaseChat renders a conversation with a model directory's template,
// as text and as ids, and refuses a directory without one.
func TestBaseChat(t *testing.T) {
	model := chatModelDir(t)
	msgs := filepath.Join(t.TempDir(), "m.json")
	if err := os.WriteFile(msgs, []byte(`[{"role": "system", "content": "Be brief."}, {"role": "user", "content": "2+2?"}]`), 0o644); err != nil {
		t.Fatal(err)
	}
	text := mustGym(t, "base", "chat", model, "--messages", msgs, "--generation-prompt")
	if want := "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\n2+2?<|im_end|>\n<|im_start|>assistant\n"; text != want {
		t.Fatalf("text %q, want %q", text, want)
	}
	var ids []int
	if err := json.Unmarshal([]byte(mustGym(t, "base", "chat", model, "--messages", msgs, "--generation-prompt", "--ids")), &ids); err != nil {
		t.Fatal(err)
	}
	if want, _ := tinyllama.ChatTokenizer().Encode(text, false); !slices.Equal(ids, want) || ids[0] != 257 {
		t.Fatalf("ids %v, want %v", ids, want)
	}
	dir := t.TempDir()
	if err := llama.Save(dir, mustWeights(t)); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(dir, "tokenizer.json"), tinyllama.ChatTokenizerJSON(), 0o644)
	if r := gym(t, "base", "chat", dir, "--messages", msgs); r.code != 1 || !strings.Contains(r.stderr, "no chat template") {
		t.Fatalf("a model without a template: %+v", r)
	}
	if r := gym(t, "base", "chat", model); r.code != 2 {
		t.Fatalf("no --messages: %+v", r)
	}
}

func mustWeights(t *testing.T) *llama.Weights {
	w, err := tinyllama.Weights(tinyllama.ChatConfig(), 1, 0.02)
	if err != nil {
		t.Fatal(err)
	}
	return w
}
