package store

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"errors"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/ipfs/go-cid"
	"github.com/zooai/gym/artifact"
)

var now = time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)

func key(seed byte) ed25519.PrivateKey {
	return ed25519.NewKeyFromSeed(bytes.Repeat([]byte{seed}, 32))
}

func randBytes(seed uint64, n int) []byte {
	r := rand.New(rand.NewPCG(seed, 1))
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

// makeSource writes a small checkpoint directory and returns its path.
func makeSource(t *testing.T, seed uint64) string {
	t.Helper()
	dir := t.TempDir()
	must(t, os.WriteFile(filepath.Join(dir, "config.json"), []byte(`{"seed":`+string(rune('0'+seed%10))+`}`), 0o644))
	must(t, os.Mkdir(filepath.Join(dir, "shards"), 0o755))
	must(t, os.WriteFile(filepath.Join(dir, "shards", "w0.bin"), randBytes(seed, 600<<10+int(seed)), 0o644))
	must(t, os.WriteFile(filepath.Join(dir, "shards", "w1.bin"), randBytes(seed+100, 70<<10), 0o644))
	return dir
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func open(t *testing.T, dir string, quota int64) *Store {
	t.Helper()
	cfg := DefaultConfig(dir)
	cfg.Quota = quota
	s, err := Open(cfg)
	must(t, err)
	t.Cleanup(func() { s.Close() })
	return s
}

func countBlocks(t *testing.T, dir string) int {
	t.Helper()
	n := 0
	filepath.WalkDir(filepath.Join(dir, "blocks"), func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			n++
		}
		return nil
	})
	return n
}

func sameTree(t *testing.T, a, b string) {
	t.Helper()
	n := 0
	filepath.WalkDir(a, func(p string, d fs.DirEntry, err error) error {
		must(t, err)
		rel, _ := filepath.Rel(a, p)
		st, err := os.Lstat(filepath.Join(b, rel))
		if err != nil {
			t.Fatalf("%s missing from the copy: %v", rel, err)
		}
		if d.IsDir() != st.IsDir() {
			t.Fatalf("%s: type differs", rel)
		}
		if !d.IsDir() {
			x, _ := os.ReadFile(p)
			y, _ := os.ReadFile(filepath.Join(b, rel))
			if !bytes.Equal(x, y) {
				t.Fatalf("%s differs", rel)
			}
		}
		n++
		return nil
	})
	m := 0
	filepath.WalkDir(b, func(string, fs.DirEntry, error) error { m++; return nil })
	if n != m {
		t.Fatalf("%d entries in %s, %d in %s", n, a, m, b)
	}
}

func TestPublishRestartExport(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	src := makeSource(t, 1)
	s := open(t, dir, 0)
	rec, err := s.Publish(ctx, src, Meta{Kind: artifact.KindCheckpoint, Name: "zoo/ckpt"}, key(1), now)
	must(t, err)
	want, err := artifact.Import(ctx, artifact.NewMemBlocks(), src)
	must(t, err)
	if rec.Root != want.Root.String() || rec.Manifest.Manifest.Version != 1 {
		t.Fatalf("record %s v%d, want %s v1", rec.Root, rec.Manifest.Manifest.Version, want.Root)
	}
	used := s.Used()
	if used != int64(rec.BlockBytes) || countBlocks(t, dir) != len(rec.Blocks) {
		t.Fatalf("used %d, record %d bytes; %d block files, %d blocks", used, rec.BlockBytes, countBlocks(t, dir), len(rec.Blocks))
	}
	// Leftovers of a crash are cleaned, the rest survives a restart.
	must(t, os.WriteFile(filepath.Join(dir, "tmp", "99-1"), []byte("half a block"), 0o644))
	s.Close()
	s2 := open(t, dir, 0)
	if s2.Used() != used || len(s2.List()) != 1 || s2.Known(artifact.KindCheckpoint, "zoo/ckpt") == nil {
		t.Fatalf("after restart: used %d, %d artifacts", s2.Used(), len(s2.List()))
	}
	if _, err := os.Stat(filepath.Join(dir, "tmp", "99-1")); !errors.Is(err, fs.ErrNotExist) {
		t.Fatal("temporary file survived Open")
	}
	if errs := s2.Verify(ctx); len(errs) != 0 {
		t.Fatal(errs)
	}
	out := filepath.Join(t.TempDir(), "out")
	must(t, s2.Export(ctx, want.Root, out, ""))
	sameTree(t, src, out)
	if err := s2.Export(ctx, want.Root, out, ""); !errors.Is(err, fs.ErrExist) {
		t.Fatalf("export over existing files: %v", err)
	}
	// A second publication of the same name gets the next version.
	rec2, err := s2.Publish(ctx, makeSource(t, 2), Meta{Kind: artifact.KindCheckpoint, Name: "zoo/ckpt"}, key(1), now)
	must(t, err)
	if rec2.Manifest.Manifest.Version != 2 {
		t.Fatalf("second version is v%d", rec2.Manifest.Manifest.Version)
	}
}

