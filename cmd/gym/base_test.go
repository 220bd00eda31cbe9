package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/zooai/gym/basemodel"
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
