package jobconf

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"errors"
	"math"
	"testing"
	"time"

	"github.com/zooai/gym/delta"
	"github.com/zooai/gym/model"
)

// TestDecodeRoundTrip: what Encode writes, Decode (ordered, against the
// job's template) and DecodeAny (the config inferred) read back exactly;
// tampered tensors are refused with the error that names the fault.
func TestDecodeRoundTrip(t *testing.T) {
	mc := model.Config{Vocab: 5, Ctx: 4, Dim: 4, Layers: 2, Heads: 2, Hidden: 8}
	lc := model.LoRAConfig{Rank: 2, Alpha: 4, Targets: []string{"q", "v", "fc2"}}
	a, err := model.InitAdapter(mc, lc, 3)
	if err != nil {
		t.Fatal(err)
	}
	for _, x := range a.Tensors() {
		for k := range x.Data {
			x.Data[k] += float32(k) / 8
		}
	}
	_, key, _ := ed25519.GenerateKey(nil)
	file, err := Encode(context.Background(), key, SyncDelta{Job: "j", Node: "n", Epoch: 1, Sync: 1, Step: 5, Time: time.Unix(1, 0), Delta: a})
	if err != nil {
		t.Fatal(err)
	}
	d, err := delta.Read(context.Background(), bytes.NewReader(file), delta.DefaultLimits())
	if err != nil {
		t.Fatal(err)
	}
	got, err := Decode(a.ZeroLike(), d.Tensors)
	if err != nil || Digest(got) != Digest(a) {
		t.Fatalf("Decode: %v, same = %v", err, err == nil && Digest(got) == Digest(a))
	}
	inferred, err := DecodeAny(d.Tensors, mc, lc.Alpha)
	if err != nil || Digest(inferred) != Digest(a) || inferred.Cfg.Rank != 2 || len(inferred.Cfg.Targets) != 3 {
		t.Fatalf("DecodeAny: %v", err)
	}
	other, _ := model.NewAdapter(mc, model.LoRAConfig{Rank: 3, Alpha: 4, Targets: lc.Targets})
	if _, err := Decode(other, d.Tensors); !errors.Is(err, ErrShape) {
		t.Fatalf("Decode against another rank: %v, want ErrShape", err)
	}
	ts := append([]delta.Tensor(nil), d.Tensors...)
	ts[0], ts[1] = ts[1], ts[0]
	if _, err := Decode(a.ZeroLike(), ts); !errors.Is(err, ErrShape) {
		t.Fatalf("Decode out of order: %v, want ErrShape", err)
	}
	if _, err := DecodeAny(ts, mc, lc.Alpha); err != nil {
		t.Fatalf("DecodeAny out of order: %v", err)
	}
	bad := append([]byte(nil), ts[2].Data...)
	copy(bad, model.Float32Bytes([]float32{float32(math.Inf(1))}))
	ts[2].Data = bad
	if _, err := DecodeAny(ts, mc, lc.Alpha); !errors.Is(err, ErrNonFinite) {
		t.Fatalf("DecodeAny with +Inf: %v, want ErrNonFinite", err)
	}
}
