package valkey

import (
	"bytes"
	"context"
	"errors"
	"fmt"

	"github.com/redis/go-redis/v9"

	"github.com/zooai/gym/orchestrator/blob"
)

// Blobs is the blob.Store of the replicas (the accepted deltas, evidence
// and checkpoints of record the judge writes before it logs the verdicts
// that need them): one string key per blob, {prefix}:blob:NAME, under the
// log's hash tag, so it lives on the same server (and cluster slot) as
// the log and is as durable as an append. Blobs are immutable, so writes
// need no fencing: SET NX, and a name that exists must hold the same
// bytes.
type Blobs struct {
	s      *Store
	prefix string
}

var _ blob.Store = (*Blobs)(nil)

// Blobs returns the blob store on the same server and prefix as s.
func (s *Store) Blobs() *Blobs { return &Blobs{s: s, prefix: s.kBlob} }

// Put implements blob.Store.
func (b *Blobs) Put(ctx context.Context, name string, data []byte) error {
	if err := blob.ValidName(name); err != nil {
		return err
	}
	if len(data) > blob.MaxSize {
		return fmt.Errorf("%w: %s is %d bytes (at most %d)", blob.ErrTooLarge, name, len(data), blob.MaxSize)
	}
	ctx, cancel := b.s.ctx(ctx)
	defer cancel()
	set, err := b.s.c.SetNX(ctx, b.prefix+name, data, 0).Result()
	if err != nil {
		return fmt.Errorf("valkey: put blob %s: %w", name, err)
	}
	if set {
		return nil
	}
	old, err := b.s.c.Get(ctx, b.prefix+name).Bytes()
	if err != nil {
		return fmt.Errorf("valkey: put blob %s: %w", name, err)
	}
	if !bytes.Equal(old, data) {
		return fmt.Errorf("%w: %s", blob.ErrConflict, name)
	}
	return nil
}

// Get implements blob.Store.
func (b *Blobs) Get(ctx context.Context, name string) ([]byte, error) {
	if err := blob.ValidName(name); err != nil {
		return nil, err
	}
	ctx, cancel := b.s.ctx(ctx)
	defer cancel()
	v, err := b.s.c.Get(ctx, b.prefix+name).Bytes()
	if errors.Is(err, redis.Nil) {
		return nil, fmt.Errorf("%w: %s", blob.ErrNotFound, name)
	}
	if err != nil {
		return nil, fmt.Errorf("valkey: get blob %s: %w", name, err)
	}
	return v, nil
}
