package judge_test

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/zooai/gym/artifact"
	"github.com/zooai/gym/artifact/store"
	"github.com/zooai/gym/model/peft"
	"github.com/zooai/gym/orchestrator/blob"
	"github.com/zooai/gym/orchestrator/judge"
	"github.com/zooai/gym/orchestrator/judge/epoch"
	"github.com/zooai/gym/orchestrator/ledger"
	"github.com/zooai/gym/orchestrator/state"
	"github.com/zooai/gym/protocol/jobconf"
)

// replica gives e a judge as a fresh replica has it: its own data
// directory and artifact store (nothing of the previous leader's disk),
// the shared blob store and the same log.
func (e *env) replica(t *testing.T, name string, blobs blob.Store) {
	t.Helper()
	dir := filepath.Join(e.dir, name)
	// The previous leader's disk is gone with it (its working copies of
	// checkpoints and reports, under the path checkPublished reads).
	if err := os.RemoveAll(e.jdir()); err != nil {
		t.Fatal(err)
	}
	arts, err := store.Open(store.DefaultConfig(filepath.Join(dir, "artifacts")))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { arts.Close() })
	j, err := judge.New(judge.Config{DataDir: e.jdir(), Blobs: blobs, Key: judgeKey(), Store: arts, Threads: 2,
		ShardSize: 8, EvalSize: 8, Base: base(t), Now: e.clk.Now, BlobRetention: e.retention}, e.eng)
	if err != nil {
		t.Fatal(err)
	}
	e.j, e.arts = j, arts
}

// checkpointBytes is the weights file of epoch's checkpoint in the current
// judge's working copy.
func (e *env) checkpointBytes(t *testing.T, epoch int) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(e.j.CheckpointDir(e.job, epoch), peft.WeightsFile))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// paidOnce checks that every epoch of the job was paid at most once and
// nobody was slashed.
func (e *env) paidOnce(t *testing.T) {
	t.Helper()
	paid := map[int]int{}
	for _, ev := range e.events() {
		switch b := ev.Body.(type) {
		case state.RewardsPaid:
			if b.Job == e.job {
				paid[b.Epoch]++
			}
		case state.Slashed:
			t.Errorf("slashed after a takeover: %+v", b)
		}
	}
	for ep, n := range paid {
		if n != 1 {
			t.Errorf("epoch %d paid %d times", ep, n)
		}
	}
}

