package localcluster_test

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/parquet-go/parquet-go"

	"github.com/zooai/gym/artifact/basecache"
	"github.com/zooai/gym/devnet/localcluster"
	"github.com/zooai/gym/model/reward"
	"github.com/zooai/gym/orchestrator/state"
	"github.com/zooai/gym/protocol/jobconf"
	"github.com/zooai/gym/protocol/jobspec"
)

// mathRow is a GSM8K-style row: a question and a worked answer ending in
// "#### N".
type mathRow struct {
	Question string `parquet:"question" json:"question"`
	Answer   string `parquet:"answer" json:"answer"`
}

// mathRows generates n addition word problems for the built-in base
// model. Its tokenizer knows only "^0123456789+=:" (task.Vocab) and it
// writes a sum as three digits, least significant first (the order in
// which a left-to-right model carries), so the question is "23+58" and the
// final answer after "####" is written that way ("180" for 81). The
// worked answer's prose is outside that alphabet: the job keeps only its
// final number (extract: numeric).
func mathRows(r *rand.Rand, n int) []mathRow {
	rows := make([]mathRow, n)
	for i := range rows {
		x, y := r.IntN(100), r.IntN(100)
		s := fmt.Sprintf("%03d", x+y)
		rev := []byte(s)
		slices.Reverse(rev)
		rows[i] = mathRow{
			Question: fmt.Sprintf("%02d+%02d", x, y),
			Answer: fmt.Sprintf("Ones: %d+%d=%d. Tens: %d+%d plus the carry. The sum %d, written from its last digit, is %s.\n#### %s",
				x%10, y%10, x%10+y%10, x/10, y/10, x+y, rev, rev),
		}
	}
	return rows
}

