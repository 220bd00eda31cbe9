package store

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/ipfs/go-cid"

	"github.com/zooai/gym/artifact"
)

// Session is a view of the store for one publish or fetch (an
// artifact.Blocks). Every block it puts, reads or asks about is pinned
// until Close: GC does not remove it, although no complete artifact holds
// it yet. Complete the artifact before closing the session; a fetch that
// is interrupted just closes it, and its blocks stay for the next attempt
// until a GC removes them.
type Session struct {
	s      *Store
	hashed bool // blocks come from our own importer: not hashed again

	mu     sync.Mutex
	pinned map[string]struct{} // multihashes this session pinned
	added  []cid.Cid
	wrote  map[string]struct{} // multihashes of added
	closed bool
}

// Session opens a session. Close it when done.
func (s *Store) Session() *Session {
	return &Session{s: s, pinned: map[string]struct{}{}, wrote: map[string]struct{}{}}
}

// pin marks c held by this session. It must happen before the session
// looks at the block on disk (see removeUnheld).
func (ss *Session) pin(c cid.Cid) {
	k := string(c.Hash())
	ss.mu.Lock()
	defer ss.mu.Unlock()
	if ss.closed {
		return
	}
	if _, ok := ss.pinned[k]; ok {
		return
	}
	ss.pinned[k] = struct{}{}
	ss.s.mu.Lock()
	ss.s.pins[k]++
	ss.s.mu.Unlock()
}

// Get reads a block (see Store.Get).
func (ss *Session) Get(ctx context.Context, c cid.Cid) ([]byte, error) {
	ss.pin(c)
	return ss.s.Get(ctx, c)
}

// LeafSize returns the size of a raw leaf (an artifact.LeafSizer). A
// block this session wrote was verified against its CID by Put moments
// ago, in this process: its size comes from the disk and it is not read
// again. Any other block may be one a crash tore before it reached the
// disk (blocks are not fsynced one by one): it is read and verified (Get).
func (ss *Session) LeafSize(ctx context.Context, c cid.Cid) (uint64, error) {
	ss.pin(c)
	ss.mu.Lock()
	_, mine := ss.wrote[string(c.Hash())]
	ss.mu.Unlock()
	if !mine {
		data, err := ss.s.Get(ctx, c)
		return uint64(len(data)), err
	}
	size, err := ss.s.blockStat(c)
	if errors.Is(err, fs.ErrNotExist) {
		return 0, fmt.Errorf("%w: %s", artifact.ErrNotFound, c)
	}
	return uint64(size), err
}

// Complete completes an artifact through this session (see
// Store.Complete): the walk reads and verifies the DAG's interior nodes
// and the leaves this session did not write itself.
func (ss *Session) Complete(ctx context.Context, sm *artifact.Signed, now time.Time) (*Record, error) {
	return ss.s.complete(ctx, ss, sm, now)
}

// Has reports whether the block is held (see Store.Has).
func (ss *Session) Has(ctx context.Context, c cid.Cid) (bool, error) {
	ss.pin(c)
	return ss.s.Has(ctx, c)
}

// Put stores a block (see Store.Put) and remembers it if it was new.
func (ss *Session) Put(ctx context.Context, c cid.Cid, data []byte) error {
	ss.pin(c)
	had, err := ss.s.Has(ctx, c)
	if err != nil {
		return err
	}
	if err := ss.s.put(ctx, c, data, ss.hashed); err != nil {
		return err
	}
	if !had {
		ss.mu.Lock()
		ss.added = append(ss.added, c)
		ss.wrote[string(c.Hash())] = struct{}{}
		ss.mu.Unlock()
	}
	return nil
}

// Added returns the blocks this session added to the store.
func (ss *Session) Added() []cid.Cid {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	return append([]cid.Cid(nil), ss.added...)
}

// Close ends the session: its blocks are no longer pinned. It may be
// called more than once.
func (ss *Session) Close() {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	if ss.closed {
		return
	}
	ss.closed = true
	ss.s.mu.Lock()
	for k := range ss.pinned {
		if ss.s.pins[k]--; ss.s.pins[k] <= 0 {
			delete(ss.s.pins, k)
		}
	}
	ss.s.mu.Unlock()
	ss.pinned = nil
}

