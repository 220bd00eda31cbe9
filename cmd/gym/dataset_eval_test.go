package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/zooai/gym/trace"
)

// writeSums writes a small GSM8K-style dataset in the built-in base's
// alphabet (docs/datasets.md): train and test splits of "xx+yy" questions
// whose worked answers end "#### " and the sum's digits, last first.
func writeSums(t *testing.T, train, test int) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "sums")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	r := rand.New(rand.NewPCG(7, 8))
	for split, n := range map[string]int{"train": train, "test": test} {
		var b bytes.Buffer
		for range n {
			x, y := r.IntN(100), r.IntN(100)
			rev := []byte(fmt.Sprintf("%03d", x+y))
			slices.Reverse(rev)
			fmt.Fprintf(&b, "{\"question\": \"%02d+%02d\", \"answer\": \"The sum is %d.\\n#### %s\"}\n", x, y, x+y, rev)
		}
		if err := os.WriteFile(filepath.Join(dir, split+".jsonl"), b.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// TestEvalDatasetAgreesWithUp: gym up trains on a dataset file; gym eval
// on the published checkpoint with the same dataset, mapping and reward
// gives the accuracy and loss gym up's summary reports, before and after;
// gym rollout samples the same dataset's held-out prompts and scores them
// with the job's reward.
func TestEvalDatasetAgreesWithUp(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end run")
	}
	dir := writeSums(t, 600, 120)
	mapping := []string{"--dataset", dir, "--template", "^{question}=", "--answer-field", "answer", "--extract", "numeric",
		"--held-out", "test", "--reward", `[{"verifier":"numeric","weight":1}]`}
	out := filepath.Join(t.TempDir(), "up")
	r := gym(t, append([]string{"up", "--out", out, "--json", "--workers", "3", "--epochs", "1", "--steps-per-epoch", "4",
		"--interval", "2", "--timeout", "12m"}, mapping...)...)
	var s struct {
		Status        string  `json:"status"`
		Reason        string  `json:"reason"`
		Before        float64 `json:"eval_before"`
		After         float64 `json:"eval_after"`
		LossBefore    float64 `json:"loss_before"`
		LossAfter     float64 `json:"loss_after"`
		CheckpointDir string  `json:"checkpoint_dir"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &s); err != nil || r.code != 0 || s.Status != "published" {
		t.Fatalf("gym up: exit %d, %v, status %q (%s)\n%s", r.code, err, s.Status, s.Reason, r.stderr)
	}
	var e evalSummary
	if err := json.Unmarshal([]byte(mustGym(t, append([]string{"eval", "--checkpoint", s.CheckpointDir, "--n", "500", "--json"}, mapping...)...)), &e); err != nil {
		t.Fatal(err)
	}
	t.Logf("gym up: accuracy %.4f → %.4f, loss %.4f → %.4f; gym eval: %.4f → %.4f, %.4f → %.4f on %d problems",
		s.Before, s.After, s.LossBefore, s.LossAfter, e.BaseAccuracy, e.Accuracy, e.BaseLoss, e.Loss, e.N)
	if e.N != 120 || e.Accuracy != s.After || e.BaseAccuracy != s.Before || e.Loss != s.LossAfter || e.BaseLoss != s.LossBefore {
		t.Errorf("gym eval %+v disagrees with gym up's summary", e)
	}
	tr, err := trace.Read(bytes.NewReader([]byte(mustGym(t, append([]string{"rollout", "--checkpoint", s.CheckpointDir, "--eval", "--n", "6",
		"--group", "2", "--out", "-"}, mapping...)...))), trace.DefaultLimits())
	if err != nil {
		t.Fatal(err)
	}
	if tr.Header.Dataset != e.Task || len(tr.Seqs) != 12 || tr.Seqs[0].PromptText[0] != '^' {
		t.Errorf("rollout on the dataset: header %+v, %d sequences, first prompt %q", tr.Header, len(tr.Seqs), tr.Seqs[0].PromptText)
	}
	for _, q := range tr.Seqs {
		if q.Reward != 0 && q.Reward != 1 {
			t.Errorf("numeric reward %v, want 0 or 1", q.Reward)
		}
	}
}
