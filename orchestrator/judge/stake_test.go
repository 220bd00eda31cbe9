package judge_test

import (
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/zooai/gym/orchestrator/judge"
	"github.com/zooai/gym/orchestrator/ledger"
	"github.com/zooai/gym/orchestrator/state"
)

// TestOrchestratorStake: the judge signs nothing until its key's account
// has the orchestrator minimum bonded (and says how to bond it); then its
// records name the account, and anyone checks one from the record and a
// ledger lookup.
func TestOrchestratorStake(t *testing.T) {
	e := newEnv(t, 3, tinySpec())
	minimum, _ := ledger.MinStake(ledger.RoleOrchestrator)
	j, err := judge.New(judge.Config{DataDir: filepath.Join(e.dir, "staked"), Key: judgeKey(), Store: e.arts, Threads: 2,
		ShardSize: 8, EvalSize: 8, Base: base(t), Now: e.clk.Now, MinStake: minimum}, e.eng)
	if err != nil {
		t.Fatal(err)
	}
	e.j = j
	h := honestEpoch1(t, e)
	for k := 1; k < len(h.files); k++ {
		for _, i := range h.ring {
			if r := e.submit(h.files[k][i]); !r.Accepted {
				t.Fatalf("honest delta: %+v", r)
			}
		}
	}
	_ = e.j.Step(e.ctx) // ends the epoch: no record needed
	err = e.j.Step(e.ctx)
	if !errors.Is(err, judge.ErrUnstaked) || !strings.Contains(err.Error(), "gym ledger bond "+j.Account()+" 50000") {
		t.Fatalf("Step with an unstaked key: %v, want ErrUnstaked saying how to bond", err)
	}
	if jb := e.jobState(); jb.State != state.Aggregating {
		t.Fatalf("an unstaked judge merged: job %s", jb.State)
	}
	e.do(state.Deposit{Account: j.Account(), Amount: minimum})
	e.do(state.Bond{Account: j.Account(), Amount: minimum - 1})
	if err := e.j.CheckStake(); !errors.Is(err, judge.ErrUnstaked) {
		t.Fatalf("1 µGYM short: %v", err)
	}
	e.do(state.Deposit{Account: j.Account(), Amount: 1})
	e.do(state.Bond{Account: j.Account(), Amount: 1})
	e.stepUntil("epoch 1 merged", func(jb state.Job) bool { return jb.State == state.Running && jb.Epoch == 2 })
	p := e.published(1)
	bonded := func(acct string) (ledger.Amount, error) {
		var b ledger.Amount
		e.eng.View(func(m *state.Machine) { b = m.Account(acct).Bonded })
		return b, nil
	}
	acct, err := judge.CheckRecord("publication", p.Record, p.Signature, bonded, minimum)
	if err != nil || acct != j.Account() {
		t.Fatalf("CheckRecord: %s, %v", acct, err)
	}
	if !strings.Contains(p.Record, `"bonded":50000000000`) {
		t.Fatalf("the record does not say the stake it was signed with: %s", p.Record)
	}
	if _, err := judge.CheckRecord("publication", p.Record, p.Signature, bonded, minimum+1); !errors.Is(err, judge.ErrUnstaked) {
		t.Fatalf("CheckRecord against a higher minimum: %v", err)
	}
	if _, err := judge.CheckRecord("settlement", p.Record, p.Signature, bonded, minimum); err == nil {
		t.Fatal("a publication checked as a settlement")
	}
	forged := strings.Replace(p.Record, `"epoch":1`, `"epoch":7`, 1)
	if _, err := judge.CheckRecord("publication", forged, p.Signature, bonded, minimum); err == nil {
		t.Fatal("an altered record checked")
	}
	other := strings.Replace(p.Record, j.Account(), nodeID(nodeKey(0)), 1)
	if _, err := judge.CheckRecord("publication", other, p.Signature, bonded, 0); err == nil {
		t.Fatal("a record naming another key checked")
	}
}
