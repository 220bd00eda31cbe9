package judge_test

import (
	"errors"
	"testing"
	"time"

	"github.com/zooai/gym/model/peft"
	"github.com/zooai/gym/orchestrator/blob"
	"github.com/zooai/gym/orchestrator/judge"
	"github.com/zooai/gym/orchestrator/state"
)

// TestSettledBlobsDeleted: once a job has settled and the retention has
// passed, the leader deletes its accepted deltas and evidence from the
// blob store and counts the bytes; the checkpoints of record and other
// jobs' files stay; a conflicting file for one of its slots is then
// refused as late (it can no longer be proven); a replica that takes over
// deletes again, which removes only what a deposed leader wrote late.
func TestSettledBlobsDeleted(t *testing.T) {
	long(t)
	e := newEnv(t, 3, tinySpec())
	blobs := blob.NewMem()
	e.retention = 10 * time.Minute
	e.replica(t, "a", blobs)
	h := honestEpoch1(t, e)
	for k := 1; k < len(h.files); k++ {
		for _, i := range h.ring {
			if r := e.submit(h.files[k][i]); !r.Accepted {
				t.Fatalf("honest delta: %+v", r)
			}
		}
	}
	e.stepUntil("epoch 1 merged", func(jb state.Job) bool { return jb.State == state.Running && jb.Epoch == 2 })
	start, _, err := peft.Read(e.j.CheckpointDir(e.job, 1), base(t).Weights.Cfg)
	if err != nil {
		t.Fatal(err)
	}
	h2 := trainEpoch(t, e.plan, 2, start, e.keys[:3], e.ring(), nil)
	for k := 1; k < len(h2.files); k++ {
		for _, i := range h2.ring {
			if r := e.submit(h2.files[k][i]); !r.Accepted {
				t.Fatalf("epoch 2 delta: %+v", r)
			}
		}
	}
	e.stepUntil("job settled", func(jb state.Job) bool { return jb.Settled })
	jb := e.jobState()

	// What the job left: its accepted deltas, and (put here as the judge
	// puts a slash's files) evidence; another job's delta.
	var want blob.Reclaimed
	for _, dig := range jb.Slots {
		b, err := blobs.Get(e.ctx, "deltas/"+e.job+"/"+dig+".delta")
		if err != nil {
			t.Fatalf("accepted delta %s before deletion: %v", dig, err)
		}
		want = want.Add(blob.Reclaimed{Blobs: 1, Bytes: int64(len(b))})
	}
	if want.Blobs == 0 {
		t.Fatal("no accepted deltas")
	}
	evidence, traces := []byte("signed evidence file"), []byte("a trace bundle")
	for name, data := range map[string][]byte{"evidence/" + e.job + "/0a.delta": evidence, "traces/" + e.job + "/bafy.jsonl": traces,
		"deltas/job-99999999/0b.delta": []byte("a running job's")} {
		if err := blobs.Put(e.ctx, name, data); err != nil {
			t.Fatal(err)
		}
	}
	want = want.Add(blob.Reclaimed{Blobs: 2, Bytes: int64(len(evidence) + len(traces))})

	// Within the retention nothing is deleted.
	if err := e.j.Step(e.ctx); err != nil {
		t.Fatal(err)
	}
	e.advance(9 * time.Minute)
	if err := e.j.Step(e.ctx); err != nil {
		t.Fatal(err)
	}
	if r := e.j.Reclaimed(); r != (blob.Reclaimed{}) {
		t.Fatalf("reclaimed %+v within the retention", r)
	}
	e.advance(2 * time.Minute)
	if err := e.j.Step(e.ctx); err != nil {
		t.Fatal(err)
	}
	if r := e.j.Reclaimed(); r != want {
		t.Fatalf("reclaimed %+v, want %+v (the job's deltas, traces and evidence)", r, want)
	}
	t.Logf("settled job %s: %d blobs, %d bytes reclaimed", e.job, want.Blobs, want.Bytes)
	for _, dig := range jb.Slots {
		if _, err := blobs.Get(e.ctx, "deltas/"+e.job+"/"+dig+".delta"); !errors.Is(err, blob.ErrNotFound) {
			t.Fatalf("accepted delta %s after deletion: %v", dig, err)
		}
	}
	if _, err := blobs.Get(e.ctx, "deltas/job-99999999/0b.delta"); err != nil {
		t.Fatalf("another job's delta was deleted: %v", err)
	}
	for _, c := range jb.CIDs {
		if _, err := blobs.Get(e.ctx, "checkpoints/"+c+"/"+peft.WeightsFile); err != nil {
			t.Fatalf("checkpoint %s deleted: %v", c, err)
		}
	}

	// A second file for a slot the job holds cannot be proven to
	// conflict any more: refused as late, without an error, no slash.
	i := h2.ring[0]
	late := e.encode(i, e.sd(i, 2, 1, e.small(5, 1e-4)))
	if v := e.submit(late); v.Accepted || v.Reason != judge.ReasonLate {
		t.Fatalf("a conflicting file after deletion: %+v, want refused as late", v)
	}
	if s := e.slashes(e.ids[i]); len(s) != 0 {
		t.Fatalf("slashed without evidence: %+v", s)
	}

	// A deposed leader writes one late; the replica that takes over
	// deletes the job's directory again and finds only that.
	if err := blobs.Put(e.ctx, "deltas/"+e.job+"/0c.delta", []byte("late")); err != nil {
		t.Fatal(err)
	}
	e.replica(t, "b", blobs)
	for range 2 {
		if err := e.j.Step(e.ctx); err != nil {
			t.Fatal(err)
		}
		e.advance(11 * time.Minute)
	}
	if err := e.j.Step(e.ctx); err != nil {
		t.Fatal(err)
	}
	if r := e.j.Reclaimed(); r != (blob.Reclaimed{Blobs: 1, Bytes: 4}) {
		t.Fatalf("the new leader reclaimed %+v, want the one late blob", r)
	}
}
