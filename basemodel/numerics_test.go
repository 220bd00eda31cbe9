package basemodel

import (
	"context"
	"crypto/sha3"
	"encoding/binary"
	"encoding/hex"
	"math"
	"runtime"
	"testing"

	"github.com/zooai/gym/sft"
)

// goldenNumerics is the digest of the weights after a tiny pre-training
// run. If the engine's kernels change their rounding (summation order,
// fusion), this changes, and so would a regenerated built-in base: run
// `go generate ./basemodel`, then update this value.
const goldenNumerics = "1da1a6207732d6e68f96d36bda14a1ddf2b98fd011ec6146269723b8ef586453"

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
