package judge_test

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/sha3"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/ipfs/go-cid"

	"github.com/zooai/gym/model/llama"
	"github.com/zooai/gym/model/peft"
	"github.com/zooai/gym/orchestrator/judge"
	"github.com/zooai/gym/orchestrator/ledger"
	"github.com/zooai/gym/orchestrator/state"
	"github.com/zooai/gym/protocol/delta"
	"github.com/zooai/gym/protocol/jobconf"
	"github.com/zooai/gym/protocol/jobspec"
	"github.com/zooai/gym/protocol/ring"
)

// epoch1 caches the honest deltas of epoch 1 of tinySpec: every test
// that needs them gets the same bytes (the job id, keys, ring order and
// clock of a fresh env are the same each time).
var epoch1 struct {
	once sync.Once
	h    *honest
}

func honestEpoch1(t *testing.T, e *env) *honest {
	t.Helper()
	epoch1.once.Do(func() { epoch1.h = trainEpoch(t, e.plan, 1, e.tmpl, e.keys, e.ring(), nil) })
	if epoch1.h == nil {
		t.Fatal("training epoch 1 failed in an earlier test")
	}
	if !slices.Equal(epoch1.h.ring, e.ring()) {
		t.Fatalf("ring %v, the cached deltas were trained in ring %v", e.ring(), epoch1.h.ring)
	}
	return epoch1.h
}

// stepUntil calls Judge.Step until cond holds (at most 10 times).
func (e *env) stepUntil(what string, cond func(jb state.Job) bool) {
	e.t.Helper()
	for range 10 {
		if cond(e.jobState()) {
			return
		}
		if err := e.j.Step(e.ctx); err != nil {
			e.t.Fatalf("Step: %v", err)
		}
	}
	jb := e.jobState()
	e.t.Fatalf("%s: job still %s in epoch %d (settled %v)", what, jb.State, jb.Epoch, jb.Settled)
}

func (e *env) report(epoch int) judge.EpochReport {
	e.t.Helper()
	b, err := os.ReadFile(filepath.Join(e.dir, "hanzod", "checkpoints", e.job, fmt.Sprintf("merge-%04d.json", epoch)))
	if err != nil {
		e.t.Fatal(err)
	}
	var r judge.EpochReport
	if err := json.Unmarshal(b, &r); err != nil {
		e.t.Fatal(err)
	}
	return r
}

func (e *env) published(epoch int) state.CheckpointPublished {
	e.t.Helper()
	for _, ev := range e.events() {
		if p, ok := ev.Body.(state.CheckpointPublished); ok && p.Job == e.job && p.Epoch == epoch {
			return p
		}
	}
	e.t.Fatalf("no checkpoint_published for epoch %d", epoch)
	return state.CheckpointPublished{}
}

// checkPublished checks epoch's checkpoint: a readable PEFT directory, a
// publication record signed by the judge naming the CID the job holds,
// the artifact in the store. It returns the checkpoint's adapter.
func (e *env) checkPublished(epoch int) *llama.Adapter {
	e.t.Helper()
	a, _, err := peft.Read(e.j.CheckpointDir(e.job, epoch), base(e.t).Weights.Cfg)
	if err != nil {
		e.t.Fatalf("checkpoint of epoch %d: %v", epoch, err)
	}
	if err := sameShape(a, e.tmpl); err != nil {
		e.t.Fatalf("checkpoint of epoch %d: %v", epoch, err)
	}
	p := e.published(epoch)
	pub := judgeKey().Public().(ed25519.PublicKey)
	if !judge.VerifyRecord(pub, "publication", p.Record, p.Signature) {
		e.t.Fatalf("publication record of epoch %d does not verify under the judge key", epoch)
	}
	if judge.VerifyRecord(pub, "settlement", p.Record, p.Signature) {
		e.t.Fatal("a publication record verifies as a settlement")
	}
	var rec map[string]any
	if err := json.Unmarshal([]byte(p.Record), &rec); err != nil {
		e.t.Fatal(err)
	}
	if rec["cid"] != p.CID || rec["kind"] != "publication" || rec["job"] != e.job || rec["epoch"] != float64(epoch) {
		e.t.Fatalf("publication record %s does not name cid %s of %s epoch %d", p.Record, p.CID, e.job, epoch)
	}
	if jb := e.jobState(); len(jb.CIDs) < epoch || jb.CIDs[epoch-1] != p.CID {
		e.t.Fatalf("job holds cids %v, the record names %s for epoch %d", jb.CIDs, p.CID, epoch)
	}
	c, err := cid.Parse(p.CID)
	if err != nil {
		e.t.Fatal(err)
	}
	if _, err := e.arts.Artifact(c); err != nil {
		e.t.Fatalf("store does not hold %s: %v", p.CID, err)
	}
	if r := e.report(epoch); r.CID != p.CID {
		e.t.Fatalf("merge report names %s, the record %s", r.CID, p.CID)
	}
	return a
}

