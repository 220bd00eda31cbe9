package judge_test

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/zooai/gym/orchestrator/judge"
	"github.com/zooai/gym/orchestrator/state"
	"github.com/zooai/gym/protocol/jobconf"
)

var update = flag.Bool("update", false, "rewrite testdata/golden-epoch.json from this run")

// golden is what TestGoldenEpoch records: everything the judge decided
// and wrote that a refactoring must keep bit for bit.
type golden struct {
	// Merge: two epochs of three nodes, every delta spot-checked; in
	// epoch 2 node ring[0] tampers with its last delta (a spot-check
	// mismatch).
	Merge goldenRun `json:"merge"`
	// Offences: one epoch where ring[0] equivocates and then replays an
	// old sequence (stale), ring[1] re-signs its sync-1 tensors for sync 2
	// (replay) and ring[2] submits a delta above the norm bound.
	Offences goldenRun `json:"offences"`
}

type goldenRun struct {
	Verdicts []string               `json:"verdicts"` // every delta_judged event, in log order
	Slashes  []string               `json:"slashes"`  // every slashed event, in log order
	Rings    []string               `json:"rings"`    // every ring configuration, in log order
	Rewards  []string               `json:"rewards,omitempty"`
	Epochs   []goldenEpoch          `json:"epochs,omitempty"`
	Final    string                 `json:"final"` // the job's state at the end
	Tallies  map[string]state.Tally `json:"tallies"`
}

type goldenEpoch struct {
	Epoch  int               `json:"epoch"`
	CID    string            `json:"cid"`
	Record string            `json:"record"` // the signed publication record
	Files  map[string]string `json:"files"`  // checkpoint file → sha256
	Report map[string]any    `json:"report"` // merge-NNNN.json without its directory and duration
}

