package judge

import (
	"testing"

	"github.com/zooai/gym/basemodel"
	"github.com/zooai/gym/jobconf"
	"github.com/zooai/gym/jobspec"
)

// TestPlanCache: the plan is derived once per job and spec, again when
// the spec differs.
func TestPlanCache(t *testing.T) {
	base, err := basemodel.Builtin()
	if err != nil {
		t.Fatal(err)
	}
	calls := 0
	j := &Judge{base: base, plans: map[string]cachedPlan{}, cfg: Config{NewPlan: func(id string, s jobspec.Spec, b *basemodel.Base) (jobconf.Plan, error) {
		calls++
		if b != base {
			t.Error("the plan was not derived from the judge's base model")
		}
		return jobconf.FromSpec(id, s, b)
	}}}
	g := jobspec.DefaultGSPO()
	g.AggregateInterval = 1
	s1 := jobspec.Spec{Model: jobconf.BuiltinModel, Dataset: "addition", Epochs: 2, MinNodes: 1, StepsPerEpoch: 4, GSPO: g}
	s2 := s1
	s2.Epochs = 3
	bad := s1
	bad.Model = "llama"
	for _, c := range []struct {
		job   string
		spec  jobspec.Spec
		calls int
		err   bool
	}{
		{"a", s1, 1, false}, {"a", s1, 1, false}, {"b", s1, 2, false}, {"a", s1, 2, false},
		{"a", s2, 3, false}, {"a", s2, 3, false}, {"c", bad, 4, true}, {"c", bad, 4, true},
	} {
		p, err := j.plan(c.job, c.spec)
		if (err != nil) != c.err || calls != c.calls {
			t.Fatalf("plan(%s, epochs %d, model %s): err %v after %d derivations; want error %v after %d", c.job, c.spec.Epochs, c.spec.Model, err, calls, c.err, c.calls)
		}
		if err == nil && (p.Job != c.job || p.Epochs != c.spec.Epochs) {
			t.Fatalf("plan %+v for job %s epochs %d", p, c.job, c.spec.Epochs)
		}
	}
}
