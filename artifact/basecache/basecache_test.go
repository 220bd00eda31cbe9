package basecache_test

import (
	"context"
	"crypto/ed25519"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/ipfs/go-cid"

	"github.com/zooai/gym/artifact"
	"github.com/zooai/gym/artifact/basecache"
	"github.com/zooai/gym/artifact/store"
	"github.com/zooai/gym/model/basemodel"
)

// env is a node's store and cache; "origin" is the store the fetch copies
// from (hanzod's, in production: the transfer is artifact/transfer's).
type env struct {
	origin, node *store.Store
	cache        *basecache.Cache
	fetches      int
}

func newEnv(t *testing.T) *env {
	t.Helper()
	open := func(dir string) *store.Store {
		st, err := store.Open(store.DefaultConfig(dir))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { st.Close() })
		return st
	}
	e := &env{origin: open(t.TempDir()), node: open(t.TempDir())}
	fetch := func(ctx context.Context, root cid.Cid) error {
		// As nodeclient.FetchBase: the whole artifact, or, when the node
		// holds it already, the blocks missing from it.
		e.fetches++
		rec, err := e.origin.Artifact(root)
		if err != nil {
			return err
		}
		sess := e.node.Session()
		defer sess.Close()
		if _, err := artifact.Walk(ctx, copier{e.origin, sess}, root, artifact.DefaultLimits()); err != nil {
			return err
		}
		if _, err := e.node.Artifact(root); err == nil {
			return nil
		}
		_, err = e.node.Complete(ctx, rec.Manifest, time.Now())
		return err
	}
	var err error
	if e.cache, err = basecache.New(filepath.Join(t.TempDir(), "bases"), e.node, fetch); err != nil {
		t.Fatal(err)
	}
	return e
}

// copier reads from one store and puts every block it reads into another.
type copier struct {
	from *store.Store
	to   *store.Session
}

func (c copier) Get(ctx context.Context, k cid.Cid) ([]byte, error) {
	b, err := c.from.Get(ctx, k)
	if err == nil {
		err = c.to.Put(ctx, k, b)
	}
	return b, err
}

func publish(t *testing.T, st *store.Store, dir string, kind artifact.Kind) cid.Cid {
	t.Helper()
	_, key, _ := ed25519.GenerateKey(nil)
	rec, err := st.Publish(context.Background(), dir, store.Meta{Kind: kind, Name: "Qwen/tiny"}, key, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	c, err := cid.Decode(rec.Manifest.Manifest.Root)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func builtinDir(t *testing.T) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "base")
	if err := basemodel.Export(dir); err != nil {
		t.Fatal(err)
	}
	return dir
}

