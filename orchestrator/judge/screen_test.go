package judge_test

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/zooai/gym/orchestrator/state"
	"github.com/zooai/gym/protocol/jobconf"
	"github.com/zooai/gym/protocol/merge"
)

// TestScreenEjectsAndRebases: a member's delta of sync 1 is tampered
// with (noise below the norm bound, which only a check can catch). Once
// every member's sync-1 delta is in, one Step screens the sync: the
// cheater is slashed and ejected while the epoch runs, and a rebase is
// set at sync 2, the first no member has submitted. When the other
// members' sync-2 deltas are in, the judge publishes the rebase state —
// the honest deltas of syncs 1 and 2, merged and stepped from the start —
// under a CID with its digest.
func TestScreenEjectsAndRebases(t *testing.T) {
	long(t)
	spec := tinySpec()
	spec.Epochs, spec.StepsPerEpoch, spec.MinNodes, spec.MaxNodes, spec.SpotCheckBP = 1, 4, 4, 4, 10_000
	e := newEnv(t, 4, spec)
	h := trainEpoch(t, e.plan, 1, e.tmpl, e.keys, e.ring(), nil)
	cheat := h.ring[0]
	d := h.contrib[1][cheat].Clone()
	if err := jobconf.AddFlat(d, jobconf.Flatten(e.small(99, 1e-5))); err != nil {
		t.Fatal(err)
	}
	hm := metaOf(t, h.files[1][cheat])
	tampered := encodeWith(t, e.keys[cheat], jobconf.SyncDelta{Job: e.job, Node: e.ids[cheat], Epoch: 1, Sync: 1,
		Step: hm.Step, Sequence: hm.Sequence, Base: hm.BaseCheckpoint, ClaimedLoss: hm.ClaimedLoss, Samples: hm.Samples,
		Time: hm.Time, Delta: d})
	for _, i := range h.ring {
		f := h.files[1][i]
		if i == cheat {
			f = tampered
		}
		if r := e.submit(f); !r.Accepted {
			t.Fatalf("sync-1 delta of node %d: %+v", i, r)
		}
	}
	if err := e.j.Step(e.ctx); err != nil {
		t.Fatal(err)
	}
	jb := e.jobState()
	if jb.State != state.Running || e.inRing(cheat) || len(e.slashes(e.ids[cheat])) != 1 {
		t.Fatalf("after sync 1's screening: job %s, cheater in the ring %v, its slashes %+v", jb.State, e.inRing(cheat), e.slashes(e.ids[cheat]))
	}
	for _, i := range h.ring[1:] {
		if s := e.slashes(e.ids[i]); len(s) > 0 {
			t.Fatalf("honest node %d slashed: %+v", i, s)
		}
	}
	if len(jb.Rebases) != 1 || jb.Rebases[0].Sync != 2 || jb.Rebases[0].CID != "" {
		t.Fatalf("rebases %+v, want one at sync 2, unpublished", jb.Rebases)
	}
	var b bytes.Buffer
	e.j.WriteMetrics(&b)
	for _, want := range []string{"gym_hanzod_in_epoch_ejections_total 1\n", "gym_hanzod_screen_checks_total 4\n", `gym_hanzod_slashes_total{offence="spot_check"} 1` + "\n"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("metrics lack %q:\n%s", want, b.String())
		}
	}
	for _, i := range h.ring[1:] {
		if r := e.submit(h.files[2][i]); !r.Accepted {
			t.Fatalf("sync-2 delta of node %d: %+v", i, r)
		}
	}
	if err := e.j.Step(e.ctx); err != nil {
		t.Fatal(err)
	}
	jb = e.jobState()
	if len(jb.Rebases) != 1 || jb.Rebases[0].CID == "" {
		t.Fatalf("rebases %+v, want sync 2's published", jb.Rebases)
	}
	// By hand: the mean of the honest contributions of syncs 1 and 2,
	// added to the start (the plain average: no outer optimiser).
	want := e.tmpl.Clone()
	for k := 1; k <= 2; k++ {
		var mi []merge.Input
		for _, i := range h.ring[1:] {
			mi = append(mi, merge.Input{Node: e.ids[i], Vec: jobconf.Flatten(h.contrib[k][i]), Quality: 1})
		}
		u, _, err := merge.Merge(merge.Config{Rule: merge.Mean}, mi)
		if err != nil {
			t.Fatal(err)
		}
		if err := jobconf.AddFlat(want, u); err != nil {
			t.Fatal(err)
		}
	}
	if got := jb.Rebases[0].Digest; got != jobconf.Digest(want) {
		t.Fatalf("rebase state %s, want the honest deltas' merge %s", got, jobconf.Digest(want))
	}

	// A replica that takes over has none of this judge's files: it reads
	// the rebase state back from the blob store (checked against the
	// logged digest) for the epoch's reconstruction, and merges.
	dir := filepath.Join(e.jdir(), "checkpoints", e.job, "rebase-0001-0002")
	if _, err := os.Stat(filepath.Join(dir, "adapter_model.safetensors")); err != nil {
		t.Fatalf("the rebase state's directory: %v", err)
	}
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	e.restartJudge()
	for k := 3; k <= e.plan.Syncs(); k++ {
		for _, i := range h.ring[1:] {
			if r := e.submit(h.files[k][i]); !r.Accepted {
				t.Fatalf("sync-%d delta of node %d: %+v", k, i, r)
			}
		}
	}
	e.stepUntil("epoch 1 published", func(jb state.Job) bool { return jb.State == state.Published })
	if _, err := os.Stat(filepath.Join(dir, "adapter_model.safetensors")); err != nil {
		t.Fatalf("the rebase state was not restored from the blob store: %v", err)
	}
	if rep := e.report(1); !slices.Equal(rep.Rebases, []int{2}) || !slices.Contains(rep.Forfeited, e.ids[cheat]) {
		t.Fatalf("report: rebases %v, forfeited %v", rep.Rebases, rep.Forfeited)
	}
}
