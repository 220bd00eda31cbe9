package jobconf_test

import (
	"reflect"
	"strings"
	"testing"

	"github.com/zooai/gym/model/basemodel"
	"github.com/zooai/gym/model/trainer"
	"github.com/zooai/gym/protocol/jobconf"
	"github.com/zooai/gym/protocol/jobspec"
)

// TestEpochSamples: jobspec.Spec.EpochSamples, which hanzod's minimum
// epoch size reads, is what the judge counts a worker's epoch as: syncs ×
// samples per sync.
func TestEpochSamples(t *testing.T) {
	for _, c := range []struct{ steps, prompts, interval int }{{0, 0, 5}, {30, 4, 5}, {30, 4, 1}, {12, 3, 4}} {
		s := jobspec.Spec{Model: jobconf.BuiltinModel, Dataset: "addition", Epochs: 1, MinNodes: 3, GSPO: jobconf.BuiltinGSPO(c.interval),
			StepsPerEpoch: c.steps, PromptsPerStep: c.prompts}
		if err := s.Normalise(); err != nil {
			t.Fatal(err)
		}
		p, err := jobconf.FromSpec("j", s, mustBase(t))
		if err != nil {
			t.Fatal(err)
		}
		if got, want := s.EpochSamples(), uint64(p.Syncs())*p.Samples(); got != want {
			t.Fatalf("%+v: EpochSamples %d, the plan trains %d", c, got, want)
		}
	}
}

// A job with the built-in profile trains with exactly trainer.DefaultConfig
// (what gym train runs), its task, seed and step count aside; a job's
// default prompts_per_step is the trainer's.
func TestBuiltinProfile(t *testing.T) {
	c := trainer.DefaultConfig()
	s := jobspec.Spec{Model: jobconf.BuiltinModel, Dataset: c.Task, Epochs: 3, MinNodes: 3, GSPO: jobconf.BuiltinGSPO(c.AggregateInterval)}
	if err := s.Normalise(); err != nil {
		t.Fatal(err)
	}
	p, err := jobconf.FromSpec("j", s, mustBase(t))
	if err != nil {
		t.Fatal(err)
	}
	want := c
	want.Steps = 3 * c.AggregateInterval
	if !reflect.DeepEqual(p.Trainer, want) {
		t.Fatalf("trainer config\n got %+v\nwant %+v", p.Trainer, want)
	}
	if d := jobspec.Fields.PromptsPerStep.Default; int(d) != c.PromptsPerStep {
		t.Fatalf("a job's default prompts_per_step %d, the trainer's %d", d, c.PromptsPerStep)
	}
	// The seed's defaults are another profile: a real model's.
	if jobconf.BuiltinGSPO(jobspec.DefaultGSPO().AggregateInterval) == jobspec.DefaultGSPO() {
		t.Fatal("the built-in profile is the seed's defaults")
	}
}

func TestCheck(t *testing.T) {
	c := trainer.DefaultConfig()
	s := jobspec.Spec{Model: jobconf.BuiltinModel, Dataset: c.Task, Epochs: 1, MinNodes: 3, GSPO: jobconf.BuiltinGSPO(5)}
	if err := jobconf.Check(s, basemodel.Builtin); err != nil {
		t.Fatal(err)
	}
	s.Dataset = "gsm8k"
	if err := jobconf.Check(s, basemodel.Builtin); err == nil || !strings.Contains(err.Error(), `dataset must be a built-in task (addition, sort) or the CID of a dataset artifact: "gsm8k"`) {
		t.Fatalf("%v", err)
	}
	s.Model = "Qwen/Qwen3-0.6B"
	if err := jobconf.Check(s, basemodel.Builtin); err != nil {
		t.Fatalf("another model: %v", err)
	}
	s.Model, s.Dataset, s.GSPO.MaxSeqLen = jobconf.BuiltinModel, c.Task, 3
	if err := jobconf.Check(s, basemodel.Builtin); err == nil || !strings.Contains(err.Error(), "max_seq_len 3 <") {
		t.Fatalf("%v", err)
	}
}

func mustBase(t *testing.T) *basemodel.Base {
	t.Helper()
	b, err := basemodel.Builtin()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// A plan is for the base model the job names, and built-in jobs train the
// profile's LoRA targets.
func TestFromSpecNamesTheBase(t *testing.T) {
	c := trainer.DefaultConfig()
	s := jobspec.Spec{Model: jobconf.BuiltinModel, Dataset: c.Task, Epochs: 1, MinNodes: 3, GSPO: jobconf.BuiltinGSPO(5)}
	if err := s.Normalise(); err != nil {
		t.Fatal(err)
	}
	b := mustBase(t)
	p, err := jobconf.FromSpec("j", s, b)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(p.Trainer.LoRATargets, []string{"q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"}) {
		t.Fatalf("targets %v", p.Trainer.LoRATargets)
	}
	a, err := p.InitialAdapter(b.Weights.Cfg)
	if err != nil || a.Views()[0].Name != "base_model.model.model.layers.0.self_attn.q_proj.lora_A.weight" {
		t.Fatalf("initial adapter: %v %v", err, a.Views()[0].Name)
	}
	// A job's own targets reach the trainer; the default set is PEFT's.
	for targets, want := range map[string][]string{"gate_proj,down_proj": {"gate_proj", "down_proj"}, "": {"q_proj", "v_proj"}} {
		s2 := s
		s2.GSPO.LoRATargets = targets
		p2, err := jobconf.FromSpec("j", s2, b)
		if err != nil || !reflect.DeepEqual(p2.Trainer.LoRATargets, want) {
			t.Errorf("targets %q: %v %v", targets, p2.Trainer.LoRATargets, err)
		}
	}
	s.Model = "bafyother"
	if _, err := jobconf.FromSpec("j", s, b); err == nil || !strings.Contains(err.Error(), `"bafyother"`) {
		t.Fatalf("a job on another model: %v", err)
	}
	if _, err := jobconf.FromSpec("j", s, nil); err == nil {
		t.Fatal("no base accepted")
	}
}