func sameShape(a, b *llama.Adapter) error {
	at, bt := a.Views(), b.Views()
	if len(at) != len(bt) {
		return fmt.Errorf("%d tensors, want %d", len(at), len(bt))
	}
	for i := range at {
		if at[i].Name != bt[i].Name || !slices.Equal(at[i].Shape, bt[i].Shape) {
			return fmt.Errorf("tensor %d is %s %v, want %s %v", i, at[i].Name, at[i].Shape, bt[i].Name, bt[i].Shape)
		}
	}
	return nil
}

// TestEpochs runs a 2-epoch job of 3 honest nodes through the judge with
// every delta spot-checked; in epoch 2 one node submits its honest last
// delta plus a little noise (below the norm bound), which only the replay
// can catch.
func TestEpochs(t *testing.T) {
	long(t)
	spec := tinySpec()
	spec.SpotCheckBP = 10000
	e := newEnv(t, 3, spec)
	h1 := honestEpoch1(t, e)
	K := e.plan.Syncs()
	for k := 1; k <= K; k++ {
		for _, i := range h1.ring {
			if r := e.submit(h1.files[k][i]); !r.Accepted || r.Duplicate {
				t.Fatalf("honest delta of node %d sync %d: %+v", i, k, r)
			}
		}
	}
	e.stepUntil("epoch 1 merged", func(jb state.Job) bool { return jb.State == state.Running && jb.Epoch == 2 })
	start := e.checkPublished(1)
	r1 := e.report(1)
	if len(r1.Scores) != 3*K || r1.SpotChecks != 3*K {
		t.Fatalf("epoch 1: %d scores, %d spot-checks; want %d of each", len(r1.Scores), r1.SpotChecks, 3*K)
	}
	for _, s := range r1.Scores {
		if !s.Checked {
			t.Errorf("epoch 1: delta of %s sync %d was not spot-checked", s.Node[:8], s.Sync)
		}
	}
	if len(r1.Excluded) > 0 || len(r1.RingDisagreements) > 0 || len(r1.RingUnknown) > 0 {
		t.Fatalf("epoch 1 of honest nodes: excluded %v, ring disagreements %v, ring unknown %v", r1.Excluded, r1.RingDisagreements, r1.RingUnknown)
	}
	for i := range 3 {
		if s := e.slashes(e.ids[i]); len(s) > 0 {
			t.Fatalf("honest node %d slashed: %+v", i, s)
		}
	}

	// Epoch 2 from the published checkpoint. The cheater is the first
	// member of the ring; it tampers with its last (not all-reduced)
	// delta.
	h2 := trainEpoch(t, e.plan, 2, start, e.keys[:3], e.ring(), nil)
	cheat := h2.ring[0]
	d := h2.contrib[K][cheat].Clone()
	noise := e.small(99, 1e-5)
	nt := noise.Views()
	for ti, tt := range d.Views() {
		for j := range tt.Data {
			tt.Data[j] += nt[ti].Data[j]
		}
	}
	if n := jobconf.Norm(d); n >= e.bound() {
		t.Fatalf("tampered delta's norm %g not below the bound %g", n, e.bound())
	}
	hm := metaOf(t, h2.files[K][cheat]) // the same claims as the honest delta
	tampered := encodeWith(t, e.keys[cheat], jobconf.SyncDelta{Job: e.job, Node: e.ids[cheat], Epoch: 2, Sync: K,
		Step: hm.Step, Sequence: hm.Sequence, Base: hm.BaseCheckpoint, ClaimedLoss: hm.ClaimedLoss, Samples: hm.Samples,
		Time: hm.Time, Delta: d})
	for k := 1; k <= K; k++ {
		for _, i := range h2.ring {
			f := h2.files[k][i]
			if k == K && i == cheat {
				f = tampered
			}
			if r := e.submit(f); !r.Accepted || r.Duplicate {
				t.Fatalf("delta of node %d sync %d of epoch 2: %+v", i, k, r)
			}
		}
	}
	e.stepUntil("epoch 2 merged", func(jb state.Job) bool { return jb.State == state.Published })
	e.checkPublished(2)
	r2 := e.report(2)
	// The cheater forfeits the epoch: the tampered slot is excluded by its
	// spot-check, every other delta of the cheater's epoch with it.
	want := []string{jobspec.Slot{Epoch: 2, Step: uint64(e.plan.SyncStep(2, K)), Node: e.ids[cheat]}.String()}
	for k := 1; k < K; k++ {
		want = append(want, jobspec.Slot{Epoch: 2, Step: uint64(e.plan.SyncStep(2, k)), Node: e.ids[cheat]}.String()+" (node slashed this epoch: spot_check)")
	}
	if !slices.Equal(r2.Excluded, want) || !slices.Equal(r2.Forfeited, []string{e.ids[cheat]}) {
		t.Fatalf("epoch 2 excluded %v, forfeited %v; want %v and the cheater", r2.Excluded, r2.Forfeited, want)
	}
	if len(r2.Scores) != 2*K || r2.SpotChecks != 3*K {
		t.Fatalf("epoch 2: %d scores, %d spot-checks; want %d and %d", len(r2.Scores), r2.SpotChecks, 2*K, 3*K)
	}
	for _, sc := range r2.Scores {
		if sc.Node == e.ids[cheat] {
			t.Fatalf("the cheater's delta of sync %d was scored", sc.Sync)
		}
	}
	paid := map[int]map[string]ledger.Amount{}
	totals := map[int]state.RewardsPaid{}
	for _, ev := range e.events() {
		if rp, ok := ev.Body.(state.RewardsPaid); ok && rp.Job == e.job {
			paid[rp.Epoch] = map[string]ledger.Amount{}
			for _, p := range rp.Payouts {
				paid[rp.Epoch][p.ID] += p.Amount
			}
			totals[rp.Epoch] = rp
		}
	}
	// An epoch pays for the samples it verified, not a flat sum: epoch 1
	// the three nodes' K syncs, epoch 2 the two honest nodes' (the
	// cheater's deltas were forfeited).
	rate := state.DefaultConfig().RewardPerSample
	for ep, n := range map[int]uint64{1: 3, 2: 2} {
		samples := n * uint64(K) * e.plan.Samples()
		if rp := totals[ep]; rp.Samples != samples || rp.Total != rate*ledger.Amount(samples) || rp.From != "" {
			t.Fatalf("epoch %d paid %d for %d samples from %q; want %d for %d from the treasury", ep, rp.Total, rp.Samples, rp.From, rate*ledger.Amount(samples), samples)
		}
	}
	if paid[2] == nil || paid[2][e.ids[cheat]] != 0 || paid[2][e.ids[h2.ring[1]]] == 0 {
		t.Fatalf("epoch 2 paid %v: the cheater must earn nothing, the honest nodes something", paid[2])
	}
	if paid[1][e.ids[cheat]] == 0 {
		t.Fatalf("epoch 1 paid %v: the cheater's honest epoch is not clawed back", paid[1])
	}
	if len(r2.RingDisagreements) > 0 || len(r2.RingUnknown) > 0 {
		t.Fatalf("epoch 2: ring disagreements %v, ring unknown %v", r2.RingDisagreements, r2.RingUnknown)
	}
	sl := e.slashes(e.ids[cheat])
	if len(sl) != 1 {
		t.Fatalf("cheater slashed %d times, want once: %+v", len(sl), sl)
	}
	ev := evidence(t, sl[0])
	if ev.Offence != judge.ReasonSpotCheck || !holdsFile(t, ev, tampered) {
		t.Fatalf("spot-check evidence %+v does not hold the tampered file", ev)
	}
	if e.inRing(cheat) {
		t.Fatal("the cheater is still in the ring")
	}
	for _, i := range h2.ring[1:] {
		if s := e.slashes(e.ids[i]); len(s) > 0 {
			t.Fatalf("honest node %d slashed: %+v", i, s)
		}
	}

	// Settlement.
	e.stepUntil("settled", func(jb state.Job) bool { return jb.Settled })
	var settled *state.JobSettled
	for _, ev := range e.events() {
		if s, ok := ev.Body.(state.JobSettled); ok && s.Job == e.job {
			settled = &s
		}
	}
	if settled == nil {
		t.Fatal("no job_settled event")
	}
	if !judge.VerifyRecord(judgeKey().Public().(ed25519.PublicKey), "settlement", settled.Record, settled.Signature) {
		t.Fatal("settlement record does not verify")
	}
	var s judge.Settlement
	if err := json.Unmarshal([]byte(settled.Record), &s); err != nil {
		t.Fatal(err)
	}
	if s.State != string(state.Published) || s.Checkpoint != e.published(2).CID || len(s.Nodes) != 3 {
		t.Fatalf("settlement %s", settled.Record)
	}
	if ns := s.Nodes[e.ids[cheat]]; len(ns.Slashes) != 1 || ns.Slashed == 0 || ns.Accepted != 2*K {
		t.Fatalf("cheater's settlement %+v", ns)
	}
	for _, i := range h2.ring[1:] {
		if ns := s.Nodes[e.ids[i]]; len(ns.Slashes) != 0 || ns.Accepted != 2*K || ns.Rewards == 0 {
			t.Fatalf("honest node %d's settlement %+v", i, ns)
		}
	}
}

