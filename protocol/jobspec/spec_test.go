package jobspec_test

import (
	"errors"
	"math"
	"strings"
	"testing"

	"github.com/zooai/gym/protocol/jobspec"
)

func TestNormalise(t *testing.T) {
	base := jobspec.Spec{Model: "m", Dataset: "d", Epochs: 1, MinNodes: 3}
	s := base
	if err := s.Normalise(); err != nil {
		t.Fatal(err)
	}
	if s.MaxNodes != 3 || s.Utility != 1 || s.Aggregation != "mean" || s.GSPO != jobspec.DefaultGSPO() ||
		s.StepsPerEpoch != 0 || s.PromptsPerStep != 0 || s.SpotCheckBP != 0 || s.SpotCheckShare() != 1000 {
		t.Fatalf("defaults: %+v", s)
	}
	for _, tc := range []struct {
		change func(*jobspec.Spec)
		want   string
	}{
		{func(s *jobspec.Spec) { s.Model = "" }, "model must be 1..256 bytes"},
		{func(s *jobspec.Spec) { s.Epochs = 100_001 }, "epochs 100001 outside 1..100000"},
		{func(s *jobspec.Spec) { s.MaxNodes = 4097 }, "max_nodes 4097 outside min_nodes..4096"},
		{func(s *jobspec.Spec) { s.MinVRAMMiB = 1<<24 + 1 }, "min_vram_mib 16777217 above 16777216"},
		{func(s *jobspec.Spec) { s.SpotCheckBP = -2 }, "spot_check_bp -2 outside -1..10000 (basis points; 0 means 10%, -1 none)"},
		{func(s *jobspec.Spec) { s.GSPO = jobspec.DefaultGSPO(); s.GSPO.Beta = math.NaN() }, "gspo.beta NaN must be a finite number >= 0"},
		{func(s *jobspec.Spec) { s.GSPO = jobspec.DefaultGSPO(); s.GSPO.LoRAAlpha = 0 }, "gspo.lora_alpha 0 must be a finite number > 0"},
		{func(s *jobspec.Spec) { s.GSPO = jobspec.DefaultGSPO(); s.GSPO.LearningRate = 2 }, "gspo.learning_rate 2 must lie in (0, 1]"},
		{func(s *jobspec.Spec) { s.GSPO = jobspec.DefaultGSPO(); s.GSPO.WeightDecay = -1 }, "gspo.weight_decay -1 must lie in [0, 1]"},
		{func(s *jobspec.Spec) { s.GSPO = jobspec.DefaultGSPO(); s.GSPO.LoRARank = 4097 }, "gspo.lora_rank 4097 outside 1..4096 (the LoRA adapter rank, e.g. 16)"},
		{func(s *jobspec.Spec) { s.GSPO = jobspec.DefaultGSPO(); s.GSPO.NumIterations = 65 }, "gspo.num_iterations 65 outside 1..64"},
		{func(s *jobspec.Spec) { s.GSPO = jobspec.DefaultGSPO(); s.GSPO.NumIterations = -1 }, "gspo.num_iterations -1 outside 1..64"},
		{func(s *jobspec.Spec) { s.GSPO = jobspec.DefaultGSPO(); s.GSPO.OuterOptimizer = "adam" }, "gspo.outer_optimizer adam needs gspo.outer_learning_rate > 0"},
		{func(s *jobspec.Spec) {
			s.GSPO = jobspec.DefaultGSPO()
			s.GSPO.OuterOptimizer, s.GSPO.OuterLR, s.GSPO.OuterMomentum = "adam", 1e-3, 0.9
		}, "gspo.outer_optimizer adam has its own moments"},
		{func(s *jobspec.Spec) { s.GSPO = jobspec.DefaultGSPO(); s.GSPO.InnerOptimizer = "sgd" }, "gspo.inner_optimizer sgd needs gspo.outer_optimizer adam"},
		{func(s *jobspec.Spec) { s.GSPO = jobspec.DefaultGSPO(); s.GSPO.InnerOptimizer = "lion" }, `gspo.inner_optimizer "lion" (want adamw or sgd)`},
		{func(s *jobspec.Spec) { s.GSPO = jobspec.DefaultGSPO(); s.GSPO.OuterOptimizer = "rmsprop" }, `gspo.outer_optimizer "rmsprop" (want sgd or adam)`},
	} {
		s := base
		tc.change(&s)
		err := s.Normalise()
		if !errors.Is(err, jobspec.ErrInvalid) || !strings.HasPrefix(err.Error(), tc.want) {
			t.Errorf("%+v: %v, want %q", s, err, tc.want)
		}
	}
	// The defaults' names are written as "" (their one encoding); the
	// synchronous data-parallel pair is accepted.
	s = base
	s.GSPO = jobspec.DefaultGSPO()
	s.GSPO.InnerOptimizer, s.GSPO.OuterOptimizer = "adamw", "sgd"
	if err := s.Normalise(); err != nil || s.GSPO != jobspec.DefaultGSPO() {
		t.Fatalf("default optimisers: %+v %v", s.GSPO, err)
	}
	s.GSPO.InnerOptimizer, s.GSPO.OuterOptimizer, s.GSPO.OuterLR = "sgd", "adam", 1.5e-3
	if err := s.Normalise(); err != nil || !s.GSPO.InnerSGD() || !s.GSPO.OuterAdam() {
		t.Fatalf("sgd inside, adam outside: %+v %v", s.GSPO, err)
	}
	// -0 is written as 0.
	s = base
	s.GSPO = jobspec.DefaultGSPO()
	s.GSPO.Beta = math.Copysign(0, -1)
	if err := s.Normalise(); err != nil || math.Signbit(s.GSPO.Beta) {
		t.Fatalf("-0: %v %v", s.GSPO.Beta, err)
	}
}

