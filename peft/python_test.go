package peft

import (
	"encoding/json"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"

	"github.com/zooai/gym/internal/pyref"
)

// requireTorch skips unless /usr/bin/python3 can import torch (or, with
// GYM_REQUIRE_PYTHON=1, fails).
func requireTorch(t *testing.T) {
	t.Helper()
	out, err := exec.Command(pyref.Python, "-c", "import torch").CombinedOutput()
	if err != nil {
		msg := "python3 with torch (apt-get install python3-torch) is not available: " + string(out)
		if os.Getenv("GYM_REQUIRE_PYTHON") == "1" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
}

// TestPythonLoads reads a checkpoint with Python and torch, as PEFT's
// loader would, and checks every name, shape and value.
func TestPythonLoads(t *testing.T) {
	requireTorch(t)
	dir := filepath.Join(t.TempDir(), "ckpt")
	a := testAdapter(t, "q", "fc1", "fc2")
	if err := Write(dir, a, testCard()); err != nil {
		t.Fatal(err)
	}
	script, _ := filepath.Abs(filepath.Join("testdata", "load_peft.py"))
	cmd := exec.Command(pyref.Python, script, dir)
	cmd.Dir = t.TempDir() // keep ./safetensors (a Go package) off Python's path
	out, err := cmd.Output()
	if err != nil {
		var stderr []byte
		if ee, ok := err.(*exec.ExitError); ok {
			stderr = ee.Stderr
		}
		t.Fatalf("%v\n%s", err, stderr)
	}
	var got struct {
		Loader   string            `json:"loader"`
		Metadata map[string]string `json:"metadata"`
		OK       bool              `json:"linear_shapes_ok"`
		Tensors  []struct {
			Name   string    `json:"name"`
			Shape  []int     `json:"shape"`
			Values []float64 `json:"values"`
		} `json:"tensors"`
	}
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	t.Logf("read with %s", got.Loader)
	if !got.OK {
		t.Fatal("tensor shapes are not those of PEFT's lora_A/lora_B nn.Linear layers")
	}
	if got.Loader == "torch" && got.Metadata["format"] != "pt" {
		t.Fatalf("metadata %v", got.Metadata)
	}
	want := a.Tensors()
	if len(got.Tensors) != len(want) {
		t.Fatalf("python sees %d tensors, want %d", len(got.Tensors), len(want))
	}
	byName := map[string]int{}
	for i, pt := range got.Tensors {
		byName[pt.Name] = i
	}
	for _, w := range want {
		i, ok := byName[tensorName(w.Name)]
		if !ok {
			t.Fatalf("python lacks %s", tensorName(w.Name))
		}
		pt := got.Tensors[i]
		if !slices.Equal(pt.Shape, w.Shape) || len(pt.Values) != len(w.Data) {
			t.Fatalf("%s: shape %v, want %v", pt.Name, pt.Shape, w.Shape)
		}
		for j, v := range pt.Values {
			if math.Float32bits(float32(v)) != math.Float32bits(w.Data[j]) {
				t.Fatalf("%s[%d] = %v, want %v", pt.Name, j, v, w.Data[j])
			}
		}
	}
}
