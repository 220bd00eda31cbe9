package store

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/ipfs/go-cid"
	"github.com/zooai/gym/artifact"
)

// srcWith writes a directory with a file shared between versions and one
// of its own.
func srcWith(t *testing.T, shared []byte, seed uint64) string {
	t.Helper()
	dir := t.TempDir()
	must(t, os.WriteFile(filepath.Join(dir, "shared.bin"), shared, 0o644))
	must(t, os.WriteFile(filepath.Join(dir, "own.bin"), randBytes(seed, 300<<10), 0o644))
	return dir
}

// orphans puts n blocks that belong to no artifact, as an interrupted
// fetch leaves them.
func orphans(t *testing.T, s *Store, seed uint64, n int) []cid.Cid {
	t.Helper()
	var out []cid.Cid
	for i := range n {
		d := randBytes(seed+uint64(i), 1000+i)
		c, _ := cid.V1Builder{Codec: cid.Raw, MhType: 0x12}.Sum(d)
		must(t, s.Put(context.Background(), c, d))
		out = append(out, c)
	}
	return out
}

func TestGC(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	s := open(t, dir, 0)
	shared := randBytes(99, 600<<10)
	meta := Meta{Kind: artifact.KindCheckpoint, Name: "job/a"}
	var recs []*Record
	for v := range 3 {
		r, err := s.Publish(ctx, srcWith(t, shared, uint64(v)), meta, key(1), now)
		must(t, err)
		recs = append(recs, r)
	}
	exp, err := s.Publish(ctx, makeSource(t, 7), Meta{Kind: artifact.KindBaseModel, Name: "old", TTL: time.Hour}, key(1), now)
	must(t, err)
	orphans(t, s, 1000, 5)
	blocksBefore, usedBefore := countBlocks(t, dir), s.Used()

	// Nothing to remove under the zero policy but the orphans; dry first.
	pol := GCPolicy{KeepVersions: 1, Expired: true, Now: now.Add(2 * time.Hour), DryRun: true}
	dry, err := s.GC(ctx, pol)
	must(t, err)
	if countBlocks(t, dir) != blocksBefore || s.Used() != usedBefore || len(s.List()) != 4 {
		t.Fatal("a dry run removed something")
	}
	want := []GCArtifact{
		{Root: exp.Root, Kind: "base-model", Name: "old", Version: 1, Reason: "expired"},
		{Root: recs[0].Root, Kind: "checkpoint", Name: "job/a", Version: 1, Reason: "superseded"},
		{Root: recs[1].Root, Kind: "checkpoint", Name: "job/a", Version: 2, Reason: "superseded"},
	}
	if len(dry.Artifacts) != len(want) {
		t.Fatalf("dry run: %+v", dry.Artifacts)
	}
	for i := range want {
		if dry.Artifacts[i] != want[i] {
			t.Fatalf("dry run artifact %d: %+v, want %+v", i, dry.Artifacts[i], want[i])
		}
	}
	pol.DryRun = false
	got, err := s.GC(ctx, pol)
	must(t, err)
	if got.Blocks != dry.Blocks || got.Bytes != dry.Bytes || len(got.Artifacts) != 3 || got.Kept != 1 {
		t.Fatalf("gc %+v, dry run said %+v", got, dry)
	}
	// What is left is exactly v3, intact; the shared file's blocks stayed.
	check := func(s *Store) {
		t.Helper()
		l := s.List()
		if len(l) != 1 || l[0].Root != recs[2].Root {
			t.Fatalf("left: %d artifacts", len(l))
		}
		if errs := s.Verify(ctx); len(errs) != 0 {
			t.Fatal(errs)
		}
		if n := countBlocks(t, dir); n != len(recs[2].Blocks) || s.Used() != int64(recs[2].BlockBytes) {
			t.Fatalf("%d block files, %d bytes used; v3 has %d blocks, %d bytes", n, s.Used(), len(recs[2].Blocks), recs[2].BlockBytes)
		}
		// The newest manifests stay known: a rollback is still refused.
		if k := s.Known(artifact.KindBaseModel, "old"); k == nil || k.Manifest.Root != exp.Root {
			t.Fatal("gc forgot the newest manifest of a removed artifact")
		}
	}
	check(s)
	if got.Bytes != usedBefore-int64(recs[2].BlockBytes) || got.Used != int64(recs[2].BlockBytes) {
		t.Fatalf("freed %d bytes, used %d→%d", got.Bytes, usedBefore, got.Used)
	}
	v1 := recs[0].Manifest
	if _, err := s.Complete(ctx, v1, now); !errors.Is(err, artifact.ErrRollback) {
		t.Fatalf("v1 after gc: %v", err)
	}
	s.Close()
	s = open(t, dir, 0)
	check(s)
	again, err := s.GC(ctx, pol)
	must(t, err)
	if again.Blocks != 0 || len(again.Artifacts) != 0 {
		t.Fatalf("second gc removed %+v", again)
	}
}