// The table's defaults are DefaultGSPO's and every default lies in its
// field's range.
func TestFieldDefaults(t *testing.T) {
	f := jobspec.Fields
	for _, w := range []jobspec.Whole{f.GroupSize, f.AggregateInterval, f.LoRARank, f.MaxSeqLen, f.GradientAccumulationSteps, f.WarmupSteps,
		f.Utility, f.PromptsPerStep, f.SpotCheckBP} {
		if !w.Contains(w.Default) {
			t.Errorf("%s: default %d outside %d..%d", w.Key, w.Default, w.Min, w.Max)
		}
	}
	for _, r := range []jobspec.Real{f.Beta, f.LoRAAlpha, f.LearningRate, f.WeightDecay} {
		if !r.Contains(r.Default) {
			t.Errorf("%s: default %v outside %s", r.Key, r.Default, r.Range())
		}
	}
	s := jobspec.Spec{Model: "m", Dataset: "d", Epochs: 1, MinNodes: 3, GSPO: jobspec.DefaultGSPO()}
	if err := s.Normalise(); err != nil {
		t.Fatal(err)
	}
}

// TestEpochSamples: a worker's epoch is steps_per_epoch × prompts_per_step
// × group_size completions, with the defaults of a spec that leaves them
// out.
func TestEpochSamples(t *testing.T) {
	s := jobspec.Spec{Model: "m", Dataset: "d", Epochs: 1, MinNodes: 3}
	if err := s.Normalise(); err != nil {
		t.Fatal(err)
	}
	if got := s.EpochSamples(); got != 50*16*8 { // one sync of 50 steps, 16 prompts, 8 completions each
		t.Fatalf("default epoch: %d samples, want %d", got, 50*16*8)
	}
	s.StepsPerEpoch, s.PromptsPerStep, s.GSPO.AggregateInterval, s.GSPO.GroupSize = 30, 4, 5, 8
	if got := s.EpochSamples(); got != 960 {
		t.Fatalf("gym up's epoch: %d samples, want 960", got)
	}
	s.StepsPerEpoch, s.PromptsPerStep, s.GSPO.GroupSize = 1_000_000, 1<<16, 1024
	if got := s.EpochSamples(); got != 1_000_000*(1<<16)*1024 {
		t.Fatalf("the largest epoch: %d samples", got)
	}
}
