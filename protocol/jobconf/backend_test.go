package jobconf

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"errors"
	"strings"
	"testing"

	"github.com/zooai/gym/model/llama"
	"github.com/zooai/gym/protocol/delta"
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

// A job naming a dtype is served only by a worker training in it; one
// naming none by any.
func TestPlanServesDType(t *testing.T) {
	for _, c := range []struct {
		job, worker string
		ok          bool
	}{{"", "float32", true}, {"", "bfloat16", true}, {"bfloat16", "bfloat16", true}, {"bfloat16", "float32", false}, {"float32", "bfloat16", false}} {
		err := Plan{DType: c.job}.ServesDType(c.worker)
		if (err == nil) != c.ok || (err != nil && (!errors.Is(err, ErrJob) || !strings.Contains(err.Error(), "--torch-dtype "+c.job))) {
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

// The dtype is recorded in a delta's signed metadata only when it is not
// float32 (absent reads as float32, as deltas from before the key do); a
// dtype without measured tolerances, a value that is not a string, and a
// go delta claiming anything but float32 are refused.
func TestDeltaRecordsDType(t *testing.T) {
	_, key, _ := ed25519.GenerateKey(nil)
	a, err := llama.NewAdapter(llama.Config{Layers: 1, Hidden: 4, Heads: 1, KVHeads: 1, HeadDim: 4, Intermediate: 4, Vocab: 4, MaxPositions: 4}, 1, 1, []llama.Module{llama.QProj})
	if err != nil {
		t.Fatal(err)
	}
	read := func(d SyncDelta) *delta.Metadata {
		t.Helper()
		b, err := Encode(context.Background(), key, d)
		if err != nil {
			t.Fatal(err)
		}
		f, err := delta.Read(context.Background(), bytes.NewReader(b), delta.DefaultLimits())
		if err != nil {
			t.Fatal(err)
		}
		return f.Info.Metadata
	}
	for _, c := range []struct {
		backend, dtype, want string
		written              bool
	}{
		{"", "", Float32, false}, {"torch", "", Float32, false}, {"torch", Float32, Float32, false},
		{"torch", BFloat16, BFloat16, true}, {"go", Float32, Float32, false},
	} {
		m := read(SyncDelta{Job: "j", Node: "n", Epoch: 1, Sync: 1, Step: 1, Base: "b", Delta: a, Backend: c.backend, DType: c.dtype})
		got, err := DTypeOf(m)
		if err != nil || got != c.want {
			t.Errorf("backend %q dtype %q: read %q, %v; want %q", c.backend, c.dtype, got, err, c.want)
		}
		if _, ok := m.Get(KeyDType); ok != c.written {
			t.Errorf("backend %q dtype %q: key written %v", c.backend, c.dtype, ok)
		}
	}
	for _, c := range []struct{ backend, dtype, says string }{
		{"torch", "float16", "want"}, {"torch", "BF16", "want"}, {"go", BFloat16, "float32 only"}, {"", BFloat16, "float32 only"},
	} {
		m := read(SyncDelta{Job: "j", Node: "n", Epoch: 1, Sync: 1, Step: 1, Base: "b", Delta: a, Backend: c.backend, DType: c.dtype})
		if got, err := DTypeOf(m); err == nil || !strings.Contains(err.Error(), c.says) {
			t.Errorf("backend %q dtype %q: read %q, %v; want an error saying %q", c.backend, c.dtype, got, err, c.says)
		}
	}
	m := &delta.Metadata{}
	if err := m.Set(KeyDType, 16); err != nil {
		t.Fatal(err)
	}
	if got, err := DTypeOf(m); err == nil {
		t.Errorf("dtype 16: read %q", got)
	}
}
