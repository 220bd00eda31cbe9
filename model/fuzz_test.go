package model

import (
	"bytes"
	"testing"
)

// FuzzReadAdapter: arbitrary bytes never panic, and whatever parses writes
// back to a file that parses to the same tensors.
func FuzzReadAdapter(f *testing.F) {
	a, _ := InitAdapter(tinyCfg, LoRAConfig{Rank: 2, Alpha: 4, Targets: []string{"q", "fc1"}}, 1)
	var buf bytes.Buffer
	if err := WriteAdapter(&buf, a, nil); err != nil {
		f.Fatal(err)
	}
	f.Add(buf.Bytes())
	w, _ := Init(Config{Vocab: 3, Ctx: 2, Dim: 2, Layers: 1, Heads: 1, Hidden: 2}, 1)
	buf.Reset()
	if err := WriteWeights(&buf, w, nil); err != nil {
		f.Fatal(err)
	}
	f.Add(buf.Bytes())
	f.Fuzz(func(t *testing.T, b []byte) {
		if w, _, err := ReadWeights(b); err == nil {
			var out bytes.Buffer
			if err := WriteWeights(&out, w, nil); err != nil {
				t.Fatal(err)
			}
			w2, _, err := ReadWeights(out.Bytes())
			if err != nil || Digest(w2.Tensors()) != Digest(w.Tensors()) {
				t.Fatalf("weights did not round-trip: %v", err)
			}
		}
		if a, _, err := ReadAdapter(b); err == nil {
			var out bytes.Buffer
			if err := WriteAdapter(&out, a, nil); err != nil {
				t.Fatal(err)
			}
			a2, _, err := ReadAdapter(out.Bytes())
			if err != nil || Digest(a2.Tensors()) != Digest(a.Tensors()) {
				t.Fatalf("adapter did not round-trip: %v", err)
			}
		}
	})
}
