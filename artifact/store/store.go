// Package store keeps artifacts on disk: blocks by CID, each verified by
// hashing against its CID when written and when read; a record per
// complete artifact, written only after its whole DAG has been walked and
// matched against its signed manifest; the newest manifest known for each
// artifact name, which refuses rollbacks; and a byte quota.
//
// Every file operation goes through an os.Root, so nothing is read or
// written outside the store's directory, and every file is Lstat-checked
// to be a regular file or directory: a symlink, FIFO or device planted in
// the store is refused, never followed or opened. Writes go to a temporary
// file in tmp/ that is fsynced and renamed into place, so a crash leaves
// either the old state or the new one, and Open rebuilds all in-memory state
// (quota usage, the set of referenced blocks) from the directory.
//
// Layout under the store's directory:
//
//	blocks/XY/<base32 multihash>     one block; XY = the name's last two characters
//	artifacts/<root CID>.json        record of a complete, verified artifact
//	manifests/<kind>/<name>.json     newest signed manifest known ('/' in name → '~')
//	tmp/                             temporary files, emptied by Open when no other process has the store open
//	lock                             flock: shared while open, exclusive while GC runs
//
// Publishing and fetching go through a Session, which pins the blocks it
// touches until the artifact is complete; GC removes every block that no
// complete artifact and no open session holds, and the artifacts a
// GCPolicy names (older versions, expired manifests).
package store

import (
	"bytes"
	"context"
	"encoding/base32"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/ipfs/go-cid"
	"github.com/zooai/gym/artifact"
)

// Errors.
var (
	ErrQuota       = errors.New("store: quota exceeded")
	ErrHostileFile = errors.New("store: refused file in the store (symlink, device or FIFO)")
	ErrNoArtifact  = errors.New("store: no such complete artifact")
	ErrReferenced  = errors.New("store: block belongs to a complete artifact")
	ErrInUse       = errors.New("store: in use by another process")
)

// Config configures a Store.
type Config struct {
	Dir    string          // created if missing
	Quota  int64           // maximum bytes of blocks; 0 means no limit
	Limits artifact.Limits // what Complete accepts from a DAG
	// SyncBlocks fsyncs every block as it is written. Without it the blocks
	// of an artifact are made durable together (syncfs) by Complete, before
	// its record is written: a block torn by a crash before that fails its
	// hash when read, is removed, and is fetched again, so per-block fsync
	// buys nothing but a slower fetch.
	SyncBlocks bool
}

// DefaultConfig returns a configuration for dir with a 100 GiB quota.
func DefaultConfig(dir string) Config {
	return Config{Dir: dir, Quota: 100 << 30, Limits: artifact.DefaultLimits()}
}

// Validate checks the configuration.
func (c Config) Validate() error {
	if c.Dir == "" {
		return errors.New("store: no directory")
	}
	if c.Quota < 0 {
		return errors.New("store: negative quota")
	}
	if c.Limits.MaxBlocks <= 0 || c.Limits.MaxDepth <= 0 || c.Limits.MaxFiles <= 0 || c.Limits.MaxVisits <= 0 {
		return errors.New("store: limits must be positive")
	}
	return nil
}

// Record is what the store keeps about a complete artifact.
type Record struct {
	Root       string           `json:"root"`
	Manifest   *artifact.Signed `json:"manifest"`
	Blocks     []string         `json:"blocks"`
	BlockBytes uint64           `json:"block_bytes"`
	Completed  time.Time        `json:"completed"`

	set map[string]struct{} // Blocks by multihash, built on first use
}

// Store is an on-disk artifact store. It is safe for concurrent use.
type Store struct {
	cfg  Config
	root *os.Root

	lock *os.File // DIR/lock: shared while open, exclusive during GC (flock)

	mu         sync.Mutex
	used       int64                       // bytes of blocks on disk, plus reservations
	referenced map[string]int              // multihash → number of complete artifacts holding it
	pins       map[string]int              // multihash → number of open sessions holding it
	records    map[string]*Record          // by root CID string
	known      map[string]*artifact.Signed // newest manifest by kind/name
}

var b32 = base32.StdEncoding.WithPadding(base32.NoPadding)