// Discard ends the session and removes the blocks it added, except those
// a complete artifact or another open session holds: what a publish or
// fetch that failed on the quota does to leave nothing behind.
func (ss *Session) Discard(ctx context.Context) {
	ss.Close()
	ss.s.RemoveUnreferenced(ctx, ss.Added())
}

// GCPolicy says which complete artifacts GC removes. Blocks that belong to
// no complete artifact and no open session are always removed. The zero
// policy removes no artifact.
type GCPolicy struct {
	// KeepVersions, if positive, keeps the newest KeepVersions complete
	// artifacts of each kind and name and removes the older ones.
	KeepVersions int
	// Expired removes complete artifacts whose manifest has expired at Now:
	// no peer accepts them any more.
	Expired bool
	Now     time.Time
	// Keep, if set, protects the artifacts for which it returns true (say,
	// the checkpoints of jobs still running) from both rules.
	Keep func(*Record) bool
	// DryRun reports what would be removed and removes nothing.
	DryRun bool
}

// GCArtifact is an artifact GC removed (or, dry, would remove).
type GCArtifact struct {
	Root    string `json:"root"`
	Kind    string `json:"kind"`
	Name    string `json:"name"`
	Version uint64 `json:"version"`
	Reason  string `json:"reason"` // "superseded" or "expired"
}

// GCStats is what GC did.
type GCStats struct {
	DryRun    bool         `json:"dry_run,omitempty"`
	Artifacts []GCArtifact `json:"artifacts"`         // removed
	Kept      int          `json:"kept_artifacts"`    // complete artifacts left
	Blocks    int          `json:"blocks"`            // block files removed
	Bytes     int64        `json:"bytes"`             // their bytes
	Pinned    int          `json:"pinned_blocks"`     // unreferenced blocks kept for an open session
	Used      int64        `json:"used_bytes_after"`  // Used() afterwards
	Elapsed   float64      `json:"elapsed_seconds"`   // wall time
	Referred  int          `json:"referenced_blocks"` // blocks kept for complete artifacts
}

// GC removes the complete artifacts the policy names, then every block
// that belongs to no complete artifact and to no open session: blocks of
// interrupted fetches, of failed publishes, of removed artifacts.
//
// Safety: a block of a complete artifact that stays is never removed (the
// decision is made per block, under the store's lock, against the
// reference counts of the complete artifacts); a block that a publish or a
// fetch in this process has put or looked at is pinned by its session
// (Publish, Complete and transfer.GetArtifact use sessions), so they run
// safely alongside GC. A record is removed before any of its blocks, so a
// crash in between leaves unreferenced blocks, never an artifact with
// missing blocks. Another process that has the store open may be writing
// blocks this process cannot see pinned, so GC refuses (ErrInUse) unless
// this process alone has the store open; run it in the process that owns
// the store. The newest manifest known per name is kept whatever is
// removed: it is what refuses a rollback.
func (s *Store) GC(ctx context.Context, p GCPolicy) (GCStats, error) {
	start := time.Now()
	st := GCStats{DryRun: p.DryRun, Artifacts: []GCArtifact{}}
	if !p.DryRun {
		if err := tryLockExclusive(s.lock); err != nil {
			return st, fmt.Errorf("%w: %v", ErrInUse, err)
		}
		defer lockShared(s.lock)
	}
	// Artifacts another process completed since this one opened the store
	// (it has closed it since, or the lock would not be ours): their
	// blocks are referenced, not garbage.
	s.mu.Lock()
	err := s.loadRecords()
	s.mu.Unlock()
	if err != nil {
		return st, err
	}
	refs, err := s.gcArtifacts(p, &st)
	if err != nil {
		return st, err
	}
	shards, err := s.readDir("blocks")
	if err != nil {
		return st, err
	}
	for _, sh := range shards {
		if err := ctx.Err(); err != nil {
			return st, err
		}
		if !sh.IsDir() {
			return st, fmt.Errorf("%w: blocks/%s", ErrHostileFile, sh.Name())
		}
		ents, err := s.readDir("blocks/" + sh.Name())
		if err != nil {
			return st, err
		}
		for _, e := range ents {
			p := "blocks/" + sh.Name() + "/" + e.Name()
			// A name that is no multihash is not a block of ours: it goes.
			mh, _ := b32.DecodeString(strings.ToUpper(e.Name()))
			key := string(mh)
			if refs != nil { // dry run: decide against the simulated counts
				s.mu.Lock()
				ref, pin := refs[key] > 0, s.pins[key] > 0
				s.mu.Unlock()
				switch {
				case ref:
					st.Referred++
				case pin:
					st.Pinned++
				default:
					if info, err := e.Info(); err == nil {
						st.Blocks++
						st.Bytes += info.Size()
					}
				}
				continue
			}
			n, err := s.removeUnheld(key, p)
			if err != nil {
				return st, err
			}
			if n >= 0 {
				st.Blocks++
				st.Bytes += n
				continue
			}
			s.mu.Lock()
			switch {
			case s.referenced[key] > 0:
				st.Referred++
			case s.pins[key] > 0:
				st.Pinned++
			}
			s.mu.Unlock()
		}
	}
	st.Used = s.Used()
	st.Elapsed = time.Since(start).Seconds()
	return st, nil
}

