package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/zooai/gym/model/basemodel"
	"github.com/zooai/gym/model/llama"
	"github.com/zooai/gym/model/peft"
	"github.com/zooai/gym/protocol/delta"
)

// runTrainCmd runs `gym train args...` in process (the command is not wired
// into the root yet) and returns stdout.
func runTrainCmd(t *testing.T, args ...string) (string, error) {
	t.Helper()
	cmd := newTrain()
	var out, errb bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetErr(&errb)
	cmd.SetArgs(args)
	err := cmd.ExecuteContext(context.Background())
	return out.String(), err
}

// TestTrainContract checks the --json contract and the output files on a
// short run, and that two runs with the same seed on different thread counts
// give the same adapter_sha3.
func TestTrainContract(t *testing.T) {
	dir := t.TempDir()
	cfg := filepath.Join(dir, "cfg.json")
	if err := os.WriteFile(cfg, []byte(`{"prompts_per_step": 4, "eval_size": 50, "use_4bit": true}`), 0o644); err != nil {
		t.Fatal(err)
	}
	var hashes []string
	for i, threads := range []string{"1", "2"} {
		out := filepath.Join(dir, "run"+threads)
		stdout, err := runTrainCmd(t, "--config", cfg, "--steps", "3", "--group-size", "4", "--seed", "5",
			"--out", out, "--json", "--threads", threads, "--eval-every", "2")
		if err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(strings.NewReader(stdout))
		var lines []map[string]any
		for sc.Scan() {
			var m map[string]any
			if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
				t.Fatalf("line %q: %v", sc.Text(), err)
			}
			lines = append(lines, m)
		}
		if len(lines) != 4 {
			t.Fatalf("%d JSON lines, want 3 steps + summary:\n%s", len(lines), stdout)
		}
		for s, m := range lines[:3] {
			for _, k := range []string{"step", "reward_mean", "loss", "kl", "clip_frac", "tokens_per_s"} {
				if _, ok := m[k]; !ok {
					t.Fatalf("step line %d lacks %q: %v", s, k, m)
				}
			}
			if m["step"].(float64) != float64(s+1) {
				t.Fatalf("step line %d: %v", s, m["step"])
			}
		}
		final := lines[3]
		for _, k := range []string{"eval_before", "eval_after", "adapter_sha3"} {
			if _, ok := final[k]; !ok {
				t.Fatalf("summary lacks %q: %v", k, final)
			}
		}
		if notes, _ := final["notes"].([]any); len(notes) != 1 || !strings.Contains(notes[0].(string), "use_4bit") {
			t.Fatalf("use_4bit not reported: %v", final["notes"])
		}
		hashes = append(hashes, final["adapter_sha3"].(string))

		// The delta verifies, is signed by the key in DIR, carries the
		// adapter under PEFT's names and the claimed loss; the PEFT
		// checkpoint matches it.
		raw, err := os.ReadFile(filepath.Join(out, "adapter.delta"))
		if err != nil {
			t.Fatal(err)
		}
		d, err := delta.Read(context.Background(), bytes.NewReader(raw), delta.Limits{})
		if err != nil {
			t.Fatal(err)
		}
		if d.Info.Header.Flags != delta.FlagLoRA || d.Info.Metadata == nil {
			t.Fatalf("flags %v metadata %v", d.Info.Header.Flags, d.Info.Metadata)
		}
		if loss, ok := d.Info.Metadata.ClaimedLoss(); !ok || loss != lines[2]["loss"].(float64) {
			t.Fatalf("claimed loss %v, last step loss %v", loss, lines[2]["loss"])
		}
		base, err := basemodel.Builtin()
		if err != nil {
			t.Fatal(err)
		}
		ad, _, err := peft.Read(filepath.Join(out, "checkpoint"), base.Weights.Cfg)
		if err != nil {
			t.Fatal(err)
		}
		ts := ad.Views()
		if len(ts) != len(d.Tensors) || !strings.HasPrefix(ts[0].Name, "base_model.model.model.layers.0.self_attn.q_proj.lora_A") {
			t.Fatalf("%d checkpoint tensors (%s), %d delta tensors", len(ts), ts[0].Name, len(d.Tensors))
		}
		for j := range ts {
			if ts[j].Name != d.Tensors[j].Name || !bytes.Equal(llama.Float32Bytes(ts[j].Data), d.Tensors[j].Data) {
				t.Fatalf("tensor %s differs between delta and safetensors", ts[j].Name)
			}
		}
		if _, err := os.Stat(filepath.Join(out, "reward.png")); err != nil {
			t.Fatal(err)
		}
		if _, err := os.Stat(filepath.Join(out, "node.key")); err != nil && i == 0 {
			t.Fatal(err)
		}
	}
	if hashes[0] != hashes[1] {
		t.Fatalf("adapter_sha3 differs between runs: %s vs %s", hashes[0], hashes[1])
	}
}

func TestTrainRefusesBadConfig(t *testing.T) {
	dir := t.TempDir()
	for _, args := range [][]string{
		{"--task", "chess"},
		{"--group-size", "1"},
		{"--level", "word"},
		{"--eval-every", "0"},
	} {
		if _, err := runTrainCmd(t, append(args, "--out", dir, "--steps", "1")...); err == nil {
			t.Errorf("%v accepted", args)
		} else if !isUsage(err) {
			t.Errorf("%v: %v is not a usage error", args, err)
		}
	}
	bad := filepath.Join(dir, "bad.json")
	os.WriteFile(bad, []byte(`{"no_such_key": 1}`), 0o644)
	if _, err := runTrainCmd(t, "--config", bad, "--out", dir); err == nil {
		t.Error("unknown config key accepted")
	}
}
