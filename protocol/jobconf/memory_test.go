package jobconf_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/zooai/gym/model/llama"
	"github.com/zooai/gym/protocol/hardware"
	"github.com/zooai/gym/protocol/jobconf"
	"github.com/zooai/gym/protocol/jobspec"
)

// The estimate is read from config.json alone: its weight term is exactly
// the parameter count × 4, its LoRA term the adapter the job would train,
// and a job that needs more than the limit is refused naming the numbers.
func TestEstimateMemory(t *testing.T) {
	// SmolLM2-135M's shape (docs/models.md's benchmark model).
	cfgJSON := `{"architectures":["LlamaForCausalLM"],"model_type":"llama","vocab_size":49152,"hidden_size":576,
"intermediate_size":1536,"num_hidden_layers":30,"num_attention_heads":9,"num_key_value_heads":3,"head_dim":64,
"max_position_embeddings":8192,"rms_norm_eps":1e-5,"rope_theta":100000,"tie_word_embeddings":true,"torch_dtype":"bfloat16"}`
	mc, err := llama.ParseConfig([]byte(cfgJSON))
	if err != nil {
		t.Fatal(err)
	}
	s := jobspec.Spec{Model: "builtin", Dataset: "addition", Epochs: 1, MinNodes: 3}
	if err := s.Normalise(); err != nil {
		t.Fatal(err)
	}
	m, err := jobconf.EstimateMemory(s, mc)
	if err != nil {
		t.Fatal(err)
	}
	if m.Params != mc.NumParams() || m.Params < 134_000_000 || m.Params > 135_000_000 || m.Weights != 4*m.Params {
		t.Fatalf("weights: %d parameters, %d bytes", m.Params, m.Weights)
	}
	// The default targets (q_proj, v_proj) at rank 16: per layer
	// 16·(576+576) + 16·(576+192).
	if want := int64(30 * 16 * (576 + 576 + 576 + 192)); m.LoRAParams != want {
		t.Fatalf("LoRA parameters %d, want %d", m.LoRAParams, want)
	}
	t.Logf("SmolLM2-135M shape, the seed's defaults: %s", m)
	if m.Total != m.Weights+m.Adapter+m.Activations || m.Activations <= 0 {
		t.Fatalf("%+v", m)
	}
	// The seed's defaults (8192 tokens, 16 prompts × 8) need far more than
	// the weights: activations dominate.
	if m.Activations < 10*m.Weights {
		t.Fatalf("activations %d for 8192-token sequences, weights %d", m.Activations, m.Weights)
	}
	if err := jobconf.CheckMemory(m, m.Total, "the limit"); err != nil {
		t.Fatalf("a job needing exactly the limit: %v", err)
	}
	limit := m.Total - 1
	err = jobconf.CheckMemory(m, limit, "this worker's limit (--max-memory-mib)")
	if !errors.Is(err, jobconf.ErrMemory) {
		t.Fatalf("over the limit: %v", err)
	}
	for _, want := range []string{jobconf.MiB(m.Total), jobconf.MiB(limit), fmt.Sprint(m.Params), "--max-memory-mib"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("%q does not name %q", err, want)
		}
	}
	// Fewer tokens, fewer bytes; more targets, more LoRA.
	s.GSPO.MaxSeqLen, s.GSPO.LoRATargets = 512, "all-linear"
	if err := s.Normalise(); err != nil {
		t.Fatal(err)
	}
	m2, err := jobconf.EstimateMemory(s, mc)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("512 tokens, all-linear: %s", m2)
	if m2.Activations >= m.Activations || m2.LoRAParams <= m.LoRAParams || m2.Weights != m.Weights {
		t.Fatalf("512 tokens all-linear %+v against %+v", m2, m)
	}
	// The torch backend in bfloat16 holds the base at its file's size,
	// half the go engine's float32 copy, and names the target.
	bf, err := jobconf.EstimateMemoryFor(s, mc, hardware.Target{Backend: "torch", DType: "bfloat16"})
	if err != nil {
		t.Fatal(err)
	}
	if bf.Weights != 2*bf.Params || bf.Total >= m2.Total || !strings.Contains(bf.String(), "in bfloat16") {
		t.Fatalf("torch bfloat16: %s against %s", bf, m2)
	}
	if _, err := jobconf.EstimateMemoryFor(s, mc, hardware.Target{Backend: "go", DType: "bfloat16"}); !errors.Is(err, jobconf.ErrJob) {
		t.Fatalf("go in bfloat16: %v", err)
	}
}
