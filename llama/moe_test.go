package llama

import (
	"encoding/binary"
	"encoding/json"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sync"
	"testing"

	"github.com/zooai/gym/internal/pyenv"
	"github.com/zooai/gym/safetensors"
)

// moeCase is a case of testdata/make_moe_models.py's manifest.
type moeCase struct {
	refCase
	Routes string `json:"routes"`
}

var (
	moeOnce   sync.Once
	moeDir    string
	moeCases  []moeCase
	moeGrads  []gradCase
	moeErrRef error
)

// moeReferences builds the MoE reference models with transformers and
// PEFT (once per test binary).
func moeReferences(t *testing.T) []moeCase {
	t.Helper()
	py := pyenv.Require(t, "torch", "transformers", "peft", "safetensors")
	moeOnce.Do(func() {
		if moeDir, moeErrRef = os.MkdirTemp("", "llama-moe-"); moeErrRef != nil {
			return
		}
		script, _ := filepath.Abs(filepath.Join("testdata", "make_moe_models.py"))
		cmd := exec.Command(py, script, moeDir)
		cmd.Dir = moeDir
		if out, err := cmd.CombinedOutput(); err != nil {
			moeErrRef = &exec.Error{Name: string(out), Err: err}
			return
		}
		b, err := os.ReadFile(filepath.Join(moeDir, "manifest.json"))
		if err != nil {
			moeErrRef = err
			return
		}
		var m struct {
			Cases []moeCase  `json:"cases"`
			Grads []gradCase `json:"grads"`
		}
		moeErrRef = json.Unmarshal(b, &m)
		moeCases, moeGrads = m.Cases, m.Grads
	})
	if moeErrRef != nil {
		t.Fatalf("making MoE reference models: %v", moeErrRef)
	}
	return moeCases
}

// readInt64s reads an I64 tensor of a safetensors file.
func readInt64s(t *testing.T, path, name string) []int {
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
	if !ok || info.DType != "I64" {
		t.Fatalf("%s: no I64 tensor %q", path, name)
	}
	raw, err := sf.ReadTensor(f, info)
	if err != nil {
		t.Fatal(err)
	}
	out := make([]int, len(raw)/8)
	for i := range out {
		out[i] = int(int64(binary.LittleEndian.Uint64(raw[8*i:])))
	}
	return out
}

// TestMoELogitsMatchTransformers: Qwen3-MoE (q/k norms, tied embeddings,
// top-k renormalised), Qwen2-MoE (shared expert and its gate, a dense
// layer from mlp_only_layers, BF16), Mixtral, a sparse step of 2, each
// in the per-expert layout save_pretrained writes and (two of them) the
// fused layout, bare and with PEFT adapters on the attention, the stacked
// experts, the router, the shared expert: the logits are transformers'
// (PeftModel's) within 1e-4, and every token's experts in every sparse
// layer are those transformers' router chose.
func TestMoELogitsMatchTransformers(t *testing.T) {
	for _, rc := range moeReferences(t) {
		t.Run(rc.Name, func(t *testing.T) {
			md := loadCase(t, rc.refCase, 2)
			c := md.W.Cfg
			if !c.Arch.MoE() {
				t.Fatalf("%s is not a MoE architecture", c.Arch)
			}
			a, err := md.Forward(rc.IDs, rc.Batch, rc.Seq)
			if err != nil {
				t.Fatal(err)
			}
			want := readLogits(t, rc.Logits)
			d := maxAbsDiff(a.Logits, want)
			sparse, routed := 0, 0
			for l := range c.Layers {
				got := a.Routes(l)
				if !c.Sparse(l) {
					if got != nil {
						t.Fatalf("layer %d is dense but has routes", l)
					}
					continue
				}
				sparse++
				ref := readInt64s(t, rc.Routes, "layer"+itoa(l))
				K := c.MoE.TopK
				if len(got) != len(ref) {
					t.Fatalf("layer %d: %d routes, transformers %d", l, len(got), len(ref))
				}
				for n := 0; n < len(got)/K; n++ {
					row := slices.Clone(got[n*K : (n+1)*K])
					slices.Sort(row)
					if !slices.Equal(row, ref[n*K:(n+1)*K]) {
						t.Errorf("layer %d token %d: experts %v, transformers chose %v", l, n, row, ref[n*K:(n+1)*K])
					}
					routed++
				}
			}
			if sparse == 0 {
				t.Fatal("no sparse layer")
			}
			t.Logf("%s (fused %v): max |Δlogit| = %.3g; %d tokens × %d sparse layers routed as transformers routes", c.Arch, c.MoE.FusedExperts, d, routed/sparse, sparse)
			if d > 1e-4 {
				t.Fatalf("max |Δlogit| = %g > 1e-4", d)
			}
			if rc.Adapter != "" {
				base, _ := New(md.W, nil, 1)
				bl, _ := base.Logits(rc.IDs, rc.Batch, rc.Seq)
				if maxAbsDiff(bl, want) < 1e-2 {
					t.Fatal("adapter does not change the logits")
				}
			}
		})
	}
}

