package model

import (
	"bytes"
	"errors"
	"math"
	"testing"

	"github.com/zooai/gym/prng"
)

var fdEps = 1e-3

var tinyCfg = Config{Vocab: 7, Ctx: 6, Dim: 8, Layers: 2, Heads: 2, Hidden: 12}

// randomModel returns a tiny model whose every parameter (norm gains and
// LoRA B included) is non-trivial, so every gradient path is exercised.
func randomModel(t *testing.T, targets []string) *Model {
	t.Helper()
	w, err := Init(tinyCfg, 1)
	if err != nil {
		t.Fatal(err)
	}
	r := prng.New(2)
	for _, ts := range w.Tensors() {
		for i := range ts.Data {
			ts.Data[i] += float32(0.3 * r.Norm())
		}
	}
	var a *Adapter
	if targets != nil {
		a, err = InitAdapter(tinyCfg, LoRAConfig{Rank: 2, Alpha: 3, Targets: targets}, 3)
		if err != nil {
			t.Fatal(err)
		}
		for _, ts := range a.Tensors() {
			for i := range ts.Data {
				ts.Data[i] += float32(0.3 * r.Norm())
			}
		}
	}
	return &Model{W: w, A: a, Threads: 1}
}

func randomTokens(seed uint64, n, vocab int) []int {
	r := prng.New(seed)
	out := make([]int, n)
	for i := range out {
		out[i] = r.IntN(vocab)
	}
	return out
}

// TestGradientsMatchFiniteDifferences checks every parameter tensor (base and
// LoRA) against central differences of L = Σ R ⊙ logits.
func TestGradientsMatchFiniteDifferences(t *testing.T) {
	md := randomModel(t, []string{"q", "k", "v", "o", "fc1", "fc2"})
	const B, T = 2, 5
	tokens := randomTokens(4, B*T, tinyCfg.Vocab)
	r := prng.New(5)
	R := make([]float32, B*T*tinyCfg.Vocab)
	for i := range R {
		R[i] = float32(r.Norm())
	}
	loss := func() float64 {
		a, err := md.Forward(tokens, B, T)
		if err != nil {
			t.Fatal(err)
		}
		var s float64
		for i, v := range a.Logits {
			s += float64(v) * float64(R[i])
		}
		return s
	}
	act, err := md.Forward(tokens, B, T)
	if err != nil {
		t.Fatal(err)
	}
	gw, _ := NewWeights(tinyCfg)
	ga := md.A.ZeroLike()
	if err := md.Backward(act, R, gw, ga); err != nil {
		t.Fatal(err)
	}
	check := func(params, grads []Tensor) {
		for k, p := range params {
			for trial := 0; trial < 6; trial++ {
				i := r.IntN(len(p.Data))
				old := p.Data[i]
				eps := fdEps
				p.Data[i] = old + float32(eps)
				lp := loss()
				p.Data[i] = old - float32(eps)
				lm := loss()
				p.Data[i] = old
				fd := (lp - lm) / float64(2*float32(eps))
				an := float64(grads[k].Data[i])
				if math.Abs(fd-an) > 1e-2*math.Max(math.Abs(fd), math.Abs(an))+2e-3 {
					t.Errorf("%s[%d]: backward %.6g, finite difference %.6g", p.Name, i, an, fd)
				}
			}
		}
	}
	check(md.W.Tensors(), gw.Tensors())
	check(md.A.Tensors(), ga.Tensors())
}

// TestBackwardWithoutBaseGradients checks that skipping base gradients (LoRA
// training) gives the same adapter gradients.
func TestBackwardWithoutBaseGradients(t *testing.T) {
	md := randomModel(t, []string{"q", "v"})
	tokens := randomTokens(6, 3*4, tinyCfg.Vocab)
	act, _ := md.Forward(tokens, 3, 4)
	R := make([]float32, len(act.Logits))
	for i := range R {
		R[i] = float32(i%5) - 2
	}
	gw, _ := NewWeights(tinyCfg)
	g1, g2 := md.A.ZeroLike(), md.A.ZeroLike()
	if err := md.Backward(act, R, gw, g1); err != nil {
		t.Fatal(err)
	}
	if err := md.Backward(act, R, nil, g2); err != nil {
		t.Fatal(err)
	}
	t2 := g2.Tensors()
	for k, ts := range g1.Tensors() {
		if !bytes.Equal(Float32Bytes(ts.Data), Float32Bytes(t2[k].Data)) {
			t.Fatalf("%s differs when base gradients are skipped", ts.Name)
		}
	}
}