// TestGoldenEpoch drives the judge through recorded epochs and compares
// everything it decided and wrote (verdicts, slashes, rewards, the merged
// checkpoint's bytes, its CID and publication record, the merge report)
// with testdata/golden-epoch.json. Run with -update to rewrite the
// recording after an intended change. The numbers are those of amd64
// (arm64 fuses multiply-adds and would differ in the last bits).
func TestGoldenEpoch(t *testing.T) {
	long(t)
	var got golden
	got.Merge = goldenMerge(t)
	got.Offences = goldenOffences(t)
	b, err := json.MarshalIndent(got, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	b = append(b, '\n')
	path := filepath.Join("testdata", "golden-epoch.json")
	if *update {
		if err := os.MkdirAll("testdata", 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, b, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -update to record)", err)
	}
	if !bytes.Equal(b, want) {
		gl, wl := strings.Split(string(b), "\n"), strings.Split(string(want), "\n")
		for i := range max(len(gl), len(wl)) {
			var g, w string
			if i < len(gl) {
				g = gl[i]
			}
			if i < len(wl) {
				w = wl[i]
			}
			if g != w {
				t.Errorf("line %d:\n got %s\nwant %s", i+1, g, w)
				break
			}
		}
		t.Fatalf("the judge's decisions differ from %s (run with -update if the change is intended)", path)
	}
}

// goldenMerge is TestEpochs' scenario, recorded.
func goldenMerge(t *testing.T) goldenRun {
	spec := tinySpec()
	spec.SpotCheckBP = 10000
	e := newEnv(t, 3, spec)
	h1 := honestEpoch1(t, e)
	K := e.plan.Syncs()
	for k := 1; k <= K; k++ {
		for _, i := range h1.ring {
			e.expectAccept(h1.files[k][i])
		}
	}
	e.stepUntil("epoch 1 merged", func(jb state.Job) bool { return jb.State == state.Running && jb.Epoch == 2 })
	start := e.checkPublished(1)
	h2 := trainEpoch(t, e.plan, 2, start, e.keys[:3], e.ring(), nil)
	cheat := h2.ring[0]
	d := h2.contrib[K][cheat].Clone()
	nt := e.small(99, 1e-5).Views()
	for ti, tt := range d.Views() {
		for j := range tt.Data {
			tt.Data[j] += nt[ti].Data[j]
		}
	}
	hm := metaOf(t, h2.files[K][cheat])
	tampered := encodeWith(t, e.keys[cheat], jobconf.SyncDelta{Job: e.job, Node: e.ids[cheat], Epoch: 2, Sync: K,
		Step: hm.Step, Sequence: hm.Sequence, Base: hm.BaseCheckpoint, ClaimedLoss: hm.ClaimedLoss, Samples: hm.Samples,
		Time: hm.Time, Delta: d})
	for k := 1; k <= K; k++ {
		for _, i := range h2.ring {
			f := h2.files[k][i]
			if k == K && i == cheat {
				f = tampered
			}
			e.expectAccept(f)
		}
	}
	e.stepUntil("epoch 2 merged", func(jb state.Job) bool { return jb.State == state.Published })
	e.checkPublished(2)
	e.stepUntil("settled", func(jb state.Job) bool { return jb.Settled })
	r := e.goldenRun()
	for ep := 1; ep <= 2; ep++ {
		r.Epochs = append(r.Epochs, e.goldenEpoch(ep))
	}
	return r
}

// goldenOffences records the verdicts and slashes of the offences the
// validation chain proves on submission.
func goldenOffences(t *testing.T) goldenRun {
	e := newEnv(t, 3, tinySpec())
	h := honestEpoch1(t, e)
	a, b, c := h.ring[0], h.ring[1], h.ring[2]
	// Equivocation: a second, different delta for a's sync-1 slot.
	e.expectAccept(h.files[1][a])
	e.expectReject(e.encode(a, e.sd(a, 1, 1, e.small(3, 1e-4))), true, judge.ReasonEquivocation)
	// Stale: a sequence at or below the last accepted one.
	st := e.sd(a, 1, 2, e.small(4, 1e-4))
	st.Sequence = 1
	e.expectReject(e.encode(a, st), true, judge.ReasonStale)
	// Replay: b's accepted sync-1 tensors re-signed for sync 2.
	e.expectAccept(h.files[1][b])
	bm := metaOf(t, h.files[1][b])
	e.expectReject(e.encode(b, jobconf.SyncDelta{Job: e.job, Node: e.ids[b], Epoch: 1, Sync: 2, Step: uint64(e.plan.SyncStep(1, 2)),
		Sequence: uint64(e.plan.SyncStep(1, 2)), Base: bm.BaseCheckpoint, ClaimedLoss: bm.ClaimedLoss, Samples: bm.Samples,
		Time: bm.Time, Delta: h.contrib[1][b]}), true, judge.ReasonReplay)
	// Norm: 1.5 times the bound.
	n := e.small(7, 1e-4)
	f := float32(1.5 * e.bound() / jobconf.Norm(n))
	for _, tt := range n.Views() {
		for j := range tt.Data {
			tt.Data[j] *= f
		}
	}
	e.expectReject(e.encode(c, e.sd(c, 1, 1, n)), true, judge.ReasonNorm)
	for range 3 {
		if err := e.j.Step(e.ctx); err != nil {
			t.Fatalf("Step: %v", err)
		}
	}
	return e.goldenRun()
}

// goldenRun collects the log's decisions, with node ids shortened to n<i>.
func (e *env) goldenRun() goldenRun {
	e.t.Helper()
	name := func(id string) string {
		for i, x := range e.ids {
			if x == id {
				return fmt.Sprintf("n%d", i)
			}
		}
		return id
	}
	var r goldenRun
	for _, ev := range e.events() {
		switch b := ev.Body.(type) {
		case state.DeltaJudged:
			v := "accepted"
			if !b.Accepted {
				v = "rejected " + b.Reason + ": " + b.Detail
			}
			r.Verdicts = append(r.Verdicts, fmt.Sprintf("%s e%d s%d step %d seq %d samples %d %s %s", name(b.Node), b.Epoch, b.Sync, b.Step, b.Sequence, b.Samples, b.Digest[:16], v))
		case state.Slashed:
			var ev judge.Evidence
			if err := json.Unmarshal(b.Evidence, &ev); err != nil {
				e.t.Fatal(err)
			}
			var files []string
			for _, f := range ev.Files {
				files = append(files, f.Digest[:16])
			}
			r.Slashes = append(r.Slashes, fmt.Sprintf("%s %d: %s (evidence %s %v)", name(b.Account), b.Amount, b.Reason, ev.Offence, files))
		case state.RingConfigured:
			var ns []string
			for _, id := range b.Ring {
				ns = append(ns, name(id))
			}
			cause := b.Cause
			for i, id := range e.ids {
				cause = strings.ReplaceAll(cause, id, fmt.Sprintf("n%d", i))
			}
			r.Rings = append(r.Rings, fmt.Sprintf("gen %d %v: %s", b.Generation, ns, cause))
		case state.RewardsPaid:
			for _, p := range b.Payouts {
				r.Rewards = append(r.Rewards, fmt.Sprintf("e%d %s %d", b.Epoch, name(p.ID), p.Amount))
			}
		}
	}
	jb := e.jobState()
	r.Final = fmt.Sprintf("%s epoch %d settled %v cids %v", jb.State, jb.Epoch, jb.Settled, jb.CIDs)
	r.Tallies = map[string]state.Tally{}
	for id, t := range jb.Tally {
		r.Tallies[name(id)] = *t
	}
	return r
}

// goldenEpoch records epoch's checkpoint: its files' sha256, its CID and
// publication record, the merge report.
func (e *env) goldenEpoch(epoch int) goldenEpoch {
	e.t.Helper()
	p := e.published(epoch)
	g := goldenEpoch{Epoch: epoch, CID: p.CID, Record: p.Record, Files: map[string]string{}}
	dir := e.j.CheckpointDir(e.job, epoch)
	ents, err := os.ReadDir(dir)
	if err != nil {
		e.t.Fatal(err)
	}
	var names []string
	for _, d := range ents {
		names = append(names, d.Name())
	}
	sort.Strings(names)
	for _, n := range names {
		b, err := os.ReadFile(filepath.Join(dir, n))
		if err != nil {
			e.t.Fatal(err)
		}
		s := sha256.Sum256(b)
		g.Files[n] = hex.EncodeToString(s[:])
	}
	b, err := os.ReadFile(filepath.Join(e.jdir(), "checkpoints", e.job, fmt.Sprintf("merge-%04d.json", epoch)))
	if err != nil {
		e.t.Fatal(err)
	}
	if err := json.Unmarshal(b, &g.Report); err != nil {
		e.t.Fatal(err)
	}
	delete(g.Report, "checkpoint_dir") // a temporary directory
	delete(g.Report, "merge_seconds")  // the fake clock's: 0
	return g
}
