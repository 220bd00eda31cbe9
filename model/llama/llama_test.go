package llama

import (
	"math"
	"reflect"
	"slices"
	"testing"

	"github.com/zooai/gym/model/prng"
)

// testConfig is a small model of each architecture's features.
func testConfig(arch Arch) Config {
	c := Config{Arch: arch, Vocab: 50, Hidden: 48, Intermediate: 80, Layers: 2, Heads: 6, KVHeads: 2,
		HeadDim: 8, MaxPositions: 40, NormEps: 1e-6, RopeTheta: 10000, BOS: -1, PAD: -1}
	switch arch {
	case Llama:
		c.RopeScaling = &Llama3Scaling{Factor: 8, LowFreqFactor: 1, HighFreqFactor: 4, OriginalMaxPositions: 16}
		c.QKVBias, c.OBias, c.MLPBias = true, true, true
	case Qwen2:
		c.QKVBias = true
		c.Tied = true
	case Qwen3:
		c.QKNorm = true
		c.HeadDim = 12
	}
	return c
}

// randomWeights fills weights of shape c with values large enough that
// every part of the network matters.
func randomWeights(t testing.TB, c Config, seed uint64) *Weights {
	t.Helper()
	w, err := NewWeights(c)
	if err != nil {
		t.Fatal(err)
	}
	r := prng.New(seed, 0x6c6c616d61)
	for _, s := range c.specs(w) {
		d := s.f32()
		switch {
		case len(s.shape) == 1 && !isBias(s.name):
			for i := range d {
				d[i] = float32(1 + 0.3*r.Norm())
			}
		case len(s.shape) == 1:
			for i := range d {
				d[i] = float32(0.3 * r.Norm())
			}
		default:
			std := 1 / math.Sqrt(float64(s.shape[1]))
			if s.name == "model.embed_tokens.weight" {
				std = 1
			}
			for i := range d {
				d[i] = float32(std * r.Norm())
			}
		}
	}
	return w
}

func isBias(name string) bool { return len(name) > 5 && name[len(name)-5:] == ".bias" }

func randomAdapter(t testing.TB, c Config, seed uint64) *Adapter {
	t.Helper()
	a, err := NewAdapter(c, 3, 6, []Module{QProj, KProj, VProj, OProj, GateProj, UpProj, DownProj})
	if err != nil {
		t.Fatal(err)
	}
	r := prng.New(seed, 0x6c6f7261)
	for _, ts := range a.Tensors(c) {
		for i := range ts.Data {
			ts.Data[i] = float32(0.2 * r.Norm())
		}
	}
	return a
}

func randomTokens(seed uint64, n, vocab int) []int {
	r := prng.New(seed, 0x746f6b)
	ids := make([]int, n)
	for i := range ids {
		ids[i] = r.IntN(vocab)
	}
	return ids
}

func sameBits(a, b []float32) bool {
	return slices.EqualFunc(a, b, func(x, y float32) bool { return math.Float32bits(x) == math.Float32bits(y) })
}

// checkCacheAndThreads checks that logits are bitwise the same for 1, 2, 3
// and 7 threads, with or without kept activations, and when the sequences
// are fed through a KV cache as a prefill followed by single-token steps.
func checkCacheAndThreads(t *testing.T, md *Model, ids []int, B, T int) {
	t.Helper()
	md.Threads = 1
	ref, err := md.Forward(ids, B, T)
	if err != nil {
		t.Fatal(err)
	}
	for _, th := range []int{2, 3, 7} {
		md.Threads = th
		got, err := md.Logits(ids, B, T)
		if err != nil {
			t.Fatal(err)
		}
		if !sameBits(got, ref.Logits) {
			t.Fatalf("%d threads: logits differ from 1 thread (max |Δ| %g)", th, maxAbsDiff(got, ref.Logits))
		}
	}
	V := md.W.Cfg.Vocab
	for _, th := range []int{1, 3} {
		md.Threads = th
		ch, err := md.NewCache(B, T+1)
		if err != nil {
			t.Fatal(err)
		}
		split := T / 2
		prompt := make([]int, 0, B*split)
		for b := range B {
			prompt = append(prompt, ids[b*T:b*T+split]...)
		}
		pl, err := md.Prefill(ch, prompt, split)
		if err != nil {
			t.Fatal(err)
		}
		for b := range B {
			for p := range split {
				if !sameBits(pl[(b*split+p)*V:(b*split+p+1)*V], ref.Logits[(b*T+p)*V:(b*T+p+1)*V]) {
					t.Fatalf("threads %d: prefill logits of sequence %d position %d differ", th, b, p)
				}
			}
		}
		last, _ := md.NewCache(B, T)
		ll, err := md.PrefillLast(last, prompt, split)
		if err != nil {
			t.Fatal(err)
		}
		for b := range B {
			if !sameBits(ll[b*V:(b+1)*V], ref.Logits[(b*T+split-1)*V:(b*T+split)*V]) {
				t.Fatalf("threads %d: PrefillLast logits of sequence %d differ", th, b)
			}
		}
		for p := split; p < T; p++ {
			step := make([]int, B)
			for b := range B {
				step[b] = ids[b*T+p]
			}
			sl, err := md.Step(ch, step)
			if err != nil {
				t.Fatal(err)
			}
			for b := range B {
				if !sameBits(sl[b*V:(b+1)*V], ref.Logits[(b*T+p)*V:(b*T+p+1)*V]) {
					t.Fatalf("threads %d: decode logits of sequence %d position %d differ (max |Δ| %g)", th, b, p,
						maxAbsDiff(sl[b*V:(b+1)*V], ref.Logits[(b*T+p)*V:(b*T+p+1)*V]))
				}
			}
		}
		if ch.Len != T {
			t.Fatalf("cache length %d, want %d", ch.Len, T)
		}
	}
	md.Threads = 1
}

