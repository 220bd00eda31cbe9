package modelbench

import (
	"bytes"
	"context"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/zooai/gym/internal/pyenv"
	"github.com/zooai/gym/model/llama"
)

// TestMain lets the test binary serve as the Go side's child process:
// with MODELBENCH_CHILD=1 it parses the child's flags, measures and prints.
func TestMain(m *testing.M) {
	if os.Getenv("MODELBENCH_CHILD") == "1" {
		args := map[string]string{}
		for i := 1; i+1 < len(os.Args); i += 2 {
			args[strings.TrimPrefix(os.Args[i], "--")] = os.Args[i+1]
		}
		num := func(k string) int { n, _ := strconv.Atoi(args[k]); return n }
		var f any
		var err error
		if mode, ok := args["mode"]; ok { // RunLoad's child
			f, err = MeasureLoad(args["dir"], mode, num("threads"), num("seq"))
		} else {
			f, err = MeasureGo(args["dir"], num("threads"), num("seq"), num("iters"))
		}
		if err != nil {
			os.Stderr.WriteString(err.Error())
			os.Exit(1)
		}
		json.NewEncoder(os.Stdout).Encode(f)
		os.Exit(0)
	}
	os.Exit(m.Run())
}

func childConfig(t *testing.T, dir string) Config {
	t.Helper()
	t.Setenv("MODELBENCH_CHILD", "1")
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	c := DefaultConfig()
	c.ModelDir, c.Threads, c.Seq, c.Iters, c.GoCmd = dir, 2, 8, 1, []string{self}
	return c
}

func tinyDir(t *testing.T) string {
	t.Helper()
	w, err := RandomWeights(TinyShape(), 3)
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "tiny")
	if err := llama.Save(dir, w); err != nil {
		t.Fatal(err)
	}
	return dir
}

func TestValidate(t *testing.T) {
	ok := DefaultConfig()
	ok.GoCmd = []string{"gym"}
	if err := ok.Validate(); err != nil {
		t.Fatalf("default config: %v", err)
	}
	for name, f := range map[string]func(*Config){
		"baseline":    func(c *Config) { c.Baseline = "jax" },
		"zero thread": func(c *Config) { c.Threads = 0 },
		"threads":     func(c *Config) { c.Threads = 5000 },
		"seq 1":       func(c *Config) { c.Seq = 1 },
		"long seq":    func(c *Config) { c.Seq = 1 << 20 },
		"iters":       func(c *Config) { c.Iters = 0 },
		"no go cmd":   func(c *Config) { c.GoCmd = nil },
	} {
		c := ok
		f(&c)
		if err := c.Validate(); err == nil {
			t.Errorf("%s: accepted", name)
		}
		if _, err := Run(context.Background(), c); err == nil {
			t.Errorf("%s: Run accepted", name)
		}
	}
}

func TestPrint(t *testing.T) {
	r := &Result{CPUs: 2, Threads: 2, Seq: 128, Models: []ModelResult{
		{Name: "m", Params: 134_515_008, Go: Figures{PrefillTPS: 100, DecodeTPS: 30, TrainTPS: 50, PeakRSSBytes: 600 << 20, PrefillCPU: 200},
			Torch: &Figures{PrefillTPS: 400, DecodeTPS: 60, TrainTPS: 50, PeakRSSBytes: 900 << 20, PrefillCPU: 100}},
		{Name: "alone", Go: Figures{PrefillTPS: 1}, TorchSkipped: "no interpreter"},
	}}
	var b bytes.Buffer
	Print(&b, r)
	out := b.String()
	for _, want := range []string{
		"m (134.5M parameters)",
		"prefill tokens/s                  100.0        400.0      0.25\n",
		"decode tokens/s                    30.0         60.0      0.50\n",
		"LoRA train step tokens/s           50.0         50.0      1.00\n",
		"peak RSS                        600 MiB      900 MiB      0.67\n",
		"prefill tokens/CPU-s              200.0        100.0      2.00\n",
		"prefill tokens/s                    1.0            -         -\n",
		"torch: skipped (no interpreter)",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("table lacks %q:\n%s", want, out)
		}
	}
	if !math.IsNaN(ratio(1, 0)) {
		t.Error("ratio by zero is a number")
	}
}

// TestRunGoOnly measures the Go engine on a tiny model in a child process.
func TestRunGoOnly(t *testing.T) {
	c := childConfig(t, tinyDir(t))
	c.Baseline = ""
	r, err := Run(context.Background(), c)
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Models) != 1 || r.Models[0].Torch != nil || r.Models[0].TorchSkipped == "" {
		t.Fatalf("result %+v", r)
	}
	g := r.Models[0].Go
	if !(g.PrefillTPS > 0 && g.DecodeTPS > 0 && g.TrainTPS > 0 && g.PeakRSSBytes > 1<<20 && g.Threads == 2 &&
		g.PrefillCPU > 0 && g.DecodeCPU > 0 && g.TrainCPU > 0) {
		t.Fatalf("Go figures %+v", g)
	}
}

// TestRunTorch runs both sides on a tiny model: the embedded script loads
// the directory llama.Save wrote and reports every figure.
func TestRunTorch(t *testing.T) {
	py := pyenv.Require(t, "torch", "transformers", "peft")
	c := childConfig(t, tinyDir(t))
	c.Python = py
	r, err := Run(context.Background(), c)
	if err != nil {
		t.Fatal(err)
	}
	tf := r.Models[0].Torch
	if tf == nil || !(tf.PrefillTPS > 0 && tf.DecodeTPS > 0 && tf.TrainTPS > 0 && tf.PeakRSSBytes > 1<<20) || tf.Threads != 2 ||
		!(tf.PrefillCPU > 0 && tf.DecodeCPU > 0 && tf.TrainCPU > 0) {
		t.Fatalf("torch figures %+v (%s)", tf, r.Models[0].TorchSkipped)
	}
	var b bytes.Buffer
	Print(&b, r)
	t.Log("\n" + b.String())
}

func TestMeasureGoRefusesLongSeq(t *testing.T) {
	if _, err := MeasureGo(tinyDir(t), 1, 5000, 1); err == nil {
		t.Fatal("seq beyond the context accepted")
	}
	if _, err := MeasureGo(t.TempDir(), 1, 8, 1); err == nil {
		t.Fatal("empty directory accepted")
	}
}
