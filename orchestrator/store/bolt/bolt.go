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
)

// Config configures the store.
type Config struct {
	// Dir is the data directory; it is created if missing.
	Dir string
	// Now is the clock used for lease expiry (time.Now when nil).
	Now func() time.Time
	// LockTimeout bounds the wait for another process's file lock.
	LockTimeout time.Duration
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
	db, err := bbolt.Open(path, 0o600, &bbolt.Options{Timeout: cfg.LockTimeout})
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

func lastIndex(b *bbolt.Bucket) uint64 {
	k, _ := b.Cursor().Last()
	return u64(k)
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
		if last := lastIndex(b); recs[0].Index != last+1 {
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
		last = lastIndex(tx.Bucket(bucketLog))
		return nil
	})
	return last, err
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
		if last := lastIndex(tx.Bucket(bucketLog)); index > last {
			return fmt.Errorf("%w: snapshot at %d beyond the log's last record %d", store.ErrInvalid, index, last)
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