func TestCache(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t)
	src := builtinDir(t)
	root := publish(t, e.origin, src, artifact.KindBaseModel)
	if got, err := basecache.DirCID(ctx, src); err != nil || !got.Equals(root) {
		t.Fatalf("DirCID %v %v, published %v", got, err, root)
	}

	// Miss: fetched, exported, verified.
	dir, err := e.cache.Dir(ctx, root)
	if err != nil {
		t.Fatal(err)
	}
	if st := e.cache.Stats(); st != (basecache.Stats{Fetches: 1}) || e.fetches != 1 || dir != e.cache.Path(root) {
		t.Fatalf("miss: %+v, %d fetches, %s", st, e.fetches, dir)
	}
	// Hit: no fetch.
	if _, err := e.cache.Dir(ctx, root); err != nil {
		t.Fatal(err)
	}
	if st := e.cache.Stats(); st != (basecache.Stats{Hits: 1, Fetches: 1}) || e.fetches != 1 {
		t.Fatalf("hit: %+v, %d fetches", st, e.fetches)
	}
	// Open parses once and names the base by its CID.
	b1, err := e.cache.Open(ctx, root)
	if err != nil {
		t.Fatal(err)
	}
	b2, err := e.cache.Open(ctx, root)
	if err != nil || b1 != b2 || b1.Name != root.String() {
		t.Fatalf("open twice: %p %p %v, name %q", b1, b2, err, b1.Name)
	}
	want, _ := basemodel.Builtin()
	if b1.SHA3 != want.SHA3 {
		t.Fatalf("SHA3 %s, the built-in directory's %s", b1.SHA3, want.SHA3)
	}

	// Corrupt entries: each is detected, removed and fetched again.
	corrupt := map[string]func(p string){
		"edited":  func(p string) { os.WriteFile(filepath.Join(p, basemodel.ConfigFile), []byte("{}"), 0o644) },
		"removed": func(p string) { os.Remove(filepath.Join(p, basemodel.TokenizerFile)) },
		"added":   func(p string) { os.WriteFile(filepath.Join(p, "extra.bin"), []byte("x"), 0o644) },
		"truncated": func(p string) {
			os.Truncate(filepath.Join(p, basemodel.WeightsFile), 100)
		},
		// Another base held under this CID (a directory copied by hand).
		"wrong CID": func(p string) {
			os.RemoveAll(p)
			os.MkdirAll(p, 0o755)
			os.WriteFile(filepath.Join(p, basemodel.ConfigFile), []byte("{}"), 0o644)
		},
		"symlink": func(p string) {
			os.RemoveAll(p)
			os.Symlink(src, p)
		},
	}
	n := 0
	for name, f := range corrupt {
		f(dir)
		got, err := e.cache.Dir(ctx, root)
		n++
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if st := e.cache.Stats(); st.Corrupt != n || st.Fetches != 1+n {
			t.Fatalf("%s: %+v", name, st)
		}
		if c, err := basecache.DirCID(ctx, got); err != nil || !c.Equals(root) {
			t.Fatalf("%s: after refetch %v %v", name, c, err)
		}
		if fi, err := os.Lstat(got); err != nil || !fi.IsDir() {
			t.Fatalf("%s: %v %v", name, fi, err)
		}
	}
	if _, err := os.Stat(filepath.Join(src, basemodel.ConfigFile)); err != nil {
		t.Fatalf("removing the symlinked entry touched its target: %v", err)
	}

	// The store's own copy rotted too (the largest block file, a chunk of
	// the weights, has a byte flipped) and the cached directory is gone:
	// the export finds the bad block, the store drops it, the second
	// fetch puts it back.
	var biggest string
	var size int64
	filepath.WalkDir(filepath.Join(e.node.Dir(), "blocks"), func(p string, d os.DirEntry, err error) error {
		if fi, err := d.Info(); err == nil && fi.Mode().IsRegular() && fi.Size() > size {
			biggest, size = p, fi.Size()
		}
		return nil
	})
	b, err := os.ReadFile(biggest)
	if err != nil {
		t.Fatal(err)
	}
	b[len(b)/2] ^= 1
	if err := os.WriteFile(biggest, b, 0o644); err != nil {
		t.Fatal(err)
	}
	os.RemoveAll(dir)
	before := e.fetches
	got, err := e.cache.Dir(ctx, root)
	if err != nil {
		t.Fatalf("rotted store block: %v", err)
	}
	if c, err := basecache.DirCID(ctx, got); err != nil || !c.Equals(root) || e.fetches != before+2 {
		t.Fatalf("rotted store block: %v %v after %d fetches", c, err, e.fetches-before)
	}
}

func TestCacheRefuses(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t)
	// A CID nobody has.
	other := filepath.Join(t.TempDir(), "other")
	os.MkdirAll(other, 0o755)
	os.WriteFile(filepath.Join(other, "config.json"), []byte("{}"), 0o644)
	absent, err := basecache.DirCID(ctx, other)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.cache.Dir(ctx, absent); !errors.Is(err, basecache.ErrFetch) {
		t.Fatalf("absent: %v", err)
	}
	// An artifact that is not a base model.
	ck := publish(t, e.origin, builtinDir(t), artifact.KindCheckpoint)
	if _, err := e.cache.Dir(ctx, ck); !errors.Is(err, basecache.ErrVerify) {
		t.Fatalf("checkpoint as a base: %v", err)
	}
	if _, err := os.Stat(e.cache.Path(ck)); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a refused artifact was kept: %v", err)
	}
	// A base-model artifact that is no model directory: verified, then
	// refused by basemodel.Open, naming the file.
	bad := publish(t, e.origin, other, artifact.KindBaseModel)
	if _, err := e.cache.Open(ctx, bad); err == nil {
		t.Fatal("opened a directory without weights")
	}
}

// A dataset cache keeps dataset artifacts the same way and refuses any
// other kind; a base-model cache refuses a dataset.
func TestDatasetCache(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t)
	src := t.TempDir()
	if err := os.WriteFile(filepath.Join(src, "train.jsonl"), []byte(`{"q":"1+2","a":"3"}`+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	root := publish(t, e.origin, src, artifact.KindDataset)
	if _, err := e.cache.Dir(ctx, root); !errors.Is(err, basecache.ErrVerify) {
		t.Fatalf("a base-model cache took a dataset: %v", err)
	}
	ds, err := basecache.NewKind(artifact.KindDataset, filepath.Join(t.TempDir(), "datasets"), e.node, func(ctx context.Context, c cid.Cid) error { return nil })
	if err != nil {
		t.Fatal(err)
	}
	dir, err := ds.Dir(ctx, root)
	if err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(filepath.Join(dir, "train.jsonl")); err != nil || string(b) != `{"q":"1+2","a":"3"}`+"\n" {
		t.Fatalf("%q %v", b, err)
	}
	if _, err := ds.Open(ctx, root); err == nil {
		t.Fatal("Open on a dataset cache")
	}
}