func blockPath(c cid.Cid) string {
	name := strings.ToLower(b32.EncodeToString(c.Hash()))
	return "blocks/" + name[len(name)-2:] + "/" + name
}

func manifestPath(kind artifact.Kind, name string) string {
	return "manifests/" + string(kind) + "/" + strings.ReplaceAll(name, "/", "~") + ".json"
}

// Open opens (creating if needed) the store in cfg.Dir and rebuilds its
// state: it empties tmp/, sums the blocks for the quota and loads the
// artifact records and known manifests.
func Open(cfg Config) (*Store, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(cfg.Dir, 0o755); err != nil {
		return nil, err
	}
	r, err := os.OpenRoot(cfg.Dir)
	if err != nil {
		return nil, err
	}
	s := &Store{cfg: cfg, root: r, referenced: map[string]int{}, pins: map[string]int{}, records: map[string]*Record{}, known: map[string]*artifact.Signed{}}
	alone, err := s.openLock()
	if err != nil {
		r.Close()
		return nil, err
	}
	if err := s.load(alone); err != nil {
		s.lock.Close()
		r.Close()
		return nil, err
	}
	return s, nil
}

// openLock takes a shared lock on DIR/lock, and tells whether no other
// process has the store open (then tmp/ may be emptied: no other
// process is writing there).
func (s *Store) openLock() (alone bool, err error) {
	if st, err := s.root.Lstat("lock"); err == nil && !st.Mode().IsRegular() {
		return false, fmt.Errorf("%w: lock is %v", ErrHostileFile, st.Mode().Type())
	}
	f, err := s.root.OpenFile("lock", os.O_RDWR|os.O_CREATE|noFollow, 0o644)
	if err != nil {
		return false, err
	}
	s.lock = f
	if tryLockExclusive(f) == nil {
		alone = true
	}
	if err := lockShared(f); err != nil {
		f.Close()
		return false, err
	}
	return alone, nil
}

// Close releases the store's directory.
func (s *Store) Close() error {
	s.lock.Close()
	return s.root.Close()
}

// Dir returns the store's directory.
func (s *Store) Dir() string { return s.cfg.Dir }

// mkdirs creates dir and its parents inside the root, refusing any
// existing element that is not a real directory.
func (s *Store) mkdirs(dir string) error {
	p := ""
	for _, el := range strings.Split(dir, "/") {
		p = path.Join(p, el)
		st, err := s.root.Lstat(p)
		if errors.Is(err, fs.ErrNotExist) {
			if err := s.root.Mkdir(p, 0o755); err != nil && !errors.Is(err, fs.ErrExist) {
				return err
			}
			continue
		}
		if err != nil {
			return err
		}
		if !st.IsDir() {
			return fmt.Errorf("%w: %s is %v", ErrHostileFile, p, st.Mode().Type())
		}
	}
	return nil
}

