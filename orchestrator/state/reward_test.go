package state

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/zooai/gym/orchestrator/ledger"
)

// rewardHarness has four staked nodes a..d and a funded treasury.
func rewardHarness(t *testing.T) *harness {
	h := newHarness(t)
	for _, n := range []string{"a", "b", "c", "d"} {
		h.must("register " + n + " vram=24576")
		h.must("deposit " + n + " 11000")
		h.must("bond " + n + " 10000")
	}
	h.must("deposit @treasury 10000")
	return h
}

// must runs a directive that has to succeed and returns its output.
func (h *harness) must(line string) string {
	h.t.Helper()
	out := h.run(line)
	if strings.HasPrefix(out, "error:") {
		h.t.Fatalf("%s: %s", line, out)
	}
	return out
}

// startJob brings the job just submitted to its first epoch: every
// member reports bandwidth to the others.
func (h *harness) startJob(job string) {
	h.t.Helper()
	j, _ := h.m.Job(job)
	for _, a := range j.Members {
		line := "bandwidth " + h.names[a] + " " + job
		for _, b := range j.Members {
			if b != a {
				line += " " + h.names[b] + "=1000"
			}
		}
		h.must(line)
	}
	if j, _ = h.m.Job(job); j.State != Running {
		h.t.Fatalf("job %s is %s, want running", job, j.State)
	}
}

// payEpoch ends epoch e of job and pays it as the judge does: each ring
// member contributed samples verified samples, quality 1 and one sync.
func (h *harness) payEpoch(job string, e int, samples uint64) RewardsPaid {
	h.t.Helper()
	h.must(fmt.Sprintf("end-epoch %s %d", job, e))
	j, _ := h.m.Job(job)
	c := PayRewards{Job: job, Epoch: e}
	for _, n := range j.Ring {
		c.Contributions = append(c.Contributions, ledger.Contribution{ID: n, Compute: samples, Quality: 1, Participation: 1})
	}
	evs, err := h.m.Step(h.now, c)
	if err != nil {
		h.t.Fatalf("pay epoch %d of %s: %v", e, job, err)
	}
	h.log = append(h.log, evs...)
	return evs[0].Body.(RewardsPaid)
}

func paidSum(rp RewardsPaid) ledger.Amount {
	var s ledger.Amount
	for _, p := range rp.Payouts {
		s += p.Amount
	}
	return s
}

// TestBusyworkEarnsItsShare: an epoch pays for the samples it verified,
// so a job of one-step epochs earns a small fraction of what a full
// epoch does; before, every epoch paid the flat 100 GYM (the issue's 8
// one-step epochs paid 800 GYM in 20 s).
func TestBusyworkEarnsItsShare(t *testing.T) {
	h := rewardHarness(t)
	// One step of 16 prompts × 8 completions: 128 samples per worker, the
	// least an epoch may hold.
	h.must("submit epochs=8 min=4 max=4 steps=1 gspo.aggregate_interval=1")
	h.startJob("job-00000001")
	busy := h.payEpoch("job-00000001", 1, 128)
	// 4 workers × 128 samples × 0.025 GYM = 12.8 GYM.
	if busy.Total != 12_800_000 || busy.Samples != 512 || paidSum(busy) > busy.Total || paidSum(busy) < busy.Total-4 {
		t.Fatalf("a one-step epoch paid %d µGYM (%d split) for %d samples, want 12.8 GYM", busy.Total, paidSum(busy), busy.Samples)
	}
	full := h.m.cfg.EpochReward
	if 100*busy.Total > 13*full { // 12.8% of a full epoch; eight earn 102.4 GYM, not 800
		t.Fatalf("a one-step epoch earns %d µGYM, a full epoch %d", busy.Total, full)
	}
	// The operator's epoch of gym up's size (4 × 960 samples) earns 96
	// GYM, and more samples than 4,000 are capped at 100 GYM.
	h.must("fail job-00000001 done")
	h.must("submit epochs=2 min=4 max=4 steps=30 prompts=4 gspo.aggregate_interval=5")
	h.startJob("job-00000002")
	if rp := h.payEpoch("job-00000002", 1, 960); rp.Total != 96*ledger.GYM {
		t.Fatalf("gym up's epoch paid %d, want 96 GYM", rp.Total)
	}
	h.must("publish job-00000002 1 bafy1")
	if rp := h.payEpoch("job-00000002", 2, 100_000); rp.Total != full {
		t.Fatalf("an epoch above the cap paid %d, want %d", rp.Total, full)
	}
}

