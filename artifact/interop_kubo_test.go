package artifact

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/zooai/gym/internal/kubotest"
)

// TestInteropWithKubo compares our roots with kubo's own `ipfs add -r
// --cid-version=1 --hidden --only-hash` on the JavaScript-importer inputs,
// the HAMT threshold from both sides, a nested tree with a dot-file, and
// files at the chunk edges. It runs when a kubo binary is found
// (internal/kubotest: scripts/build-kubo.sh builds kubo 0.43.1; it must
// run under GYM_REQUIRE_KUBO=1, which scripts/test.sh sets) and uses a
// throw-away repository (IPFS_PATH), initialised with the test profile,
// which does not touch the Import settings. It also checks CARs both ways:
// kubo imports a CAR written by WriteCAR and reads the files back, and its
// `ipfs dag export` of that DAG is byte-identical to ours.
func TestInteropWithKubo(t *testing.T) {
	ipfs := kubotest.Binary(t)
	repo := t.TempDir()
	env := append(os.Environ(), "IPFS_PATH="+repo)
	init := exec.Command(ipfs, "init", "--profile", "test")
	init.Env = env
	if out, err := init.CombinedOutput(); err != nil {
		t.Fatalf("ipfs init: %v\n%s", err, out)
	}
	if out, err := exec.Command(ipfs, "version").Output(); err == nil {
		t.Logf("%s", strings.TrimSpace(string(out)))
	}

	inputs := interopInputs()
	file := func(data []byte) func(t *testing.T) string {
		return func(t *testing.T) string {
			p := filepath.Join(t.TempDir(), "f")
			must(t, os.WriteFile(p, data, 0o644))
			return p
		}
	}
	inputs["empty-file"] = file(nil)
	inputs["one-chunk"] = file(pattern(262144, 5))
	inputs["one-chunk+1"] = file(pattern(262145, 6))
	inputs["empty-dir"] = func(t *testing.T) string { return t.TempDir() }
	inputs["dotfiles"] = func(t *testing.T) string {
		d := t.TempDir()
		must(t, os.MkdirAll(filepath.Join(d, "a", "b", ".cfg"), 0o755))
		must(t, os.WriteFile(filepath.Join(d, ".gitattributes"), []byte("*.bin binary\n"), 0o644))
		must(t, os.WriteFile(filepath.Join(d, "a", "b", ".cfg", "x"), pattern(70000, 7), 0o644))
		must(t, os.WriteFile(filepath.Join(d, "a", "w.bin"), pattern(3*262144+17, 8), 0o644))
		return d
	}
	// Both sides of the HAMT threshold (see TestHAMTThreshold): 2 730
	// entries of 96 estimated bytes stay basic, 2 731 are sharded.
	for _, n := range []int{2730, 2731} {
		inputs["hamt-edge-"+itoa(n)] = func(t *testing.T) string {
			d := t.TempDir()
			for i := range n {
				name := strings.Repeat("x", 52) + string(rune('a'+i%26)) + strings.Repeat("0", 7-len(itoa(i))) + itoa(i)
				must(t, os.WriteFile(filepath.Join(d, name), nil, 0o644))
			}
			return d
		}
	}

	ctx := context.Background()
	run := func(t *testing.T, stdin []byte, args ...string) []byte {
		t.Helper()
		cmd := exec.Command(ipfs, args...)
		cmd.Env = env
		cmd.Stdin = bytes.NewReader(stdin)
		var errb bytes.Buffer
		cmd.Stderr = &errb
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("ipfs %v: %v\n%s", args, err, errb.String())
		}
		return out
	}

	// CARs both ways on the nested tree: kubo imports our CAR and reads
	// the files back, and exports the same DAG as the same bytes.
	t.Run("car", func(t *testing.T) {
		src := inputs["tree"](t)
		bs := NewMemBlocks()
		res, err := Import(ctx, bs, src)
		must(t, err)
		var car bytes.Buffer
		must(t, WriteCAR(ctx, &car, bs, res.Root))
		run(t, car.Bytes(), "dag", "import", "--pin-roots=false", "--offline")
		for _, f := range []string{"a.bin", "config.json", "sub/b"} {
			want, err := os.ReadFile(filepath.Join(src, f))
			must(t, err)
			if got := run(t, nil, "cat", "--offline", res.Root.String()+"/"+f); !bytes.Equal(got, want) {
				t.Fatalf("kubo reads %s from our CAR as %d different bytes", f, len(got))
			}
		}
		if got := run(t, nil, "dag", "export", "--offline", res.Root.String()); !bytes.Equal(got, car.Bytes()) {
			t.Fatalf("kubo's dag export (%d bytes) differs from WriteCAR (%d bytes)", len(got), car.Len())
		}
	})

	for name, make := range inputs {
		t.Run(name, func(t *testing.T) {
			src := make(t)
			res, err := Import(ctx, NewMemBlocks(), src)
			must(t, err)
			out := run(t, nil, "add", "-Q", "-r", "--cid-version=1", "--hidden", "--only-hash", src)
			if kubo := strings.TrimSpace(string(out)); kubo != res.Root.String() {
				t.Fatalf("root %s, kubo gives %s", res.Root, kubo)
			}
			if want, ok := interopGolden[name]; ok && want != res.Root.String() {
				t.Fatalf("root %s, the JS importer gives %s", res.Root, want)
			}
		})
	}
}