func itoa(n int) string {
	b, _ := json.Marshal(n)
	return string(b)
}

// TestMoECacheAndThreads: on the MoE reference models, KV-cached decoding
// and every thread count give the full forward's logits bit for bit.
func TestMoECacheAndThreads(t *testing.T) {
	for _, rc := range moeReferences(t) {
		t.Run(rc.Name, func(t *testing.T) {
			md := loadCase(t, rc.refCase, 1)
			checkCacheAndThreads(t, md, rc.IDs, rc.Batch, rc.Seq)
		})
	}
}

// TestMoEGradientsMatchTorch: with PEFT adapters on the attention, the
// stacked experts (rank and alpha patterns included), the router, the
// shared expert and its gate, the log-probabilities, dLogits and every
// lora_A and lora_B gradient of Σ w·log p(target) match torch autograd
// within 1e-4·max(1, max |g|) per tensor, and the gradients are bitwise
// the same on 1 and 3 threads.
func TestMoEGradientsMatchTorch(t *testing.T) {
	moeReferences(t)
	if len(moeGrads) == 0 {
		t.Fatal("no gradient cases in the manifest")
	}
	for _, gc := range moeGrads {
		t.Run(gc.Name, func(t *testing.T) {
			var prev *Adapter
			for _, threads := range []int{1, 3} {
				md := loadCase(t, gc.refCase, threads)
				c := md.W.Cfg
				a, err := md.Forward(gc.IDs, gc.Batch, gc.Seq)
				if err != nil {
					t.Fatal(err)
				}
				lp, _ := TokenLogProbs(threads, a.Logits, c.Vocab, gc.Targets)
				tol := func(want []float32) float64 {
					var s float64
					for _, v := range want {
						s = max(s, math.Abs(float64(v)))
					}
					return 1e-4 * max(1, s)
				}
				if want := readTensor(t, gc.Grads, "logp"); maxAbsDiff(lp, want) > tol(want) {
					t.Fatalf("log-probabilities: max |Δ| = %g", maxAbsDiff(lp, want))
				}
				dl, _ := TokenLogProbsBackward(threads, a.Logits, c.Vocab, gc.Targets, gc.Weights)
				g := md.A.Zeroed()
				if err := md.Backward(a, dl, g); err != nil {
					t.Fatal(err)
				}
				var rel float64
				names := map[string]bool{}
				for _, gt := range g.Tensors(c) {
					want := readTensor(t, gc.Grads, gt.Name)
					if len(want) != len(gt.Data) {
						t.Fatalf("%s: %d values, torch has %d", gt.Name, len(gt.Data), len(want))
					}
					var s float64
					for _, v := range want {
						s = max(s, math.Abs(float64(v)))
					}
					if s == 0 {
						t.Errorf("%s: torch's gradient is zero, the comparison proves nothing", gt.Name)
					}
					if d := maxAbsDiff(gt.Data, want); d > tol(want) {
						t.Errorf("%s: max |Δ| = %g > %g", gt.Name, d, tol(want))
					} else {
						rel = max(rel, d/max(1, s))
					}
					names[gt.Name] = true
				}
				// Every LoRA tensor torch has is one the engine computed.
				f, _ := os.Open(gc.Grads)
				st, _ := f.Stat()
				sf, err := safetensors.Parse(f, st.Size(), safetensors.Limits{})
				f.Close()
				if err != nil {
					t.Fatal(err)
				}
				for _, ti := range sf.Tensors {
					if ti.Name != "logp" && ti.Name != "dlogits" && !names[ti.Name] {
						t.Errorf("torch has a gradient for %s, the engine none", ti.Name)
					}
				}
				if prev != nil {
					for i, gt := range g.Views() {
						if !slices.Equal(gt.Data, prev.Views()[i].Data) {
							t.Fatalf("%s differs between 1 and %d threads", gt.Name, threads)
						}
					}
				}
				prev = g
				if threads == 1 {
					t.Logf("%s, %v: %d tensors, max over tensors of |Δ|/max(1,|g|) = %.3g", c.Arch, md.A.Targets, len(names), rel)
				}
			}
		})
	}
}
