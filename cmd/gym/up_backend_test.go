package main

import (
	"io"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/zooai/gym/protocol/jobconf"
	"github.com/zooai/gym/protocol/jobspec"
)

// gym up --backend: one name for every worker or one per worker; the job
// asks for go, torch or any accordingly.
func TestUpBackendFlag(t *testing.T) {
	base := upOptions{workers: 4, epochs: 1, stepsPerEpoch: 5, interval: 5, prompts: 4, task: "addition", out: "x", threads: 1, evalSize: 500, shardSize: 128, timeout: time.Minute, replicas: 1, ledger: "embedded", learningRate: -1, outerLR: -1, dataFlags: dataFlags{data: jobspec.Data{Answer: defaultAnswerField}}}
	for _, c := range []struct {
		flag, job, err string
		per            []string
	}{
		{"go", "", "", []string{"go", "go", "go", "go"}},
		{"torch", "torch", "", []string{"torch", "torch", "torch", "torch"}},
		{"go,go,torch,torch", "any", "", []string{"go", "go", "torch", "torch"}},
		{"go,torch", "", "2 backends for 4 workers", nil},
		{"go,jax,go,go", "", "not a backend", nil},
	} {
		o := base
		o.backend = c.flag
		err := o.check()
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("--backend %s: %v, want %q", c.flag, err, c.err)
			}
			continue
		}
		if err != nil || !slices.Equal(o.backends, c.per) || upSpec(o, "builtin").Backend != c.job {
			t.Errorf("--backend %s: %v, workers %v, job %q", c.flag, err, o.backends, upSpec(o, "builtin").Backend)
		}
	}
}

// gym up's rates: the built-in profile's for --workers unless given; a
// given rate is sent as it is, 0 for --outer-lr being the plain average.
func TestUpRates(t *testing.T) {
	base := upOptions{workers: 4, epochs: 1, stepsPerEpoch: 5, interval: 5, prompts: 4, task: "addition", out: "x", threads: 1, evalSize: 500, shardSize: 128, timeout: time.Minute, replicas: 1, ledger: "embedded", learningRate: -1, outerLR: -1, dataFlags: dataFlags{data: jobspec.Data{Answer: defaultAnswerField}}}
	for _, c := range []struct {
		workers         int
		lr, outer       float64
		wantLR, wantOut float64
		err             string
	}{
		{4, -1, -1, 0.00283, 1, ""},
		{8, -1, -1, 0.00283, 1.41, ""},
		{3, -1, -1, 0.00263, 1, ""},
		{8, 0.002, 0, 0.002, 0, ""},
		{4, 0, -1, 0, 0, "--learning-rate 0"},
		{4, 2, -1, 0, 0, "--learning-rate 2"},
		{4, -1, -0.5, 0, 0, "--outer-lr -0.5"},
	} {
		o := base
		o.workers, o.learningRate, o.outerLR, o.backend = c.workers, c.lr, c.outer, "go"
		err := o.check()
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("%+v: %v, want %q", c, err, c.err)
			}
			continue
		}
		if err != nil {
			t.Fatalf("%+v: %v", c, err)
		}
		g := upSpec(o, "builtin").GSPO
		if g.LearningRate != c.wantLR || g.OuterLR != c.wantOut {
			t.Errorf("%d workers, --learning-rate %v --outer-lr %v: job has %v and %v, want %v and %v", c.workers, c.lr, c.outer, g.LearningRate, g.OuterLR, c.wantLR, c.wantOut)
		}
	}
}

// gym up --data-parallel submits the built-in data-parallel profile (SGD
// inside, Adam outside, a sync every step unless --interval is given),
// which hanzod's validation accepts, on go and torch workers; it refuses an outer
// momentum.
func TestUpDataParallel(t *testing.T) {
	base := upOptions{workers: 4, epochs: 1, stepsPerEpoch: 30, interval: 1, prompts: 4, task: "addition", out: "x", threads: 1, evalSize: 500, shardSize: 128, timeout: time.Minute, replicas: 1, ledger: "embedded", learningRate: -1, outerLR: -1, dataParallel: true, dataFlags: dataFlags{data: jobspec.Data{Answer: defaultAnswerField}}}
	o := base
	o.backend = "go"
	if err := o.check(); err != nil {
		t.Fatal(err)
	}
	s := upSpec(o, "builtin")
	g := s.GSPO
	if !g.InnerSGD() || !g.OuterAdam() || g.Iterations() != 1 || g.AggregateInterval != 1 || g.LearningRate != 1e-3 || g.OuterLR != 1.5e-3 || g.MaxGradNorm != 30 {
		t.Fatalf("job gspo %+v", g)
	}
	s.Model = jobconf.BuiltinModel
	if err := s.Normalise(); err != nil {
		t.Fatalf("hanzod would refuse the job: %v", err)
	}
	o = base
	o.backend, o.learningRate, o.outerLR = "go", 5e-4, 1e-3
	if err := o.check(); err != nil {
		t.Fatal(err)
	}
	if g := upSpec(o, "builtin").GSPO; g.LearningRate != 5e-4 || g.OuterLR != 1e-3 {
		t.Fatalf("given rates: %+v", g)
	}
	for _, b := range []string{"go,go,torch,torch", "torch"} { // the torch trainer steps plain SGD too
		o := base
		o.backend = b
		if err := o.check(); err != nil {
			t.Errorf("--backend %s: %v", b, err)
		}
	}
	// --interval defaults to 1 under --data-parallel, and a given one
	// stays: 7 steps an epoch are a multiple of 1, not of 5, so the
	// first reaches the next check (--byzantine) and the second stops
	// at the interval's.
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--data-parallel", "--steps-per-epoch", "7", "--byzantine", "-1"}, "--byzantine -1"},
		{[]string{"--data-parallel", "--steps-per-epoch", "7", "--interval", "5", "--byzantine", "-1"}, "--interval 5"},
	} {
		cmd := newUp()
		cmd.SetArgs(c.args)
		cmd.SetOut(io.Discard)
		cmd.SetErr(io.Discard)
		if err := cmd.Execute(); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("gym up %v: %v, want %q", c.args, err, c.want)
		}
	}
	o = base
	o.backend, o.outerMomentum = "go", 0.9
	if err := o.check(); err == nil || !strings.Contains(err.Error(), "--outer-momentum") {
		t.Errorf("--outer-momentum 0.9: %v", err)
	}
}
