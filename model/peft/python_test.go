package peft

import (
	"encoding/json"
	"math"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/zooai/gym/internal/pyenv"
	"github.com/zooai/gym/internal/tinyllama"
	"github.com/zooai/gym/model/llama"
)

// PEFTResult is what testdata/peft_logits.py reports.
type PEFTResult struct {
	Missing      []string  `json:"missing"`
	Unexpected   []string  `json:"unexpected"`
	Warnings     []string  `json:"warnings"`
	FileTensors  int       `json:"file_tensors"`
	LoRAParams   int       `json:"lora_params"`
	WeightsEqual bool      `json:"weights_equal"`
	Logits       []float64 `json:"logits"`
}

// LoadWithPEFT runs testdata/peft_logits.py (in this package's directory)
// with py: the checkpoint ckpt loaded by PEFT on the base model in baseDir,
// and the adapted logits on ids ([B][T]).
func LoadWithPEFT(t testing.TB, py, script, baseDir, ckpt string, ids [][]int) PEFTResult {
	t.Helper()
	idsJSON, _ := json.Marshal(ids)
	cmd := exec.Command(py, script, baseDir, ckpt, string(idsJSON))
	cmd.Dir = t.TempDir() // keep ./safetensors (a Go package) off Python's path
	out, err := cmd.Output()
	if err != nil {
		var stderr []byte
		if ee, ok := err.(*exec.ExitError); ok {
			stderr = ee.Stderr
		}
		t.Fatalf("%v\n%s", err, stderr)
	}
	var r PEFTResult
	if err := json.Unmarshal(out, &r); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	return r
}

// TestPEFTLoads: a checkpoint Write produced, on a base llama.Save wrote
// (a tiny Qwen2 with biases), loads in PEFT with no missing or unexpected
// keys and every LoRA weight as written, and PEFT's adapted logits equal
// the Go engine's within 1e-4, far closer than the adapter moves them.
func TestPEFTLoads(t *testing.T) {
	py := pyenv.Require(t, "torch", "transformers", "peft", "safetensors")
	c := tinyllama.Config()
	w, err := tinyllama.Weights(c, 4, 0.3)
	if err != nil {
		t.Fatal(err)
	}
	baseDir := filepath.Join(t.TempDir(), "base")
	if err := llama.Save(baseDir, w); err != nil {
		t.Fatal(err)
	}
	a, err := llama.InitAdapter(c, 4, 8, []llama.Module{llama.QProj, llama.KProj, llama.VProj, llama.OProj, llama.GateProj, llama.UpProj, llama.DownProj}, 5)
	if err != nil {
		t.Fatal(err)
	}
	for l := range a.B {
		for _, b := range a.B[l] {
			for i := range b {
				b[i] = float32(math.Sin(float64(i*7+l))) * 0.2
			}
		}
	}
	checkPEFTLoads(t, py, baseDir, w, a)
}

// TestPEFTLoadsMoE is TestPEFTLoads on a tiny Qwen3-MoE and Mixtral whose
// adapter covers the attention, the router and the stacked experts
// (written under target_parameters).
func TestPEFTLoadsMoE(t *testing.T) {
	py := pyenv.Require(t, "torch", "transformers", "peft", "safetensors")
	for _, arch := range []llama.Arch{llama.Qwen3MoE, llama.Mixtral} {
		t.Run(string(arch), func(t *testing.T) {
			c := llama.Config{Arch: arch, Vocab: 16, Hidden: 32, Intermediate: 24, Layers: 2, Heads: 4, KVHeads: 2, HeadDim: 8,
				MaxPositions: 32, NormEps: 1e-6, RopeTheta: 10000, BOS: -1, PAD: -1, QKNorm: arch == llama.Qwen3MoE,
				MoE: llama.MoEConfig{Experts: 4, TopK: 2, Intermediate: 24, NormTopK: true, SparseStep: 1}}
			w, err := llama.NewWeights(c)
			if err != nil {
				t.Fatal(err)
			}
			for k, ts := range w.Tensors() {
				for i := range ts.Data {
					v := math.Sin(float64(i*13+k*7)) / math.Sqrt(float64(ts.Shape[len(ts.Shape)-1]))
					if len(ts.Shape) == 1 {
						v = 1 + 0.1*v
					}
					ts.Data[i] = float32(v)
				}
			}
			baseDir := filepath.Join(t.TempDir(), "base")
			if err := llama.Save(baseDir, w); err != nil {
				t.Fatal(err)
			}
			a, err := llama.InitAdapter(c, 2, 4, []llama.Module{llama.QProj, llama.Router, llama.ExpertsGateUp, llama.ExpertsDown}, 5)
			if err != nil {
				t.Fatal(err)
			}
			for l := range a.B {
				for _, b := range a.B[l] {
					for i := range b {
						b[i] = float32(math.Sin(float64(i*7+l))) * 0.3
					}
				}
			}
			checkPEFTLoads(t, py, baseDir, w, a)
		})
	}
}

// checkPEFTLoads writes a as a checkpoint and checks that PEFT loads it on
// the base in baseDir (weights w) with every tensor and the Go engine's
// logits.
func checkPEFTLoads(t *testing.T, py, baseDir string, w *llama.Weights, a *llama.Adapter) {
	t.Helper()
	ckpt := filepath.Join(t.TempDir(), "ckpt")
	if err := Write(ckpt, a, Card{BaseModel: "tiny-qwen2", BaseSHA3: "00", Job: "job-1", Epoch: 1}); err != nil {
		t.Fatal(err)
	}
	ids := [][]int{{0, 3, 4, 11, 6, 9, 12, 2, 9}, {0, 1, 2, 3, 4, 5, 6, 7, 8}}
	script, _ := filepath.Abs(filepath.Join("testdata", "peft_logits.py"))
	r := LoadWithPEFT(t, py, script, baseDir, ckpt, ids)
	if len(r.Missing) > 0 || len(r.Unexpected) > 0 || !r.WeightsEqual || r.FileTensors != len(a.Views()) || r.LoRAParams != len(a.Views()) {
		t.Fatalf("PEFT: missing %v, unexpected %v, weights equal %v, %d file tensors and %d LoRA parameters for %d; warnings %q",
			r.Missing, r.Unexpected, r.WeightsEqual, r.FileTensors, r.LoRAParams, len(a.Views()), r.Warnings)
	}
	var flat []int
	for _, s := range ids {
		flat = append(flat, s...)
	}
	adapted, _ := llama.New(w, a, 2)
	got, err := adapted.Logits(flat, len(ids), len(ids[0]))
	if err != nil {
		t.Fatal(err)
	}
	plain, _ := llama.New(w, nil, 2)
	baseLogits, _ := plain.Logits(flat, len(ids), len(ids[0]))
	if len(r.Logits) != len(got) {
		t.Fatalf("PEFT gave %d logits, Go %d", len(r.Logits), len(got))
	}
	var worst, moved float64
	for i, v := range r.Logits {
		worst = math.Max(worst, math.Abs(v-float64(got[i])))
		moved = math.Max(moved, math.Abs(float64(got[i]-baseLogits[i])))
	}
	t.Logf("max |PEFT − Go| = %.3g; the adapter moves logits by up to %.3g", worst, moved)
	if worst > 1e-4 || moved < 1e-2 {
		t.Fatalf("max |PEFT − Go| = %g (want ≤ 1e-4), adapter effect %g", worst, moved)
	}
}
