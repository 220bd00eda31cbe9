package worker

import (
	"context"
	"crypto/ed25519"
	"crypto/sha256"
	"errors"
	"log/slog"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/zooai/gym/protocol/attack"
	"github.com/zooai/gym/protocol/attack/attacktest"
	"github.com/zooai/gym/protocol/merge"
)

// attacker is a worker mounting name with the honest updates hs shown
// through Peek.
func attacker(name string, hs [][]float32, seed string, p AttackParams, colluders int) *Worker {
	s := sha256.Sum256([]byte("attack-test:" + seed))
	return &Worker{c: Config{Attack: name, AttackParams: p, Colluders: colluders, Key: ed25519.NewKeyFromSeed(s[:]),
		Peek:   func(context.Context, string, int, int) ([][]float32, error) { return hs, nil },
		Logger: slog.New(slog.DiscardHandler)}}
}

func l2(a, b []float32) float64 {
	var s float64
	for i := range a {
		d := float64(a[i])
		if b != nil {
			d -= float64(b[i])
		}
		s += d * d
	}
	return math.Sqrt(s)
}

// The in-bound attacks at their defaults — ALIE z = 1.5, IPM ε = 2 — and
// at the strengths set, the old z = 0 and ε = 0.1 among them; each
// clipped to the bound.
func TestInBoundStrengths(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	hs := attacktest.Batch(r, 3, 512, 1)
	own := hs[0]
	ctx := context.Background()
	clipped := func(v []float32, err error) []float32 {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		attack.Clip(v, 100)
		return v
	}
	zero, two := 0.0, 2.5
	for _, c := range []struct {
		name string
		p    AttackParams
		want []float32
	}{
		{AttackALIE, AttackParams{}, clipped(attack.ALIE(hs, 1.5))},
		{AttackALIE, AttackParams{ALIEZ: &zero}, clipped(attack.ALIE(hs, 0))},
		{AttackALIE, AttackParams{ALIEZ: &two}, clipped(attack.ALIE(hs, 2.5))},
		{AttackIPM, AttackParams{}, clipped(attack.IPM(hs, 2))},
		{AttackIPM, AttackParams{IPMEpsilon: 0.1}, clipped(attack.IPM(hs, 0.1))},
		{AttackMimic, AttackParams{}, clipped(attack.Mimic(hs))},
	} {
		w := attacker(c.name, hs, "a", c.p, 1)
		if err := c.p.Check(c.name); err != nil {
			t.Fatal(err)
		}
		v, err := w.inBound(ctx, own, "job", 1, 1, 100, 4)
		if err != nil || !slices.Equal(v, c.want) {
			t.Errorf("%s %+v: %d values, %v; not the expected vector", c.name, c.p, len(v), err)
		}
	}
	// Clipped to the bound.
	w := attacker(AttackIPM, hs, "a", AttackParams{IPMEpsilon: 50}, 1)
	if v, err := w.inBound(ctx, own, "job", 1, 1, 1, 4); err != nil || math.Abs(l2(v, nil)-1) > 1e-5 {
		t.Errorf("ipm ε = 50 clipped to 1: norm %v, %v", l2(v, nil), err)
	}
}

// The noisy mimic is the first honest update plus noise of 0.6 × the
// typical distance (or the scale set); repeatable for one worker and
// slot, and drawn apart for two colluders or two syncs.
func TestInBoundNoisyMimic(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	hs := attacktest.Batch(r, 3, 512, 1)
	typ, _ := attack.TypicalDistance(hs)
	ctx := context.Background()
	for _, scale := range []float64{0, 0.3, 1.2} {
		w := attacker(AttackMimicNoise, hs, "a", AttackParams{MimicNoise: scale}, 2)
		v, err := w.inBound(ctx, hs[0], "job", 1, 2, 1e9, 4)
		if err != nil {
			t.Fatal(err)
		}
		want := cmpOr(scale, 0.6) * typ
		if d := l2(v, hs[0]); math.Abs(d-want) > 1e-4*typ {
			t.Errorf("scale %v: %v from the copied update, want %v", scale, d, want)
		}
	}
	w := attacker(AttackMimicNoise, hs, "a", AttackParams{}, 2)
	a1, _ := w.inBound(ctx, hs[0], "job", 1, 2, 1e9, 4)
	a2, _ := w.inBound(ctx, hs[0], "job", 1, 2, 1e9, 4)
	a3, _ := w.inBound(ctx, hs[0], "job", 1, 3, 1e9, 4)
	b1, _ := attacker(AttackMimicNoise, hs, "b", AttackParams{}, 2).inBound(ctx, hs[0], "job", 1, 2, 1e9, 4)
	if !slices.Equal(a1, a2) || slices.Equal(a1, a3) || slices.Equal(a1, b1) {
		t.Errorf("same worker and slot equal %v, another sync equal %v, another worker equal %v; want true, false, false",
			slices.Equal(a1, a2), slices.Equal(a1, a3), slices.Equal(a1, b1))
	}
	// Two colluders are no near-copies of each other either.
	if d := l2(a1, b1); d < 0.5*typ {
		t.Errorf("two colluders %v apart, under 0.5 × the typical distance %v", d, typ)
	}
}

