package judge_test

import (
	"sync/atomic"
	"testing"

	"github.com/zooai/gym/model/basemodel"
	"github.com/zooai/gym/model/task"
	"github.com/zooai/gym/orchestrator/judge"
	"github.com/zooai/gym/protocol/jobconf"
	"github.com/zooai/gym/protocol/jobspec"
)

// TestPlanDerivedOnce: the judge derives a job's plan from its spec once,
// however many steps and submissions follow (Step asks for every running
// job every second, under the engine's lock).
func TestPlanDerivedOnce(t *testing.T) {
	e := newEnv(t, 3, tinySpec())
	var calls atomic.Int64
	j, err := judge.New(judge.Config{DataDir: e.jdir(), Key: judgeKey(), Store: e.arts, Threads: 2, ShardSize: 8, EvalSize: 8,
		Base: base(t), Now: e.clk.Now,
		NewPlan: func(id string, s jobspec.Spec, b *basemodel.Base, data *task.Data) (jobconf.Plan, error) {
			calls.Add(1)
			return jobconf.FromSpecData(id, s, b, data)
		}}, e.eng)
	if err != nil {
		t.Fatal(err)
	}
	e.j = j
	for range 5 {
		if err := e.j.Step(e.ctx); err != nil {
			t.Fatal(err)
		}
	}
	if n := calls.Load(); n != 1 {
		t.Fatalf("5 steps derived the plan %d times, want once", n)
	}
	e.expectAccept(e.good(0, 1, 1))
	e.expectAccept(e.good(1, 1, 2))
	e.expectReject(e.encode(2, e.sd(2, 1, 1, e.small(3, 1))), true, judge.ReasonNorm)
	for range 5 {
		if err := e.j.Step(e.ctx); err != nil {
			t.Fatal(err)
		}
	}
	if n := calls.Load(); n != 1 {
		t.Fatalf("steps and submissions derived the plan %d times, want once", n)
	}
}