func evidence(t testing.TB, s state.Slashed) judge.Evidence {
	t.Helper()
	var ev judge.Evidence
	if err := json.Unmarshal(s.Evidence, &ev); err != nil {
		t.Fatalf("evidence %q: %v", s.Evidence, err)
	}
	return ev
}

// holdsFile reports whether the evidence keeps file: its digest, inline
// bytes (when given) and the evidence file on disk.
func holdsFile(t testing.TB, ev judge.Evidence, file []byte) bool {
	t.Helper()
	dg := digestOf(file)
	for _, f := range ev.Files {
		if f.Digest != dg {
			continue
		}
		if f.Delta == "" && len(file) <= 24<<10 {
			t.Errorf("evidence of %s does not inline a %d-byte file", dg[:12], len(file))
			return false
		}
		if f.Delta != "" {
			b, err := base64.StdEncoding.DecodeString(f.Delta)
			if err != nil || !bytes.Equal(b, file) {
				t.Errorf("inline evidence of %s is not the file", dg[:12])
				return false
			}
		}
		b, err := os.ReadFile(f.Path)
		if err != nil || !bytes.Equal(b, file) {
			t.Errorf("evidence file %s: %v (equal %v)", f.Path, err, bytes.Equal(b, file))
			return false
		}
		return true
	}
	return false
}

