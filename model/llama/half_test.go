package llama

import (
	"bytes"
	"encoding/binary"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/zooai/gym/model/prng"
	"github.com/zooai/gym/model/safetensors"
)

// halfMat returns a 16-bit Mat of dtype dt holding v rounded (narrow), and
// the float32 values it holds.
func halfMat(t *testing.T, dt DType, v []float32) (Mat, []float32) {
	t.Helper()
	m := Mat{dtype: dt, half: make([]uint16, len(v))}
	for i, x := range v {
		h, ok := narrow(dt, x)
		if !ok {
			t.Fatalf("%v does not fit %v", x, dt)
		}
		m.half[i] = h
	}
	f := make([]float32, len(v))
	widenGo(dt, f, m.half)
	return m, f
}

// TestKernelsBitExactHalf: widening is exact on every 16-bit value (the
// SIMD kernels and the Go ones), and products with a BF16 or F16 matrix
// (matMulTW, matMulNNW) have exactly the bits of matMulT and matMulNN on
// its float32 values, with and without the SIMD kernels, for several
// thread counts, on shapes with remainders in every dimension and more
// than one panel and k-block.
func TestKernelsBitExactHalf(t *testing.T) {
	all := make([]uint16, 1<<16)
	for i := range all {
		all[i] = uint16(i)
	}
	for _, dt := range []DType{BF16, F16} {
		for _, n := range []int{1 << 16, 16*37 + 5, 15} {
			src := all[len(all)-n:]
			s, p := withSIMD(t, func() []float32 {
				d := make([]float32, n)
				widen(dt, d, src)
				return d
			})
			for i, h := range src {
				want := bf16ToFloat(h)
				if dt == F16 {
					want = halfToFloat(h)
					if math.IsNaN(float64(want)) {
						continue // the hardware quiets signalling NaNs; loading refuses NaN
					}
				}
				if math.Float32bits(s[i]) != math.Float32bits(want) || math.Float32bits(p[i]) != math.Float32bits(want) {
					t.Fatalf("%v %#04x: SIMD %v, Go %v, want %v", dt, h, s[i], p[i], want)
				}
			}
		}
	}

	r := prng.New(12, 5)
	for _, dt := range []DType{BF16, F16} {
		for _, sh := range []struct{ N, in, out int }{{1, 8, 5}, {5, 37, 70}, {9, 64, 130}, {70, 33, 67}, {3, 300, 9}} {
			x := randVec(r, sh.N*sh.in)
			wm, wf := halfMat(t, dt, randVec(r, sh.out*sh.in))
			bias := randVec(r, sh.out)
			for _, th := range []int{1, 3} {
				want := make([]float32, sh.N*sh.out)
				matMulT(th, want, x, wf, bias, sh.N, sh.in, sh.out)
				s, p := withSIMD(t, func() []float32 {
					y := make([]float32, sh.N*sh.out)
					matMulTW(th, y, x, wm, bias, sh.N, sh.in, sh.out)
					return y
				})
				if !sameBits(s, want) || !sameBits(p, want) {
					t.Fatalf("matMulTW %v %+v, %d threads: differs from matMulT on the widened matrix", dt, sh, th)
				}
			}
		}
		for _, sh := range []struct{ N, K, M int }{{1, 7, 5}, {5, 300, 64}, {9, 257, 130}, {70, 40, 67}, {66, 520, 3}} {
			x := randVec(r, sh.N*sh.K)
			wm, wf := halfMat(t, dt, randVec(r, sh.K*sh.M))
			for _, th := range []int{1, 3} {
				want := make([]float32, sh.N*sh.M)
				matMulNN(th, want, x, wf, sh.N, sh.K, sh.M)
				s, p := withSIMD(t, func() []float32 {
					y := make([]float32, sh.N*sh.M)
					matMulNNW(th, y, x, wm, sh.N, sh.K, sh.M)
					return y
				})
				if !sameBits(s, want) || !sameBits(p, want) {
					t.Fatalf("matMulNNW %v %+v, %d threads: differs from matMulNN on the widened matrix", dt, sh, th)
				}
			}
		}
	}
}

// halfConfig is testConfig with a vocabulary and MLP wide enough that the
// products span several panels and the head's backward several k-blocks.
func halfConfig(arch Arch) Config {
	c := testConfig(arch)
	c.Vocab, c.Intermediate = 300, 136
	return c
}

