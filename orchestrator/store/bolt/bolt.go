// Package bolt is the embedded orchestrator store: the event log, the
// latest snapshot and the lease in one bbolt file inside a data directory.
//
// bbolt holds an exclusive file lock, so only one process uses a directory
// at a time; the lease still issues fencing tokens so that code paths are
// the same as with Valkey. Every transaction is fsynced before it returns:
// an acknowledged append survives kill -9.
package bolt

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	bbolt "go.etcd.io/bbolt"

	"github.com/zooai/gym/orchestrator/store"
)

var (
	bucketLog  = []byte("log")
	bucketMeta = []byte("meta")

	keyToken   = []byte("token")   // last token issued
	keyHolder  = []byte("holder")  // lease holder
	keyExpires = []byte("expires") // lease expiry, unix nanoseconds
	keySnapIdx = []byte("snap_index")
	keySnap    = []byte("snap")
	keyCompact = []byte("compacted") // index of the last record Compact dropped
)

// compactChunk bounds the records one Compact transaction deletes, so a
// large compaction holds the write lock in short turns.
const compactChunk = 8192

// Config configures the store.
type Config struct {
	// Dir is the data directory; it is created if missing.
	Dir string
	// Now is the clock used for lease expiry (time.Now when nil).
	Now func() time.Time
	// LockTimeout bounds the wait for another process's file lock.
	LockTimeout time.Duration
	// NoSync skips the fsync of each transaction: an acknowledged write
	// may be lost in a crash of the machine. For tests that compress days
	// of log into seconds only.
	NoSync bool
}

// DefaultConfig returns a config for dir.
func DefaultConfig(dir string) Config {
	return Config{Dir: dir, LockTimeout: 2 * time.Second}
}

// Validate checks the config.
func (c Config) Validate() error {
	if c.Dir == "" {
		return fmt.Errorf("%w: bolt: empty data directory", store.ErrInvalid)
	}
	if c.LockTimeout < 0 {
		return fmt.Errorf("%w: bolt: negative lock timeout", store.ErrInvalid)
	}
	return nil
}

// Store is the bbolt implementation of store.Store.
type Store struct {
	db  *bbolt.DB
	now func() time.Time
}

var _ store.Store = (*Store)(nil)

// Open opens (or creates) the store in cfg.Dir.
func Open(cfg Config) (*Store, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(cfg.Dir, 0o700); err != nil {
		return nil, err
	}
	path := filepath.Join(cfg.Dir, "hanzod.db")
	db, err := bbolt.Open(path, 0o600, &bbolt.Options{Timeout: cfg.LockTimeout, NoSync: cfg.NoSync})
	if err != nil {
		if errors.Is(err, bbolt.ErrTimeout) {
			return nil, fmt.Errorf("bolt: %s is in use by another process (one hanzod per data directory; use the valkey store for replicas)", path)
		}
		return nil, fmt.Errorf("bolt: open %s: %w", path, err)
	}
	if err := db.Update(func(tx *bbolt.Tx) error {
		if _, err := tx.CreateBucketIfNotExists(bucketLog); err != nil {
			return err
		}
		_, err := tx.CreateBucketIfNotExists(bucketMeta)
		return err
	}); err != nil {
		db.Close()
		return nil, err
	}
	now := cfg.Now
	if now == nil {
		now = time.Now
	}
	return &Store{db: db, now: now}, nil
}

func u64(b []byte) uint64 {
	if len(b) != 8 {
		return 0
	}
	return binary.BigEndian.Uint64(b)
}

func put64(v uint64) []byte {
	b := make([]byte, 8)
	binary.BigEndian.PutUint64(b, v)
	return b
}

// Acquire implements store.Store.
func (s *Store) Acquire(ctx context.Context, holder string, ttl time.Duration) (uint64, error) {
	if holder == "" || ttl <= 0 {
		return 0, fmt.Errorf("%w: holder and a positive ttl are required", store.ErrInvalid)
	}
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	var token uint64
	err := s.db.Update(func(tx *bbolt.Tx) error {
		m := tx.Bucket(bucketMeta)
		now := s.now()
		cur := string(m.Get(keyHolder))
		live := cur != "" && now.UnixNano() < int64(u64(m.Get(keyExpires)))
		token = u64(m.Get(keyToken))
		switch {
		case live && cur != holder:
			return fmt.Errorf("%w: %s", store.ErrLeaseHeld, cur)
		case !live || token == 0:
			token++
			if err := m.Put(keyToken, put64(token)); err != nil {
				return err
			}
		}
		if err := m.Put(keyHolder, []byte(holder)); err != nil {
			return err
		}
		return m.Put(keyExpires, put64(uint64(now.Add(ttl).UnixNano())))
	})
	if err != nil {
		return 0, err
	}
	return token, nil
}

// Release implements store.Store.
func (s *Store) Release(ctx context.Context, token uint64) error {
	return s.db.Update(func(tx *bbolt.Tx) error {
		m := tx.Bucket(bucketMeta)
		if u64(m.Get(keyToken)) != token {
			return nil
		}
		if err := m.Delete(keyHolder); err != nil {
			return err
		}
		return m.Delete(keyExpires)
	})
}

func fence(m *bbolt.Bucket, token uint64) error {
	if cur := u64(m.Get(keyToken)); token != cur {
		return fmt.Errorf("%w (token %d, current %d)", store.ErrFenced, token, cur)
	}
	return nil
}

