package jobspec

import (
	"cmp"
	"strings"

	"google.golang.org/protobuf/proto"

	pb "github.com/zooai/gym/api/hanzod/v1"
	"github.com/zooai/gym/model/reward"
)

// FromProto maps an API job spec (api/hanzod/v1) onto a Spec: the one
// mapping for hanzod's server, the node client and the command line. p must not be nil.
// GSPO settings: absent, the zero config (the state fills in every
// default); otherwise each unset field takes its default and each set one
// is taken as it is, for the state to validate. A spec as hanzod reports
// it (ToProto: every GSPO field set) maps back exactly.
func FromProto(p *pb.JobSpec) Spec {
	return Spec{
		Model: p.Model, Dataset: p.Dataset, Epochs: int(p.Epochs), MinNodes: int(p.MinNodes), MaxNodes: int(p.MaxNodes),
		MinVRAMMiB: p.MinVramMib, Aggregation: p.Aggregation, Utility: p.Utility, Submitter: p.Submitter, Deadline: p.DeadlineUnixMs,
		GSPO: GSPOFromProto(p.Gspo), StepsPerEpoch: int(p.StepsPerEpoch), PromptsPerStep: int(p.PromptsPerStep), Seed: p.Seed,
		Byzantine: int(p.Byzantine), SpotCheckBP: int(p.SpotCheckBp), Backend: p.Backend, Validators: int(p.Validators),
		Data: DataFromProto(p.Data), Reward: RewardsFromProto(p.Reward), DType: p.Dtype,
	}
}

// DataFromProto maps the API's data mapping (nil: none).
func DataFromProto(p *pb.DataMapping) Data {
	if p == nil {
		return Data{}
	}
	return Data{Prompt: p.Prompt, Template: p.Template, Answer: p.Answer, Extract: p.Extract,
		Split: p.Split, HeldOut: p.HeldOut, HoldOutBP: int(p.HoldOutBp)}
}

// RewardsFromProto maps the API's reward list onto its canonical form
// (unchecked: Normalise refuses a bad list by name).
func RewardsFromProto(ts []*pb.RewardTerm) Rewards {
	if len(ts) == 0 {
		return ""
	}
	terms := make([]reward.Term, len(ts))
	for i, t := range ts {
		if t != nil {
			terms[i] = reward.Term{Verifier: t.Verifier, Weight: t.Weight, Pattern: t.Pattern, Tolerance: t.Tolerance, MaxChars: int(t.MaxChars), URL: t.Url}
		}
	}
	return Rewards(reward.MarshalTerms(terms))
}

func dataToProto(d Data) *pb.DataMapping {
	if d == (Data{}) {
		return nil
	}
	return &pb.DataMapping{Prompt: d.Prompt, Template: d.Template, Answer: d.Answer, Extract: d.Extract,
		Split: d.Split, HeldOut: d.HeldOut, HoldOutBp: int32(d.HoldOutBP)}
}

func rewardsToProto(r Rewards) []*pb.RewardTerm {
	terms, err := r.Terms()
	if err != nil {
		return nil
	}
	var out []*pb.RewardTerm
	for _, t := range terms {
		out = append(out, &pb.RewardTerm{Verifier: t.Verifier, Weight: t.Weight, Pattern: t.Pattern, Tolerance: t.Tolerance, MaxChars: int32(t.MaxChars), Url: t.URL})
	}
	return out
}