// A fetch or publish in progress keeps its blocks through a GC: the ones
// it stored and the ones it found already held (a resume); once its
// session is closed without completing, they go.
func TestGCSparesOpenSessions(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	s := open(t, dir, 0)
	staging := artifact.NewMemBlocks()
	res, err := artifact.Import(ctx, staging, makeSource(t, 3))
	must(t, err)
	ix, err := artifact.Walk(ctx, staging, res.Root, artifact.DefaultLimits())
	must(t, err)
	half := len(ix.Blocks) / 2
	// An earlier, interrupted fetch left the first quarter.
	for _, c := range ix.Blocks[:half/2] {
		d, _ := staging.Get(ctx, c)
		must(t, s.Put(ctx, c, d))
	}
	sess := s.Session()
	for _, c := range ix.Blocks[:half] {
		ok, err := sess.Has(ctx, c)
		must(t, err)
		if !ok {
			d, _ := staging.Get(ctx, c)
			must(t, sess.Put(ctx, c, d))
		}
	}
	strays := orphans(t, s, 2000, 3)
	st, err := s.GC(ctx, GCPolicy{})
	must(t, err)
	if st.Blocks != len(strays) || st.Pinned != half {
		t.Fatalf("gc removed %d blocks and spared %d; want %d and %d", st.Blocks, st.Pinned, len(strays), half)
	}
	for _, c := range ix.Blocks[half:] {
		d, _ := staging.Get(ctx, c)
		must(t, sess.Put(ctx, c, d))
	}
	sm, err := s.sign(res, Meta{Kind: artifact.KindCheckpoint, Name: "f"}, key(1), now)
	must(t, err)
	_, err = s.Complete(ctx, sm, now)
	must(t, err)
	sess.Close()
	st, err = s.GC(ctx, GCPolicy{})
	must(t, err)
	if st.Blocks != 0 || st.Referred != len(ix.Blocks) {
		t.Fatalf("gc after completion: %+v", st)
	}

	// A session closed without completing leaves its blocks to GC.
	sess = s.Session()
	for i := range 4 {
		d := randBytes(4000+uint64(i), 500)
		c, _ := cid.V1Builder{Codec: cid.Raw, MhType: 0x12}.Sum(d)
		must(t, sess.Put(ctx, c, d))
	}
	if st, _ := s.GC(ctx, GCPolicy{}); st.Blocks != 0 || st.Pinned != 4 {
		t.Fatalf("open session: %+v", st)
	}
	sess.Close()
	if st, _ := s.GC(ctx, GCPolicy{}); st.Blocks != 4 {
		t.Fatalf("closed session: %+v", st)
	}
}

