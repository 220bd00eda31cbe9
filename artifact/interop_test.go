package artifact

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	dag "github.com/ipfs/boxo/ipld/merkledag"
	"github.com/ipfs/boxo/ipld/unixfs"
	pb "github.com/ipfs/boxo/ipld/unixfs/pb"
)

// Root CIDs computed by a second, independent UnixFS implementation: the
// JavaScript ipfs-unixfs-importer 17.1.1 (Helia's importer), run with
// {profile: 'unixfs-v0-2015', cidVersion: 1, rawLeaves: true} — kubo's
// defaults under `ipfs add --cid-version=1`: 256 KiB chunks, 174 links per
// node, links-bytes HAMT estimate, 256 KiB threshold. The inputs are
// regenerated here byte for byte (see pattern and interopTrees); the script
// is in docs/artifacts.md.
var interopGolden = map[string]string{
	"file1":     "bafybeia523jxvabhifwh6oetryzvdpxctzd3nfi666z4qlshyppyp2pwsu",
	"file2":     "bafybeic22qpzujqebzveavvzewjbkbtaxte2jc7r6hxvsl7aoduj65qpwm",
	"tree":      "bafybeidbnioholokf2c3jtp7ir4gbwojazaysd4e5z6zsdgvagk7eixhjm",
	"hamt":      "bafybeiclnuwp6pclavjphctr326qre2jswqlmwcl7zlnasymcs7imvniym",
	"basic2000": "bafybeidsos7vfzw4zkgq5lmqfgdt7xzhk3dbqfordrmyxjzg4pvbalxp5u",
}

func pattern(n, seed int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(i*7 + i>>8 + seed)
	}
	return b
}

func manyFiles(t *testing.T, n, pad int) string {
	dir := t.TempDir()
	for i := range n {
		name := fmt.Sprintf("file-%05d-%s", i, strings.Repeat("x", pad))
		must(t, os.WriteFile(filepath.Join(dir, name), []byte(fmt.Sprint(i)), 0o644))
	}
	return dir
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// interopInputs makes the inputs of interopGolden, by name.
func interopInputs() map[string]func(t *testing.T) string {
	return map[string]func(t *testing.T) string{
		"file1": func(t *testing.T) string {
			p := filepath.Join(t.TempDir(), "f")
			must(t, os.WriteFile(p, pattern(1048577, 1), 0o644))
			return p
		},
		"file2": func(t *testing.T) string {
			p := filepath.Join(t.TempDir(), "f")
			must(t, os.WriteFile(p, pattern(175*262144+5, 2), 0o644))
			return p
		},
		"tree": func(t *testing.T) string {
			d := t.TempDir()
			must(t, os.WriteFile(filepath.Join(d, "a.bin"), pattern(600000, 3), 0o644))
			must(t, os.WriteFile(filepath.Join(d, "config.json"), []byte(`{"x":1}`), 0o644))
			must(t, os.MkdirAll(filepath.Join(d, "sub"), 0o755))
			must(t, os.WriteFile(filepath.Join(d, "sub", "empty"), nil, 0o644))
			must(t, os.WriteFile(filepath.Join(d, "sub", "b"), []byte("bee"), 0o644))
			must(t, os.Mkdir(filepath.Join(d, "emptydir"), 0o755))
			return d
		},
		"hamt":      func(t *testing.T) string { return manyFiles(t, 3000, 49) },
		"basic2000": func(t *testing.T) string { return manyFiles(t, 2000, 34) },
	}
}

func TestInteropWithJSImporter(t *testing.T) {
	ctx := context.Background()
	for name, make := range interopInputs() {
		t.Run(name, func(t *testing.T) {
			bs := NewMemBlocks()
			res, err := Import(ctx, bs, make(t))
			must(t, err)
			if got := res.Root.String(); got != interopGolden[name] {
				t.Fatalf("root %s, the JS importer gives %s", got, interopGolden[name])
			}
			if name == "hamt" {
				data, _ := bs.Get(ctx, res.Root)
				pn, err := dag.DecodeProtobuf(data)
				must(t, err)
				fsn, err := unixfs.FSNodeFromBytes(pn.Data())
				must(t, err)
				if fsn.Type() != pb.Data_HAMTShard {
					t.Fatalf("not sharded: %v", fsn.Type())
				}
				ix, err := Walk(ctx, bs, res.Root, DefaultLimits())
				must(t, err)
				if len(ix.Files) != 3000 {
					t.Fatalf("walk found %d files in the shard", len(ix.Files))
				}
			}
		})
	}
}