// TestTakeover: the leader's judge dies (its data directory and artifact
// store are gone with it) at several points of an epoch and a replica
// with nothing but the log and the blob store finishes the epoch. The
// published checkpoint is the same bytes and CID as an undisturbed run
// with the same deltas, no acknowledged delta is lost (resubmitting one
// is a duplicate, and the merge counts it), nothing is paid twice.
func TestTakeover(t *testing.T) {
	long(t)
	spec := tinySpec()
	spec.SpotCheckBP = 10000
	// Undisturbed.
	u := newEnv(t, 3, spec)
	u.replica(t, "only", blob.NewMem())
	h := honestEpoch1(t, u)
	var files [][]byte
	for k := 1; k < len(h.files); k++ {
		for _, i := range h.ring {
			files = append(files, h.files[k][i])
		}
	}
	for _, f := range files {
		if r := u.submit(f); !r.Accepted {
			t.Fatalf("honest delta: %+v", r)
		}
	}
	u.stepUntil("epoch 1 merged", func(jb state.Job) bool { return jb.State == state.Running && jb.Epoch == 2 })
	want, wantCID := u.checkpointBytes(t, 1), u.published(1).CID

	check := func(t *testing.T, e *env) {
		t.Helper()
		e.stepUntil("epoch 1 merged", func(jb state.Job) bool { return jb.State == state.Running && jb.Epoch == 2 })
		if got := e.published(1).CID; got != wantCID {
			t.Fatalf("published %s after the takeover, %s undisturbed", got, wantCID)
		}
		if !bytes.Equal(e.checkpointBytes(t, 1), want) {
			t.Fatal("the checkpoint's weights differ from the undisturbed run's")
		}
		if k := e.arts.Known(artifact.KindCheckpoint, e.job); k == nil || k.Manifest.Root != wantCID {
			t.Fatalf("the new leader's artifact store holds %+v, want %s", k, wantCID)
		}
		e.paidOnce(t)
	}

	t.Run("while deltas arrive", func(t *testing.T) {
		e := newEnv(t, 3, spec)
		blobs := blob.NewMem()
		e.replica(t, "a", blobs)
		half := len(files) / 2
		for _, f := range files[:half] {
			if r := e.submit(f); !r.Accepted || r.Duplicate {
				t.Fatalf("honest delta: %+v", r)
			}
		}
		e.replica(t, "b", blobs) // kill -9 a
		// A worker that did not hear the answer resubmits: a duplicate,
		// so the new leader knows the file it never received.
		if r := e.submit(files[half-1]); !r.Accepted || !r.Duplicate {
			t.Fatalf("resubmitted accepted delta after the takeover: %+v, want a duplicate", r)
		}
		for _, f := range files[half:] {
			if r := e.submit(f); !r.Accepted || r.Duplicate {
				t.Fatalf("honest delta after the takeover: %+v", r)
			}
		}
		check(t, e)
		if n := len(e.jobState().Slots); n != len(files) {
			t.Fatalf("%d slots filled, %d deltas acknowledged", n, len(files))
		}
	})

	t.Run("during the merge", func(t *testing.T) {
		e := newEnv(t, 3, spec)
		blobs := blob.NewMem()
		e.replica(t, "a", blobs)
		for _, f := range files {
			if r := e.submit(f); !r.Accepted {
				t.Fatalf("honest delta: %+v", r)
			}
		}
		if err := e.j.Step(e.ctx); err != nil { // ends the epoch
			t.Fatal(err)
		}
		if jb := e.jobState(); jb.State != state.Aggregating {
			t.Fatalf("job %s, want aggregating", jb.State)
		}
		e.replica(t, "b", blobs) // kill -9 a before it merged
		check(t, e)
	})

	t.Run("after the reward, before the publication is logged", func(t *testing.T) {
		e := newEnv(t, 3, spec)
		blobs := blob.NewMem()
		e.replica(t, "a", blobs)
		for _, f := range files {
			if r := e.submit(f); !r.Accepted {
				t.Fatalf("honest delta: %+v", r)
			}
		}
		if err := e.j.Step(e.ctx); err != nil { // ends the epoch
			t.Fatal(err)
		}
		// a merged, paid the epoch (the judge pays before it logs the
		// publication) and died before logging it.
		var cs []ledger.Contribution
		for _, id := range e.jobState().Ring {
			cs = append(cs, ledger.Contribution{ID: id, Compute: 1, Quality: 1, Participation: 1})
		}
		e.do(state.PayRewards{Job: e.job, Epoch: 1, Total: 100 * ledger.GYM, Contributions: cs})
		e.replica(t, "b", blobs)
		check(t, e) // the epoch is published once more by b, and paid once
	})

	t.Run("after publication", func(t *testing.T) {
		e := newEnv(t, 3, spec)
		blobs := blob.NewMem()
		e.replica(t, "a", blobs)
		for _, f := range files {
			if r := e.submit(f); !r.Accepted {
				t.Fatalf("honest delta: %+v", r)
			}
		}
		e.stepUntil("epoch 1 merged", func(jb state.Job) bool { return jb.State == state.Running && jb.Epoch == 2 })
		e.replica(t, "b", blobs) // kill -9 a after it published epoch 1
		// The new leader restores epoch 1's checkpoint from the blob store
		// and serves it to the workers from its own artifact store.
		if err := e.j.Step(e.ctx); err != nil {
			t.Fatal(err)
		}
		check(t, e)
		start, _, err := peft.Read(e.j.CheckpointDir(e.job, 1), base(t).Weights.Cfg)
		if err != nil {
			t.Fatal(err)
		}
		h2 := trainEpoch(t, e.plan, 2, start, e.keys[:3], e.ring(), nil)
		for k := 1; k < len(h2.files); k++ {
			for _, i := range h2.ring {
				if r := e.submit(h2.files[k][i]); !r.Accepted || r.Duplicate {
					t.Fatalf("epoch 2 delta: %+v", r)
				}
			}
		}
		e.stepUntil("epoch 2 merged", func(jb state.Job) bool { return jb.State == state.Published })
		e.checkPublished(2)
		e.paidOnce(t)
	})
}

