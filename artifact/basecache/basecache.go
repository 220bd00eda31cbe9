// Package basecache keeps the base models jobs name by CID on a node's disk.
//
// A job's model is "builtin" or the root CID of a base-model artifact (a
// Hugging Face model directory published with `gym artifact publish --kind
// base-model DIR`). A worker, and hanzod's validator, resolve such a CID
// through a Cache: the artifact is made complete in the node's artifact
// store (Fetch: from hanzod and peers for a worker, already there for
// hanzod), exported to DIR/<cid>/ and checked again by rebuilding the
// directory's DAG: the root must be the CID the job names (CID = content).
// A later job on the same base finds DIR/<cid>/, re-hashes it, and uses it
// without fetching; an entry that no longer hashes to its CID (a file
// edited, truncated or removed) is deleted and fetched again. Open parses
// a verified directory with basemodel.Open once per process and CID.
//
// Nothing here trusts the manifest's name or creator: the CID the job names
// is the trust anchor, and the manifest's kind must be base-model.
//
// Datasets (a job's dataset named by CID) are kept the same way by a cache
// made with NewKind(artifact.KindDataset, ...): Dir returns the verified
// directory of a dataset artifact; Open is for base models only.
package basecache

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sync"

	"github.com/ipfs/go-cid"

	"github.com/zooai/gym/artifact"
	"github.com/zooai/gym/artifact/store"
	"github.com/zooai/gym/internal/atomicfile"
	"github.com/zooai/gym/model/basemodel"
)

// Errors.
var (
	// ErrVerify is a directory whose DAG root is not the CID it is held
	// under, or an artifact that is not a base model.
	ErrVerify = errors.New("basecache: artifact does not verify")
	// ErrFetch wraps a failure to get the artifact into the store.
	ErrFetch = errors.New("basecache: artifact not available")
)

// Fetch makes root a complete artifact in the store; when it already is
// one, it fetches the blocks missing from it (a block that rotted is
// removed when read).
type Fetch func(ctx context.Context, root cid.Cid) error

// Stats counts what Dir did.
type Stats struct {
	Hits    int // a cached directory verified and was used
	Fetches int // the artifact was fetched (or taken from the store) and exported
	Corrupt int // a cached directory did not verify and was removed
}

// Cache resolves base-model CIDs to verified directories and parsed bases.
// Safe for concurrent use (calls are serialised).
type Cache struct {
	kind  artifact.Kind
	dir   string
	st    *store.Store
	fetch Fetch

	mu    sync.Mutex
	stats Stats
	bases map[string]*basemodel.Base
}

// New returns a cache keeping directories under dir, exporting from st,
// and calling fetch for a CID it does not hold.
func New(dir string, st *store.Store, fetch Fetch) (*Cache, error) {
	return NewKind(artifact.KindBaseModel, dir, st, fetch)
}