// GSPOFromProto maps the API's GSPO settings (see FromProto).
func GSPOFromProto(p *pb.GSPOConfig) GSPO {
	if p == nil {
		return GSPO{}
	}
	g := DefaultGSPO()
	if p.ImportanceSamplingLevel != nil {
		g.ImportanceSamplingLevel = *p.ImportanceSamplingLevel
	}
	if p.Beta != nil {
		g.Beta = *p.Beta
	}
	if p.GroupSize != nil {
		g.GroupSize = int(*p.GroupSize)
	}
	if p.AggregateInterval != nil {
		g.AggregateInterval = int(*p.AggregateInterval)
	}
	if p.Use_4Bit != nil {
		g.Use4Bit = *p.Use_4Bit
	}
	if p.LoraRank != nil {
		g.LoRARank = int(*p.LoraRank)
	}
	if p.LoraAlpha != nil {
		g.LoRAAlpha = *p.LoraAlpha
	}
	if p.MaxSeqLen != nil {
		g.MaxSeqLen = int(*p.MaxSeqLen)
	}
	if p.GradientAccumulationSteps != nil {
		g.GradientAccumulationSteps = int(*p.GradientAccumulationSteps)
	}
	if p.LearningRate != nil {
		g.LearningRate = *p.LearningRate
	}
	if p.WarmupSteps != nil {
		g.WarmupSteps = int(*p.WarmupSteps)
	}
	if p.WeightDecay != nil {
		g.WeightDecay = *p.WeightDecay
	}
	if p.OuterLearningRate != nil {
		g.OuterLR = *p.OuterLearningRate
	}
	if p.OuterMomentum != nil {
		g.OuterMomentum = *p.OuterMomentum
	}
	if p.MaxGradNorm != nil {
		g.MaxGradNorm = *p.MaxGradNorm
	}
	if p.NumIterations != nil && int64(*p.NumIterations) != Fields.NumIterations.Default {
		g.NumIterations = int(*p.NumIterations)
	}
	if p.InnerOptimizer != nil && *p.InnerOptimizer != Fields.InnerOptimizer.Default {
		g.InnerOptimizer = *p.InnerOptimizer
	}
	if p.OuterOptimizer != nil && *p.OuterOptimizer != Fields.OuterOptimizer.Default {
		g.OuterOptimizer = *p.OuterOptimizer
	}
	if len(p.LoraTargetModules) > 0 {
		// Canonical when the names are; otherwise kept for Normalise to refuse by name.
		g.LoRATargets = strings.Join(p.LoraTargetModules, ",")
		if t, err := Fields.LoRATargetModules.Canonical(p.LoraTargetModules); err == nil {
			g.LoRATargets = canonicalTargets(t)
		}
	}
	return g
}

// ToProto reports a job's spec, every GSPO field set.
func ToProto(s Spec) *pb.JobSpec {
	return &pb.JobSpec{
		Model: s.Model, Dataset: s.Dataset, Epochs: int32(s.Epochs), MinNodes: int32(s.MinNodes), MaxNodes: int32(s.MaxNodes),
		MinVramMib: s.MinVRAMMiB, Aggregation: s.Aggregation, Utility: s.Utility, Submitter: s.Submitter, DeadlineUnixMs: s.Deadline,
		Gspo: GSPOToProto(s.GSPO), StepsPerEpoch: int32(s.StepsPerEpoch), PromptsPerStep: int32(s.PromptsPerStep), Seed: s.Seed,
		Byzantine: int32(s.Byzantine), SpotCheckBp: int32(s.SpotCheckBP), Backend: s.Backend, Validators: int32(s.Validators),
		Data: dataToProto(s.Data), Reward: rewardsToProto(s.Reward), Dtype: s.DType,
	}
}

// GSPOToProto reports GSPO settings, every field set; nil for the zero
// config (a job logged before jobs carried them).
func GSPOToProto(g GSPO) *pb.GSPOConfig {
	if g == (GSPO{}) {
		return nil
	}
	return &pb.GSPOConfig{
		ImportanceSamplingLevel: proto.String(g.ImportanceSamplingLevel), Beta: proto.Float64(g.Beta),
		GroupSize: proto.Int32(int32(g.GroupSize)), AggregateInterval: proto.Int32(int32(g.AggregateInterval)),
		Use_4Bit: proto.Bool(g.Use4Bit), LoraRank: proto.Int32(int32(g.LoRARank)), LoraAlpha: proto.Float64(g.LoRAAlpha),
		MaxSeqLen: proto.Int32(int32(g.MaxSeqLen)), GradientAccumulationSteps: proto.Int32(int32(g.GradientAccumulationSteps)),
		LearningRate: proto.Float64(g.LearningRate), WarmupSteps: proto.Int32(int32(g.WarmupSteps)), WeightDecay: proto.Float64(g.WeightDecay),
		LoraTargetModules: g.Targets(), OuterLearningRate: proto.Float64(g.OuterLR), OuterMomentum: proto.Float64(g.OuterMomentum),
		InnerOptimizer: proto.String(cmp.Or(g.InnerOptimizer, Fields.InnerOptimizer.Default)),
		OuterOptimizer: proto.String(cmp.Or(g.OuterOptimizer, Fields.OuterOptimizer.Default)),
		MaxGradNorm:    proto.Float64(g.MaxGradNorm),
		NumIterations:  proto.Int32(int32(g.Iterations())),
	}
}
