package jobconf

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"errors"
	"math"
	"testing"
	"time"

	"github.com/zooai/gym/internal/tinyllama"
	"github.com/zooai/gym/model/llama"
	"github.com/zooai/gym/protocol/delta"
)

// TestDecodeRoundTrip: what Encode writes, Decode (ordered, against the
// job's template) and DecodeAny (the config inferred) read back exactly;
// tampered tensors are refused with the error that names the fault.
func TestDecodeRoundTrip(t *testing.T) {
	mc := tinyllama.Config()
	targets := []llama.Module{llama.QProj, llama.VProj, llama.DownProj}
	const alpha = 4
	a, err := llama.InitAdapter(mc, 2, alpha, targets, 3)
	if err != nil {
		t.Fatal(err)
	}
	for _, x := range a.Views() {
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
	for i, x := range d.Tensors {
		if want := a.Views()[i].Name; x.Name != want {
			t.Fatalf("tensor %d is named %q, want PEFT's %q", i, x.Name, want)
		}
	}
	if d.Tensors[0].Name != "base_model.model.model.layers.0.self_attn.q_proj.lora_A.weight" {
		t.Fatalf("first tensor %q", d.Tensors[0].Name)
	}
	got, err := Decode(a.Zeroed(), d.Tensors)
	if err != nil || Digest(got) != Digest(a) {
		t.Fatalf("Decode: %v, same = %v", err, err == nil && Digest(got) == Digest(a))
	}
	inferred, err := DecodeAny(d.Tensors, mc, alpha)
	if err != nil || Digest(inferred) != Digest(a) || inferred.Rank != 2 || len(inferred.Targets) != 3 || !inferred.SameShape(a) {
		t.Fatalf("DecodeAny: %v", err)
	}
	other, _ := llama.NewAdapter(mc, 3, alpha, targets)
	if _, err := Decode(other, d.Tensors); !errors.Is(err, ErrShape) {
		t.Fatalf("Decode against another rank: %v, want ErrShape", err)
	}
	ts := append([]delta.Tensor(nil), d.Tensors...)
	ts[0], ts[1] = ts[1], ts[0]
	if _, err := Decode(a.Zeroed(), ts); !errors.Is(err, ErrShape) {
		t.Fatalf("Decode out of order: %v, want ErrShape", err)
	}
	if _, err := DecodeAny(ts, mc, alpha); err != nil {
		t.Fatalf("DecodeAny out of order: %v", err)
	}
	dup := append([]delta.Tensor(nil), ts...)
	dup[1] = dup[0]
	if _, err := DecodeAny(dup, mc, alpha); !errors.Is(err, ErrShape) {
		t.Fatalf("DecodeAny with a tensor twice: %v, want ErrShape", err)
	}
	for _, name := range []string{"lora.blocks.0.attn.q.A.weight", "base_model.model.model.layers.0.mlp.q_proj.lora_A.weight",
		"base_model.model.model.layers.x.self_attn.q_proj.lora_A.weight", "base_model.model.model.layers.0.self_attn.q_proj.lora_C.weight"} {
		odd := append([]delta.Tensor(nil), ts...)
		odd[0].Name = name
		if _, err := DecodeAny(odd, mc, alpha); !errors.Is(err, ErrShape) {
			t.Fatalf("DecodeAny with a tensor named %q: %v, want ErrShape", name, err)
		}
	}
	bad := append([]byte(nil), ts[2].Data...)
	copy(bad, llama.Float32Bytes([]float32{float32(math.Inf(1))}))
	ts[2].Data = bad
	if _, err := DecodeAny(ts, mc, alpha); !errors.Is(err, ErrNonFinite) {
		t.Fatalf("DecodeAny with +Inf: %v, want ErrNonFinite", err)
	}
}

// FuzzDecodeAny gives DecodeAny a valid delta's tensors with one renamed
// and reshaped: it must not panic, and what it accepts has exactly the
// tensors it was given.
func FuzzDecodeAny(f *testing.F) {
	mc := tinyllama.Config()
	a, err := llama.InitAdapter(mc, 2, 4, []llama.Module{llama.QProj, llama.DownProj}, 1)
	if err != nil {
		f.Fatal(err)
	}
	var base []delta.Tensor
	for _, v := range a.Views() {
		base = append(base, delta.Tensor{Name: v.Name, DType: delta.FP32, Shape: []uint64{uint64(v.Shape[0]), uint64(v.Shape[1])}, Data: llama.Float32Bytes(v.Data)})
	}
	f.Add(0, base[0].Name, uint64(2), uint64(32))
	f.Add(1, "base_model.model.model.layers.1.mlp.down_proj.lora_A.weight", uint64(1<<40), uint64(64))
	f.Add(3, "base_model.model.model.layers.99999.self_attn.k_proj.lora_B.weight", uint64(0), uint64(2))
	f.Fuzz(func(t *testing.T, i int, name string, d0, d1 uint64) {
		ts := append([]delta.Tensor(nil), base...)
		i = ((i % len(ts)) + len(ts)) % len(ts)
		ts[i].Name, ts[i].Shape = name, []uint64{d0, d1}
		got, err := DecodeAny(ts, mc, 4)
		if err != nil {
			return
		}
		if len(got.Views()) != len(ts) {
			t.Fatalf("accepted %d tensors as an adapter of %d", len(ts), len(got.Views()))
		}
	})
}