// NewKind is New for artifacts of another kind (artifact.KindDataset):
// Dir accepts only artifacts of that kind.
func NewKind(kind artifact.Kind, dir string, st *store.Store, fetch Fetch) (*Cache, error) {
	if dir == "" || st == nil || fetch == nil {
		return nil, errors.New("basecache: needs a directory, a store and a fetch function")
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	return &Cache{kind: kind, dir: dir, st: st, fetch: fetch, bases: map[string]*basemodel.Base{}}, nil
}

// Stats returns the counters so far.
func (c *Cache) Stats() Stats {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.stats
}

// Path is where the directory of root is kept.
func (c *Cache) Path(root cid.Cid) string { return filepath.Join(c.dir, root.String()) }

// Dir returns the directory of the base model root, verified against its
// CID: from the cache, or fetched, checked to be a base-model artifact,
// exported and verified.
func (c *Cache) Dir(ctx context.Context, root cid.Cid) (string, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.dirLocked(ctx, root)
}

func (c *Cache) dirLocked(ctx context.Context, root cid.Cid) (string, error) {
	if err := artifact.CheckCID(root); err != nil {
		return "", fmt.Errorf("%w: %w", ErrVerify, err)
	}
	p := c.Path(root)
	switch _, err := os.Lstat(p); {
	case err == nil:
		got, err := DirCID(ctx, p)
		if err == nil && got.Equals(root) {
			c.stats.Hits++
			return p, nil
		}
		if ctx.Err() != nil {
			return "", ctx.Err()
		}
		// Edited, truncated, a file added or removed, or not a directory
		// at all: it is not this base any more. Fetch it again.
		c.stats.Corrupt++
		if err := os.RemoveAll(p); err != nil {
			return "", fmt.Errorf("basecache: remove corrupt %s: %w", p, err)
		}
	case !errors.Is(err, fs.ErrNotExist):
		return "", err
	}
	// Two tries: a block of the store's copy that rotted is removed when
	// the export reads it, and the second fetch puts it back.
	var err error
	for try := 0; try < 2; try++ {
		if err = c.fetch(ctx, root); err != nil {
			return "", fmt.Errorf("%w: %s: %w", ErrFetch, root, err)
		}
		if err = c.export(ctx, root, p); err == nil || errors.Is(err, ErrVerify) || ctx.Err() != nil {
			break
		}
	}
	if err != nil {
		return "", fmt.Errorf("basecache: %s: %w", root, err)
	}
	c.stats.Fetches++
	return p, nil
}

// export writes the store's artifact root to p, verified.
func (c *Cache) export(ctx context.Context, root cid.Cid, p string) error {
	rec, err := c.st.Artifact(root)
	if err != nil {
		return fmt.Errorf("%w: %s: %w", ErrFetch, root, err)
	}
	if k := rec.Manifest.Manifest.Kind; k != c.kind {
		return fmt.Errorf("%w: %s is a %s artifact, not a %s", ErrVerify, root, k, c.kind)
	}
	return atomicfile.Dir(p, 0o755, func(tmp string) error {
		if err := c.st.Export(ctx, root, tmp, ""); err != nil {
			return err
		}
		got, err := DirCID(ctx, tmp)
		if err != nil {
			return err
		}
		if !got.Equals(root) {
			return fmt.Errorf("%w: the exported directory is %s, not %s", ErrVerify, got, root)
		}
		return nil
	})
}

// Open returns the base model root parsed (basemodel.Open of its verified
// directory, named by its CID). It is parsed once per Cache: later calls
// return the same *Base.
func (c *Cache) Open(ctx context.Context, root cid.Cid) (*basemodel.Base, error) {
	if c.kind != artifact.KindBaseModel {
		return nil, fmt.Errorf("basecache: Open on a cache of %s artifacts", c.kind)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if b, ok := c.bases[root.String()]; ok {
		return b, nil
	}
	dir, err := c.dirLocked(ctx, root)
	if err != nil {
		return nil, err
	}
	b, err := basemodel.Open(dir)
	if err != nil {
		return nil, err
	}
	b.Name = root.String()
	c.bases[root.String()] = b
	return b, nil
}

// OpenConfig returns what a process that never computes with the base
// needs of it (hanzod on nodes, docs/validators.md "Evaluations"): its
// config and tokenizer (basemodel.OpenConfig: no tensor read) and the
// directory's SHA3 (streamed, not held), named by its CID. Parsed once
// per Cache.
func (c *Cache) OpenConfig(ctx context.Context, root cid.Cid) (*basemodel.Base, error) {
	if c.kind != artifact.KindBaseModel {
		return nil, fmt.Errorf("basecache: OpenConfig on a cache of %s artifacts", c.kind)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	key := "config:" + root.String()
	if b, ok := c.bases[key]; ok {
		return b, nil
	}
	dir, err := c.dirLocked(ctx, root)
	if err != nil {
		return nil, err
	}
	b, err := basemodel.OpenConfig(dir)
	if err != nil {
		return nil, err
	}
	if b.SHA3, err = basemodel.DirSHA3(os.DirFS(dir)); err != nil {
		return nil, fmt.Errorf("basecache: %s: %w", dir, err)
	}
	b.Name = root.String()
	c.bases[key] = b
	return b, nil
}

// DirCID returns the root CID `gym artifact publish` gives the file or
// directory at path, hashing it without keeping its blocks.
func DirCID(ctx context.Context, path string) (cid.Cid, error) {
	res, err := artifact.Import(ctx, &hashOnly{nodes: artifact.NewMemBlocks()}, path)
	if err != nil {
		return cid.Undef, err
	}
	return res.Root, nil
}

// hashOnly is an artifact.Blocks that drops raw leaves (file contents) and
// keeps the dag-pb nodes (a few bytes per 256 KiB chunk) in case the
// importer reads one back.
type hashOnly struct{ nodes *artifact.MemBlocks }

func (h *hashOnly) Get(ctx context.Context, c cid.Cid) ([]byte, error) { return h.nodes.Get(ctx, c) }
func (h *hashOnly) Has(ctx context.Context, c cid.Cid) (bool, error) {
	if c.Prefix().Codec == cid.Raw {
		return false, nil
	}
	return h.nodes.Has(ctx, c)
}
func (h *hashOnly) Put(ctx context.Context, c cid.Cid, data []byte) error {
	if c.Prefix().Codec == cid.Raw {
		return nil
	}
	return h.nodes.Put(ctx, c, data)
}