// passResults runs a forward pass, the LoRA backward and the
// full-parameter backward on md and returns the logits and every gradient,
// one after the other.
func passResults(t *testing.T, md *Model, ids, targets []int, B, T int) []float32 {
	t.Helper()
	c := md.W.Cfg
	act, err := md.Forward(ids, B, T)
	if err != nil {
		t.Fatal(err)
	}
	dLogP := make([]float32, B*T)
	for i := range dLogP {
		dLogP[i] = 1 / float32(i+1)
	}
	dl, err := TokenLogProbsBackward(md.Threads, act.Logits, c.Vocab, targets, dLogP)
	if err != nil {
		t.Fatal(err)
	}
	out := append([]float32(nil), act.Logits...)
	g := md.A.Zeroed()
	if err := md.Backward(act, dl, g); err != nil {
		t.Fatal(err)
	}
	for _, ts := range g.Tensors(c) {
		out = append(out, ts.Data...)
	}
	gw, err := NewWeights(c)
	if err != nil {
		t.Fatal(err)
	}
	if err := md.BackwardFull(act, dl, gw); err != nil {
		t.Fatal(err)
	}
	for _, ts := range gw.Tensors() {
		out = append(out, ts.Data...)
	}
	return out
}

// TestHalfBase: a base saved in BF16 (and one in F16) loads with its
// matrices kept 16-bit and memory-mapped, and gives bit for bit the
// logits, KV-cached decoding, LoRA gradients and full-parameter gradients
// of the same checkpoint widened to float32 at load (the engine before
// weights kept their dtype), for 1, 2, 3 and 7 threads, with and without
// the SIMD kernels; so do its unmapped forms (read into the heap, and from
// an fs.FS).
func TestHalfBase(t *testing.T) {
	for _, tc := range []struct {
		arch Arch
		dt   DType
	}{{Llama, BF16}, {Qwen2, BF16}, {Qwen3, BF16}, {Mistral, F16}, {Qwen3, F16}} {
		t.Run(string(tc.arch)+"-"+tc.dt.String(), func(t *testing.T) {
			c := halfConfig(tc.arch)
			dir := t.TempDir()
			if err := SaveAs(dir, randomWeights(t, c, 31), tc.dt); err != nil {
				t.Fatal(err)
			}
			ck, err := Open(dir)
			if err != nil {
				t.Fatal(err)
			}
			defer ck.Close()
			kept, err := ck.Read()
			if err != nil {
				t.Fatal(err)
			}
			wide, err := ck.ReadFloat32()
			if err != nil {
				t.Fatal(err)
			}
			heap, err := ck.read(true, false)
			if err != nil {
				t.Fatal(err)
			}
			fsys := fstest.MapFS{}
			for _, f := range []string{ConfigFile, WeightsFile} {
				b, err := os.ReadFile(filepath.Join(dir, f))
				if err != nil {
					t.Fatal(err)
				}
				fsys[f] = &fstest.MapFile{Data: b}
			}
			fromFS, err := LoadFS(fsys)
			if err != nil {
				t.Fatal(err)
			}

			// What each holds: 16-bit matrices (mapped only from the
			// file), float32 vectors, the same values.
			ws, want := c.specs(wide), c.specs(kept)
			for i, s := range c.specs(kept) {
				if s.mat == nil {
					if !sameBits(s.f32(), ws[i].f32()) {
						t.Fatalf("%s differs", s.name)
					}
					continue
				}
				if s.mat.DType() != tc.dt || !s.mat.Mapped() || s.f32() != nil {
					t.Fatalf("%s: kept as %v (mapped %v), want %v mapped", s.name, s.mat.DType(), s.mat.Mapped(), tc.dt)
				}
				if ws[i].mat.DType() != F32 {
					t.Fatalf("%s: ReadFloat32 gave %v", s.name, ws[i].mat.DType())
				}
				if !sameBits(s.values(), ws[i].f32()) {
					t.Fatalf("%s: 16-bit values differ from their float32 reading", s.name)
				}
				for _, o := range []*Weights{heap, fromFS} {
					om := c.specs(o)[i].mat
					if om.DType() != tc.dt || om.Mapped() || !sameBits(om.Float32(), want[i].values()) {
						t.Fatalf("%s: unmapped reading is %v (mapped %v) or differs", s.name, om.DType(), om.Mapped())
					}
				}
			}
			if c.Tied && &kept.Head.half[0] != &kept.Embed.half[0] {
				t.Fatal("tied head is not the embedding")
			}
			if got, want := ck.Bytes(), kept.Bytes(); got != want {
				t.Fatalf("Checkpoint.Bytes %d, the weights take %d", got, want)
			}
			if got, want := wide.Bytes(), 4*c.NumParams(); got != want {
				t.Fatalf("float32 weights take %d bytes, want %d", got, want)
			}
			if kept.Bytes() > wide.Bytes()*6/10 {
				t.Fatalf("16-bit weights take %d bytes, float32 %d", kept.Bytes(), wide.Bytes())
			}

			a := randomAdapter(t, c, 32)
			B, T := 3, 29
			ids, targets := randomTokens(33, B*T, c.Vocab), randomTokens(34, B*T, c.Vocab)
			model := func(w *Weights, th int) *Model {
				md, err := New(w, a, th)
				if err != nil {
					t.Fatal(err)
				}
				return md
			}
			ref := passResults(t, model(wide, 1), ids, targets, B, T)
			for _, th := range []int{1, 2, 3, 7} {
				s, p := withSIMD(t, func() []float32 { return passResults(t, model(kept, th), ids, targets, B, T) })
				if !sameBits(s, ref) || !sameBits(p, ref) {
					t.Fatalf("%d threads: the 16-bit base differs from its float32 reading (max |Δ| %g SIMD, %g Go)", th, maxAbsDiff(s, ref), maxAbsDiff(p, ref))
				}
			}
			for _, o := range []*Weights{heap, fromFS} {
				if got := passResults(t, model(o, 3), ids, targets, B, T); !sameBits(got, ref) {
					t.Fatal("the unmapped 16-bit base differs from its float32 reading")
				}
			}
			// Decoding through the KV cache gives the full forward's bits.
			checkCacheAndThreads(t, model(kept, 1), ids, B, T)
		})
	}
}