func TestSingleFileArtifact(t *testing.T) {
	ctx := context.Background()
	s := open(t, t.TempDir(), 0)
	src := filepath.Join(t.TempDir(), "model.bin")
	must(t, os.WriteFile(src, randBytes(5, 300<<10), 0o644))
	rec, err := s.Publish(ctx, src, Meta{Kind: artifact.KindBaseModel, Name: "base"}, key(1), now)
	must(t, err)
	root, _ := cid.Decode(rec.Root)
	out := t.TempDir()
	if err := s.Export(ctx, root, out, "../escape"); !errors.Is(err, artifact.ErrHostilePath) {
		t.Fatalf("hostile file name: %v", err)
	}
	must(t, s.Export(ctx, root, out, "model.bin"))
	a, _ := os.ReadFile(src)
	b, _ := os.ReadFile(filepath.Join(out, "model.bin"))
	if !bytes.Equal(a, b) {
		t.Fatal("exported file differs")
	}
}

func TestQuota(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	s := open(t, dir, 400<<10) // the source needs ~670 KiB
	_, err := s.Publish(ctx, makeSource(t, 1), Meta{Kind: artifact.KindCheckpoint, Name: "big"}, key(1), now)
	if !errors.Is(err, ErrQuota) {
		t.Fatalf("over quota: %v", err)
	}
	if s.Used() != 0 || countBlocks(t, dir) != 0 || len(s.List()) != 0 {
		t.Fatalf("a failed publish left %d bytes, %d blocks, %d artifacts", s.Used(), countBlocks(t, dir), len(s.List()))
	}
	// A small one fits, and the usage is remembered across a restart.
	small := t.TempDir()
	must(t, os.WriteFile(filepath.Join(small, "f"), randBytes(2, 300<<10), 0o644))
	_, err = s.Publish(ctx, small, Meta{Kind: artifact.KindCheckpoint, Name: "small"}, key(1), now)
	must(t, err)
	s.Close()
	s = open(t, dir, 400<<10)
	d := randBytes(3, 200<<10)
	c, _ := cid.V1Builder{Codec: cid.Raw, MhType: 0x12}.Sum(d)
	if err := s.Put(ctx, c, d); !errors.Is(err, ErrQuota) {
		t.Fatalf("after restart the quota forgot the usage: %v", err)
	}
}

func signed(t *testing.T, s *Store, src string, version uint64, created time.Time, ttl time.Duration) *artifact.Signed {
	t.Helper()
	res, err := artifact.Import(context.Background(), s, src)
	must(t, err)
	sm, err := s.sign(res, Meta{Kind: artifact.KindCheckpoint, Name: "zoo/ckpt", Version: version, TTL: ttl}, key(1), created)
	must(t, err)
	return sm
}

