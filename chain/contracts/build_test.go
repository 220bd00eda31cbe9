package contracts

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// requireNode skips when node, npm or the installed solc-js are missing,
// and fails instead under GYM_REQUIRE_NODE=1 (scripts/test.sh).
func requireNode(t *testing.T) {
	t.Helper()
	miss := func(what string) {
		if os.Getenv("GYM_REQUIRE_NODE") == "1" {
			t.Fatalf("%s missing and GYM_REQUIRE_NODE=1", what)
		}
		t.Skipf("%s missing (GYM_REQUIRE_NODE=1 makes this a failure)", what)
	}
	for _, c := range []string{"node", "npm", "go"} {
		if _, err := exec.LookPath(c); err != nil {
			miss(c)
		}
	}
	if _, err := os.Stat("node_modules/solc/package.json"); err != nil {
		miss("chain/contracts/node_modules (npm ci in chain/contracts/)")
	}
}

// Rebuilding the contracts and the bindings gives the committed bytes.
func TestReproducible(t *testing.T) {
	if testing.Short() {
		t.Skip("runs solc and abigen")
	}
	requireNode(t)
	dir := t.TempDir()
	cmd := exec.Command("../../scripts/build-contracts.sh", dir)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("build-contracts.sh: %v\n%s", err, out)
	}
	var files []string
	for _, pat := range []string{"build/*", "*_bind.go"} {
		m, err := filepath.Glob(pat)
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, m...)
	}
	if len(files) != 9 {
		t.Fatalf("committed files %v, want 6 build outputs and 3 bindings (9)", files)
	}
	rebuilt, _ := filepath.Glob(filepath.Join(dir, "build", "*"))
	bound, _ := filepath.Glob(filepath.Join(dir, "*_bind.go"))
	if len(rebuilt)+len(bound) != len(files) {
		t.Fatalf("rebuild wrote %v %v, committed %v", rebuilt, bound, files)
	}
	for _, f := range files {
		want, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		got, err := os.ReadFile(filepath.Join(dir, f))
		if err != nil {
			t.Fatalf("rebuild did not write %s: %v", f, err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s: rebuilt %d bytes differ from the committed %d (run scripts/build-contracts.sh and commit)", f, len(got), len(want))
		}
	}
}
