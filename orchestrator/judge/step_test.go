package judge_test

import (
	"bytes"
	"crypto/ed25519"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/zooai/gym/artifact"
	"github.com/zooai/gym/artifact/store"
	"github.com/zooai/gym/orchestrator/judge"
	"github.com/zooai/gym/orchestrator/state"
)

// TestEpochGrace: an epoch whose member never submits ends only once the
// grace after the first finished member has passed on the (fake) clock,
// and is merged from what was submitted.
func TestEpochGrace(t *testing.T) {
	e := newEnv(t, 3, tinySpec())
	h := honestEpoch1(t, e)
	absent := h.ring[1]
	for k := 1; k < len(h.files); k++ {
		for _, i := range h.ring {
			if i != absent {
				e.expectAccept(h.files[k][i])
			}
		}
	}
	step := func() {
		t.Helper()
		if err := e.j.Step(e.ctx); err != nil {
			t.Fatal(err)
		}
	}
	step() // the first finished member is seen now
	e.advance(119 * time.Second)
	step()
	if jb := e.jobState(); jb.State != state.Running || jb.Epoch != 1 {
		t.Fatalf("job %s in epoch %d before the grace (2 min) passed", jb.State, jb.Epoch)
	}
	e.advance(2 * time.Second)
	e.stepUntil("epoch 1 merged after the grace", func(jb state.Job) bool { return jb.State == state.Running && jb.Epoch == 2 })
	e.checkPublished(1)
	r := e.report(1)
	if len(r.Scores) != 4 {
		t.Fatalf("%d scores, want the 4 submitted deltas", len(r.Scores))
	}
	// Without the absent member's sync-1 delta the ring's result cannot be
	// rebuilt: say so rather than blame the others.
	if len(r.RingDisagreements) > 0 || len(r.RingUnknown) != 1 || r.RingUnknown[0] != 1 {
		t.Fatalf("ring disagreements %v, unknown %v; want sync 1 unknown", r.RingDisagreements, r.RingUnknown)
	}
	for _, i := range h.ring {
		if sl := e.slashes(e.ids[i]); len(sl) > 0 {
			t.Fatalf("node %d slashed: %+v", i, sl)
		}
	}
}

