package llama

import (
	"encoding/binary"
	"encoding/json"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"

	"github.com/zooai/gym/internal/pyenv"
	"github.com/zooai/gym/model/safetensors"
)

// refCase is one entry of the manifest testdata/make_models.py writes.
type refCase struct {
	Name    string `json:"name"`
	Dir     string `json:"dir"`
	Adapter string `json:"adapter"`
	Batch   int    `json:"batch"`
	Seq     int    `json:"seq"`
	IDs     []int  `json:"ids"`
	Logits  string `json:"logits"`
}

// gradCase is one gradient case of the manifest: torch's LoRA gradients of
// Σ weights·log p(targets) on ids.
type gradCase struct {
	refCase
	Targets []int     `json:"targets"`
	Weights []float32 `json:"weights"`
	Grads   string    `json:"grads"`
}

var (
	refOnce   sync.Once
	refDir    string
	refCases  []refCase
	gradCases []gradCase
	fullCases []gradCase
	refErr    error
)

func TestMain(m *testing.M) {
	code := m.Run()
	if refDir != "" {
		os.RemoveAll(refDir)
	}
	if moeDir != "" {
		os.RemoveAll(moeDir)
	}
	os.Exit(code)
}

// references builds the reference models with transformers and PEFT (once
// per test binary) and returns the cases.
func references(t *testing.T) []refCase {
	t.Helper()
	py := pyenv.Require(t, "torch", "transformers", "peft", "safetensors")
	refOnce.Do(func() {
		if refDir, refErr = os.MkdirTemp("", "llama-ref-"); refErr != nil {
			return
		}
		script, _ := filepath.Abs(filepath.Join("testdata", "make_models.py"))
		cmd := exec.Command(py, script, refDir)
		cmd.Dir = refDir // keep ./safetensors (a Go package) off Python's path
		if out, err := cmd.CombinedOutput(); err != nil {
			refErr = &exec.Error{Name: string(out), Err: err}
			return
		}
		b, err := os.ReadFile(filepath.Join(refDir, "manifest.json"))
		if err != nil {
			refErr = err
			return
		}
		var m struct {
			Cases []refCase  `json:"cases"`
			Grads []gradCase `json:"grads"`
			Full  []gradCase `json:"full"`
		}
		refErr = json.Unmarshal(b, &m)
		refCases, gradCases, fullCases = m.Cases, m.Grads, m.Full
	})
	if refErr != nil {
		t.Fatalf("making reference models: %v", refErr)
	}
	return refCases
}

// readLogits reads the float32 tensor "logits" of a safetensors file.
func readLogits(t *testing.T, path string) []float32 {
	t.Helper()
	return readTensor(t, path, "logits")
}