func TestRollbackFreezeMixAndMatch(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	s := open(t, dir, 0)
	srcA, srcB := makeSource(t, 1), makeSource(t, 2)
	v1 := signed(t, s, srcA, 1, now, time.Hour)
	v2 := signed(t, s, srcB, 2, now, time.Hour)
	_, err := s.Complete(ctx, v2, now)
	must(t, err)
	if _, err := s.Complete(ctx, v1, now); !errors.Is(err, artifact.ErrRollback) {
		t.Fatalf("rollback: %v", err)
	}
	s.Close()
	s = open(t, dir, 0)
	if _, err := s.Complete(ctx, v1, now); !errors.Is(err, artifact.ErrRollback) {
		t.Fatalf("rollback after restart: %v", err)
	}
	v3 := signed(t, s, srcA, 3, now, time.Hour)
	if _, err := s.Complete(ctx, v3, now.Add(2*time.Hour)); !errors.Is(err, artifact.ErrExpired) {
		t.Fatalf("expired: %v", err)
	}
	// Mix and match: v4 names A's root but B's file list.
	m := v3.Manifest
	m.Version = 4
	m.Files = v2.Manifest.Files
	m.Size = v2.Manifest.Size
	mixed, err := artifact.Sign(m, key(1))
	must(t, err)
	if _, err := s.Complete(ctx, mixed, now); !errors.Is(err, artifact.ErrMismatch) {
		t.Fatalf("mix and match: %v", err)
	}
	if len(s.List()) != 1 {
		t.Fatalf("%d artifacts visible", len(s.List()))
	}
}

func TestIncompleteArtifactInvisible(t *testing.T) {
	ctx := context.Background()
	src := makeSource(t, 1)
	staging := artifact.NewMemBlocks()
	res, err := artifact.Import(ctx, staging, src)
	must(t, err)
	ix, err := artifact.Walk(ctx, staging, res.Root, artifact.DefaultLimits())
	must(t, err)
	s := open(t, t.TempDir(), 0)
	for _, c := range ix.Blocks[:len(ix.Blocks)-1] {
		d, _ := staging.Get(ctx, c)
		must(t, s.Put(ctx, c, d))
	}
	sm, err := s.sign(res, Meta{Kind: artifact.KindCheckpoint, Name: "x"}, key(1), now)
	must(t, err)
	if _, err := s.Complete(ctx, sm, now); !errors.Is(err, artifact.ErrNotFound) {
		t.Fatalf("incomplete: %v", err)
	}
	if len(s.List()) != 0 {
		t.Fatal("an incomplete artifact is visible")
	}
	if _, err := s.Artifact(res.Root); !errors.Is(err, ErrNoArtifact) {
		t.Fatal(err)
	}
	last := ix.Blocks[len(ix.Blocks)-1]
	d, _ := staging.Get(ctx, last)
	if err := s.Put(ctx, last, append([]byte{1}, d...)); !errors.Is(err, artifact.ErrHashMismatch) {
		t.Fatalf("bad block: %v", err)
	}
	must(t, s.Put(ctx, last, d))
	_, err = s.Complete(ctx, sm, now)
	must(t, err)
}

func TestCorruptionOnDisk(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	s := open(t, dir, 0)
	rec, err := s.Publish(ctx, makeSource(t, 1), Meta{Kind: artifact.KindCheckpoint, Name: "c"}, key(1), now)
	must(t, err)
	c, _ := cid.Decode(rec.Blocks[len(rec.Blocks)-1])
	p := filepath.Join(dir, filepath.FromSlash(blockPath(c)))
	data, _ := os.ReadFile(p)
	data[0] ^= 0xff
	must(t, os.WriteFile(p, data, 0o644))
	if errs := s.Verify(ctx); len(errs) != 1 || !errors.Is(errs[0], artifact.ErrHashMismatch) {
		t.Fatalf("verify: %v", errs)
	}
	if ok, _ := s.Has(ctx, c); ok {
		t.Fatal("the corrupt block is still held")
	}
}