// readDir lists dir, which must be a real directory; missing is empty.
func (s *Store) readDir(dir string) ([]fs.DirEntry, error) {
	st, err := s.root.Lstat(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	if !st.IsDir() {
		return nil, fmt.Errorf("%w: %s is %v", ErrHostileFile, dir, st.Mode().Type())
	}
	return fs.ReadDir(s.root.FS(), dir)
}

func (s *Store) load(alone bool) error {
	for _, d := range []string{"blocks", "artifacts", "manifests", "tmp"} {
		if err := s.mkdirs(d); err != nil {
			return err
		}
	}
	if alone {
		if err := s.root.RemoveAll("tmp"); err != nil {
			return err
		}
		if err := s.mkdirs("tmp"); err != nil {
			return err
		}
	}
	shards, err := s.readDir("blocks")
	if err != nil {
		return err
	}
	for _, sh := range shards {
		if !sh.IsDir() {
			return fmt.Errorf("%w: blocks/%s", ErrHostileFile, sh.Name())
		}
		ents, err := s.readDir("blocks/" + sh.Name())
		if err != nil {
			return err
		}
		for _, e := range ents {
			if !e.Type().IsRegular() {
				return fmt.Errorf("%w: blocks/%s/%s is %v", ErrHostileFile, sh.Name(), e.Name(), e.Type())
			}
			info, err := e.Info()
			if err != nil {
				return err
			}
			s.used += info.Size()
		}
	}
	if err := s.loadRecords(); err != nil {
		return err
	}
	kinds, err := s.readDir("manifests")
	if err != nil {
		return err
	}
	for _, k := range kinds {
		ents, err := s.readDir("manifests/" + k.Name())
		if err != nil {
			return err
		}
		for _, e := range ents {
			data, err := s.readRegular("manifests/"+k.Name()+"/"+e.Name(), artifact.MaxManifestSize)
			if err != nil {
				return err
			}
			sm, err := artifact.ParseSigned(data)
			if err != nil {
				return fmt.Errorf("store: manifests/%s/%s: %w", k.Name(), e.Name(), err)
			}
			s.known[string(sm.Manifest.Kind)+"/"+sm.Manifest.Name] = sm
		}
	}
	return nil
}

// loadRecords adds the records in artifacts/ this process does not hold:
// all of them when the store is opened, and later those another process
// that has the store open completed (gym artifact publish into a running
// hanzod's store). The caller holds s.mu or is Open.
func (s *Store) loadRecords() error {
	recs, err := s.readDir("artifacts")
	if err != nil {
		return err
	}
	for _, e := range recs {
		root, ok := strings.CutSuffix(e.Name(), ".json")
		if !ok {
			continue
		}
		if _, held := s.records[root]; held {
			continue
		}
		rec, err := s.readRecord(root)
		if err != nil {
			return err
		}
		s.addRecord(rec)
	}
	return nil
}

// readRecord reads artifacts/<root>.json.
func (s *Store) readRecord(root string) (*Record, error) {
	name := "artifacts/" + root + ".json"
	data, err := s.readRegular(name, artifact.MaxManifestSize*4)
	if err != nil {
		return nil, err
	}
	var rec Record
	if err := json.Unmarshal(data, &rec); err != nil {
		return nil, fmt.Errorf("store: %s: %v", name, err)
	}
	if rec.Root != root {
		return nil, fmt.Errorf("%w: %s holds the record of %s", ErrHostileFile, name, rec.Root)
	}
	return &rec, nil
}

// addRecord adds or, for a root already complete (the same content under
// a newer manifest), replaces a record.
func (s *Store) addRecord(rec *Record) {
	if _, ok := s.records[rec.Root]; ok {
		s.records[rec.Root] = rec // same blocks: the references stand
		return
	}
	s.records[rec.Root] = rec
	for _, b := range rec.Blocks {
		if c, err := cid.Decode(b); err == nil {
			s.referenced[string(c.Hash())]++
		}
	}
}

// readRegular reads a regular file of at most max bytes.
func (s *Store) readRegular(name string, max int64) ([]byte, error) {
	st, err := s.root.Lstat(name)
	if err != nil {
		return nil, err
	}
	if !st.Mode().IsRegular() {
		return nil, fmt.Errorf("%w: %s is %v", ErrHostileFile, name, st.Mode().Type())
	}
	if st.Size() > max {
		return nil, fmt.Errorf("%w: %s is %d bytes", artifact.ErrTooLarge, name, st.Size())
	}
	f, err := s.root.OpenFile(name, os.O_RDONLY|noFollow, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	// Sized from the Lstat: io.ReadAll would grow its buffer (and copy)
	// about ten times for a 256 KiB block.
	buf := bytes.NewBuffer(make([]byte, 0, st.Size()+bytes.MinRead))
	if _, err := buf.ReadFrom(io.LimitReader(f, max+1)); err != nil {
		return nil, err
	}
	data := buf.Bytes()
	if int64(len(data)) > max {
		return nil, fmt.Errorf("%w: %s grew past %d bytes", artifact.ErrTooLarge, name, max)
	}
	return data, nil
}

// writeAtomic writes data to name through a synced temporary file and a
// rename, then syncs the directory.
func (s *Store) writeAtomic(name string, data []byte) error {
	if err := s.mkdirs(path.Dir(name)); err != nil {
		return err
	}
	f, tmp, err := s.tempFile()
	if err != nil {
		return err
	}
	defer s.root.Remove(tmp)
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	if st, err := s.root.Lstat(name); err == nil && !st.Mode().IsRegular() {
		return fmt.Errorf("%w: %s is %v", ErrHostileFile, name, st.Mode().Type())
	}
	if err := s.root.Rename(tmp, name); err != nil {
		return err
	}
	return s.syncDir(path.Dir(name))
}

func (s *Store) syncDir(dir string) error {
	d, err := s.root.OpenFile(dir, os.O_RDONLY|noFollow, 0)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

var tmpSeq struct {
	sync.Mutex
	n uint64
}

func (s *Store) tempFile() (*os.File, string, error) {
	for range 100 {
		tmpSeq.Lock()
		tmpSeq.n++
		n := tmpSeq.n
		tmpSeq.Unlock()
		name := fmt.Sprintf("tmp/%d-%d", os.Getpid(), n)
		f, err := s.root.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL|noFollow, 0o644)
		if errors.Is(err, fs.ErrExist) {
			continue
		}
		return f, name, err
	}
	return nil, "", errors.New("store: no free temporary name")
}

// Has reports whether the block is held (as a regular file).
func (s *Store) Has(_ context.Context, c cid.Cid) (bool, error) {
	_, err := s.blockStat(c)
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	return err == nil, err
}

// blockStat returns the size of a held block without reading it: an
// error wrapping fs.ErrNotExist when it is not held, ErrHostileFile when
// its file is not a regular one.
func (s *Store) blockStat(c cid.Cid) (int64, error) {
	st, err := s.root.Lstat(blockPath(c))
	if err != nil {
		return 0, err
	}
	if !st.Mode().IsRegular() {
		return 0, fmt.Errorf("%w: block %s is %v", ErrHostileFile, c, st.Mode().Type())
	}
	return st.Size(), nil
}

// Get reads a block and verifies it against its CID. A block that no longer
// matches (disk corruption) is removed so that it can be fetched again, and
// ErrHashMismatch is returned.
func (s *Store) Get(_ context.Context, c cid.Cid) ([]byte, error) {
	if err := artifact.CheckCID(c); err != nil {
		return nil, err
	}
	data, err := s.readRegular(blockPath(c), artifact.MaxBlockSize)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("%w: %s", artifact.ErrNotFound, c)
	}
	if err != nil {
		return nil, err
	}
	if err := artifact.Check(c, data); err != nil {
		if errors.Is(err, artifact.ErrHashMismatch) {
			s.removeBlock(c)
		}
		return nil, err
	}
	return data, nil
}

func (s *Store) removeBlock(c cid.Cid) {
	p := blockPath(c)
	st, err := s.root.Lstat(p)
	if err != nil || !st.Mode().IsRegular() {
		return
	}
	if s.root.Remove(p) == nil {
		s.mu.Lock()
		s.used -= st.Size()
		s.mu.Unlock()
	}
}

// Put verifies data against c and stores it, unless it is already held.
// It fails with ErrQuota, writing nothing, when the block would take the
// store over its quota.
func (s *Store) Put(ctx context.Context, c cid.Cid, data []byte) error {
	return s.put(ctx, c, data, false)
}

// put stores a block; hashed says that the caller computed c from data in
// this process (the importer), so hashing it again would only cost time.
func (s *Store) put(ctx context.Context, c cid.Cid, data []byte, hashed bool) error {
	check := artifact.Check
	if hashed {
		check = checkShape
	}
	if err := check(c, data); err != nil {
		return err
	}
	if ok, err := s.Has(ctx, c); err != nil || ok {
		return err
	}
	n := int64(len(data))
	s.mu.Lock()
	if s.cfg.Quota > 0 && s.used+n > s.cfg.Quota {
		used := s.used
		s.mu.Unlock()
		return fmt.Errorf("%w: %d + %d bytes > %d", ErrQuota, used, n, s.cfg.Quota)
	}
	s.used += n
	s.mu.Unlock()
	if err := s.writeBlock(c, data); err != nil {
		s.mu.Lock()
		s.used -= n
		s.mu.Unlock()
		return err
	}
	return nil
}

func (s *Store) writeBlock(c cid.Cid, data []byte) error {
	p := blockPath(c)
	if err := s.mkdirs(path.Dir(p)); err != nil {
		return err
	}
	f, tmp, err := s.tempFile()
	if err != nil {
		return err
	}
	defer s.root.Remove(tmp)
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	if s.cfg.SyncBlocks {
		if err := f.Sync(); err != nil {
			f.Close()
			return err
		}
	}
	if err := f.Close(); err != nil {
		return err
	}
	return s.root.Rename(tmp, p)
}

// Used returns the bytes of blocks held.
func (s *Store) Used() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.used
}

