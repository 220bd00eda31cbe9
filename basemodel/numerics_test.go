package basemodel

import (
	"context"
	"encoding/hex"
	"runtime"
	"testing"

	"github.com/zooai/gym/model"
	"github.com/zooai/gym/sft"
)

// goldenNumerics is the digest of the weights after a tiny pre-training
// run. If the model's kernels change their rounding (summation order,
// fusion), this changes, and so would a regenerated base.safetensors: run
// `go generate ./basemodel`, then update this value.
const goldenNumerics = "660533879bad0c70979605113d978c6fae63405b011984b30cce234687301ad0"

func TestNumericsMatchShippedBase(t *testing.T) {
	if runtime.GOARCH != "amd64" {
		t.Skip("the golden digest was recorded on amd64; other architectures may fuse multiply-adds")
	}
	c := Recipe()
	c.Model = model.Config{Vocab: c.Model.Vocab, Ctx: c.Model.Ctx, Dim: 16, Layers: 2, Heads: 2, Hidden: 32}
	c.Steps, c.Batch = 3, 8
	w, err := sft.Run(context.Background(), c, 2, nil)
	if err != nil {
		t.Fatal(err)
	}
	d := model.Digest(w.Tensors())
	if got := hex.EncodeToString(d[:]); got != goldenNumerics {
		t.Fatalf("numerics changed (digest %s, golden %s): regenerate base.safetensors with `go generate ./basemodel` and update goldenNumerics", got, goldenNumerics)
	}
}