// TestMinimumEpochSize: a job whose workers' epochs train fewer samples
// than the minimum is refused, and the refusal says the numbers.
func TestMinimumEpochSize(t *testing.T) {
	h := rewardHarness(t)
	out := h.run("submit epochs=8 min=4 max=4 steps=1 prompts=4 gspo.aggregate_interval=1")
	want := "error: state: invalid request: an epoch of 32 samples per worker (steps_per_epoch 1 × prompts_per_step 4 × gspo.group_size 8); " +
		"this hanzod's minimum is 128: raise steps_per_epoch to 4 or more, or train more prompts per step"
	if out != want {
		t.Fatalf("got  %s\nwant %s", out, want)
	}
	// The suggested size passes; whole syncs are suggested when a sync
	// is several steps.
	h.must("submit epochs=8 min=4 max=4 steps=4 prompts=4 gspo.aggregate_interval=1")
	if out := h.run("submit steps=5 prompts=2 gspo.aggregate_interval=5"); !strings.Contains(out, "80 samples per worker") ||
		!strings.Contains(out, "raise steps_per_epoch to 10 or more") {
		t.Fatalf("refusal of 5 steps × 2 × 8: %s", out)
	}
	// The operator sets the minimum; 0 is none.
	cfg := testConfig()
	cfg.MinEpochSamples = 0
	m, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	m.Start(epoch0)
	h.m = m
	h.must("submit steps=1 prompts=1 gspo.group_size=2 gspo.aggregate_interval=1")
}

// TestEscrowBalances: a signed submitter's job is paid from its escrow,
// not the treasury; what the epochs do not spend comes back when the job
// ends. A node farming its own job gets back at most what it put in.
func TestEscrowBalances(t *testing.T) {
	h := rewardHarness(t)
	a := h.id("a")
	before := h.m.Account(a)
	treasury := h.m.Treasury()
	// a submits a job its own ring (a, b, c) runs: 2 epochs of at most
	// 3 × 6,400 samples, capped at 100 GYM each: 200 GYM escrowed.
	out := h.must("submit by=a epochs=2")
	if !strings.Contains(out, `"escrow":200000000`) {
		t.Fatalf("submission: %s", out)
	}
	if got := h.m.Account(a); got.Free != before.Free-200*ledger.GYM || got.Escrowed != 200*ledger.GYM {
		t.Fatalf("after submission: %+v", got)
	}
	h.startJob("job-00000001")
	// Epoch 1 trains a third of its samples: 3 × 2,133 × 0.025 = 159.975
	// GYM, capped at 100.
	rp := h.payEpoch("job-00000001", 1, 2_133)
	if rp.From != a || rp.Total != 100*ledger.GYM {
		t.Fatalf("epoch 1 paid %d from %q", rp.Total, rp.From)
	}
	h.must("publish job-00000001 1 bafy1")
	// Epoch 2 trains 600 samples: 45 GYM. The treasury pays nothing.
	rp2 := h.payEpoch("job-00000001", 2, 600)
	if rp2.Total != 45*ledger.GYM || h.m.Treasury() != treasury {
		t.Fatalf("epoch 2 paid %d; treasury %d, was %d", rp2.Total, h.m.Treasury(), treasury)
	}
	h.must("publish job-00000001 2 bafy2")
	paid := paidSum(rp) + paidSum(rp2)
	if last, ok := h.log[len(h.log)-1].Body.(EscrowReleased); !ok || last.Account != a || last.Amount != 200*ledger.GYM-paid {
		t.Fatalf("the job's end released %+v, want %d to a", h.log[len(h.log)-1].Body, 200*ledger.GYM-paid)
	}
	// Balances: a got back its escrow less what b and c earned; the
	// treasury is untouched; nothing was created.
	var others ledger.Amount
	for _, p := range append(rp.Payouts, rp2.Payouts...) {
		if p.ID != a {
			others += p.Amount
		}
	}
	after := h.m.Account(a)
	if after.Escrowed != 0 || after.Total() != before.Total()-others || others == 0 {
		t.Fatalf("a holds %d (escrow %d), held %d; b and c earned %d", after.Total(), after.Escrowed, before.Total(), others)
	}
	if h.m.Treasury() != treasury {
		t.Fatalf("treasury %d, was %d", h.m.Treasury(), treasury)
	}
	if err := h.m.CheckLedger(); err != nil {
		t.Fatal(err)
	}
	// Nothing more is paid from the released escrow.
	if _, err := h.m.Step(h.now, PayRewards{Job: "job-00000001", Epoch: 2}); !errors.Is(err, ErrPrecondition) {
		t.Fatalf("paying a paid epoch again: %v", err)
	}
	// The escrow is part of the log: a replay reaches the same state.
	m, err := New(testConfig())
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range h.log {
		if err := m.Apply(e); err != nil {
			t.Fatal(err)
		}
	}
	if !bytes.Equal(m.Marshal(), h.m.Marshal()) {
		t.Fatal("replayed state differs")
	}
}