// writeMathDataset writes the same generated dataset as JSONL and as
// Parquet, each in the datasets layout (train and test splits).
func writeMathDataset(t *testing.T, train, test int) (jsonlDir, parquetDir string) {
	t.Helper()
	r := rand.New(rand.NewPCG(42, 15))
	splits := map[string][]mathRow{"train": mathRows(r, train), "test": mathRows(r, test)}
	jsonlDir, parquetDir = filepath.Join(t.TempDir(), "math-jsonl"), filepath.Join(t.TempDir(), "math-parquet")
	for _, d := range []string{jsonlDir, filepath.Join(parquetDir, "data")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for name, rows := range splits {
		var j bytes.Buffer
		for _, row := range rows {
			fmt.Fprintf(&j, "{\"question\": %q, \"answer\": %q}\n", row.Question, row.Answer)
		}
		if err := os.WriteFile(filepath.Join(jsonlDir, name+".jsonl"), j.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
		var p bytes.Buffer
		if err := parquet.Write(&p, rows); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(parquetDir, "data", name+"-00000-of-00001.parquet"), p.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return jsonlDir, parquetDir
}

// mathData is the mapping and reward of the generated dataset.
func mathJob(t *testing.T, spec jobspec.Spec, root string) jobspec.Spec {
	t.Helper()
	spec.Dataset = root
	spec.Data = jobspec.Data{Template: "^{question}=", Answer: "answer", Extract: "numeric", HeldOut: "test"}
	r, err := jobspec.NewRewards([]reward.Term{{Verifier: reward.Numeric, Weight: 1}})
	if err != nil {
		t.Fatal(err)
	}
	spec.Reward = r
	return spec
}

// TestDatasetByCID: a job trains on a dataset named by CID with the
// numeric verifier. The cluster publishes the directory into hanzod's
// store and gives it to nobody: each worker fetches it, verifies it and
// reads it with the job's mapping, and hanzod's validator does the same
// from its store; the held-out accuracy rises. The Parquet export of the
// same rows is another CID with the same problems.
func TestDatasetByCID(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	jsonl, pq := writeMathDataset(t, 3000, 300)
	rootJ, err := basecache.DirCID(ctx, jsonl)
	if err != nil {
		t.Fatal(err)
	}
	rootP, err := basecache.DirCID(ctx, pq)
	if err != nil {
		t.Fatal(err)
	}
	if rootJ == rootP {
		t.Fatal("the JSONL and Parquet directories hash alike")
	}
	probe := mathJob(t, tinySpec(1, 2, 3), rootJ.String())
	dj, err := jobconf.LoadData(jsonl, probe)
	if err != nil {
		t.Fatal(err)
	}
	dp, err := jobconf.LoadData(pq, probe)
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(dj) != fmt.Sprint(dp) || len(dj.Train) != 3000 || len(dj.Eval) != 300 {
		t.Fatalf("JSONL and Parquet give different problems (%d, %d rows)", len(dj.Train), len(dp.Train))
	}

	dir := filepath.Join(t.TempDir(), "up")
	cfg := localcluster.TestConfig(dir, 4)
	cfg.DatasetDir, cfg.EvalSize = jsonl, 300
	spec := tinySpec(2, 10, 4)
	spec.PromptsPerStep, spec.GSPO = 4, jobconf.BuiltinGSPO(5)
	spec = mathJob(t, spec, rootJ.String())
	sum, err := localcluster.Run(ctx, cfg, spec)
	if err != nil {
		t.Fatal(err)
	}
	if sum.Status != "published" {
		t.Fatalf("job %s (%s)", sum.Status, sum.Reason)
	}
	t.Logf("held-out accuracy %.3f → %.3f, loss %.4f → %.4f (300 test problems, numeric verifier)", sum.EvalBefore, sum.EvalAfter, sum.LossBefore, sum.LossAfter)
	if !(sum.EvalAfter > sum.EvalBefore+0.1) {
		t.Errorf("held-out accuracy %.3f → %.3f: training on the dataset did not raise it", sum.EvalBefore, sum.EvalAfter)
	}
	for _, e := range sum.Epochs {
		if e.Accuracy <= 0 {
			t.Errorf("epoch %d: hanzod measured accuracy %v", e.Epoch, e.Accuracy)
		}
	}
	for i := range 4 {
		if _, err := os.Stat(filepath.Join(dir, "workers", fmt.Sprintf("w%d", i), "datasets", rootJ.String(), "train.jsonl")); err != nil {
			t.Errorf("worker %d has no verified copy of the dataset: %v", i, err)
		}
	}
	if sum.Events["worker_dataset_ready"] != 4 {
		t.Errorf("dataset_ready events %v", sum.Events)
	}
}

// TestDatasetMismatch: a job whose mapping names a field the dataset does
// not have is accepted by hanzod (which does not read the rows at
// submission) and refused by every worker with the reason: the job's
// record says which file, line and field; nothing crashes. The cluster's
// own Submit, which plans before submitting, refuses it at once.
func TestDatasetMismatch(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	jsonl, _ := writeMathDataset(t, 50, 10)
	root, err := basecache.DirCID(ctx, jsonl)
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "up")
	cfg := localcluster.TestConfig(dir, 3)
	cfg.DatasetDir = jsonl
	c, err := localcluster.Start(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	spec := mathJob(t, tinySpec(1, 2, 3), root.String())
	spec.Data.Answer = "solution"
	const want = `train.jsonl:1: no field "solution" (the line has fields "answer", "question")`
	if _, err := c.Submit(ctx, spec); err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("submitting a mismatched mapping: %v", err)
	}
	if err := c.StartWorkers(ctx); err != nil {
		t.Fatal(err)
	}
	defer c.StopWorkers()
	if err := c.WaitRegistered(ctx); err != nil {
		t.Fatal(err)
	}
	evs, err := c.Engine().Do(ctx, state.SubmitJob{Spec: spec})
	if err != nil {
		t.Fatal(err)
	}
	job := evs[0].Body.(state.JobSubmitted).Job
	if err := c.WaitJob(ctx, job, func(j state.Job) bool { return len(j.Refusals) == 3 }); err != nil {
		jb, _ := c.Job(job)
		t.Fatalf("refusals %v: %v", jb.Refusals, err)
	}
	jb, _ := c.Job(job)
	for node, why := range jb.Refusals {
		if !strings.Contains(why, want) {
			t.Errorf("node %s refused with %q, want it to say %q", node[:8], why, want)
		}
	}
}
