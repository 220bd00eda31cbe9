package localcluster_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/zooai/gym/devnet/localcluster"
	"github.com/zooai/gym/node/worker"
	"github.com/zooai/gym/orchestrator/judge"
	"github.com/zooai/gym/orchestrator/state"
	"github.com/zooai/gym/protocol/jobspec"
	"github.com/zooai/gym/protocol/verdict"
)

// validatorLog collects the delegated checks' events of hanzod's log.
type validatorLog struct {
	mu       sync.Mutex
	assigned []state.CheckAssigned
	verdicts []state.VerdictRecorded
	expired  []state.CheckExpired
	slashed  []state.Slashed
}

func (l *validatorLog) add(ev localcluster.Event) {
	if ev.Kind != localcluster.EventHanzod {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	switch b := ev.Hanzod.Body.(type) {
	case state.CheckAssigned:
		l.assigned = append(l.assigned, b)
	case state.VerdictRecorded:
		l.verdicts = append(l.verdicts, b)
	case state.CheckExpired:
		l.expired = append(l.expired, b)
	case state.Slashed:
		l.slashed = append(l.slashed, b)
	}
}

// decisions replays the log's verdicts check by check: the decided
// outcome of each (verdict.Decide) and who answered what.
func (l *validatorLog) decisions(t *testing.T, k int) map[string]struct {
	dec     verdict.Decision
	who     []string
	answers []verdict.Outcome
} {
	t.Helper()
	l.mu.Lock()
	defer l.mu.Unlock()
	type ck struct {
		asked   int
		who     []string
		answers []verdict.Outcome
	}
	checks := map[string]*ck{}
	for _, a := range l.assigned {
		c := checks[a.Job+" "+a.Slot]
		if c == nil {
			c = &ck{}
			checks[a.Job+" "+a.Slot] = c
		}
		c.asked++
	}
	for _, v := range l.verdicts {
		c := checks[v.Job+" "+v.Slot]
		c.who = append(c.who, v.Validator)
		c.answers = append(c.answers, verdict.Outcome(v.Verdict.Outcome))
	}
	out := map[string]struct {
		dec     verdict.Decision
		who     []string
		answers []verdict.Outcome
	}{}
	for key, c := range checks {
		d := verdict.Decide(k, c.answers, 0, c.asked)
		out[key] = struct {
			dec     verdict.Decision
			who     []string
			answers []verdict.Outcome
		}{d, c.who, c.answers}
	}
	return out
}

// TestValidators runs a job that asks two validators per check (every
// delta checked) with four go workers, one of them scaling its update ×1.5,
// and three validators, one lying in both directions (verdict-flip: the
// attacker's bad delta passed, honest deltas failed). The majority decides
// every check right: the attacker is slashed for trace_check on the
// validators' word and nobody honest is; the liar is slashed for every
// verdict the majority contradicted (false_verdict; progressively, banned at
// the third), never the honest validators, who are paid from the
// participation share.
func TestValidators(t *testing.T) {
	cfg := localcluster.TestConfig(t.TempDir(), 4)
	cfg.Attacks = []string{"", "", "", worker.AttackScale}
	cfg.Validators = []string{"", "", worker.AttackVerdictFlip}
	var log validatorLog
	cfg.OnEvent = log.add
	spec := tinySpec(2, 4, 4)
	spec.MinNodes, spec.SpotCheckBP, spec.Validators = 3, 10_000, 2
	sum := runPublished(t, cfg, spec)
	byName := map[string]localcluster.NodeSummary{}
	for _, n := range sum.Nodes {
		byName[n.Name] = n
		t.Logf("%s %s attack %q: reward %.3f GYM, slashes %v", n.Name, n.Role, n.Attack, n.Reward, n.Slashes)
	}
	for _, name := range []string{"w0", "w1", "w2", "v0", "v1"} {
		if byName[name].Slashed {
			t.Errorf("%s is honest and was slashed: %v", name, byName[name].Slashes)
		}
	}
	if n := byName["w3"]; !n.Slashed || !strings.Contains(strings.Join(n.Slashes, " "), "trace_check") {
		t.Errorf("the ×1.5 attacker was not slashed for trace_check: %v", n.Slashes)
	}
	liar := byName["v2"]
	if !liar.Slashed {
		t.Errorf("the lying validator was not slashed")
	}
	for _, s := range liar.Slashes {
		if !strings.HasPrefix(s, judge.OffenceFalseVerdict+": ") {
			t.Errorf("the liar slashed for %q", s)
		}
	}
	for _, name := range []string{"v0", "v1"} {
		if byName[name].Reward <= 0 {
			t.Errorf("honest validator %s earned nothing", name)
		}
	}
	// Every check checked by validators, decided as the majority says, and
	// every verdict the majority contradicted slashed exactly once.
	checks := 0
	for _, e := range sum.Epochs {
		for _, c := range e.TraceChecks {
			checks++
			if len(c.Validators) < verdict.Quorum(2) {
				t.Errorf("check %s decided by %v, want at least %d validators", c.Slot, c.Validators, verdict.Quorum(2))
			}
			attacker := strings.HasSuffix(c.Slot, "/"+byName["w3"].ID)
			if attacker != (c.Failed != "") {
				t.Errorf("check %s of attacker=%v: failed %q %s", c.Slot, attacker, c.Failed, c.Detail)
			}
		}
	}
	if checks < 7 {
		t.Errorf("%d checks, want every delta of the epochs checked", checks)
	}
	falseReports := 0
	for key, d := range log.decisions(t, 2) {
		if !d.dec.Decided || d.dec.Exhausted {
			t.Errorf("check %s not decided by its verdicts: %v from %v", key, d.answers, d.who)
			continue
		}
		for _, i := range d.dec.False {
			falseReports++
			if d.who[i] != liar.ID {
				t.Errorf("check %s: honest validator %s contradicted the majority %v", key, d.who[i][:12], d.answers)
			}
		}
		for i, w := range d.who {
			if w == liar.ID && !contains(d.dec.False, i) {
				t.Errorf("check %s: the liar's verdict %s stood", key, d.answers[i])
			}
		}
	}
	// Slashing is progressive: 5 %, 25 %, then everything and a ban, after
	// which the liar is asked for nothing more.
	if falseReports == 0 || len(liar.Slashes) != min(falseReports, 3) {
		t.Errorf("%d false reports, %d slashes of the liar (want one each, up to the ban at the third)", falseReports, len(liar.Slashes))
	}
	t.Logf("%d checks, %d assignments, %d verdicts, %d false reports", checks, len(log.assigned), len(log.verdicts), falseReports)
}

func contains(s []int, x int) bool {
	for _, v := range s {
		if v == x {
			return true
		}
	}
	return false
}

// TestValidatorKilled kills a validator (its context, at once) as it starts
// its first check: its assignments expire (noted, not slashed), other
// validators are asked instead, every check is decided by verdicts and the
// job publishes with nobody slashed.
func TestValidatorKilled(t *testing.T) {
	cfg := localcluster.TestConfig(t.TempDir(), 3)
	cfg.Validators = []string{"", "", ""}
	// Long enough for a live validator's queue of toy checks on a loaded
	// machine; the killed one's assignments wait it out.
	cfg.CheckTimeout = 40 * time.Second
	var log validatorLog
	var once sync.Once
	var victim *localcluster.Worker
	var vmu sync.Mutex
	cfg.OnEvent = func(ev localcluster.Event) {
		log.add(ev)
		if ev.Kind == localcluster.EventWorker && ev.Work.Kind == worker.EventCheckStarted {
			once.Do(func() {
				vmu.Lock()
				victim = ev.Worker
				vmu.Unlock()
				ev.Worker.Kill()
			})
		}
	}
	spec := tinySpec(1, 4, 3)
	spec.SpotCheckBP, spec.Validators = 10_000, 2
	sum := runPublished(t, cfg, spec)
	vmu.Lock()
	v := victim
	vmu.Unlock()
	if v == nil {
		t.Fatal("no validator started a check")
	}
	for _, n := range sum.Nodes {
		if n.Slashed {
			t.Errorf("%s slashed: %v", n.Name, n.Slashes)
		}
		if n.ID == v.ID && n.MissedChecks < 1 {
			t.Errorf("the killed validator missed %d checks", n.MissedChecks)
		}
	}
	log.mu.Lock()
	expired := 0
	for _, e := range log.expired {
		if e.Validator != v.ID {
			// A live validator's queue outlasting the timeout on a loaded
			// machine: also replaced, also unpunished (checked below).
			t.Logf("check %s expired for %s too, which was not killed", e.Slot, e.Validator[:12])
			continue
		}
		expired++
	}
	log.mu.Unlock()
	if expired == 0 {
		t.Fatal("no assignment of the killed validator expired")
	}
	for key, d := range log.decisions(t, 2) {
		// Decided by verdicts, or (every validator asked gone) by hanzod.
		if len(d.dec.False) > 0 || (d.dec.Decided && d.dec.Outcome != verdict.Pass) {
			t.Errorf("check %s: %+v from %v", key, d.dec, d.answers)
		}
		for _, w := range d.who {
			if w == v.ID {
				t.Errorf("check %s answered by the killed validator", key)
			}
		}
	}
	checks, byValidators := 0, 0
	for _, e := range sum.Epochs {
		for _, c := range e.TraceChecks {
			checks++
			if c.Failed != "" || c.Unverifiable != "" {
				t.Errorf("check %s: failed %q unverifiable %q by %v", c.Slot, c.Failed, c.Unverifiable, c.Validators)
			}
			if len(c.Validators) == 2 {
				byValidators++
			}
		}
	}
	if byValidators == 0 {
		t.Errorf("no check decided by two validators")
	}
	if checks != 6 {
		t.Errorf("%d checks, want 6 (3 nodes, 2 syncs)", checks)
	}
	t.Logf("%d checks, %d expired assignments of the killed validator", checks, expired)
}

// TestValidatorsAbsent: a job asks for validators and none is registered:
// hanzod checks every delta itself (the report says so) rather than
// waiting for ever, and the job publishes.
func TestValidatorsAbsent(t *testing.T) {
	cfg := localcluster.TestConfig(t.TempDir(), 3)
	spec := tinySpec(1, 4, 3)
	spec.SpotCheckBP, spec.Validators = 10_000, 2
	sum := runPublished(t, cfg, spec)
	checks := 0
	for _, e := range sum.Epochs {
		for _, c := range e.TraceChecks {
			checks++
			if c.Failed != "" || len(c.Validators) != 1 || c.Validators[0] != "hanzod" {
				t.Errorf("check %s: failed %q by %v, want passed by hanzod", c.Slot, c.Failed, c.Validators)
			}
		}
	}
	if checks != 6 {
		t.Errorf("%d checks, want 6", checks)
	}
}

// runPublished runs spec on cfg's cluster and fails the test unless the job
// publishes. The bound is generous (the runs take 20–100 s alone): it only
// ends a hang, on a machine whose cores other tests share.
func runPublished(t *testing.T, cfg localcluster.Config, spec jobspec.Spec) *localcluster.Summary {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	sum, err := localcluster.Run(ctx, cfg, spec)
	if err != nil {
		t.Fatal(err)
	}
	if sum.Status != "published" {
		t.Fatalf("job %s (%s)", sum.Status, sum.Reason)
	}
	return sum
}