// readTensor reads a float32 tensor of a safetensors file.
func readTensor(t *testing.T, path, name string) []float32 {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	st, _ := f.Stat()
	sf, err := safetensors.Parse(f, st.Size(), safetensors.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	info, ok := sf.Lookup(name)
	if !ok || info.DType != "F32" {
		t.Fatalf("%s: no F32 tensor %q", path, name)
	}
	raw, err := sf.ReadTensor(f, info)
	if err != nil {
		t.Fatal(err)
	}
	out := make([]float32, len(raw)/4)
	for i := range out {
		out[i] = math.Float32frombits(binary.LittleEndian.Uint32(raw[4*i:]))
	}
	return out
}

func maxAbsDiff(a, b []float32) float64 {
	var m float64
	for i := range a {
		m = max(m, math.Abs(float64(a[i])-float64(b[i])))
	}
	return m
}

func loadCase(t *testing.T, rc refCase, threads int) *Model {
	t.Helper()
	w, err := Load(rc.Dir)
	if err != nil {
		t.Fatal(err)
	}
	var a *Adapter
	if rc.Adapter != "" {
		if a, _, err = ReadAdapter(rc.Adapter, w.Cfg); err != nil {
			t.Fatal(err)
		}
	}
	md, err := New(w, a, threads)
	if err != nil {
		t.Fatal(err)
	}
	return md
}

// TestLogitsMatchTransformers: every architecture, dtype, layout and
// adapter gives transformers' (and PeftModel's) logits within 1e-4.
func TestLogitsMatchTransformers(t *testing.T) {
	for _, rc := range references(t) {
		t.Run(rc.Name, func(t *testing.T) {
			md := loadCase(t, rc, 2)
			got, err := md.Logits(rc.IDs, rc.Batch, rc.Seq)
			if err != nil {
				t.Fatal(err)
			}
			want := readLogits(t, rc.Logits)
			if len(got) != len(want) {
				t.Fatalf("%d logits, want %d", len(got), len(want))
			}
			var scale float64
			for _, v := range want {
				scale = max(scale, math.Abs(float64(v)))
			}
			d := maxAbsDiff(got, want)
			t.Logf("%s: max |Δlogit| = %.3g (max |logit| %.3g)", md.W.Cfg.Arch, d, scale)
			if d > 1e-4 {
				t.Fatalf("max |Δlogit| = %g > 1e-4", d)
			}
			if s := md.W.Cfg.RopeScaling; s != nil {
				// The Llama-3 frequency scaling must matter at these positions.
				plain := md.W.Cfg
				plain.RopeScaling = nil
				md.inv = invFreq(plain)
				pl, _ := md.Logits(rc.IDs, rc.Batch, rc.Seq)
				if maxAbsDiff(pl, want) < 1e-2 {
					t.Fatal("rope_scaling does not change the logits")
				}
			}
			if rc.Adapter != "" {
				// The adapter must matter, or the comparison proves nothing.
				base, _ := New(md.W, nil, 1)
				bl, _ := base.Logits(rc.IDs, rc.Batch, rc.Seq)
				if maxAbsDiff(bl, want) < 1e-2 {
					t.Fatal("adapter does not change the logits")
				}
			}
		})
	}
}

// TestReferenceCacheAndThreads: on the reference models, KV-cached decoding
// and every thread count give the full forward's logits bit for bit.
func TestReferenceCacheAndThreads(t *testing.T) {
	for _, rc := range references(t) {
		t.Run(rc.Name, func(t *testing.T) {
			md := loadCase(t, rc, 1)
			checkCacheAndThreads(t, md, rc.IDs, rc.Batch, rc.Seq)
		})
	}
}

// TestGradientsMatchTorch: for every architecture, with a random adapter
// on all seven modules (and one on three), the log-probabilities, dLogits
// and every lora_A and lora_B gradient of Σ w·log p(target) match torch
// autograd. Tolerance: max |Δ| ≤ 1e-4·max(1, max |g|) per tensor, g the
// torch tensor (the gradients here are O(1): absolute 1e-4).
func TestGradientsMatchTorch(t *testing.T) {
	references(t)
	if len(gradCases) == 0 {
		t.Fatal("no gradient cases in the manifest")
	}
	for _, gc := range gradCases {
		t.Run(gc.Name, func(t *testing.T) {
			md := loadCase(t, gc.refCase, 2)
			c := md.W.Cfg
			tol := func(want []float32) float64 {
				var s float64
				for _, v := range want {
					s = max(s, math.Abs(float64(v)))
				}
				return 1e-4 * max(1, s)
			}
			a, err := md.Forward(gc.IDs, gc.Batch, gc.Seq)
			if err != nil {
				t.Fatal(err)
			}
			lp, err := TokenLogProbs(md.Threads, a.Logits, c.Vocab, gc.Targets)
			if err != nil {
				t.Fatal(err)
			}
			if want := readTensor(t, gc.Grads, "logp"); maxAbsDiff(lp, want) > tol(want) {
				t.Fatalf("log-probabilities: max |Δ| = %g", maxAbsDiff(lp, want))
			}
			dl, err := TokenLogProbsBackward(md.Threads, a.Logits, c.Vocab, gc.Targets, gc.Weights)
			if err != nil {
				t.Fatal(err)
			}
			if want := readTensor(t, gc.Grads, "dlogits"); maxAbsDiff(dl, want) > tol(want) {
				t.Fatalf("dLogits: max |Δ| = %g", maxAbsDiff(dl, want))
			}
			g := md.A.Zeroed()
			if err := md.Backward(a, dl, g); err != nil {
				t.Fatal(err)
			}
			var worst, scale, rel float64
			n := 0
			for _, gt := range g.Tensors(c) {
				want := readTensor(t, gc.Grads, gt.Name)
				if len(want) != len(gt.Data) {
					t.Fatalf("%s: %d values, torch has %d", gt.Name, len(gt.Data), len(want))
				}
				d := maxAbsDiff(gt.Data, want)
				if d > tol(want) {
					t.Errorf("%s: max |Δ| = %g > %g", gt.Name, d, tol(want))
				}
				worst = max(worst, d)
				scale = max(scale, tol(want)*1e4)
				rel = max(rel, d/(tol(want)*1e4))
				n++
			}
			if want := 2 * len(md.A.Targets) * c.Layers; n != want {
				t.Fatalf("%d gradient tensors, want %d", n, want)
			}
			t.Logf("%s, %v: %d tensors, max |Δgrad| = %.3g (largest max(1,|g|) %.3g), max over tensors of |Δ|/max(1,|g|) = %.3g",
				c.Arch, md.A.Targets, n, worst, scale, rel)
		})
	}
}

// TestFullGradientsMatchTorch: for every reference model (GQA with Llama-3
// rope scaling; tied embeddings with every bias; Qwen2 biases; Qwen3 q/k
// norms with tied embeddings; Mistral), every parameter's gradient of
// Σ w·log p(target) from BackwardFull matches torch autograd within
// 1e-4·max(1, max |g|) per tensor, as TestGradientsMatchTorch.
func TestFullGradientsMatchTorch(t *testing.T) {
	references(t)
	if len(fullCases) == 0 {
		t.Fatal("no full-gradient cases in the manifest")
	}
	for _, gc := range fullCases {
		t.Run(gc.Name, func(t *testing.T) {
			md := loadCase(t, gc.refCase, 2)
			c := md.W.Cfg
			a, err := md.Forward(gc.IDs, gc.Batch, gc.Seq)
			if err != nil {
				t.Fatal(err)
			}
			dl, err := TokenLogProbsBackward(md.Threads, a.Logits, c.Vocab, gc.Targets, gc.Weights)
			if err != nil {
				t.Fatal(err)
			}
			g, err := NewWeights(c)
			if err != nil {
				t.Fatal(err)
			}
			if err := md.BackwardFull(a, dl, g); err != nil {
				t.Fatal(err)
			}
			var rel float64
			n := 0
			for _, s := range c.specs(g) {
				want := readTensor(t, gc.Grads, s.name)
				got := s.f32()
				if len(want) != len(got) {
					t.Fatalf("%s: %d values, torch has %d", s.name, len(got), len(want))
				}
				var scale float64
				for _, v := range want {
					scale = max(scale, math.Abs(float64(v)))
				}
				if scale == 0 {
					t.Errorf("%s: torch's gradient is zero, the comparison proves nothing", s.name)
				}
				d := maxAbsDiff(got, want)
				if d > 1e-4*max(1, scale) {
					t.Errorf("%s: max |Δ| = %g > %g", s.name, d, 1e-4*max(1, scale))
				}
				rel = max(rel, d/max(1, scale))
				n++
			}
			t.Logf("%s: %d tensors, max over tensors of |Δ|/max(1,|g|) = %.3g", c.Arch, n, rel)
		})
	}
}