// TestHalfBaseMemory: a BF16 base read with its dtype kept adds almost
// nothing to the Go heap when mapped (the file's pages are the weights),
// its file size when read into the heap, and twice that when widened to
// float32.
func TestHalfBaseMemory(t *testing.T) {
	c := Config{Arch: Llama, Vocab: 4096, Hidden: 256, Intermediate: 512, Layers: 2, Heads: 4, KVHeads: 2,
		HeadDim: 64, MaxPositions: 64, NormEps: 1e-6, RopeTheta: 10000, BOS: -1, PAD: -1}
	dir := t.TempDir()
	if err := SaveAs(dir, randomWeights(t, c, 41), BF16); err != nil {
		t.Fatal(err)
	}
	st, err := os.Stat(filepath.Join(dir, WeightsFile))
	if err != nil {
		t.Fatal(err)
	}
	file := float64(st.Size())
	ck, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer ck.Close()
	heapGrowth := func(read func() (*Weights, error)) float64 {
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		w, err := read()
		if err != nil {
			t.Fatal(err)
		}
		runtime.GC()
		runtime.ReadMemStats(&after)
		runtime.KeepAlive(w)
		return (float64(after.HeapAlloc) - float64(before.HeapAlloc)) / file
	}
	mapped := heapGrowth(ck.Read)
	heap := heapGrowth(func() (*Weights, error) { return ck.read(true, false) })
	wide := heapGrowth(ck.ReadFloat32)
	t.Logf("Go heap growth / file size (%.1f MB): mapped %.3f, read into the heap %.3f, float32 %.3f", file/1e6, mapped, heap, wide)
	if mapped > 0.05 || heap < 0.9 || heap > 1.1 || wide < 1.9 || wide > 2.1 {
		t.Fatalf("heap growth / file size: mapped %.3f (want ≤ 0.05), heap %.3f (want ≈ 1), float32 %.3f (want ≈ 2)", mapped, heap, wide)
	}
}

// TestNarrow: narrow rounds to the nearest BF16 or F16 value, ties to
// even, and refuses what does not fit; every 16-bit finite value survives
// widening and narrowing.
func TestNarrow(t *testing.T) {
	for _, dt := range []DType{BF16, F16} {
		w := func(h uint16) float32 {
			f := make([]float32, 1)
			widenGo(dt, f, []uint16{h})
			return f[0]
		}
		for i := range 1 << 16 {
			h := uint16(i)
			if !halfFinite(dt, h) {
				continue
			}
			if got, ok := narrow(dt, w(h)); !ok || got != h {
				t.Fatalf("%v %#04x → %v → %#04x (ok %v)", dt, h, w(h), got, ok)
			}
			// The midpoint to the next value away from zero (exact in
			// float32) goes to the even one.
			if n := h + 1; halfFinite(dt, n) && n&0x7fff != 0 {
				mid := float32((float64(w(h)) + float64(w(n))) / 2)
				even := h
				if h&1 == 1 {
					even = n
				}
				if got, ok := narrow(dt, mid); !ok || got != even {
					t.Fatalf("%v: midpoint %v of %#04x and %#04x → %#04x, want %#04x", dt, mid, h, n, got, even)
				}
				// Just either side of the midpoint: the nearer value.
				below, above := math.Nextafter32(mid, w(h)), math.Nextafter32(mid, w(n))
				if got, _ := narrow(dt, below); got != h {
					t.Fatalf("%v: %v → %#04x, want %#04x", dt, below, got, h)
				}
				if got, _ := narrow(dt, above); got != n {
					t.Fatalf("%v: %v → %#04x, want %#04x", dt, above, got, n)
				}
			}
		}
		for _, bad := range []float32{float32(math.NaN()), float32(math.Inf(1)), float32(math.Inf(-1))} {
			if _, ok := narrow(dt, bad); ok {
				t.Fatalf("%v: %v accepted", dt, bad)
			}
		}
	}
	if _, ok := narrow(F16, 65520); ok { // the midpoint of 65504 and infinity rounds to even: infinity
		t.Fatal("65520 fits F16")
	}
	if h, ok := narrow(F16, -65519); !ok || h != 0xfbff {
		t.Fatalf("-65519 → %#04x, %v; want 0xfbff", h, ok)
	}
	if h, ok := narrow(F16, 0x1p-25); !ok || h != 0 { // half the smallest subnormal: ties to even, zero
		t.Fatalf("2⁻²⁵ → %#04x", h)
	}
	if _, ok := narrow(BF16, math.MaxFloat32); ok {
		t.Fatal("MaxFloat32 fits BF16")
	}
}

