package torch

import (
	"math"
	"testing"

	"github.com/zooai/gym/model/basemodel"
	"github.com/zooai/gym/model/llama"
	"github.com/zooai/gym/model/prng"
)

// moeBase writes a random tiny Mixture-of-Experts base of arch with the
// built-in base's tokenizer (vocabulary 15) into a new directory, as
// llama.Save writes it (one module per expert), and opens it.
func moeBase(t *testing.T, arch llama.Arch) (*basemodel.Base, string) {
	t.Helper()
	dir := t.TempDir()
	if err := basemodel.ExportOverwrite(dir); err != nil {
		t.Fatal(err)
	}
	c := llama.Config{Arch: arch, Vocab: 15, Hidden: 32, Intermediate: 48, Layers: 2, Heads: 4, KVHeads: 2, HeadDim: 8,
		MaxPositions: 32, NormEps: 1e-6, RopeTheta: 10000, BOS: -1, PAD: -1, EOS: []int{14}, QKNorm: arch == llama.Qwen3MoE,
		MoE: llama.MoEConfig{Experts: 4, TopK: 2, Intermediate: 24, NormTopK: true, SparseStep: 1, RouterAuxLossCoef: 0.001}}
	switch arch {
	case llama.Qwen2MoE:
		c.QKVBias, c.MoE.Shared, c.MoE.NormTopK = true, 16, false
	case llama.Mixtral:
		c.MoE.Intermediate = c.Intermediate
	}
	w, err := llama.NewWeights(c)
	if err != nil {
		t.Fatal(err)
	}
	r := prng.New(11, 0x6d6f65)
	for _, ts := range w.Tensors() {
		std := 1 / math.Sqrt(float64(ts.Shape[len(ts.Shape)-1]))
		norm := len(ts.Shape) == 1
		for i := range ts.Data {
			if norm {
				ts.Data[i] = float32(1 + 0.1*r.Norm())
			} else {
				ts.Data[i] = float32(std * r.Norm())
			}
		}
	}
	if err := llama.Save(dir, w); err != nil {
		t.Fatal(err)
	}
	b, err := basemodel.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	return b, dir
}

// TestGSPOMatchesGoEngineMoE is TestGSPOMatchesGoEngine on Qwen3-MoE,
// Qwen2-MoE and Mixtral bases with LoRA on the attention, the stacked
// experts, the router (and Qwen2-MoE's shared expert and its gate): the
// same traces give the same loss (1e-5), LoRA gradient and update (1e-4
// relative). Neither engine adds the router's auxiliary loss.
func TestGSPOMatchesGoEngineMoE(t *testing.T) {
	for _, tc := range []struct {
		arch    llama.Arch
		targets []string
	}{
		{llama.Qwen3MoE, []string{"q_proj", "v_proj", "gate.weight", "experts.gate_up_proj", "experts.down_proj"}},
		{llama.Qwen2MoE, []string{"o_proj", "shared_expert.up_proj", "shared_expert_gate", "experts.down_proj"}},
		{llama.Mixtral, []string{"k_proj", "experts.gate_up_proj"}},
	} {
		t.Run(string(tc.arch), func(t *testing.T) {
			base, dir := moeBase(t, tc.arch)
			c := smallConfig()
			c.LoRATargets = tc.targets
			matchGoEngineOn(t, c, base, dir)
		})
	}
}