// Quota returns the configured quota (0: none).
func (s *Store) Quota() int64 { return s.cfg.Quota }

// RemoveUnreferenced deletes the given blocks except those that belong to
// a complete artifact: what a failed fetch calls to leave nothing behind.
// Blocks an open session holds are kept as well.
func (s *Store) RemoveUnreferenced(_ context.Context, cs []cid.Cid) {
	for _, c := range cs {
		s.removeUnheld(string(c.Hash()), blockPath(c))
	}
}

// removeUnheld removes the block file p (of multihash key) unless a
// complete artifact or an open session holds it (held), and returns the
// bytes removed (-1 if nothing was: held, or absent). The decision and the removal happen under
// the lock that sessions pin under, so a block a session has pinned is
// never removed, and a block removed before the pin is seen missing by
// the session, which fetches it again.
func (s *Store) removeUnheld(key, p string) (int64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.referenced[key] > 0 || s.pins[key] > 0 {
		return -1, nil
	}
	st, err := s.root.Lstat(p)
	if errors.Is(err, fs.ErrNotExist) {
		return -1, nil
	}
	if err != nil {
		return -1, err
	}
	if !st.Mode().IsRegular() {
		return -1, fmt.Errorf("%w: %s is %v", ErrHostileFile, p, st.Mode().Type())
	}
	if err := s.root.Remove(p); err != nil {
		return -1, err
	}
	s.used -= st.Size()
	return st.Size(), nil
}

