package jobconf

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"errors"
	"testing"

	"github.com/zooai/gym/delta"
	"github.com/zooai/gym/llama"
)

func TestPlanServes(t *testing.T) {
	for _, c := range []struct {
		job, worker string
		ok          bool
	}{
		{"", "go", true}, {"go", "go", true}, {"", "torch", false}, {"go", "torch", false},
		{"torch", "torch", true}, {"torch", "go", false}, {"any", "go", true}, {"any", "torch", true},
	} {
		err := Plan{Backend: c.job}.Serves(c.worker)
		if (err == nil) != c.ok || (err != nil && !errors.Is(err, ErrJob)) {
			t.Errorf("job %q, worker %q: %v", c.job, c.worker, err)
		}
	}
}

// The backend is recorded in a delta's signed metadata, and only when it
// is not go.
func TestDeltaRecordsBackend(t *testing.T) {
	_, key, _ := ed25519.GenerateKey(nil)
	a, err := llama.NewAdapter(llama.Config{Layers: 1, Hidden: 4, Heads: 1, KVHeads: 1, HeadDim: 4, Intermediate: 4, Vocab: 4, MaxPositions: 4}, 1, 1, []llama.Module{llama.QProj})
	if err != nil {
		t.Fatal(err)
	}
	for _, be := range []string{"", "go", "torch"} {
		b, err := Encode(context.Background(), key, SyncDelta{Job: "j", Node: "n", Epoch: 1, Sync: 1, Step: 1, Base: "b", Delta: a, Backend: be})
		if err != nil {
			t.Fatal(err)
		}
		d, err := delta.Read(context.Background(), bytes.NewReader(b), delta.DefaultLimits())
		if err != nil {
			t.Fatal(err)
		}
		got, err := BackendOf(d.Info.Metadata)
		want := be
		if want == "" {
			want = "go"
		}
		if err != nil || got != want {
			t.Errorf("backend %q: read %q, %v", be, got, err)
		}
		if _, ok := d.Info.Metadata.Get(KeyBackend); ok != (be == "torch") {
			t.Errorf("backend %q: key written %v", be, ok)
		}
	}
}
