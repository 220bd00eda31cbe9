package sft_test

import (
	"context"
	"math"
	"testing"

	"github.com/zooai/gym/model/basemodel"
	"github.com/zooai/gym/model/llama"
	"github.com/zooai/gym/model/sft"
	"github.com/zooai/gym/model/tokenizer"
)

func smallConfig() sft.Config {
	c := basemodel.Recipe()
	c.Model.Hidden, c.Model.Intermediate, c.Model.Layers, c.Model.Heads, c.Model.KVHeads, c.Model.HeadDim = 16, 32, 1, 2, 1, 8
	c.BugFrac, c.Steps, c.Batch, c.LR, c.Warmup, c.Seed = 0.5, 60, 16, 1e-2, 5, 3
	return c
}

func tok(t testing.TB) *tokenizer.Tokenizer {
	tk, err := basemodel.Tokenizer()
	if err != nil {
		t.Fatal(err)
	}
	return tk
}

func sameBits(a, b []float32) bool {
	for i := range a {
		if math.Float32bits(a[i]) != math.Float32bits(b[i]) {
			return false
		}
	}
	return len(a) == len(b)
}

// TestRunLearnsAndIsDeterministic: the loss falls, and runs on 1, 2 and 3
// threads give the same weights bit for bit.
func TestRunLearnsAndIsDeterministic(t *testing.T) {
	var losses []float64
	c := smallConfig()
	_, err := sft.Run(context.Background(), c, tok(t), 1, func(p sft.Progress) { losses = append(losses, p.Loss) })
	if err != nil {
		t.Fatal(err)
	}
	first := (losses[0] + losses[1] + losses[2]) / 3
	last := (losses[len(losses)-1] + losses[len(losses)-2] + losses[len(losses)-3]) / 3
	t.Logf("loss %.3f → %.3f", first, last)
	if !(last < 0.8*first) {
		t.Fatalf("loss went from %.3f to %.3f", first, last)
	}
	c.Steps = 8
	ref, err := sft.Run(context.Background(), c, tok(t), 1, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, th := range []int{2, 3} {
		w2, err := sft.Run(context.Background(), c, tok(t), th, nil)
		if err != nil {
			t.Fatal(err)
		}
		a, b := ref.Tensors(), w2.Tensors()
		for i := range a {
			if !sameBits(a[i].Data, b[i].Data) {
				t.Fatalf("%d threads: %s differs from 1 thread", th, a[i].Name)
			}
		}
	}
}

// TestInit: matrices are normal(0, std) (checked by their sample
// moments), norms one, and the draw depends on the seed alone.
func TestInit(t *testing.T) {
	c := basemodel.Recipe().Model.Config()
	w, err := sft.Init(c, 0.02, 7)
	if err != nil {
		t.Fatal(err)
	}
	w2, _ := sft.Init(c, 0.02, 7)
	w3, _ := sft.Init(c, 0.02, 8)
	for i, ts := range w.Tensors() {
		if !sameBits(ts.Data, w2.Tensors()[i].Data) {
			t.Fatalf("%s: two draws with one seed differ", ts.Name)
		}
		if len(ts.Shape) == 1 {
			for _, v := range ts.Data {
				if v != 1 {
					t.Fatalf("%s: norm gain %g", ts.Name, v)
				}
			}
			continue
		}
		if sameBits(ts.Data, w3.Tensors()[i].Data) {
			t.Fatalf("%s: another seed gives the same draw", ts.Name)
		}
		var s, s2 float64
		for _, v := range ts.Data {
			s += float64(v)
			s2 += float64(v) * float64(v)
		}
		n := float64(len(ts.Data))
		mean, std := s/n, math.Sqrt(s2/n)
		if math.Abs(mean) > 5*0.02/math.Sqrt(n) || math.Abs(std-0.02) > 0.002 {
			t.Errorf("%s: mean %.4g std %.4g, want 0 and 0.02", ts.Name, mean, std)
		}
	}
}

func TestValidate(t *testing.T) {
	c := smallConfig()
	c.Model.MaxPositions = 8 // sort needs 11
	if _, err := sft.Run(context.Background(), c, tok(t), 1, nil); err == nil {
		t.Fatal("context too short for the task accepted")
	}
	c = smallConfig()
	c.Tasks = []string{"nope"}
	if _, err := sft.Run(context.Background(), c, tok(t), 1, nil); err == nil {
		t.Fatal("unknown task accepted")
	}
	c = smallConfig()
	c.Model.Vocab = 20
	if _, err := sft.Run(context.Background(), c, tok(t), 1, nil); err == nil {
		t.Fatal("a tokenizer of another vocabulary accepted")
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := sft.Run(ctx, smallConfig(), tok(t), 1, nil); err == nil {
		t.Fatal("cancelled context ignored")
	}
}

func BenchmarkRecipeStep(b *testing.B) {
	c := basemodel.Recipe()
	c.Steps = 3
	tk := tok(b)
	for b.Loop() {
		if _, err := sft.Run(context.Background(), c, tk, 2, nil); err != nil {
			b.Fatal(err)
		}
	}
}

var _ = llama.Llama