func TestZeroAdapterIsBaseModel(t *testing.T) {
	md := randomModel(t, nil)
	tokens := randomTokens(7, 2*6, tinyCfg.Vocab)
	base, _ := md.Forward(tokens, 2, 6)
	md.A, _ = InitAdapter(tinyCfg, LoRAConfig{Rank: 4, Alpha: 8, Targets: []string{"q", "v", "fc2"}}, 1)
	adapted, _ := md.Forward(tokens, 2, 6)
	if !bytes.Equal(Float32Bytes(base.Logits), Float32Bytes(adapted.Logits)) {
		t.Fatal("a freshly initialised adapter (B = 0) changed the logits")
	}
	md.A.B[1][FC2][0] = 0.5
	changed, _ := md.Forward(tokens, 2, 6)
	if bytes.Equal(Float32Bytes(base.Logits), Float32Bytes(changed.Logits)) {
		t.Fatal("a non-zero adapter did not change the logits")
	}
}

// TestCacheMatchesForward: generation with the KV cache gives exactly the
// logits of a full forward pass.
func TestCacheMatchesForward(t *testing.T) {
	md := randomModel(t, []string{"q", "k", "v", "o", "fc1", "fc2"})
	const B, T = 3, 6
	tokens := randomTokens(8, B*T, tinyCfg.Vocab)
	full, err := md.Forward(tokens, B, T)
	if err != nil {
		t.Fatal(err)
	}
	ch := md.NewCache(B)
	V := tinyCfg.Vocab
	for pos := 0; pos < T; pos++ {
		step := make([]int, B)
		for b := range step {
			step[b] = tokens[b*T+pos]
		}
		logits, err := md.Step(ch, step)
		if err != nil {
			t.Fatal(err)
		}
		for b := 0; b < B; b++ {
			want := full.Logits[(b*T+pos)*V : (b*T+pos+1)*V]
			if !bytes.Equal(Float32Bytes(logits[b*V:(b+1)*V]), Float32Bytes(want)) {
				t.Fatalf("position %d sequence %d: cached %v, full %v", pos, b, logits[b*V:(b+1)*V], want)
			}
		}
	}
	if _, err := md.Step(ch, make([]int, B)); err == nil {
		t.Fatal("step past the context length succeeded")
	}
}

// TestThreadsDoNotChangeResults runs a batch large enough to be split across
// goroutines and compares logits and gradients bit for bit.
func TestThreadsDoNotChangeResults(t *testing.T) {
	c := Config{Vocab: 13, Ctx: 10, Dim: 64, Layers: 2, Heads: 4, Hidden: 256}
	w, _ := Init(c, 9)
	a, _ := InitAdapter(c, LoRAConfig{Rank: 8, Alpha: 16, Targets: []string{"q", "v", "fc1"}}, 9)
	for _, ts := range a.Tensors() {
		for i := range ts.Data {
			ts.Data[i] += 0.01 * float32(i%7)
		}
	}
	const B, T = 64, 10
	tokens := randomTokens(10, B*T, c.Vocab)
	var ref [][]byte
	for _, th := range []int{1, 2, 3, 8} {
		md := &Model{W: w, A: a, Threads: th}
		act, err := md.Forward(tokens, B, T)
		if err != nil {
			t.Fatal(err)
		}
		g := a.ZeroLike()
		gw, _ := NewWeights(c)
		if err := md.Backward(act, act.Logits, gw, g); err != nil {
			t.Fatal(err)
		}
		got := [][]byte{Float32Bytes(act.Logits)}
		for _, ts := range append(g.Tensors(), gw.Tensors()...) {
			got = append(got, Float32Bytes(ts.Data))
		}
		if ref == nil {
			ref = got
			continue
		}
		for i := range ref {
			if !bytes.Equal(ref[i], got[i]) {
				t.Fatalf("threads=%d: output %d differs from threads=1", th, i)
			}
		}
	}
}

