package main

import (
	"bytes"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/zooai/gym/model/task"
	"github.com/zooai/gym/protocol/trace"
)

// TestRollout: gym rollout writes traces the trace reader accepts, the same
// file for any --threads, to a file or standard output; a checkpoint
// changes the policy recorded and the completions; the held-out split
// takes the held-out problems.
func TestRollout(t *testing.T) {
	_, peftDir, _ := evalFixture(t)
	dir := t.TempDir()
	read := func(b []byte) *trace.Set {
		t.Helper()
		s, err := trace.Read(bytes.NewReader(b), trace.DefaultLimits())
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	a := filepath.Join(dir, "a.jsonl")
	r := gym(t, "rollout", "--dataset", "sort", "--n", "6", "--group", "3", "--seed", "5", "--threads", "1", "--out", a)
	if r.code != 0 || !strings.Contains(r.stderr, "18 completions") || !strings.Contains(r.stderr, "sampled 6/6 prompts") {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	raw, err := os.ReadFile(a)
	if err != nil {
		t.Fatal(err)
	}
	s := read(raw)
	if s.Header.Dataset != "sort" || s.Header.Model != "builtin" || s.Header.Policy != "" || s.Header.Seed != 5 || len(s.Seqs) != 18 {
		t.Fatalf("header %+v, %d sequences", s.Header, len(s.Seqs))
	}
	// The rewards are the task's for the recorded text, recomputed exactly.
	for i, q := range s.Seqs {
		if got := task.Reward(task.Problem{Prompt: q.PromptText, Answer: q.Answer}, q.Completion); got != q.Reward {
			t.Errorf("sequence %d: reward %v recorded, %v recomputed", i, q.Reward, got)
		}
	}
	if out := mustGym(t, "rollout", "--dataset", "sort", "--n", "6", "--group", "3", "--seed", "5", "--threads", "3", "--out", "-"); out != string(raw) {
		t.Errorf("--threads 3 to stdout wrote a different file")
	}
	// --out x.parquet: the same set as Parquet.
	pq := filepath.Join(dir, "a.parquet")
	mustGym(t, "rollout", "--dataset", "sort", "--n", "6", "--group", "3", "--seed", "5", "--out", pq)
	praw, err := os.ReadFile(pq)
	if err != nil {
		t.Fatal(err)
	}
	if ps, err := trace.ReadParquet(bytes.NewReader(praw), int64(len(praw)), trace.DefaultLimits()); err != nil || !reflect.DeepEqual(ps, s) {
		t.Errorf("--out .parquet: %v (same set: %v)", err, err == nil && reflect.DeepEqual(ps, s))
	}
	ck := read([]byte(mustGym(t, "rollout", "--dataset", "sort", "--n", "6", "--group", "3", "--seed", "5", "--checkpoint", peftDir, "--out", "-")))
	if len(ck.Header.Policy) != 64 || reflect.DeepEqual(ck.Seqs, s.Seqs) {
		t.Errorf("with a checkpoint: policy %q, same completions %v", ck.Header.Policy, reflect.DeepEqual(ck.Seqs, s.Seqs))
	}
	test := read([]byte(mustGym(t, "rollout", "--dataset", "sort", "--eval", "--n", "2", "--group", "1", "--out", "-")))
	if len(test.Seqs) != 2 || test.Seqs[0].PromptText == s.Seqs[0].PromptText {
		t.Errorf("test split: %+v", test.Seqs)
	}
	for _, bad := range [][]string{{"--n", "3"}, {"--out", "-"}, {"--n", "3", "--out", "-", "--dataset", "sort", "--template", "^{q}="}, {"--n", "3", "--out", "-", "--dataset", "nope"},
		{"--n", "3", "--out", "-", "--temperature", "0"}} {
		if r := gym(t, append([]string{"rollout"}, bad...)...); r.code != 2 {
			t.Errorf("gym rollout %v: exit %d, want 2 (usage)\n%s", bad, r.code, r.stderr)
		}
	}
}