// TestEscrowRefusedWithoutFunds: a signed submitter that cannot escrow
// what its job can pay is refused, with the numbers.
func TestEscrowRefusedWithoutFunds(t *testing.T) {
	h := rewardHarness(t)
	h.must("deposit poor 50")
	out := h.run("submit by=poor epochs=3")
	for _, want := range []string{"failed precondition", "up to 300000000 µGYM", "epochs 3 × at most 100000000 µGYM", "free balance of 50000000 µGYM", "deposit more"} {
		if !strings.Contains(out, want) {
			t.Fatalf("refusal %q lacks %q", out, want)
		}
	}
	if got := h.m.Account(h.id("poor")); got.Free != 50*ledger.GYM || got.Escrowed != 0 {
		t.Fatalf("a refused submission moved money: %+v", got)
	}
	// A smaller job fits: one epoch of 3 × 128 samples is 9.6 GYM.
	if out := h.must("submit by=poor steps=1 gspo.aggregate_interval=1"); !strings.Contains(out, `"escrow":9600000`) {
		t.Fatalf("submission: %s", out)
	}
}

// TestApplyRefusesForeignEscrow: replay refuses escrow events that
// contradict the state.
func TestApplyRefusesForeignEscrow(t *testing.T) {
	h := rewardHarness(t)
	h.must("submit by=a epochs=1")
	h.startJob("job-00000001")
	h.payEpoch("job-00000001", 1, 100)
	h.must("publish job-00000001 1 bafy1")
	upTo := func(i int) *Machine {
		m, _ := New(testConfig())
		for _, e := range h.log[:i] {
			if err := m.Apply(e); err != nil {
				t.Fatal(err)
			}
		}
		return m
	}
	for _, c := range []struct {
		name   string
		kind   string
		change func(Body) Body
	}{
		{"escrow above the free balance", "job_submitted", func(b Body) Body { e := b.(JobSubmitted); e.Escrow = 1 << 60; return e }},
		{"escrow without a submitter", "job_submitted", func(b Body) Body { e := b.(JobSubmitted); e.By = ""; return e }},
		{"payment from another account's escrow", "rewards_paid", func(b Body) Body { e := b.(RewardsPaid); e.From = h.id("b"); return e }},
		{"payment above the job's escrow", "rewards_paid", func(b Body) Body {
			e := b.(RewardsPaid)
			e.Payouts = append([]ledger.Payout(nil), e.Payouts...)
			e.Payouts[0].Amount += 100 * ledger.GYM
			return e
		}},
		{"release of another amount", "escrow_released", func(b Body) Body { e := b.(EscrowReleased); e.Amount--; return e }},
		{"release to another account", "escrow_released", func(b Body) Body { e := b.(EscrowReleased); e.Account = h.id("b"); return e }},
	} {
		i := 0
		for i < len(h.log) && (h.log[i].Body.Kind() != c.kind || (c.kind == "job_submitted" && h.log[i].Body.(JobSubmitted).Escrow == 0)) {
			i++
		}
		if i == len(h.log) {
			t.Fatalf("%s: no %s event in the log", c.name, c.kind)
		}
		if err := upTo(i).Apply(h.log[i]); err != nil {
			t.Fatalf("%s: the event as logged: %v", c.name, err)
		}
		ev := h.log[i]
		ev.Body = c.change(ev.Body)
		if err := upTo(i).Apply(ev); err == nil {
			t.Errorf("%s: applied %+v", c.name, ev.Body)
		}
	}
}

// TestIssueBusywork is the issue's case, with the minimum lowered so the
// job is accepted: 8 one-step epochs of 4 workers × 32 samples paid 800
// GYM before (one flat 100 GYM each); now they pay 25.6 GYM.
func TestIssueBusywork(t *testing.T) {
	cfg := testConfig()
	cfg.MinEpochSamples = 0
	m, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	h := newHarness(t)
	h.m, h.log = m, m.Start(epoch0)
	for _, n := range []string{"a", "b", "c", "d"} {
		h.must("register " + n + " vram=24576")
		h.must("deposit " + n + " 11000")
		h.must("bond " + n + " 10000")
	}
	h.must("deposit @treasury 10000")
	h.must("submit epochs=8 min=4 max=4 steps=1 prompts=4 gspo.aggregate_interval=1")
	h.startJob("job-00000001")
	var total ledger.Amount
	for e := 1; e <= 8; e++ {
		total += paidSum(h.payEpoch("job-00000001", e, 32))
		h.must(fmt.Sprintf("publish job-00000001 %d bafy%d", e, e))
	}
	if total > 25_600_000 || total < 25_600_000-8*4 {
		t.Fatalf("8 one-step epochs paid %d µGYM, want 25.6 GYM", total)
	}
}