func TestWeightsAndAdapterRoundTrip(t *testing.T) {
	md := randomModel(t, []string{"k", "fc1"})
	var buf bytes.Buffer
	if err := WriteWeights(&buf, md.W, map[string]string{"note": "x"}); err != nil {
		t.Fatal(err)
	}
	w, meta, err := ReadWeights(buf.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	if meta["note"] != "x" || w.Cfg != tinyCfg {
		t.Fatalf("metadata %v config %+v", meta, w.Cfg)
	}
	wt := w.Tensors()
	for i, ts := range md.W.Tensors() {
		if ts.Name != wt[i].Name || !bytes.Equal(Float32Bytes(ts.Data), Float32Bytes(wt[i].Data)) {
			t.Fatalf("tensor %s did not round-trip", ts.Name)
		}
	}
	buf.Reset()
	if err := WriteAdapter(&buf, md.A, nil); err != nil {
		t.Fatal(err)
	}
	a, _, err := ReadAdapter(buf.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	at := a.Tensors()
	want := []string{"lora.blocks.0.attn.k.A.weight", "lora.blocks.0.attn.k.B.weight", "lora.blocks.0.mlp.fc1.A.weight"}
	for i, n := range want {
		if at[i].Name != n {
			t.Fatalf("tensor %d is %s, want %s", i, at[i].Name, n)
		}
	}
	for i, ts := range md.A.Tensors() {
		if !bytes.Equal(Float32Bytes(ts.Data), Float32Bytes(at[i].Data)) {
			t.Fatalf("tensor %s did not round-trip", ts.Name)
		}
	}
	if _, _, err := ReadAdapter(buf.Bytes()[:buf.Len()-4]); err == nil {
		t.Fatal("truncated adapter accepted")
	}
}

func TestConfigValidation(t *testing.T) {
	bad := []Config{{}, {Vocab: 5, Ctx: 4, Dim: 6, Layers: 1, Heads: 4, Hidden: 8}}
	for _, c := range bad {
		if _, err := NewWeights(c); !errors.Is(err, ErrConfig) {
			t.Errorf("%+v: err %v", c, err)
		}
	}
	for _, lc := range []LoRAConfig{
		{Rank: 0, Alpha: 1, Targets: []string{"q"}},
		{Rank: 2, Alpha: 0, Targets: []string{"q"}},
		{Rank: 2, Alpha: 1, Targets: []string{"z"}},
		{Rank: 2, Alpha: 1, Targets: []string{"q", "q"}},
		{Rank: 2, Alpha: 1},
	} {
		if _, err := NewAdapter(tinyCfg, lc); !errors.Is(err, ErrConfig) {
			t.Errorf("%+v: err %v", lc, err)
		}
	}
	md := randomModel(t, nil)
	if _, err := md.Forward([]int{0, 1, 99}, 1, 3); err == nil {
		t.Error("out-of-vocabulary token accepted")
	}
	if _, err := md.Forward(make([]int, 7), 1, 7); err == nil {
		t.Error("sequence longer than the context accepted")
	}
}

func TestDigest(t *testing.T) {
	a := []Tensor{{"x", []int{2}, []float32{1, 2}}}
	b := []Tensor{{"x", []int{2}, []float32{1, 2}}}
	if Digest(a) != Digest(b) {
		t.Fatal("equal tensors, different digests")
	}
	for _, c := range [][]Tensor{
		{{"y", []int{2}, []float32{1, 2}}},
		{{"x", []int{1, 2}, []float32{1, 2}}},
		{{"x", []int{2}, []float32{1, 3}}},
	} {
		if Digest(c) == Digest(a) {
			t.Fatalf("%v has the digest of %v", c, a)
		}
	}
}
