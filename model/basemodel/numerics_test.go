package basemodel

import (
	"context"
	"crypto/sha3"
	"encoding/binary"
	"encoding/hex"
	"math"
	"runtime"
	"testing"

	"github.com/zooai/gym/model/sft"
)

// goldenNumerics is the digest of the weights after a tiny pre-training
// run. If the engine's kernels change their rounding (summation order,
// fusion), this changes, and so would a regenerated built-in base: run
// `go generate ./model/basemodel`, then update this value.
const goldenNumerics = "40bcadcfb636b4f0c6b86c652132816810e34728df280bd53c05abe42ec00961"

func TestNumericsMatchShippedBase(t *testing.T) {
	if runtime.GOARCH != "amd64" {
		t.Skip("the golden digest was recorded on amd64; other architectures may fuse multiply-adds")
	}
	c := Recipe()
	c.Model.Hidden, c.Model.Intermediate, c.Model.Heads, c.Model.KVHeads, c.Model.HeadDim = 16, 32, 2, 2, 8
	c.Steps, c.Batch = 3, 8
	tok, err := Tokenizer()
	if err != nil {
		t.Fatal(err)
	}
	w, err := sft.Run(context.Background(), c, tok, 2, nil)
	if err != nil {
		t.Fatal(err)
	}
	h := sha3.New256()
	var b [4]byte
	for _, ts := range w.Tensors() {
		h.Write([]byte(ts.Name))
		for _, v := range ts.Data {
			binary.LittleEndian.PutUint32(b[:], math.Float32bits(v))
			h.Write(b[:])
		}
	}
	if got := hex.EncodeToString(h.Sum(nil)); got != goldenNumerics {
		t.Fatalf("numerics changed (digest %s, golden %s): regenerate the built-in base with `go generate ./basemodel` and update goldenNumerics", got, goldenNumerics)
	}
}