// TestConcurrentSubmitAndStep submits an epoch's deltas from several
// goroutines (and every one twice) while Step runs: every delta is
// accepted exactly once and the epoch publishes. Run with -race.
func TestConcurrentSubmitAndStep(t *testing.T) {
	e := newEnv(t, 3, tinySpec())
	h := honestEpoch1(t, e)
	var files [][]byte
	for k := 1; k < len(h.files); k++ {
		for _, i := range h.ring {
			files = append(files, h.files[k][i])
		}
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	accepted, dups := 0, 0
	for _, i := range h.ring {
		wg.Go(func() {
			for k := 1; k < len(h.files); k++ {
				for range 2 {
					r, err := e.j.Submit(e.ctx, h.files[k][i], nil)
					if err != nil {
						t.Error(err)
						return
					}
					mu.Lock()
					switch {
					case r.Duplicate:
						dups++
					case r.Accepted:
						accepted++
					default:
						t.Errorf("node %d sync %d: %+v", i, k, r)
					}
					mu.Unlock()
				}
			}
		})
	}
	stop := make(chan struct{})
	var sw sync.WaitGroup
	sw.Go(func() {
		for {
			select {
			case <-stop:
				return
			default:
			}
			if err := e.j.Step(e.ctx); err != nil {
				t.Error(err)
				return
			}
		}
	})
	wg.Wait()
	close(stop)
	sw.Wait()
	if accepted != len(files) || dups != len(files) {
		t.Fatalf("%d accepted and %d duplicates, want %d of each", accepted, dups, len(files))
	}
	e.stepUntil("epoch 1 merged", func(jb state.Job) bool { return jb.State == state.Running && jb.Epoch == 2 })
	e.checkPublished(1)
	if r := e.report(1); len(r.Scores) != len(files) || len(r.RingDisagreements) > 0 || len(r.RingUnknown) > 0 {
		t.Fatalf("report: %d scores, disagreements %v, unknown %v", len(r.Scores), r.RingDisagreements, r.RingUnknown)
	}
}

// TestSettleFailedJob: a failed job is settled once with a signed record
// naming no checkpoint.
func TestSettleFailedJob(t *testing.T) {
	e := newEnv(t, 3, tinySpec())
	e.expectAccept(e.good(0, 1, 1))
	e.do(state.FailJob{Job: e.job, Reason: "operator"})
	e.stepUntil("settled", func(jb state.Job) bool { return jb.Settled })
	if err := e.j.Step(e.ctx); err != nil { // nothing left to do
		t.Fatal(err)
	}
	var rec []state.JobSettled
	for _, ev := range e.events() {
		if s, ok := ev.Body.(state.JobSettled); ok {
			rec = append(rec, s)
		}
	}
	if len(rec) != 1 {
		t.Fatalf("%d settlements, want 1", len(rec))
	}
	if !judge.VerifyRecord(judgeKey().Public().(ed25519.PublicKey), "settlement", rec[0].Record, rec[0].Signature) {
		t.Fatal("settlement record does not verify")
	}
	if judge.VerifyRecord(nodeKey(0).Public().(ed25519.PublicKey), "settlement", rec[0].Record, rec[0].Signature) {
		t.Fatal("settlement verifies under another key")
	}
	var s judge.Settlement
	if err := json.Unmarshal([]byte(rec[0].Record), &s); err != nil {
		t.Fatal(err)
	}
	if s.State != string(state.Failed) || s.Checkpoint != "" || s.Nodes[e.ids[0]].Accepted != 1 {
		t.Fatalf("settlement %s", rec[0].Record)
	}
}

// TestMetrics: verdicts and slashes are counted by reason and offence.
func TestMetrics(t *testing.T) {
	e := newEnv(t, 3, tinySpec())
	a := e.good(0, 1, 1)
	e.expectAccept(a)
	e.submit(a)
	e.expectReject(e.good(0, 1, 2), true, judge.ReasonEquivocation)
	e.expectReject([]byte("x"), false, judge.ReasonFormat)
	var b bytes.Buffer
	e.j.WriteMetrics(&b)
	for _, want := range []string{
		`gym_hanzod_deltas_total{verdict="accepted",reason=""} 1`,
		`gym_hanzod_deltas_total{verdict="duplicate",reason=""} 1`,
		`gym_hanzod_deltas_total{verdict="rejected",reason="equivocation"} 1`,
		`gym_hanzod_deltas_total{verdict="rejected",reason="format"} 1`,
		`gym_hanzod_slashes_total{offence="equivocation"} 1`,
		`gym_hanzod_slashes_total{offence="norm"} 0`,
		`gym_hanzod_merges_total 0`,
	} {
		if !strings.Contains(b.String(), want+"\n") {
			t.Errorf("metrics lack %q:\n%s", want, b.String())
		}
	}
}

// TestRestartMidMerge: a merge repeated by a restarted judge after the
// checkpoint reached the store (but before the publication was logged)
// finds its own earlier publication and publishes the same CID; a store
// holding another checkpoint under that version is refused.
func TestRestartMidMerge(t *testing.T) {
	long(t)
	submitAll := func(e *env) {
		h := honestEpoch1(t, e)
		for k := 1; k < len(h.files); k++ {
			for _, i := range h.ring {
				e.expectAccept(h.files[k][i])
			}
		}
		e.stepUntil("epoch 1 ended", func(jb state.Job) bool { return jb.State == state.Aggregating })
	}
	a := newEnv(t, 3, tinySpec())
	submitAll(a)
	a.stepUntil("epoch 1 merged", func(jb state.Job) bool { return jb.State == state.Running && jb.Epoch == 2 })
	want := a.published(1).CID

	b := newEnv(t, 3, tinySpec())
	submitAll(b)
	if _, err := b.arts.Publish(b.ctx, a.j.CheckpointDir(a.job, 1), store.Meta{Kind: artifact.KindCheckpoint, Name: b.job, Version: 1},
		judgeKey(), b.clk.Now()); err != nil {
		t.Fatal(err)
	}
	b.restartJudge()
	b.stepUntil("epoch 1 merged after a restart", func(jb state.Job) bool { return jb.State == state.Running && jb.Epoch == 2 })
	b.checkPublished(1)
	if got := b.published(1).CID; got != want {
		t.Fatalf("CID %s after the restart, %s before", got, want)
	}

	c := newEnv(t, 3, tinySpec())
	submitAll(c)
	other := t.TempDir()
	if err := os.WriteFile(filepath.Join(other, "adapter_model.safetensors"), []byte("not this one"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := c.arts.Publish(c.ctx, other, store.Meta{Kind: artifact.KindCheckpoint, Name: c.job, Version: 1}, judgeKey(), c.clk.Now()); err != nil {
		t.Fatal(err)
	}
	if err := c.j.Step(c.ctx); err == nil || !strings.Contains(err.Error(), "another root") {
		t.Fatalf("Step over a store holding another version 1: %v", err)
	}
	if jb := c.jobState(); jb.State != state.Aggregating || len(jb.CIDs) != 0 {
		t.Fatalf("job %s with cids %v after a refused publication", jb.State, jb.CIDs)
	}
}

// TestMergeKeepsFailing: when an epoch's merge cannot succeed (here the
// accepted delta files vanished from disk), the judge retries, then fails
// the job with the reason instead of holding it and its stakes for ever.
func TestMergeKeepsFailing(t *testing.T) {
	e := newEnv(t, 3, tinySpec())
	h := honestEpoch1(t, e)
	for k := 1; k < len(h.files); k++ {
		for _, i := range h.ring {
			e.expectAccept(h.files[k][i])
		}
	}
	if err := os.RemoveAll(filepath.Join(e.jdir(), "deltas")); err != nil {
		t.Fatal(err)
	}
	var jb state.Job
	for range 40 {
		e.j.Step(e.ctx) // errors expected
		if jb = e.jobState(); jb.State.Terminal() {
			break
		}
	}
	if jb.State != state.Failed || !strings.Contains(jb.Reason, "merge of epoch 1 failed") {
		t.Fatalf("job %s (%q), want failed after repeated merge failures", jb.State, jb.Reason)
	}
}