// TestSaveAs: SaveAs F32 writes exactly Save's files; SaveAs refuses a
// value F16 cannot hold, naming the tensor.
func TestSaveAs(t *testing.T) {
	w := randomWeights(t, testConfig(Qwen2), 51)
	a, b := t.TempDir(), t.TempDir()
	if err := Save(a, w); err != nil {
		t.Fatal(err)
	}
	if err := SaveAs(b, w, F32); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{WeightsFile, ConfigFile} {
		x, _ := os.ReadFile(filepath.Join(a, f))
		y, _ := os.ReadFile(filepath.Join(b, f))
		if len(x) == 0 || !bytes.Equal(x, y) {
			t.Fatalf("%s: SaveAs F32 differs from Save", f)
		}
	}
	w.Layers[1].W[DownProj].F32[3] = 1e6
	err := SaveAs(t.TempDir(), w, F16)
	if err == nil || !strings.Contains(err.Error(), "model.layers.1.mlp.down_proj.weight") {
		t.Fatalf("1e6 saved as F16: %v", err)
	}
}

// TestHalfLoadRefuses: a NaN or infinity in a 16-bit matrix is refused,
// naming the tensor and the index, mapped or not; a tensor at an odd
// offset (a header of odd length) is read instead of mapped, with the same
// values; replacing a mapped file leaves the weights mapped from it as
// they were.
func TestHalfLoadRefuses(t *testing.T) {
	const name = "model.layers.1.mlp.up_proj.weight"
	for _, tc := range []struct {
		dt   DType
		bits uint16
		want string
	}{{BF16, 0x7fc0, "NaN"}, {F16, 0xfc00, "-Inf"}} {
		dir := t.TempDir()
		if err := SaveAs(dir, randomWeights(t, testConfig(Llama), 61), tc.dt); err != nil {
			t.Fatal(err)
		}
		p := filepath.Join(dir, WeightsFile)
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		sf, err := safetensors.Parse(bytes.NewReader(b), int64(len(b)), safetensors.Limits{})
		if err != nil {
			t.Fatal(err)
		}
		info, _ := sf.Lookup(name)
		binary.LittleEndian.PutUint16(b[sf.DataOffset+info.Begin+2*7:], tc.bits)
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
		ck, err := Open(dir)
		if err != nil {
			t.Fatal(err)
		}
		for _, mapped := range []bool{true, false} {
			_, err := ck.read(true, mapped)
			if err == nil || !strings.Contains(err.Error(), `"`+name+`"[7]`) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("%v (mapped %v): %v", tc.dt, mapped, err)
			}
		}
		ck.Close()
	}

	// An odd header length puts every tensor at an odd offset.
	dir := t.TempDir()
	w := randomWeights(t, testConfig(Qwen3), 62)
	if err := SaveAs(dir, w, BF16); err != nil {
		t.Fatal(err)
	}
	want, err := Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(dir, WeightsFile)
	b, _ := os.ReadFile(p)
	n := binary.LittleEndian.Uint64(b)
	odd := append(binary.LittleEndian.AppendUint64(nil, n+1), b[8:8+n]...)
	odd = append(append(odd, ' '), b[8+n:]...)
	// Replaced, not rewritten in place: want's mapping keeps the old file.
	if err := os.WriteFile(p+".new", odd, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(p+".new", p); err != nil {
		t.Fatal(err)
	}
	got, err := Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	ws := want.Cfg.specs(want)
	for i, s := range got.Cfg.specs(got) {
		if s.mat != nil && (s.mat.DType() != BF16 || s.mat.Mapped()) {
			t.Fatalf("%s at an odd offset: %v, mapped %v", s.name, s.mat.DType(), s.mat.Mapped())
		}
		if !sameBits(s.values(), ws[i].values()) {
			t.Fatalf("%s differs when read from an odd offset", s.name)
		}
	}
}
