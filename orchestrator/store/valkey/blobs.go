package valkey

import (
	"context"
	"errors"
	"fmt"
	"strings"

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
//
// Each blob in a directory is also a member of its directory's set,
// {prefix}:blobdir:DIR (added in the same script as the blob), so
// DeleteDir finds a directory's blobs without scanning the keyspace.
type Blobs struct {
	s      *Store
	prefix string
	dirs   string
}

var _ blob.Store = (*Blobs)(nil)

// Blobs returns the blob store on the same server and prefix as s.
func (s *Store) Blobs() *Blobs { return &Blobs{s: s, prefix: s.kBlob, dirs: s.kBlobDir} }

// putScript sets KEYS[1] to ARGV[1] unless it exists, and adds ARGV[2],
// the blob's name, to its directory's set KEYS[2] (when given) either
// way: 1 written, 0 the same bytes were there, CONFLICT other bytes.
var putScript = redis.NewScript(`
local set = redis.call('SET', KEYS[1], ARGV[1], 'NX')
if not set and redis.call('GET', KEYS[1]) ~= ARGV[1] then
  return redis.error_reply('CONFLICT ' .. ARGV[2])
end
if KEYS[2] then
  redis.call('SADD', KEYS[2], ARGV[2])
end
if set then
  return 1
end
return 0
`)

// deleteScript pops up to ARGV[2] names from the directory's set
// KEYS[1] and deletes their blobs (keys ARGV[1] .. name): the blobs
// deleted and their bytes.
var deleteScript = redis.NewScript(`
local names = redis.call('SPOP', KEYS[1], ARGV[2])
local n, bytes = 0, 0
for _, name in ipairs(names) do
  local k = ARGV[1] .. name
  local len = redis.call('STRLEN', k)
  if redis.call('DEL', k) == 1 then
    n = n + 1
    bytes = bytes + len
  end
end
return {#names, n, bytes}
`)

// dirOf is the directory of a blob name ("" at the top).
func dirOf(name string) string {
	if i := strings.LastIndexByte(name, '/'); i >= 0 {
		return name[:i]
	}
	return ""
}

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
	keys := []string{b.prefix + name}
	if d := dirOf(name); d != "" {
		keys = append(keys, b.dirs+d)
	}
	err := putScript.Run(ctx, b.s.c, keys, data, name).Err()
	if err != nil && strings.HasPrefix(err.Error(), "CONFLICT") {
		return fmt.Errorf("%w: %s", blob.ErrConflict, name)
	}
	if err != nil {
		return fmt.Errorf("valkey: put blob %s: %w", name, err)
	}
	return nil
}

// deleteBatch is how many blobs one script deletes (the server runs
// nothing else meanwhile).
const deleteBatch = 256

// DeleteDir implements blob.Store: scripts of up to deleteBatch blobs
// each, until the directory's set is empty (the server deletes an empty
// set).
func (b *Blobs) DeleteDir(ctx context.Context, dir string) (blob.Reclaimed, error) {
	if err := blob.ValidName(dir); err != nil {
		return blob.Reclaimed{}, err
	}
	var r blob.Reclaimed
	for {
		cctx, cancel := b.s.ctx(ctx)
		v, err := deleteScript.Run(cctx, b.s.c, []string{b.dirs + dir}, b.prefix, deleteBatch).Int64Slice()
		cancel()
		if err != nil {
			return r, fmt.Errorf("valkey: delete blobs of %s: %w", dir, err)
		}
		if len(v) != 3 {
			return r, fmt.Errorf("valkey: delete blobs of %s: reply %v", dir, v)
		}
		r.Blobs += int(v[1])
		r.Bytes += v[2]
		if v[0] < deleteBatch {
			return r, nil
		}
	}
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