func TestHostileStoreFiles(t *testing.T) {
	ctx := context.Background()
	outside := t.TempDir()
	secret := filepath.Join(outside, "secret")
	must(t, os.WriteFile(secret, []byte("do not read"), 0o600))
	d := []byte("block")
	c, _ := cid.V1Builder{Codec: cid.Raw, MhType: 0x12}.Sum(d)

	// A symlink where a block should be: never followed.
	dir := t.TempDir()
	s := open(t, dir, 0)
	p := filepath.Join(dir, filepath.FromSlash(blockPath(c)))
	must(t, os.MkdirAll(filepath.Dir(p), 0o755))
	must(t, os.Symlink(secret, p))
	if _, err := s.Get(ctx, c); !errors.Is(err, ErrHostileFile) {
		t.Fatalf("symlinked block: %v", err)
	}
	if _, err := s.Has(ctx, c); !errors.Is(err, ErrHostileFile) {
		t.Fatalf("symlinked block: %v", err)
	}
	s.Close()
	if _, err := Open(DefaultConfig(dir)); !errors.Is(err, ErrHostileFile) {
		t.Fatalf("open with a symlinked block: %v", err)
	}

	// A FIFO among the blocks, a symlinked directory.
	dir = t.TempDir()
	open(t, dir, 0).Close()
	must(t, syscall.Mkfifo(filepath.Join(dir, "blocks", "fifo"), 0o644))
	if _, err := Open(DefaultConfig(dir)); !errors.Is(err, ErrHostileFile) {
		t.Fatalf("open with a FIFO: %v", err)
	}
	dir = t.TempDir()
	must(t, os.Symlink(outside, filepath.Join(dir, "artifacts")))
	if _, err := Open(DefaultConfig(dir)); !errors.Is(err, ErrHostileFile) {
		t.Fatalf("open with symlinked artifacts/: %v", err)
	}

	// Export into a directory whose subdirectory is a symlink out.
	s = open(t, t.TempDir(), 0)
	rec, err := s.Publish(ctx, makeSource(t, 1), Meta{Kind: artifact.KindCheckpoint, Name: "e"}, key(1), now)
	must(t, err)
	root, _ := cid.Decode(rec.Root)
	out := t.TempDir()
	must(t, os.Symlink(outside, filepath.Join(out, "shards")))
	if err := s.Export(ctx, root, out, ""); !errors.Is(err, ErrHostileFile) {
		t.Fatalf("export through a symlink: %v", err)
	}
	ents, _ := os.ReadDir(outside)
	if len(ents) != 1 {
		t.Fatalf("export wrote outside its directory: %v", ents)
	}
}

// The same content published again under a new version is one artifact
// with the newer manifest, before and after a restart.
func TestRepublishSameContent(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	s := open(t, dir, 0)
	src := makeSource(t, 1)
	meta := Meta{Kind: artifact.KindCheckpoint, Name: "same"}
	r1, err := s.Publish(ctx, src, meta, key(1), now)
	must(t, err)
	used := s.Used()
	r2, err := s.Publish(ctx, src, meta, key(1), now)
	must(t, err)
	if r1.Root != r2.Root || r2.Manifest.Manifest.Version != 2 || s.Used() != used {
		t.Fatalf("v%d of %s, used %d→%d", r2.Manifest.Manifest.Version, r2.Root, used, s.Used())
	}
	s.Close()
	s = open(t, dir, 0)
	l := s.List()
	if len(l) != 1 || l[0].Manifest.Manifest.Version != 2 || s.Known(artifact.KindCheckpoint, "same").Manifest.Version != 2 {
		t.Fatalf("after restart: %d artifacts, v%d", len(l), l[0].Manifest.Manifest.Version)
	}
}

// countingSession counts the blocks a walk reads.
type countingSession struct {
	*Session
	reads map[uint64]int
}

func (c *countingSession) Get(ctx context.Context, b cid.Cid) ([]byte, error) {
	c.reads[b.Type()]++
	return c.Session.Get(ctx, b)
}

