package judge

import (
	"context"
	"errors"
	"testing"

	"github.com/ipfs/go-cid"

	"github.com/zooai/gym/model/basemodel"
	"github.com/zooai/gym/model/task"
	"github.com/zooai/gym/protocol/jobconf"
	"github.com/zooai/gym/protocol/jobspec"
)

// TestPlanCache: the plan is derived once per job and spec, again when
// the spec differs; a job naming a base by CID gets that base from Bases,
// parsed once; a model that is neither builtin nor a CID, or a base that
// cannot be had, is an error that is not cached.
func TestPlanCache(t *testing.T) {
	base, err := basemodel.Builtin()
	if err != nil {
		t.Fatal(err)
	}
	const root = "bafybeiczsscdsbs7ffqz55asqdf3smv6klcw3gofszvwlyarci47bgf354"
	byCID := *base
	byCID.Name = root
	bases := &fakeBases{base: &byCID}
	calls := 0
	j := &Judge{base: base, plans: map[string]cachedPlan{}, loaded: map[string]bool{}, cfg: Config{Bases: bases, ModelWork: ModelWorkSelf, NewPlan: func(id string, s jobspec.Spec, b *basemodel.Base, data *task.Data) (jobconf.Plan, error) {
		calls++
		if want := map[string]*basemodel.Base{jobconf.BuiltinModel: base, root: &byCID}[s.Model]; b != want {
			t.Errorf("the plan of model %s was derived from base %s", s.Model, b.Name)
		}
		return jobconf.FromSpecData(id, s, b, data)
	}}}
	g := jobspec.DefaultGSPO()
	g.AggregateInterval = 1
	s1 := jobspec.Spec{Model: jobconf.BuiltinModel, Dataset: "addition", Epochs: 2, MinNodes: 1, StepsPerEpoch: 4, GSPO: g}
	s2 := s1
	s2.Epochs = 3
	bad := s1
	bad.Model = "llama"
	s3 := s1
	s3.Model = root
	for _, c := range []struct {
		job   string
		spec  jobspec.Spec
		calls int
		err   bool
	}{
		{"a", s1, 1, false}, {"a", s1, 1, false}, {"b", s1, 2, false}, {"a", s1, 2, false},
		{"a", s2, 3, false}, {"a", s2, 3, false}, {"c", bad, 3, true}, {"c", bad, 3, true},
		{"d", s3, 4, false}, {"d", s3, 4, false}, {"e", s3, 5, false},
	} {
		p, err := j.plan(c.job, c.spec)
		if (err != nil) != c.err || calls != c.calls {
			t.Fatalf("plan(%s, epochs %d, model %s): err %v after %d derivations; want error %v after %d", c.job, c.spec.Epochs, c.spec.Model, err, calls, c.err, c.calls)
		}
		if err == nil && (p.Job != c.job || p.Epochs != c.spec.Epochs) {
			t.Fatalf("plan %+v for job %s epochs %d", p, c.job, c.spec.Epochs)
		}
	}

	if bases.opens != 2 {
		t.Fatalf("Bases.Open called %d times for two jobs on the base", bases.opens)
	}
	bases.err = errors.New("not in the store")
	s4 := s3
	s4.Epochs = 4
	for range 2 {
		if _, err := j.plan("f", s4); err == nil {
			t.Fatal("a plan without its base")
		}
	}
	bases.err = nil
	if p, err := j.plan("f", s4); err != nil || p.Base != &byCID {
		t.Fatalf("once the base is there: %v", err)
	}
}

// fakeBases hands out one base for one CID, or err.
type fakeBases struct {
	base  *basemodel.Base
	err   error
	opens int
}

func (f *fakeBases) OpenConfig(_ context.Context, root cid.Cid) (*basemodel.Base, error) {
	return nil, errors.New("test: OpenConfig on a judge that checks with the base itself")
}

func (f *fakeBases) Open(_ context.Context, root cid.Cid) (*basemodel.Base, error) {
	f.opens++
	if f.err != nil {
		return nil, f.err
	}
	if root.String() != f.base.Name {
		return nil, errors.New("unknown base")
	}
	return f.base, nil
}

// TestOnNodes: where a job's model work runs, by --model-work and by how
// the job names its base.
func TestOnNodes(t *testing.T) {
	const byCID = "bafybeidmnsqa4dxidsoc32lt5rwtbha7rc55ghkvuwdujitufvmteku3x4"
	for _, c := range []struct {
		work, model string
		want        bool
	}{
		{ModelWorkAuto, byCID, true},
		{ModelWorkAuto, jobconf.BuiltinModel, false},
		{ModelWorkAuto, "given-dir", false}, // the base hanzod was given (Config.Base)
		{ModelWorkNodes, jobconf.BuiltinModel, true},
		{ModelWorkSelf, byCID, false},
	} {
		j := &Judge{base: &basemodel.Base{Name: "given-dir"}, cfg: Config{ModelWork: c.work}}
		if got := j.OnNodes(c.model); got != c.want {
			t.Errorf("model work %s, model %s: on nodes %v, want %v", c.work, c.model, got, c.want)
		}
	}
	if _, err := ParseModelWork("gpu"); err == nil {
		t.Error("model work gpu accepted")
	}
}