// TestTakeoverCarriesOuter: under the outer Adam (the data-parallel
// profile) the checkpoint carries the outer state into the next epoch. A
// replica that takes over after epoch 1's publication restores that
// state from the blob store with the rest of the checkpoint, and merges
// epoch 2, which the workers trained from it, reconstructing every ring
// result without a slash.
func TestTakeoverCarriesOuter(t *testing.T) {
	long(t)
	spec := tinySpec()
	spec.SpotCheckBP = 10000
	spec.StepsPerEpoch = 3
	spec.GSPO.LearningRate, spec.GSPO.NumIterations = 1e-3, 1
	spec.GSPO.InnerOptimizer, spec.GSPO.OuterOptimizer, spec.GSPO.OuterLR = "sgd", "adam", 1.5e-3
	e := newEnv(t, 3, spec)
	if !e.plan.CarriesOuter() {
		t.Fatal("the data-parallel plan does not carry its outer state")
	}
	blobs := blob.NewMem()
	e.replica(t, "a", blobs)
	submit := func(h *honest) {
		for k := 1; k < len(h.files); k++ {
			for _, i := range h.ring {
				if r := e.submit(h.files[k][i]); !r.Accepted || r.Duplicate {
					t.Fatalf("sync %d delta: %+v", k, r)
				}
			}
		}
	}
	submit(trainEpoch(t, e.plan, 1, e.tmpl, e.keys[:3], e.ring(), e.plan.NewOuter()))
	e.stepUntil("epoch 1 merged", func(jb state.Job) bool { return jb.State == state.Running && jb.Epoch == 2 })
	e.replica(t, "b", blobs) // kill -9 a after it published epoch 1
	if err := e.j.Step(e.ctx); err != nil {
		t.Fatal(err)
	}
	dir := e.j.CheckpointDir(e.job, 1)
	start, _, err := peft.Read(dir, base(t).Weights.Cfg)
	if err != nil {
		t.Fatal(err)
	}
	ob, err := os.ReadFile(filepath.Join(dir, jobconf.OuterFile))
	if err != nil {
		t.Fatalf("the restored checkpoint has no outer state: %v", err)
	}
	outer, err := e.plan.ResumeOuter(ob, start.NumParams())
	if err != nil || outer.Steps() != 3 {
		t.Fatalf("restored outer state: %v, %d steps (want 3)", err, outer.Steps())
	}
	submit(trainEpoch(t, e.plan, 2, start, e.keys[:3], e.ring(), outer))
	e.stepUntil("epoch 2 merged", func(jb state.Job) bool { return jb.State == state.Published })
	e.checkPublished(2)
	e.paidOnce(t)
	var rep epoch.Report
	b, err := os.ReadFile(filepath.Join(e.jdir(), "checkpoints", e.job, "merge-0002.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &rep); err != nil {
		t.Fatal(err)
	}
	if len(rep.RingDisagreements)+len(rep.RingUnknown)+len(rep.Excluded) != 0 || len(rep.Scores) != 9 {
		t.Fatalf("epoch 2 after the takeover: disagreements %v, unknown %v, excluded %v, %d scores",
			rep.RingDisagreements, rep.RingUnknown, rep.Excluded, len(rep.Scores))
	}
}