// Known returns the newest manifest accepted for kind/name, or nil.
func (s *Store) Known(kind artifact.Kind, name string) *artifact.Signed {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.known[string(kind)+"/"+name]
}

// CheckManifest tells whether sm could be accepted now: fresh, and not
// older than (nor conflicting with) the newest manifest known for its name.
func (s *Store) CheckManifest(sm *artifact.Signed, now time.Time) error {
	var known *artifact.Manifest
	if k := s.Known(sm.Manifest.Kind, sm.Manifest.Name); k != nil {
		known = &k.Manifest
	}
	return artifact.CheckUpdate(known, &sm.Manifest, now)
}

// Complete makes an artifact visible: it checks the manifest against the
// newest one known (rollback, freeze, equivocation), walks the whole DAG
// from the store verifying every block, matches it against the manifest's
// files, makes the blocks durable, and writes the record and the manifest.
// The manifest's signature must already have been checked (ParseSigned or
// Sign) and its creator trusted by the caller.
func (s *Store) Complete(ctx context.Context, sm *artifact.Signed, now time.Time) (*Record, error) {
	// Walk through a session, so that GC cannot remove a block between the
	// walk and the record.
	sess := s.Session()
	defer sess.Close()
	return s.complete(ctx, sess, sm, now)
}

// complete is Complete through sess, whose pins keep the blocks until the
// record is written.
func (s *Store) complete(ctx context.Context, sess *Session, sm *artifact.Signed, now time.Time) (*Record, error) {
	if err := sm.Manifest.Validate(); err != nil {
		return nil, err
	}
	if err := s.CheckManifest(sm, now); err != nil {
		return nil, err
	}
	root, err := sm.Manifest.RootCID()
	if err != nil {
		return nil, err
	}
	ix, err := artifact.Walk(ctx, sess, root, s.cfg.Limits)
	if err != nil {
		return nil, err
	}
	if err := sm.Manifest.Matches(ix); err != nil {
		return nil, err
	}
	// The blocks, and their directory entries, must be on disk before the
	// record is.
	if err := s.syncBlocks(ix.Blocks); err != nil {
		return nil, err
	}
	rec := &Record{Root: root.String(), Manifest: sm, BlockBytes: ix.BlockBytes, Completed: now.UTC()}
	for _, c := range ix.Blocks {
		rec.Blocks = append(rec.Blocks, c.String())
	}
	data, err := json.Marshal(rec)
	if err != nil {
		return nil, err
	}
	menc, err := sm.Encode()
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	key := string(sm.Manifest.Kind) + "/" + sm.Manifest.Name
	var known *artifact.Manifest
	if k := s.known[key]; k != nil {
		known = &k.Manifest
	}
	if err := artifact.CheckUpdate(known, &sm.Manifest, now); err != nil {
		return nil, err // a newer one landed while we walked
	}
	if err := s.writeAtomic("artifacts/"+rec.Root+".json", data); err != nil {
		return nil, err
	}
	if err := s.writeAtomic(manifestPath(sm.Manifest.Kind, sm.Manifest.Name), menc); err != nil {
		return nil, err
	}
	s.addRecord(rec)
	s.known[key] = sm
	return rec, nil
}

