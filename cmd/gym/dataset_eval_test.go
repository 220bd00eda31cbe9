package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/zooai/gym/protocol/trace"
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

// TestUpDatasetSeqLen: gym up plans the job on the dataset before anything
// starts. With --max-seq-len below what the rows need, it refuses with the
// numbers and starts nothing; without it, max_seq_len is raised to the
// longest prompt and answer (the built-in profile's 12 refused every text
// dataset before).
func TestUpDatasetSeqLen(t *testing.T) {
	dir := writeSums(t, 60, 12)
	mapping := []string{"--dataset", dir, "--template", "^What is {question}? =", "--answer-field", "answer", "--held-out", "test"}
	out := filepath.Join(t.TempDir(), "up")
	r := gym(t, append([]string{"up", "--out", out, "--workers", "3", "--max-seq-len", "6"}, mapping...)...)
	if r.code != 2 || !strings.Contains(r.stderr, "gspo.max_seq_len is 6") {
		t.Fatalf("--max-seq-len 6: exit %d, want 2 naming the need\n%s", r.code, r.stderr)
	}
	if _, err := os.Stat(filepath.Join(out, "hanzod")); err == nil {
		t.Error("hanzod was started for a job refused up front")
	}
	// Without it the job is sized to the rows: planned, printed, nothing
	// started.
	r = gym(t, append([]string{"up", "--out", out, "--workers", "3", "--dry-run"}, mapping...)...)
	var spec struct {
		GSPO struct {
			MaxSeqLen int `json:"max_seq_len"`
		} `json:"gspo"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &spec); r.code != 0 || err != nil {
		t.Fatalf("--dry-run: exit %d, %v\n%s\n%s", r.code, err, r.stdout, r.stderr)
	}
	if spec.GSPO.MaxSeqLen <= 12 || !strings.Contains(r.stderr+r.stdout, fmt.Sprintf("gspo.max_seq_len 12 → %d", spec.GSPO.MaxSeqLen)) {
		t.Errorf("max_seq_len %d: not raised from the profile's 12 to the rows' need\n%s", spec.GSPO.MaxSeqLen, r.stderr)
	}
	if _, err := os.Stat(filepath.Join(out, "hanzod")); err == nil {
		t.Error("hanzod was started by --dry-run")
	}
	// A model directory is planned as the workers will see it: named by
	// its CID.
	model := filepath.Join(t.TempDir(), "model")
	mustGym(t, "base", "export", model)
	r = gym(t, append([]string{"up", "--out", out, "--workers", "3", "--dry-run", "--model", model}, mapping...)...)
	if r.code != 0 || !strings.Contains(r.stdout, `"model": "bafy`) {
		t.Errorf("--model DIR --dry-run: exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
}
