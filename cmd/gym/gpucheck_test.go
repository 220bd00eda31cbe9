package main

import (
	"encoding/json"
	"math"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/zooai/gym/internal/pyenv"
)

// TestGPUCheckScript runs scripts/gpu-check.sh as the test suite can, on
// the CPU with a tiny model, so that the script a GPU owner runs cannot
// rot: the bf16 torch job publishes through a hanzod that decodes no base,
// two validators measured its epoch and checked its sampled deltas from
// their traces within the calibrated tolerances, the report carries the
// step times and every check's distances, and 4-bit is reported skipped
// with the reason (it needs CUDA).
func TestGPUCheckScript(t *testing.T) {
	if testing.Short() {
		t.Skip("runs gym up with torch workers")
	}
	py := pyenv.Require(t, "torch", "transformers", "peft", "safetensors", "grpc")
	script, _ := filepath.Abs(filepath.Join("..", "..", "scripts", "gpu-check.sh"))
	cmd := exec.Command(script, "--device", "cpu", "--size", "tiny", "--gym", gymBin, "--python", py, "--out", t.TempDir(), "--timeout", "400")
	out, err := cmd.Output()
	if err != nil {
		var stderr []byte
		if ee, ok := err.(*exec.ExitError); ok {
			stderr = ee.Stderr
		}
		t.Fatalf("gpu-check.sh: %v\n%s\n%s", err, out, stderr)
	}
	var rep struct {
		Device string `json:"device"`
		Modes  []struct {
			Mode, Status, Reason string
			Steps                int      `json:"steps"`
			StepMean             *float64 `json:"step_seconds_mean"`
			BaseLoads            *int     `json:"hanzod_base_loads"`
			Evaluators           []string `json:"evaluators"`
			Checks               []struct {
				DType      string   `json:"dtype"`
				Failed     *string  `json:"failed"`
				Validators []string `json:"validators"`
				LogProbMax float64  `json:"logprob_max"`
				RelL2      float64  `json:"update_rel_l2"`
				Cosine     float64  `json:"update_cosine"`
			} `json:"trace_checks"`
		} `json:"modes"`
	}
	if err := json.Unmarshal(out, &rep); err != nil {
		t.Fatalf("report: %v\n%s", err, out)
	}
	t.Logf("report:\n%s", out)
	if rep.Device != "cpu" || len(rep.Modes) != 2 {
		t.Fatalf("report of device %q with %d modes", rep.Device, len(rep.Modes))
	}
	bf16, q4 := rep.Modes[0], rep.Modes[1]
	if bf16.Mode != "bf16" || bf16.Status != "published" || bf16.Steps == 0 || bf16.StepMean == nil || bf16.BaseLoads == nil || *bf16.BaseLoads != 0 {
		t.Errorf("bf16 mode: %+v", bf16)
	}
	if len(bf16.Evaluators) != 2 {
		t.Errorf("the epoch was measured by %v, want the two validators", bf16.Evaluators)
	}
	if len(bf16.Checks) == 0 {
		t.Error("no delta was trace-checked")
	}
	for _, c := range bf16.Checks {
		if c.DType != "bfloat16" || c.Failed != nil || len(c.Validators) != 2 || math.IsNaN(c.RelL2) || !(c.Cosine > 0.99) {
			t.Errorf("trace check %+v", c)
		}
	}
	if q4.Mode != "4bit" || q4.Status != "skipped" || q4.Reason == "" {
		t.Errorf("4-bit mode on the CPU: %+v, want skipped with the reason", q4)
	}
}
