package state

import (
	"bytes"
	"errors"
	"math"
	"strings"
	"testing"

	"github.com/zooai/gym/protocol/jobspec"
)

// TestGSPORefusesNonFinite checks that NaN and infinities are refused for
// every real-valued setting before anything is logged (JSON cannot encode
// them, so one in the state would make it unserialisable).
func TestGSPORefusesNonFinite(t *testing.T) {
	fields := map[string]func(*jobspec.GSPO) *float64{
		"beta":          func(g *jobspec.GSPO) *float64 { return &g.Beta },
		"lora_alpha":    func(g *jobspec.GSPO) *float64 { return &g.LoRAAlpha },
		"learning_rate": func(g *jobspec.GSPO) *float64 { return &g.LearningRate },
		"weight_decay":  func(g *jobspec.GSPO) *float64 { return &g.WeightDecay },
	}
	for name, field := range fields {
		for _, v := range []float64{math.NaN(), math.Inf(1), math.Inf(-1)} {
			h := newHarness(t)
			before := h.m.Marshal()
			spec := jobspec.Spec{Model: "m", Dataset: "d", Epochs: 1, MinNodes: 3, GSPO: jobspec.DefaultGSPO()}
			*field(&spec.GSPO) = v
			evs, err := h.m.Step(h.now, SubmitJob{Spec: spec})
			if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "gspo."+name) || len(evs) != 0 {
				t.Errorf("%s = %v: events %v, error %v; want ErrInvalid naming gspo.%s", name, v, evs, err, name)
			}
			if !bytes.Equal(before, h.m.Marshal()) {
				t.Errorf("%s = %v: refused submission changed the state", name, v)
			}
		}
	}
}

// TestGSPOAbsentInOldLog checks that a job_submitted event logged before
// jobs carried a GSPO config still replays, and that the state and its
// snapshot re-encode byte for byte (the field is omitted when zero).
func TestGSPOAbsentInOldLog(t *testing.T) {
	old := `{"i":2,"at":1767225600000,"type":"job_submitted","body":{"job":"job-00000001","spec":{"model":"m","dataset":"d","epochs":1,"min_nodes":3,"max_nodes":3,"min_vram_mib":0,"aggregation":"mean","utility":1}}}`
	e, err := DecodeEvent([]byte(old))
	if err != nil {
		t.Fatal(err)
	}
	if b, err := e.Encode(); err != nil || string(b) != old {
		t.Fatalf("re-encoded as %s (%v)", b, err)
	}
	m, err := New(testConfig())
	if err != nil {
		t.Fatal(err)
	}
	m.Start(epoch0)
	if err := m.Apply(e); err != nil {
		t.Fatal(err)
	}
	j, ok := m.Job("job-00000001")
	if !ok || j.Spec.GSPO != (jobspec.GSPO{}) {
		t.Fatalf("job %+v", j)
	}
	snap := m.Marshal()
	if bytes.Contains(snap, []byte("gspo")) {
		t.Fatalf("snapshot invents a config: %s", snap)
	}
	if _, err := Restore(testConfig(), snap); err != nil {
		t.Fatal(err)
	}
}
