package llama

import (
	"encoding/binary"
	"encoding/json"
	"maps"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/zooai/gym/internal/pyenv"
	"github.com/zooai/gym/model/safetensors"
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

// TestRouterAgreement measures how often the Go engine (float32) and
// torch (float32, and the model in bfloat16) route a token to different
// experts, on Qwen3-MoE and Mixtral models with routers at transformers'
// initialisation (nearly uniform: the worst case for near-ties) and at
// 1/sqrt(hidden), three seeds each, 8 × 32 tokens, 2 sparse layers
// (docs/moe.md has the figures). It fails when a float32 disagreement is
// not a near-tie: the gap between the k-th and the (k+1)-th probability,
// in torch's float32, must be below 1e-5 wherever the two float32
// computations choose differently.
func TestRouterAgreement(t *testing.T) {
	py := pyenv.Require(t, "torch", "transformers", "safetensors")
	dir := t.TempDir()
	script, _ := filepath.Abs(filepath.Join("testdata", "route_agreement.py"))
	cmd := exec.Command(py, script, dir)
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	b, err := os.ReadFile(filepath.Join(dir, "manifest.json"))
	if err != nil {
		t.Fatal(err)
	}
	var m struct {
		Cases []moeCase `json:"cases"`
	}
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	type tally struct{ decisions, fp32, bf16, tokFP32, tokBF16, tokens int }
	sums := map[string]*tally{}
	for _, rc := range m.Cases {
		md := loadCase(t, rc.refCase, 2)
		c := md.W.Cfg
		a, err := md.Forward(rc.IDs, rc.Batch, rc.Seq)
		if err != nil {
			t.Fatal(err)
		}
		group := rc.Name[:strings.LastIndexByte(rc.Name, '_')]
		s := sums[group]
		if s == nil {
			s = &tally{}
			sums[group] = s
		}
		K, E, N := c.MoE.TopK, c.MoE.Experts, rc.Batch*rc.Seq
		anyFP32, anyBF16 := make([]bool, N), make([]bool, N)
		for l := range c.Layers {
			got := a.Routes(l)
			f32 := readInt64s(t, rc.Routes, "fp32.layer"+itoa(l))
			b16 := readInt64s(t, rc.Routes, "bf16.layer"+itoa(l))
			probs := readTensor(t, rc.Routes, "probs.layer"+itoa(l))
			for n := range N {
				row := slices.Clone(got[n*K : (n+1)*K])
				slices.Sort(row)
				s.decisions++
				if !slices.Equal(row, f32[n*K:(n+1)*K]) {
					s.fp32++
					anyFP32[n] = true
					p := slices.Clone(probs[n*E : (n+1)*E])
					slices.Sort(p)
					if gap := p[E-K] - p[E-K-1]; gap >= 1e-5 {
						t.Errorf("%s layer %d token %d: experts %v, torch float32 %v, with a gap of %g between the %d-th and %d-th probability",
							rc.Name, l, n, row, f32[n*K:(n+1)*K], gap, K, K+1)
					}
				}
				if !slices.Equal(row, b16[n*K:(n+1)*K]) {
					s.bf16++
					anyBF16[n] = true
				}
			}
		}
		for n := range N {
			s.tokens++
			if anyFP32[n] {
				s.tokFP32++
			}
			if anyBF16[n] {
				s.tokBF16++
			}
		}
	}
	for _, g := range slices.Sorted(maps.Keys(sums)) {
		s := sums[g]
		t.Logf("%-16s %5d routing decisions: differ from torch fp32 %d (%.2f%%), from torch bf16 %d (%.2f%%); tokens with any differing layer: fp32 %d/%d, bf16 %d/%d",
			g, s.decisions, s.fp32, 100*float64(s.fp32)/float64(s.decisions), s.bf16, 100*float64(s.bf16)/float64(s.decisions),
			s.tokFP32, s.tokens, s.tokBF16, s.tokens)
	}
}