func TestCacheAndThreadsEveryArch(t *testing.T) {
	for _, arch := range []Arch{Llama, Qwen2, Qwen3, Mistral} {
		for _, withLoRA := range []bool{false, true} {
			name := string(arch)
			if withLoRA {
				name += "+lora"
			}
			t.Run(name, func(t *testing.T) {
				c := testConfig(arch)
				w := randomWeights(t, c, 7)
				var a *Adapter
				if withLoRA {
					a = randomAdapter(t, c, 8)
				}
				md, err := New(w, a, 1)
				if err != nil {
					t.Fatal(err)
				}
				// Enough work per product that the kernels do split across goroutines.
				B, T := 4, 23
				checkCacheAndThreads(t, md, randomTokens(9, B*T, c.Vocab), B, T)
			})
		}
	}
}

// TestSaveLoadRoundTrip: what Save writes, Load reads back exactly.
func TestSaveLoadRoundTrip(t *testing.T) {
	for _, arch := range []Arch{Llama, Qwen2, Qwen3, Mistral} {
		c := testConfig(arch)
		w := randomWeights(t, c, 3)
		dir := t.TempDir()
		if err := Save(dir, w); err != nil {
			t.Fatal(err)
		}
		got, err := Load(dir)
		if err != nil {
			t.Fatalf("%s: %v", arch, err)
		}
		if !equalConfig(got.Cfg, c) {
			t.Fatalf("%s: config %+v, want %+v", arch, got.Cfg, c)
		}
		for i, s := range c.specs(got) {
			if !sameBits(s.f32(), c.specs(w)[i].f32()) {
				t.Fatalf("%s: tensor %s differs", arch, s.name)
			}
		}
		if c.Tied && &got.Head.F32[0] != &got.Embed.F32[0] {
			t.Fatalf("%s: tied head is not the embedding", arch)
		}
	}
}

func equalConfig(a, b Config) bool {
	if (a.RopeScaling == nil) != (b.RopeScaling == nil) || (a.RopeScaling != nil && *a.RopeScaling != *b.RopeScaling) {
		return false
	}
	a.RopeScaling, b.RopeScaling = nil, nil
	a.DType, b.DType = "", ""
	return slices.Equal(a.EOS, b.EOS) && func() bool { a.EOS, b.EOS = nil, nil; return true }() && a.Arch == b.Arch &&
		a.Vocab == b.Vocab && a.Hidden == b.Hidden && a.Intermediate == b.Intermediate && a.Layers == b.Layers &&
		a.Heads == b.Heads && a.KVHeads == b.KVHeads && a.HeadDim == b.HeadDim && a.MaxPositions == b.MaxPositions &&
		a.NormEps == b.NormEps && a.RopeTheta == b.RopeTheta && a.Tied == b.Tied && a.QKVBias == b.QKVBias &&
		a.OBias == b.OBias && a.MLPBias == b.MLPBias && a.QKNorm == b.QKNorm && a.BOS == b.BOS && a.PAD == b.PAD &&
		equalMoE(a.MoE, b.MoE)
}

func equalMoE(a, b MoEConfig) bool {
	if !slices.Equal(a.MLPOnly, b.MLPOnly) {
		return false
	}
	a.MLPOnly, b.MLPOnly = nil, nil
	return reflect.DeepEqual(a, b)
}

func TestHalfToFloat(t *testing.T) {
	for _, tc := range []struct {
		h    uint16
		want float32
	}{
		{0x0000, 0}, {0x3c00, 1}, {0xc000, -2}, {0x7bff, 65504}, {0x0001, 5.960464477539063e-08},
		{0x03ff, 6.097555160522461e-05}, {0x0400, 6.103515625e-05}, {0x3555, 0.333251953125},
	} {
		if got := halfToFloat(tc.h); got != tc.want {
			t.Errorf("halfToFloat(%#04x) = %v, want %v", tc.h, got, tc.want)
		}
	}
	if v := halfToFloat(0x7c00); !math.IsInf(float64(v), 1) {
		t.Errorf("0x7c00 = %v", v)
	}
	if v := halfToFloat(0x8000); math.Float32bits(v) != 0x80000000 {
		t.Errorf("0x8000 = %v", v)
	}
}

// TestCacheRepeat: a prompt prefilled once and repeated decodes exactly as
// the prompt prefilled for every copy.
func TestCacheRepeat(t *testing.T) {
	c := testConfig(Qwen3)
	md, err := New(randomWeights(t, c, 4), randomAdapter(t, c, 5), 2)
	if err != nil {
		t.Fatal(err)
	}
	prompt := randomTokens(6, 2*5, c.Vocab) // 2 prompts of 5 tokens
	one, _ := md.NewCache(2, 12)
	if _, err := md.Prefill(one, prompt, 5); err != nil {
		t.Fatal(err)
	}
	rep, err := one.Repeat(3)
	if err != nil {
		t.Fatal(err)
	}
	copies := make([]int, 0, 6*5)
	for b := range 6 {
		copies = append(copies, prompt[(b/3)*5:(b/3+1)*5]...)
	}
	full, _ := md.NewCache(6, 12)
	if _, err := md.Prefill(full, copies, 5); err != nil {
		t.Fatal(err)
	}
	next := randomTokens(7, 6, c.Vocab)
	for range 3 {
		a, err := md.Step(rep, next)
		if err != nil {
			t.Fatal(err)
		}
		b, err := md.Step(full, next)
		if err != nil {
			t.Fatal(err)
		}
		if !sameBits(a, b) {
			t.Fatal("repeated cache decodes differently")
		}
	}
}
