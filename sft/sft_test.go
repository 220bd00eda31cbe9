package sft

import (
	"bytes"
	"context"
	"testing"

	"github.com/zooai/gym/model"
)

func smallConfig() Config {
	return Config{
		Model: model.Config{Vocab: 14, Ctx: 11, Dim: 16, Layers: 1, Heads: 2, Hidden: 32},
		Tasks: []string{"addition", "sort"}, BugFrac: 0.5, Steps: 40, Batch: 16, LR: 3e-3, Warmup: 5, Seed: 3,
	}
}

// TestRunLearnsAndIsDeterministic: the loss falls, and two runs on
// different thread counts give the same weights bit for bit.
func TestRunLearnsAndIsDeterministic(t *testing.T) {
	var losses []float64
	w1, err := Run(context.Background(), smallConfig(), 1, func(p Progress) { losses = append(losses, p.Loss) })
	if err != nil {
		t.Fatal(err)
	}
	first := (losses[0] + losses[1] + losses[2]) / 3
	last := (losses[len(losses)-1] + losses[len(losses)-2] + losses[len(losses)-3]) / 3
	if !(last < 0.8*first) {
		t.Fatalf("loss went from %.3f to %.3f", first, last)
	}
	w2, err := Run(context.Background(), smallConfig(), 2, nil)
	if err != nil {
		t.Fatal(err)
	}
	a, b := w1.Tensors(), w2.Tensors()
	for i := range a {
		if !bytes.Equal(model.Float32Bytes(a[i].Data), model.Float32Bytes(b[i].Data)) {
			t.Fatalf("%s differs between runs", a[i].Name)
		}
	}
}

func TestValidate(t *testing.T) {
	c := smallConfig()
	c.Model.Ctx = 8 // sort needs 11
	if _, err := Run(context.Background(), c, 1, nil); err == nil {
		t.Fatal("context too short for the task accepted")
	}
	c = smallConfig()
	c.Tasks = []string{"nope"}
	if _, err := Run(context.Background(), c, 1, nil); err == nil {
		t.Fatal("unknown task accepted")
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := Run(ctx, smallConfig(), 1, nil); err == nil {
		t.Fatal("cancelled context ignored")
	}
}
