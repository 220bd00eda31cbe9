package main

import (
	"encoding/json"
	"path/filepath"
	"testing"

	"github.com/zooai/gym/internal/pyenv"
)

// bench backend runs end to end on the built-in base with a tiny batch
// (a test of the command, not a measurement); bad flags are usage errors.
func TestBenchBackendSmall(t *testing.T) {
	py := pyenv.Require(t, "torch", "transformers", "peft", "safetensors", "grpc")
	pkg, err := filepath.Abs(filepath.Join("..", "..", "python"))
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv("PYTHONPATH", pkg)
	var r benchBackendResult
	out := mustGym(t, "bench", "backend", "--python", py, "--steps", "1", "--threads", "1", "--prompts", "2", "--group", "2", "--json")
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if r.GoStep <= 0 || r.TorchStep <= 0 || r.TorchGen <= 0 || r.TorchTrain <= 0 || r.Seam <= 0 || r.TorchGen+r.TorchTrain+r.Seam > r.TorchStep*1.0001 {
		t.Fatalf("%s", out)
	}
	for _, args := range [][]string{{"--steps", "0"}, {"--group", "1"}, {"--threads", "0"}} {
		if res := gym(t, append([]string{"bench", "backend"}, args...)...); res.code == 0 {
			t.Errorf("bench backend %v succeeded", args)
		}
	}
}
