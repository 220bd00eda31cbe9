package daemon

import (
	"context"
	"crypto/ed25519"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ipfs/go-cid"

	"github.com/zooai/gym/artifact"
	astore "github.com/zooai/gym/artifact/store"
	"github.com/zooai/gym/model/basemodel"
	"github.com/zooai/gym/protocol/jobconf"
)

// hanzod reads a base's shape from its config.json alone: the built-in
// one, or that of a base published into its store (here a directory
// holding only a config.json of Qwen3-0.6B's shape and a stand-in for the
// weights, which are never read). A base it does not hold has none; a
// config.json the engine refuses is an error naming it.
func TestModelShape(t *testing.T) {
	ctx := context.Background()
	arts, err := astore.Open(astore.DefaultConfig(t.TempDir()))
	if err != nil {
		t.Fatal(err)
	}
	defer arts.Close()
	sh, err := modelShape(ctx, arts, "builtin")
	if err != nil || sh == nil {
		t.Fatalf("builtin: %v %v", sh, err)
	}
	cfg, _ := fs.ReadFile(basemodel.BuiltinFS(), "config.json")
	if want, _ := jobconf.ShapeFromConfig(cfg); *sh != want {
		t.Fatalf("builtin shape %+v, want %+v", *sh, want)
	}

	publish := func(config string) cid.Cid {
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, "config.json"), []byte(config), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "model.safetensors"), []byte("not read"), 0o644); err != nil {
			t.Fatal(err)
		}
		key := ed25519.NewKeyFromSeed(make([]byte, 32))
		rec, err := arts.Publish(ctx, dir, astore.Meta{Kind: artifact.KindBaseModel, Name: "q"}, key, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		c, err := cid.Decode(rec.Root)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	qwen := `{"architectures":["Qwen3ForCausalLM"],"model_type":"qwen3","vocab_size":151936,"hidden_size":1024,"intermediate_size":3072,
"num_hidden_layers":28,"num_attention_heads":16,"num_key_value_heads":8,"head_dim":128,"max_position_embeddings":40960,
"rms_norm_eps":1e-6,"rope_theta":1000000,"tie_word_embeddings":true,"torch_dtype":"bfloat16"}`
	root := publish(qwen)
	sh, err = modelShape(ctx, arts, root.String())
	if err != nil || sh == nil {
		t.Fatalf("published base: %v %v", sh, err)
	}
	if sh.Hidden != 1024 || sh.Layers != 28 || sh.Vocab != 151936 || sh.KVHeads != 8 || sh.Params < 590_000_000 || sh.Params > 600_000_000 {
		t.Fatalf("Qwen3-0.6B shape %+v", *sh)
	}
	// Not in the store, or not a CID: no shape, no error.
	for _, m := range []string{"Qwen/Qwen3-0.6B", "bafybeibg6x7yedevydzqqq64u3rxivntls3hm3gwcxwxcbp54gxgnbpg5e"} {
		if sh, err := modelShape(ctx, arts, m); sh != nil || err != nil {
			t.Errorf("%s: %v %v", m, sh, err)
		}
	}
	bad := publish(strings.Replace(qwen, "Qwen3ForCausalLM", "MambaForCausalLM", 1))
	if _, err := modelShape(ctx, arts, bad.String()); err == nil || !strings.Contains(err.Error(), "config.json") {
		t.Fatalf("an architecture the engine refuses: %v", err)
	}
}