func cmpOr(a, b float64) float64 {
	if a == 0 {
		return b
	}
	return a
}

// Adaptive ALIE sends a vector the judge's outlier tests do not flag
// among the honest updates, further from the mean than the default z's;
// with two colluders (identical vectors: near-copies whatever z) it falls
// back to the default z.
func TestInBoundAdaptiveALIE(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	ctx := context.Background()
	for trial := range 5 {
		all := attacktest.Batch(r, 4, 1024, 0.5+r.Float64())
		hs, fourth := all[:3], all[3]
		c := 3 * l2(hs[0], nil)
		v, err := attacker(AttackALIEAdaptive, hs, "a", AttackParams{}, 1).inBound(ctx, hs[0], "job", 1, 1, c, 4)
		if err != nil {
			t.Fatal(err)
		}
		in := []merge.Input{{Node: "h0", Vec: hs[0]}, {Node: "h1", Vec: hs[1]}, {Node: "h2", Vec: hs[2]}, {Node: "x", Vec: v}}
		out, err := merge.Outliers(merge.OutlierConfig{}, in)
		if err != nil {
			t.Fatal(err)
		}
		if i := slices.IndexFunc(out, func(o merge.Outlier) bool { return o.Node == "x" }); i >= 0 {
			t.Fatalf("trial %d: adaptive ALIE flagged: %s", trial, out[i].Reason)
		}
		mean, _, _ := attack.Moments(hs)
		fixed, _ := attack.ALIE(hs, 1.5)
		mf := make([]float32, len(mean))
		for j := range mf {
			mf[j] = float32(mean[j])
		}
		if l2(v, mf) <= l2(fixed, mf) {
			t.Errorf("trial %d: adaptive ALIE %v from the mean, the default z's %v: want further", trial, l2(v, mf), l2(fixed, mf))
		}
		// Its test is the judge's: it refuses a near-copy and a far vector,
		// accepts an honest one.
		hidden := unflagged(merge.OutlierConfig{}, hs, 1)
		far := slices.Clone(hs[0])
		for j := range far {
			far[j] *= 5
		}
		for _, x := range []struct {
			v    []float32
			want bool
		}{{hs[0], false}, {far, false}, {fourth, true}} {
			if ok, err := hidden(x.v); err != nil || ok != x.want {
				t.Errorf("unflagged: %v, %v; want %v", ok, err, x.want)
			}
		}
	}
	hs := attacktest.Batch(r, 5, 1024, 1)
	v, err := attacker(AttackALIEAdaptive, hs, "a", AttackParams{}, 2).inBound(ctx, hs[0], "job", 1, 1, 1e9, 7)
	want, _ := attack.ALIE(hs, attack.DefaultALIEZ(7, 2))
	if err != nil || !slices.Equal(v, want) {
		t.Errorf("two colluders: %v; want the default z's vector", err)
	}
}

func TestAttackParamsCheck(t *testing.T) {
	z, nan := 1.0, math.NaN()
	for _, c := range []struct {
		name string
		p    AttackParams
		ok   bool
	}{
		{AttackALIE, AttackParams{}, true},
		{AttackALIE, AttackParams{ALIEZ: &z}, true},
		{AttackIPM, AttackParams{IPMEpsilon: 0.5}, true},
		{AttackMimicNoise, AttackParams{MimicNoise: 1}, true},
		{"", AttackParams{}, true},
		{AttackALIEAdaptive, AttackParams{ALIEZ: &z}, false},
		{AttackIPM, AttackParams{ALIEZ: &z}, false},
		{AttackALIE, AttackParams{ALIEZ: &nan}, false},
		{AttackALIE, AttackParams{IPMEpsilon: 2}, false},
		{AttackIPM, AttackParams{IPMEpsilon: -1}, false},
		{AttackIPM, AttackParams{IPMEpsilon: math.Inf(1)}, false},
		{AttackMimic, AttackParams{MimicNoise: 0.6}, false},
		{AttackMimicNoise, AttackParams{MimicNoise: -0.6}, false},
		{"", AttackParams{MimicNoise: 0.6}, false},
	} {
		err := c.p.Check(c.name)
		if (err == nil) != c.ok || (err != nil && !errors.Is(err, ErrConfig)) {
			t.Errorf("Check(%q) of %+v: %v, want ok %v", c.name, c.p, err, c.ok)
		}
	}
	for _, a := range []string{AttackALIEAdaptive, AttackMimicNoise} {
		if err := CheckAttack(a); err != nil || !NeedsPeek(a) {
			t.Errorf("%s: CheckAttack %v, NeedsPeek %v", a, err, NeedsPeek(a))
		}
	}
	if err := CheckAttack("alie-adaptiv"); err == nil || !strings.Contains(err.Error(), "alie-adaptive") || !strings.Contains(err.Error(), "mimic-noise") {
		t.Errorf("unknown attack: %v, want the list with the new ones", err)
	}
}
