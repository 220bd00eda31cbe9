package checkpkg_test

import (
	"context"
	"crypto/ed25519"
	"encoding/hex"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/zooai/gym/model/basemodel"
	"github.com/zooai/gym/model/llama"
	"github.com/zooai/gym/model/peft"
	"github.com/zooai/gym/protocol/checkpkg"
	"github.com/zooai/gym/protocol/jobconf"
	"github.com/zooai/gym/protocol/jobspec"
	"github.com/zooai/gym/protocol/trace"
)

// fixture is a package's inputs for node key's sync 2 of epoch 1 of job j.
type fixture struct {
	key    ed25519.PrivateKey
	node   string
	base   *basemodel.Base
	starts []*llama.Adapter
	in     checkpkg.Inputs
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	ctx := context.Background()
	base, err := basemodel.Builtin()
	if err != nil {
		t.Fatal(err)
	}
	spec := jobspec.Spec{Model: "builtin", Dataset: "addition", Epochs: 1, MinNodes: 3, GSPO: jobspec.DefaultGSPO()}
	spec.GSPO.LoRARank, spec.GSPO.LoRAAlpha = 4, 8
	plan, err := jobconf.FromSpec("j", spec, base)
	if err != nil {
		t.Fatal(err)
	}
	a0, err := plan.InitialAdapter(base.Weights.Cfg)
	if err != nil {
		t.Fatal(err)
	}
	a1 := a0.Clone()
	a1.Views()[0].Data[0] += 0.25
	_, key, _ := ed25519.GenerateKey(nil)
	node := hex.EncodeToString(key.Public().(ed25519.PublicKey))
	f := &fixture{key: key, node: node, base: base, starts: []*llama.Adapter{a0, a1}}
	var bundles [][]byte
	var cids []string
	for s := 1; s <= 2; s++ {
		set := &trace.Set{Header: trace.Header{Format: trace.Format, Version: trace.Version, Model: "builtin", Dataset: "addition",
			Job: "j", Node: node, Epoch: 1, Step: s, Temperature: 1, Prompts: 1, GroupSize: 1, Vocab: 16},
			Seqs: []trace.Sequence{{PromptText: "^1+2=", Answer: "3", PromptIDs: []int{1, 2}, Completion: "3", CompletionIDs: []int{3}, LogProbs: []float32{-0.5}, Reward: 1}}}
		tr, err := jobconf.EncodeTraces(ctx, []*trace.Set{set})
		if err != nil {
			t.Fatal(err)
		}
		bundles, cids = append(bundles, tr.Bundle), append(cids, tr.CID)
	}
	upd := a0.Zeroed()
	upd.Views()[1].Data[2] = 0.5
	file := f.delta(t, 100, jobconf.Digest(a1), cids[1], upd)
	f.in = checkpkg.Inputs{Info: checkpkg.Info{Job: "j", Epoch: 1, Step: 100, Node: node, Sync: 2, Digest: checkpkg.FileDigest(file), Traces: cids},
		Delta: file, Bundles: bundles, Starts: f.starts, Card: peft.Card{BaseModel: "builtin", Job: "j", Epoch: 1}}
	return f
}

func (f *fixture) delta(t *testing.T, step uint64, base, traces string, upd *llama.Adapter) []byte {
	t.Helper()
	b, err := jobconf.Encode(context.Background(), f.key, jobconf.SyncDelta{Job: "j", Node: f.node, Epoch: 1, Sync: 2, Step: step, Sequence: 2,
		Base: base, ClaimedLoss: 0.5, Samples: 8, Time: time.Unix(1_800_000_000, 0), Delta: upd, Backend: "torch", Traces: traces})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func (f *fixture) write(t *testing.T, in checkpkg.Inputs) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "pkg")
	if err := checkpkg.Write(dir, in); err != nil {
		t.Fatal(err)
	}
	return dir
}

