package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/zooai/gym/model/basemodel"
)

// TestBaseExport: gym base export writes the built-in directory, prints
// its identity, refuses a non-empty directory without --force (exit 1)
// and takes one with it; a missing argument is a usage error.
func TestBaseExport(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "base")
	out := mustGym(t, "base", "export", dir)
	b, err := basemodel.Builtin()
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, b.SHA3) || !strings.Contains(out, "LlamaForCausalLM") {
		t.Fatalf("output %q lacks the identity %s", out, b.SHA3)
	}
	o, err := basemodel.Open(dir)
	if err != nil || o.SHA3 != b.SHA3 {
		t.Fatalf("exported directory: %v (sha3 %v)", err, o)
	}
	if r := gym(t, "base", "export", dir); r.code != 1 || !strings.Contains(r.stderr, "not empty") {
		t.Fatalf("export over a non-empty directory: exit %d, %q", r.code, r.stderr)
	}
	os.WriteFile(filepath.Join(dir, basemodel.WeightsFile), []byte("junk"), 0o644)
	mustGym(t, "base", "export", "--force", dir)
	if o, err := basemodel.Open(dir); err != nil || o.SHA3 != b.SHA3 {
		t.Fatalf("after --force: %v", err)
	}
	if r := gym(t, "base", "export"); r.code != 2 {
		t.Fatalf("no argument: exit %d", r.code)
	}
}

// TestModelLogits: gym model logits prints the built-in base's top K for a
// prompt (text and JSON), and refuses a missing --prompt as a usage error
// and a failing comparison (an interpreter that is not Python) with exit 1.
func TestModelLogits(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "base")
	mustGym(t, "base", "export", dir)
	out := mustGym(t, "model", "logits", "--model", dir, "--prompt", "12+34=", "--top", "3", "--threads", "1")
	if !strings.Contains(out, "LlamaForCausalLM") || !strings.Contains(out, "top 3") || strings.Count(out, "\n") < 6 {
		t.Fatalf("output %q", out)
	}
	js := mustGym(t, "model", "logits", "--model", dir, "--prompt", "12+34=", "--top", "2", "--json")
	var r struct {
		IDs []int `json:"ids"`
		Top []struct {
			ID    int     `json:"id"`
			Logit float64 `json:"logit"`
		} `json:"top"`
	}
	if err := json.Unmarshal([]byte(js), &r); err != nil || len(r.IDs) != 6 || len(r.Top) != 2 || r.Top[0].Logit < r.Top[1].Logit {
		t.Fatalf("JSON %q: %v", js, err)
	}
	if res := gym(t, "model", "logits", "--model", dir); res.code != 2 {
		t.Fatalf("no --prompt: exit %d, %q", res.code, res.stderr)
	}
	if res := gym(t, "model", "logits", "--model", dir, "--prompt", "1", "--compare-transformers", "--python", "/bin/false"); res.code != 1 || !strings.Contains(res.stderr, "compare.py") {
		t.Fatalf("failing comparison: exit %d, %q", res.code, res.stderr)
	}
}