// metaOf returns a delta file's metadata.
func metaOf(t testing.TB, file []byte) delta.MetadataFields {
	t.Helper()
	d, err := delta.Read(context.Background(), bytes.NewReader(file), delta.DefaultLimits())
	if err != nil {
		t.Fatal(err)
	}
	m, err := d.Info.Metadata.Fields()
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// digestOf is a delta file's signature digest (SHA3-256 of everything but
// the trailer), what verdicts and evidence name it by.
func digestOf(file []byte) string {
	n := max(len(file)-delta.SignatureSize-ed25519.PublicKeySize, 0)
	d := sha3.Sum256(file[:n])
	return hex.EncodeToString(d[:])
}

// TestRingDisagreement: a node naming a base for its second sync other
// than what the ring produced from the submitted deltas is flagged; the
// others are not, and their deltas are still spot-checked and pass.
func TestRingDisagreement(t *testing.T) {
	long(t)
	spec := tinySpec()
	spec.SpotCheckBP = 10000
	e := newEnv(t, 3, spec)
	h := honestEpoch1(t, e)
	liar := h.ring[2]
	m := metaOf(t, h.files[2][liar])
	forged := e.encode(liar, jobconf.SyncDelta{Job: e.job, Node: e.ids[liar], Epoch: 1, Sync: 2, Step: m.Step, Sequence: m.Sequence,
		Base: jobconf.Digest(e.small(5, 1)), ClaimedLoss: m.ClaimedLoss, Samples: m.Samples, Time: m.Time, Delta: h.contrib[2][liar]})
	for k := 1; k < len(h.files); k++ {
		for _, i := range h.ring {
			f := h.files[k][i]
			if k == 2 && i == liar {
				f = forged
			}
			e.expectAccept(f)
		}
	}
	e.stepUntil("epoch 1 merged", func(jb state.Job) bool { return jb.State == state.Running && jb.Epoch == 2 })
	r := e.report(1)
	if len(r.RingDisagreements) != 1 || !strings.HasPrefix(r.RingDisagreements[0], e.ids[liar][:12]+" sync 2") {
		t.Fatalf("ring disagreements %v, want only node %s at sync 2", r.RingDisagreements, e.ids[liar][:12])
	}
	// The liar's delta is left out of the merge (it could be dodging the
	// spot-check by naming a false base); nobody else's is.
	if len(r.RingUnknown) > 0 || len(r.Excluded) != 1 || !strings.HasPrefix(r.Excluded[0], jobspec.Slot{Epoch: 1, Step: m.Step, Node: e.ids[liar]}.String()) {
		t.Fatalf("ring unknown %v, excluded %v", r.RingUnknown, r.Excluded)
	}
	for _, s := range r.Scores {
		if s.Node == e.ids[liar] && s.Sync == 2 {
			t.Errorf("the liar's sync-2 delta was scored and merged: %+v", s)
		}
		if s.Node != e.ids[liar] && !s.Checked {
			t.Errorf("honest delta of %s sync %d not spot-checked", s.Node[:12], s.Sync)
		}
	}
}

// TestSubmissionOffenceForfeits: a node proven to cheat on submission
// (here an equivocation on its own sync-1 slot) forfeits the deltas of
// the epoch it had already had accepted: the merge leaves them out and
// the epoch pays it nothing.
func TestSubmissionOffenceForfeits(t *testing.T) {
	long(t)
	spec := tinySpec()
	spec.Epochs, spec.MaxNodes = 1, 4
	e := newEnv(t, 4, spec)
	h := trainEpoch(t, e.plan, 1, e.tmpl, e.keys, e.ring(), nil)
	K := e.plan.Syncs()
	cheat := h.ring[0]
	for _, i := range h.ring {
		e.expectAccept(h.files[1][i])
	}
	e.expectReject(e.encode(cheat, e.sd(cheat, 1, 1, e.small(3, 1e-4))), true, judge.ReasonEquivocation)
	if e.inRing(cheat) {
		t.Fatal("the equivocating node is still in the ring")
	}
	for k := 2; k <= K; k++ {
		for _, i := range h.ring[1:] {
			e.expectAccept(h.files[k][i])
		}
	}
	e.stepUntil("epoch 1 merged", func(jb state.Job) bool { return jb.State == state.Published })
	r := e.report(1)
	want := []string{jobspec.Slot{Epoch: 1, Step: uint64(e.plan.SyncStep(1, 1)), Node: e.ids[cheat]}.String() + " (node slashed this epoch: equivocation)"}
	if !slices.Equal(r.Excluded, want) || !slices.Equal(r.Forfeited, []string{e.ids[cheat]}) {
		t.Fatalf("excluded %v, forfeited %v; want %v and the cheater", r.Excluded, r.Forfeited, want)
	}
	if len(r.Scores) != 3*K {
		t.Fatalf("%d scores, want %d (the honest nodes' deltas)", len(r.Scores), 3*K)
	}
	var paid bool
	for _, ev := range e.events() {
		if rp, ok := ev.Body.(state.RewardsPaid); ok && rp.Job == e.job && rp.Epoch == 1 {
			paid = true
			for _, p := range rp.Payouts {
				if p.ID == e.ids[cheat] && p.Amount != 0 {
					t.Fatalf("the cheater was paid %d for the epoch it was caught in", p.Amount)
				}
			}
		}
	}
	if !paid {
		t.Fatal("epoch 1 paid nobody")
	}
}

// TestRingOffenceForfeits: a node slashed on ring evidence (a signed
// all-reduce frame above the norm bound, judge.RingEvidence) forfeits the
// deltas of that epoch it had already had accepted and the epoch's
// reward, exactly like a node slashed on submission or by a spot-check.
func TestRingOffenceForfeits(t *testing.T) {
	long(t)
	spec := tinySpec()
	spec.Epochs, spec.MaxNodes = 1, 4
	e := newEnv(t, 4, spec)
	h := trainEpoch(t, e.plan, 1, e.tmpl, e.keys, e.ring(), nil)
	K := e.plan.Syncs()
	cheat := h.ring[0]
	for _, i := range h.ring {
		e.expectAccept(h.files[1][i])
	}
	const n = 64
	frame := e.ringReport(e.keys[cheat], e.job, 1, ring.ScatterReduce, 0, float32(50*e.bound()/math.Sqrt(n)), n)
	if punished, err := e.j.RingEvidence(e.ctx, e.job, e.ids[cheat], frame); err != nil || !punished {
		t.Fatalf("a frame at 50 C: punished %v, %v", punished, err)
	}
	if e.inRing(cheat) {
		t.Fatal("the node slashed on ring evidence is still in the ring")
	}
	for k := 2; k <= K; k++ {
		for _, i := range h.ring[1:] {
			e.expectAccept(h.files[k][i])
		}
	}
	e.stepUntil("epoch 1 merged", func(jb state.Job) bool { return jb.State == state.Published })
	r := e.report(1)
	want := []string{jobspec.Slot{Epoch: 1, Step: uint64(e.plan.SyncStep(1, 1)), Node: e.ids[cheat]}.String() + " (node slashed this epoch: " + judge.OffenceRingNorm + ")"}
	if !slices.Equal(r.Excluded, want) || !slices.Equal(r.Forfeited, []string{e.ids[cheat]}) {
		t.Fatalf("excluded %v, forfeited %v; want %v and the cheater", r.Excluded, r.Forfeited, want)
	}
	if len(r.Scores) != 3*K {
		t.Fatalf("%d scores, want %d (the honest nodes' deltas)", len(r.Scores), 3*K)
	}
	var paid bool
	for _, ev := range e.events() {
		if rp, ok := ev.Body.(state.RewardsPaid); ok && rp.Job == e.job && rp.Epoch == 1 {
			paid = true
			for _, p := range rp.Payouts {
				if p.ID == e.ids[cheat] && p.Amount != 0 {
					t.Fatalf("the cheater was paid %d for the epoch it was caught in", p.Amount)
				}
			}
		}
	}
	if !paid {
		t.Fatal("epoch 1 paid nobody")
	}
}