// lastIndex is the index of the last record appended: the last key, or
// the compaction point when every record was dropped.
func lastIndex(tx *bbolt.Tx) uint64 {
	k, _ := tx.Bucket(bucketLog).Cursor().Last()
	return max(u64(k), u64(tx.Bucket(bucketMeta).Get(keyCompact)))
}

// Append implements store.Store.
func (s *Store) Append(ctx context.Context, token uint64, recs []store.Record) error {
	if err := store.CheckBatch(token, recs); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	return s.db.Update(func(tx *bbolt.Tx) error {
		if err := fence(tx.Bucket(bucketMeta), token); err != nil {
			return err
		}
		b := tx.Bucket(bucketLog)
		if last := lastIndex(tx); recs[0].Index != last+1 {
			return fmt.Errorf("%w: append at %d, last is %d", store.ErrConflict, recs[0].Index, last)
		}
		b.FillPercent = 1 // keys only grow: pack pages full
		for _, r := range recs {
			if err := b.Put(put64(r.Index), r.Data); err != nil {
				return err
			}
		}
		return nil
	})
}

// Read implements store.Store.
func (s *Store) Read(ctx context.Context, from uint64, max int) ([]store.Record, error) {
	if from == 0 || max <= 0 {
		return nil, fmt.Errorf("%w: read from %d max %d", store.ErrInvalid, from, max)
	}
	var out []store.Record
	err := s.db.View(func(tx *bbolt.Tx) error {
		if done := u64(tx.Bucket(bucketMeta).Get(keyCompact)); from <= done {
			return fmt.Errorf("%w: read from %d, the log starts at %d", store.ErrCompacted, from, done+1)
		}
		c := tx.Bucket(bucketLog).Cursor()
		for k, v := c.Seek(put64(from)); k != nil && len(out) < max; k, v = c.Next() {
			out = append(out, store.Record{Index: u64(k), Data: append([]byte(nil), v...)})
		}
		return nil
	})
	return out, err
}

// Last implements store.Store.
func (s *Store) Last(ctx context.Context) (uint64, error) {
	var last uint64
	err := s.db.View(func(tx *bbolt.Tx) error {
		last = lastIndex(tx)
		return nil
	})
	return last, err
}

// First implements store.Store.
func (s *Store) First(ctx context.Context) (uint64, error) {
	var first uint64
	err := s.db.View(func(tx *bbolt.Tx) error {
		first = u64(tx.Bucket(bucketMeta).Get(keyCompact)) + 1
		return nil
	})
	return first, err
}

// Compact implements store.Store. It deletes in transactions of at most
// compactChunk records, each moving the compaction point, so a crash
// midway leaves a log that starts where the last transaction stopped.
func (s *Store) Compact(ctx context.Context, token, through uint64) error {
	if token == 0 {
		return fmt.Errorf("%w: compact needs a token", store.ErrInvalid)
	}
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		var done bool
		err := s.db.Update(func(tx *bbolt.Tx) error {
			m := tx.Bucket(bucketMeta)
			if err := fence(m, token); err != nil {
				return err
			}
			if snap := u64(m.Get(keySnapIdx)); through > snap {
				return fmt.Errorf("%w: compact through %d beyond the snapshot at %d", store.ErrInvalid, through, snap)
			}
			from := u64(m.Get(keyCompact)) + 1
			if from > through {
				done = true
				return nil
			}
			upTo := min(through, from+compactChunk-1)
			c := tx.Bucket(bucketLog).Cursor()
			for k, _ := c.Seek(put64(from)); k != nil && u64(k) <= upTo; k, _ = c.Seek(put64(from)) {
				if err := c.Delete(); err != nil {
					return err
				}
			}
			done = upTo == through
			return m.Put(keyCompact, put64(upTo))
		})
		if err != nil || done {
			return err
		}
	}
}

// SaveSnapshot implements store.Store.
func (s *Store) SaveSnapshot(ctx context.Context, token, index uint64, data []byte) error {
	if token == 0 || index == 0 {
		return fmt.Errorf("%w: snapshot needs a token and an index", store.ErrInvalid)
	}
	return s.db.Update(func(tx *bbolt.Tx) error {
		m := tx.Bucket(bucketMeta)
		if err := fence(m, token); err != nil {
			return err
		}
		if last := lastIndex(tx); index > last {
			return fmt.Errorf("%w: snapshot at %d beyond the log's last record %d", store.ErrInvalid, index, last)
		}
		if done := u64(m.Get(keyCompact)); index < done {
			return fmt.Errorf("%w: snapshot at %d below the compacted log's start %d", store.ErrInvalid, index, done+1)
		}
		if err := m.Put(keySnapIdx, put64(index)); err != nil {
			return err
		}
		return m.Put(keySnap, data)
	})
}

// LoadSnapshot implements store.Store.
func (s *Store) LoadSnapshot(ctx context.Context) (uint64, []byte, error) {
	var idx uint64
	var data []byte
	err := s.db.View(func(tx *bbolt.Tx) error {
		m := tx.Bucket(bucketMeta)
		idx = u64(m.Get(keySnapIdx))
		if idx == 0 {
			return store.ErrNoSnapshot
		}
		data = append([]byte(nil), m.Get(keySnap)...)
		return nil
	})
	return idx, data, err
}

// Close implements store.Store.
func (s *Store) Close() error { return s.db.Close() }