// Publishes of new versions race a GC that keeps one version per name:
// every publish completes, and what is left is intact.
func TestGCConcurrentPublish(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	s := open(t, dir, 0)
	shared := randBytes(5, 400<<10)
	srcs := make([]string, 12)
	for i := range srcs {
		srcs[i] = srcWith(t, shared, uint64(100+i))
	}
	var gcs, pubs sync.WaitGroup
	stop := make(chan struct{})
	var gcErr error
	runs := 0
	gcs.Go(func() {
		for {
			select {
			case <-stop:
				return
			default:
			}
			if _, err := s.GC(ctx, GCPolicy{KeepVersions: 1}); err != nil {
				gcErr = err
				return
			}
			runs++
		}
	})
	for w := range 2 {
		pubs.Go(func() {
			for i := w; i < len(srcs); i += 2 {
				name := []string{"x", "y"}[w]
				if _, err := s.Publish(ctx, srcs[i], Meta{Kind: artifact.KindCheckpoint, Name: name}, key(1), now); err != nil {
					t.Error(err)
				}
			}
		})
	}
	pubs.Wait()
	close(stop)
	gcs.Wait()
	t.Logf("%d GC runs during 12 publishes", runs)
	must(t, gcErr)
	_, err := s.GC(ctx, GCPolicy{KeepVersions: 1})
	must(t, err)
	if errs := s.Verify(ctx); len(errs) != 0 {
		t.Fatal(errs)
	}
	l := s.List()
	if len(l) != 2 || l[0].Manifest.Manifest.Version != 6 || l[1].Manifest.Manifest.Version != 6 {
		t.Fatalf("left %d artifacts", len(l))
	}
	n := 0
	for _, r := range l {
		n += len(r.Blocks)
	}
	// The shared file's blocks are in both.
	if got := countBlocks(t, dir); got >= n || got < n/2 {
		t.Fatalf("%d block files for %d blocks of two artifacts", got, n)
	}
}

// GC refuses while another open of the store (another process, or here
// another Store on the same directory) may be writing blocks it cannot see.
func TestGCRefusesSharedStore(t *testing.T) {
	dir := t.TempDir()
	s := open(t, dir, 0)
	other := open(t, dir, 0)
	if _, err := s.GC(context.Background(), GCPolicy{}); !errors.Is(err, ErrInUse) {
		t.Fatalf("gc with the store open twice: %v", err)
	}
	if _, err := s.GC(context.Background(), GCPolicy{DryRun: true}); err != nil {
		t.Fatalf("dry run: %v", err)
	}
	other.Close()
	if _, err := s.GC(context.Background(), GCPolicy{}); err != nil {
		t.Fatalf("gc alone: %v", err)
	}
	// The lock is shared again: another open does not wait.
	open(t, dir, 0)
}

// TestRecordsOfAnotherProcess: an artifact another process completes in a
// store this one has open (gym artifact publish into a running hanzod's
// store) is found by Artifact, exported, and its blocks survive GC once
// that process closed the store.
func TestRecordsOfAnotherProcess(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	s := open(t, dir, 0)
	src := makeSource(t, 5)
	other := open(t, dir, 0)
	rec, err := other.Publish(ctx, src, Meta{Kind: artifact.KindBaseModel, Name: "Qwen/tiny"}, key(3), now)
	must(t, err)
	other.Close()
	root, err := cid.Decode(rec.Root)
	must(t, err)
	// GC first: the record on disk is loaded before anything is swept.
	st, err := s.GC(ctx, GCPolicy{})
	must(t, err)
	if st.Blocks != 0 {
		t.Fatalf("GC removed %d blocks of an artifact another process completed", st.Blocks)
	}
	got, err := s.Artifact(root)
	if err != nil || got.Manifest.Manifest.Kind != artifact.KindBaseModel {
		t.Fatalf("artifact: %+v %v", got, err)
	}
	out := filepath.Join(t.TempDir(), "out")
	must(t, s.Export(ctx, root, out, ""))
	sameTree(t, src, out)

	// Found by Artifact alone too, without a GC in between.
	dir3 := t.TempDir()
	s3 := open(t, dir3, 0)
	o3 := open(t, dir3, 0)
	rec3, err := o3.Publish(ctx, makeSource(t, 6), Meta{Kind: artifact.KindBaseModel, Name: "x"}, key(3), now)
	must(t, err)
	root3, _ := cid.Decode(rec3.Root)
	if _, err := s3.Artifact(root3); err != nil {
		t.Fatalf("artifact completed by another open store: %v", err)
	}
	if _, err := s3.Artifact(root); !errors.Is(err, ErrNoArtifact) {
		t.Fatalf("an artifact nobody completed here: %v", err)
	}
}