// gcArtifacts removes (or, dry, picks) the artifacts the policy names.
// For a dry run it returns the reference counts as they would be.
func (s *Store) gcArtifacts(p GCPolicy, st *GCStats) (map[string]int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	byName := map[string][]*Record{}
	for _, r := range s.records {
		m := r.Manifest.Manifest
		k := string(m.Kind) + "/" + m.Name
		byName[k] = append(byName[k], r)
	}
	var victims []*Record
	var reasons []string
	for _, rs := range byName {
		sort.Slice(rs, func(i, j int) bool { return rs[i].Manifest.Manifest.Version > rs[j].Manifest.Manifest.Version })
		for i, r := range rs {
			reason := ""
			switch {
			case p.Keep != nil && p.Keep(r):
			case p.KeepVersions > 0 && i >= p.KeepVersions:
				reason = "superseded"
			case p.Expired && !p.Now.Before(r.Manifest.Manifest.Expires):
				reason = "expired"
			}
			if reason == "" {
				st.Kept++
				continue
			}
			victims = append(victims, r)
			reasons = append(reasons, reason)
		}
	}
	var refs map[string]int
	if p.DryRun {
		refs = make(map[string]int, len(s.referenced))
		for k, v := range s.referenced {
			refs[k] = v
		}
	}
	removed := false
	var err error
	for i, r := range victims {
		if !p.DryRun {
			if err = s.root.Remove("artifacts/" + r.Root + ".json"); err != nil {
				break
			}
			removed = true
			delete(s.records, r.Root)
		}
		m := r.Manifest.Manifest
		st.Artifacts = append(st.Artifacts, GCArtifact{Root: r.Root, Kind: string(m.Kind), Name: m.Name, Version: m.Version, Reason: reasons[i]})
		counts := s.referenced
		if p.DryRun {
			counts = refs
		}
		for _, b := range r.Blocks {
			if c, err := cid.Decode(b); err == nil {
				k := string(c.Hash())
				if counts[k]--; counts[k] <= 0 {
					delete(counts, k)
				}
			}
		}
	}
	sort.Slice(st.Artifacts, func(i, j int) bool {
		a, b := st.Artifacts[i], st.Artifacts[j]
		if a.Kind+"/"+a.Name != b.Kind+"/"+b.Name {
			return a.Kind+"/"+a.Name < b.Kind+"/"+b.Name
		}
		return a.Version < b.Version
	})
	if removed {
		// The records must be gone for good before their blocks go.
		if serr := s.syncDir("artifacts"); err == nil {
			err = serr
		}
	}
	return refs, err
}