// TestRoundTrip: a package reads back as written, verified.
func TestRoundTrip(t *testing.T) {
	f := newFixture(t)
	l, err := checkpkg.Read(context.Background(), f.write(t, f.in), f.base.Weights.Cfg)
	if err != nil {
		t.Fatal(err)
	}
	if l.Backend != "torch" || l.Meta.ClaimedLoss != 0.5 || len(l.Traces) != 2 || len(l.Starts) != 2 {
		t.Fatalf("read back %+v", l)
	}
	if jobconf.Digest(l.Starts[1]) != jobconf.Digest(f.starts[1]) || l.Delta.Views()[1].Data[2] != 0.5 {
		t.Fatal("the starts or the delta changed on the way")
	}
}

// TestRefusals: a package whose parts do not fit together is refused with
// ErrPackage, saying what.
func TestRefusals(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	_, other, _ := ed25519.GenerateKey(nil)
	for _, c := range []struct {
		name   string
		change func(t *testing.T, in *checkpkg.Inputs) string // may edit the written directory instead (returns it)
		want   string
	}{
		{"another digest", func(t *testing.T, in *checkpkg.Inputs) string { in.Info.Digest = strings.Repeat("0", 64); return "" }, "digest"},
		{"signed by another node", func(t *testing.T, in *checkpkg.Inputs) string {
			g := *f
			g.key = other
			in.Delta = g.delta(t, 100, jobconf.Digest(f.starts[1]), in.Info.Traces[1], f.starts[0].Zeroed())
			in.Info.Digest = checkpkg.FileDigest(in.Delta)
			return ""
		}, "not the checked node"},
		{"another slot", func(t *testing.T, in *checkpkg.Inputs) string { in.Info.Step = 50; return "" }, "the check names"},
		{"bundles swapped", func(t *testing.T, in *checkpkg.Inputs) string {
			in.Info.Traces[0], in.Info.Traces[1] = in.Info.Traces[1], in.Info.Traces[0]
			return ""
		}, "names traces"},
		{"a bundle that is not its CID", func(t *testing.T, in *checkpkg.Inputs) string {
			in.Bundles[0] = in.Bundles[1]
			return ""
		}, "traces of sync 1"},
		{"another start", func(t *testing.T, in *checkpkg.Inputs) string {
			in.Starts = []*llama.Adapter{f.starts[0], f.starts[0]}
			return ""
		}, "started from"},
		{"check.json with an unknown field", func(t *testing.T, in *checkpkg.Inputs) string {
			dir := f.write(t, *in)
			b, _ := os.ReadFile(filepath.Join(dir, "check.json"))
			os.WriteFile(filepath.Join(dir, "check.json"), []byte(strings.Replace(string(b), "{", `{"extra":1,`, 1)), 0o644)
			return dir
		}, "check.json"},
	} {
		in := f.in
		in.Info.Traces = append([]string(nil), f.in.Info.Traces...)
		in.Bundles = append([][]byte(nil), f.in.Bundles...)
		dir := c.change(t, &in)
		if dir == "" {
			dir = f.write(t, in)
		}
		_, err := checkpkg.Read(ctx, dir, f.base.Weights.Cfg)
		if !errors.Is(err, checkpkg.ErrPackage) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want ErrPackage saying %q", c.name, err, c.want)
		}
	}
}

// FuzzReadInfo: whatever check.json holds, Read refuses it or reads a
// package that verifies; it never panics.
func FuzzReadInfo(f *testing.F) {
	f.Add([]byte(`{"format":"zoo-gym-check","job":"j","epoch":1,"step":100,"node":"n","sync":1,"digest":"d","traces":["x"]}`))
	f.Add([]byte(`{"format":"zoo-gym-check","sync":65536,"traces":[]}`))
	f.Add([]byte(`{}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, "check.json"), b, 0o644); err != nil {
			t.Fatal(err)
		}
		if _, err := checkpkg.Read(context.Background(), dir, llama.Config{}); err == nil {
			t.Fatalf("an empty package with check.json %q read", b)
		}
	})
}