// Artifact returns the record of a complete artifact.
func (s *Store) Artifact(root cid.Cid) (*Record, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if r, ok := s.records[root.String()]; ok {
		return r, nil
	}
	// Completed by another process that has the store open since this
	// one opened it (its record is written last, after its blocks).
	if r, err := s.readRecord(root.String()); err == nil {
		s.addRecord(r)
		return r, nil
	}
	return nil, fmt.Errorf("%w: %s", ErrNoArtifact, root)
}

// List returns the records of the complete artifacts, by kind, name and
// version.
func (s *Store) List() []*Record {
	s.mu.Lock()
	out := make([]*Record, 0, len(s.records))
	for _, r := range s.records {
		out = append(out, r)
	}
	s.mu.Unlock()
	sort.Slice(out, func(i, j int) bool {
		a, b := out[i].Manifest.Manifest, out[j].Manifest.Manifest
		if a.Kind != b.Kind {
			return a.Kind < b.Kind
		}
		if a.Name != b.Name {
			return a.Name < b.Name
		}
		return a.Version < b.Version
	})
	return out
}

// Verify re-reads every complete artifact, verifying every block against
// its CID and every DAG against its manifest. It returns one error per
// broken artifact.
func (s *Store) Verify(ctx context.Context) []error {
	var errs []error
	for _, r := range s.List() {
		root, err := cid.Decode(r.Root)
		if err == nil {
			var ix *artifact.Index
			if ix, err = artifact.Walk(ctx, s, root, s.cfg.Limits); err == nil {
				err = r.Manifest.Manifest.Matches(ix)
			}
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("%s (%s v%d): %w", r.Root, r.Manifest.Manifest.Name, r.Manifest.Manifest.Version, err))
		}
	}
	return errs
}

// Contains reports whether block c belongs to the DAG of the complete
// artifact root: what a server checks before handing a block to a peer
// authorized for root.
func (s *Store) Contains(root, c cid.Cid) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	r, ok := s.records[root.String()]
	if !ok {
		return false
	}
	if r.set == nil {
		r.set = make(map[string]struct{}, len(r.Blocks))
		for _, b := range r.Blocks {
			if bc, err := cid.Decode(b); err == nil {
				r.set[string(bc.Hash())] = struct{}{}
			}
		}
	}
	_, ok = r.set[string(c.Hash())]
	return ok
}

// Free returns the bytes left under the quota (-1: no quota).
func (s *Store) Free() int64 {
	if s.cfg.Quota == 0 {
		return -1
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return max(s.cfg.Quota-s.used, 0)
}

// checkShape is Check without the hash: CID kind and size only.
func checkShape(c cid.Cid, data []byte) error {
	if err := artifact.CheckCID(c); err != nil {
		return err
	}
	if len(data) > artifact.MaxBlockSize {
		return fmt.Errorf("%w: block %s of %d bytes", artifact.ErrTooLarge, c, len(data))
	}
	return nil
}

func (s *Store) syncBlocks(blocks []cid.Cid) error {
	if !s.cfg.SyncBlocks {
		return syncFS(s.root)
	}
	dirs := map[string]bool{}
	for _, c := range blocks {
		dirs[path.Dir(blockPath(c))] = true
	}
	for d := range dirs {
		if err := s.syncDir(d); err != nil {
			return err
		}
	}
	return nil
}