// fetchInto stores an artifact's blocks through a new session, as a fetch
// does, and returns the session, the signed manifest and the full index.
func fetchInto(t *testing.T, s *Store, seed uint64) (*Session, *artifact.Signed, *artifact.Index) {
	t.Helper()
	ctx := context.Background()
	staging := artifact.NewMemBlocks()
	res, err := artifact.Import(ctx, staging, makeSource(t, seed))
	must(t, err)
	ix, err := artifact.Walk(ctx, staging, res.Root, artifact.DefaultLimits())
	must(t, err)
	sess := s.Session()
	t.Cleanup(sess.Close)
	for _, c := range ix.Blocks {
		d, _ := staging.Get(ctx, c)
		must(t, sess.Put(ctx, c, d))
	}
	sm, err := s.sign(res, Meta{Kind: artifact.KindCheckpoint, Name: "c"}, key(1), now)
	must(t, err)
	return sess, sm, ix
}

// Completing an artifact through the session that stored its blocks reads
// and hashes only the DAG's interior nodes: the leaves were verified by
// Put, so their sizes come from the disk, and the index is the one a walk
// that reads every block builds. A leaf cut short on disk still fails the
// walk. A session that did not write the leaves (a fetch resumed after a
// crash, which may have torn blocks that were never synced) reads and
// verifies every one, and removes a torn one so it is fetched again.
func TestCompleteSizesLeaves(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	s := open(t, dir, 0)
	sess, sm, full := fetchInto(t, s, 3)
	cs := &countingSession{Session: sess, reads: map[uint64]int{}}
	ix, err := artifact.Walk(ctx, cs, full.Root, artifact.DefaultLimits())
	must(t, err)
	if cs.reads[cid.Raw] != 0 || cs.reads[cid.DagProtobuf] == 0 {
		t.Fatalf("reads by type: %v, want interior nodes only", cs.reads)
	}
	if ix.BlockBytes != full.BlockBytes || len(ix.Blocks) != len(full.Blocks) || len(ix.Files) != len(full.Files) {
		t.Fatalf("sized walk: %d blocks, %d bytes, %d files; read walk: %d, %d, %d",
			len(ix.Blocks), ix.BlockBytes, len(ix.Files), len(full.Blocks), full.BlockBytes, len(full.Files))
	}
	for i := range ix.Blocks {
		if !ix.Blocks[i].Equals(full.Blocks[i]) {
			t.Fatalf("block %d: %s, want %s", i, ix.Blocks[i], full.Blocks[i])
		}
	}

	// A chunk of a file of several blocks cut short on disk: the sizes
	// its parent declares no longer add up.
	var leaf cid.Cid
	for _, b := range full.Blocks {
		if d, _ := s.Get(ctx, b); b.Type() == cid.Raw && len(d) == 256<<10 {
			leaf = b
		}
	}
	p := filepath.Join(dir, filepath.FromSlash(blockPath(leaf)))
	data, _ := os.ReadFile(p)
	must(t, os.WriteFile(p, data[:len(data)-1], 0o644))
	if _, err := sess.Complete(ctx, sm, now); !errors.Is(err, artifact.ErrBadDAG) {
		t.Fatalf("complete over a truncated leaf: %v, want ErrBadDAG", err)
	}
	// The same size, other bytes (a torn block), seen by a session that did
	// not write it: read, refused, removed.
	torn := append([]byte(nil), data...)
	torn[0] ^= 0xff
	must(t, os.WriteFile(p, torn, 0o644))
	later := &countingSession{Session: s.Session(), reads: map[uint64]int{}}
	defer later.Close()
	if _, err := artifact.Walk(ctx, later, full.Root, artifact.DefaultLimits()); !errors.Is(err, artifact.ErrHashMismatch) {
		t.Fatalf("walk of a torn leaf by another session: %v, want ErrHashMismatch", err)
	}
	if ok, _ := s.Has(ctx, leaf); ok {
		t.Fatal("the torn leaf is still held")
	}
	if _, err := s.Complete(ctx, sm, now); !errors.Is(err, artifact.ErrNotFound) {
		t.Fatalf("complete without the leaf: %v, want ErrNotFound", err)
	}
	must(t, sess.Put(ctx, leaf, data))
	rec, err := sess.Complete(ctx, sm, now)
	must(t, err)
	if rec.BlockBytes != full.BlockBytes {
		t.Fatalf("record of %d bytes, want %d", rec.BlockBytes, full.BlockBytes)
	}
}
