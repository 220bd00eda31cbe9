package main

import (
	"math"
	"testing"

	"github.com/zooai/gym/jobconf"
	"github.com/zooai/gym/llama"
)

// The screen's outer Adam: its first step moves every value by lr in the
// direction of the mean (bias-corrected m̂/√v̂ = sign), the second by the
// Adam formula on both means, and its state is its own (a new one starts
// from zero, as every epoch does).
func TestAdamOuter(t *testing.T) {
	a, err := llama.NewAdapter(llama.Config{Layers: 1, Hidden: 4, Heads: 1, KVHeads: 1, HeadDim: 4, Intermediate: 4, Vocab: 4, MaxPositions: 4}, 1, 1, []llama.Module{llama.QProj})
	if err != nil {
		t.Fatal(err)
	}
	n := len(jobconf.Flatten(a))
	d1, d2 := make([]float32, n), make([]float32, n)
	for i := range d1 {
		d1[i] = float32(i%3-1) * 1e-3 // -1e-3, 0, 1e-3, ...
		d2[i] = 2e-3
	}
	o := &adamOuter{lr: 0.01}
	if err := o.Apply(a, d1); err != nil {
		t.Fatal(err)
	}
	got := jobconf.Flatten(a)
	for i, x := range d1 {
		want := 0.01 * float64(x) / (math.Abs(float64(x)) + 1e-8)
		if math.Abs(float64(got[i])-want) > 1e-6 {
			t.Fatalf("step 1, value %d: %v, want %v", i, got[i], want)
		}
	}
	if err := o.Apply(a, d2); err != nil {
		t.Fatal(err)
	}
	got2 := jobconf.Flatten(a)
	for i := range d1 {
		g1, g2 := float64(d1[i]), float64(d2[i])
		m := (0.9*0.1*g1 + 0.1*g2) / (1 - 0.81)
		v := (0.99*0.01*g1*g1 + 0.01*g2*g2) / (1 - 0.99*0.99)
		want := float64(got[i]) + 0.01*m/(math.Sqrt(v)+1e-8)
		if math.Abs(float64(got2[i])-want) > 1e-5 {
			t.Fatalf("step 2, value %d: %v, want %v", i, got2[i], want)
		}
	}
}
