package jobspec_test

import (
	"math/rand/v2"
	"strings"
	"testing"

	pb "github.com/zooai/gym/api/hanzod/v1"
	"github.com/zooai/gym/protocol/jobspec"
)

// Every spec survives ToProto then FromProto exactly (hanzod reports a
// spec; a node maps it back), for random field values.
func TestRoundTrip(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for range 1000 {
		s := jobspec.Spec{Model: "m", Dataset: "d", Epochs: r.IntN(9), MinNodes: r.IntN(9), MaxNodes: r.IntN(9),
			MinVRAMMiB: r.Uint64(), Aggregation: "median", Utility: r.Uint64(), Submitter: "s", Deadline: r.Int64(),
			StepsPerEpoch: r.IntN(99), PromptsPerStep: r.IntN(99), Seed: r.Uint64(), Byzantine: r.IntN(3), SpotCheckBP: r.IntN(10000) - 1}
		if r.IntN(4) > 0 {
			s.GSPO = jobspec.GSPO{ImportanceSamplingLevel: "token", Beta: r.Float64(), GroupSize: r.IntN(16), AggregateInterval: r.IntN(16),
				Use4Bit: r.IntN(2) == 1, LoRARank: r.IntN(64), LoRAAlpha: r.Float64(), MaxSeqLen: r.IntN(512),
				GradientAccumulationSteps: r.IntN(8), LearningRate: r.Float64(), WarmupSteps: r.IntN(9), WeightDecay: r.Float64()}
			// A normalised spec always names its targets (canonical, non-empty).
			var names []string
			for _, m := range jobspec.Fields.LoRATargetModules.Values {
				if r.IntN(2) == 1 {
					names = append(names, m)
				}
			}
			if r.IntN(2) == 1 {
				s.GSPO.InnerOptimizer, s.GSPO.OuterOptimizer, s.GSPO.MaxGradNorm = "sgd", "adam", r.Float64()
			}
			if n := r.IntN(8); n != 2 { // 2, the default, is stored as 0
				s.GSPO.NumIterations = n
			}
			if len(names) == 0 {
				names = []string{"o_proj"}
			}
			if s.GSPO.LoRATargets = strings.Join(names, ","); s.GSPO.LoRATargets == jobspec.Fields.LoRATargetModules.Default {
				s.GSPO.LoRATargets = "" // the default set's one encoding
			}
		}
		if got := jobspec.FromProto(jobspec.ToProto(s)); got != s {
			t.Fatalf("round trip:\n%+v\n%+v", s, got)
		}
	}
}

// Unset GSPO fields take the defaults; absent GSPO stays zero.
func TestDefaults(t *testing.T) {
	if g := jobspec.FromProto(&pb.JobSpec{}).GSPO; g != (jobspec.GSPO{}) {
		t.Fatalf("absent GSPO: %+v", g)
	}
	rank := int32(3)
	g := jobspec.FromProto(&pb.JobSpec{Gspo: &pb.GSPOConfig{LoraRank: &rank}}).GSPO
	want := jobspec.DefaultGSPO()
	want.LoRARank = 3
	if g != want {
		t.Fatalf("one field set: %+v, want %+v", g, want)
	}
}
