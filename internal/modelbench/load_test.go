package modelbench

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/zooai/gym/model/llama"
)

// TestRunLoad measures a small BF16 model both ways in child processes:
// the kept reading holds half the float32 reading's weights, its mapped
// file is resident as file-backed memory, and the float32 reading costs
// about a file size more at its peak. (Memory, not time: these hold on a
// loaded machine.)
func TestRunLoad(t *testing.T) {
	c := QwenShape(2)
	c.Vocab, c.Hidden, c.Intermediate, c.Heads, c.KVHeads, c.HeadDim = 8192, 512, 1536, 8, 4, 64
	w, err := RandomWeights(c, 5)
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "bf16")
	if err := llama.SaveAs(dir, w, llama.BF16); err != nil {
		t.Fatal(err)
	}
	t.Setenv("MODELBENCH_CHILD", "1")
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cfg := DefaultLoadConfig()
	cfg.ModelDir, cfg.Threads, cfg.Seq, cfg.GoCmd = dir, 2, 8, []string{self}
	r, err := RunLoad(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	PrintLoad(&b, r)
	t.Log("\n" + b.String())
	file := float64(r.FileBytes)
	f, k := r.Float32, r.Kept
	switch {
	case r.Params != c.NumParams() || file < 2*float64(c.NumParams()):
		t.Fatalf("params %d, file %d bytes", r.Params, r.FileBytes)
	case f.Mode != ModeFloat32 || k.Mode != ModeKept:
		t.Fatalf("modes %q, %q", f.Mode, k.Mode)
	case float64(f.WeightsBytes) < 1.98*float64(k.WeightsBytes) || float64(k.WeightsBytes) > 1.01*file:
		t.Fatalf("weights: float32 %d bytes, kept %d, file %d", f.WeightsBytes, k.WeightsBytes, r.FileBytes)
	case float64(k.RSSFileBytes) < 0.9*file:
		t.Fatalf("kept: %d bytes file-backed resident, file %d", k.RSSFileBytes, r.FileBytes)
	case float64(f.LoadRSSBytes-k.LoadRSSBytes) < 0.7*file:
		t.Fatalf("peak RSS after load: float32 %d, kept %d, file %d", f.LoadRSSBytes, k.LoadRSSBytes, r.FileBytes)
	case k.PeakRSSBytes < k.LoadRSSBytes || f.PeakRSSBytes < f.LoadRSSBytes || k.StepSeconds <= 0 || f.StepSeconds <= 0:
		t.Fatalf("figures %+v %+v", f, k)
	}
	for _, want := range []string{"weights in memory", "peak RSS after a LoRA step", "peak RSS / file size: float32 "} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("table lacks %q", want)
		}
	}
}

func TestLoadValidate(t *testing.T) {
	ok := DefaultLoadConfig()
	ok.GoCmd = []string{"gym"}
	if err := ok.Validate(); err != nil {
		t.Fatalf("default config: %v", err)
	}
	for name, f := range map[string]func(*LoadConfig){
		"layers":    func(c *LoadConfig) { c.Layers = 0 },
		"threads":   func(c *LoadConfig) { c.Threads = 0 },
		"seq":       func(c *LoadConfig) { c.Seq = 1 },
		"no go cmd": func(c *LoadConfig) { c.GoCmd = nil },
	} {
		c := ok
		f(&c)
		if _, err := RunLoad(context.Background(), c); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	if _, err := MeasureLoad(tinyDir(t), "float16", 1, 8); err == nil {
		t.Error("unknown mode accepted")
	}
}
