// Package valkey is the replicated orchestrator store on Valkey (or any
// Redis-protocol server with Lua scripting): the event log is a list, the
// snapshot a hash, the lease a key with a server-side TTL, and the fencing
// token a counter; compaction trims the head of the list and counts the
// records dropped in a key of its own, so indices never change. Every write is one Lua script that compares the token
// with the newest issued and writes only if they match, atomically on the
// server, so a deposed leader's writes are refused.
//
// Durability is the server's: run it with appendonly yes and appendfsync
// always so an acknowledged append survives a crash of the server too.
package valkey

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/zooai/gym/orchestrator/store"
)

// Config configures the store.
type Config struct {
	// URL is a redis:// or rediss:// URL.
	URL string
	// Prefix namespaces the keys; it is wrapped in a hash tag so all keys
	// share a cluster slot.
	Prefix string
	// Timeout bounds each call when the context has no deadline.
	Timeout time.Duration
}

// DefaultConfig returns a config for url.
func DefaultConfig(url string) Config {
	return Config{URL: url, Prefix: "gym", Timeout: 5 * time.Second}
}

// Validate checks the config.
func (c Config) Validate() error {
	if c.URL == "" {
		return fmt.Errorf("%w: valkey: empty URL (want redis://host:port/db)", store.ErrInvalid)
	}
	if c.Prefix == "" || strings.ContainsAny(c.Prefix, "{}") {
		return fmt.Errorf("%w: valkey: prefix must be non-empty without braces", store.ErrInvalid)
	}
	if c.Timeout <= 0 {
		return fmt.Errorf("%w: valkey: timeout must be positive", store.ErrInvalid)
	}
	return nil
}

// Store is the Valkey implementation of store.Store.
type Store struct {
	c        *redis.Client
	timeout  time.Duration
	kLease   string // holder, with a PX ttl
	kToken   string // newest token issued
	kLog     string // list of records; element i is index base+i+1
	kBase    string // records dropped from the head by Compact (absent: 0)
	kSnap    string // hash: index, data
	kBlob    string // prefix of the blobs' keys (Blobs)
	kBlobDir string // prefix of the sets of a directory's blob names (Blobs)
}

var _ store.Store = (*Store)(nil)

// Open connects and checks the server answers.
func Open(ctx context.Context, cfg Config) (*Store, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	opt, err := redis.ParseURL(cfg.URL)
	if err != nil {
		return nil, fmt.Errorf("%w: valkey: %v", store.ErrInvalid, err)
	}
	c := redis.NewClient(opt)
	p := "{" + cfg.Prefix + "}:"
	s := &Store{c: c, timeout: cfg.Timeout, kLease: p + "lease", kToken: p + "token", kLog: p + "log", kBase: p + "base", kSnap: p + "snap", kBlob: p + "blob:", kBlobDir: p + "blobdir:"}
	ctx, cancel := s.ctx(ctx)
	defer cancel()
	if err := c.Ping(ctx).Err(); err != nil {
		c.Close()
		return nil, fmt.Errorf("valkey: %s: %w", cfg.URL, err)
	}
	return s, nil
}

func (s *Store) ctx(ctx context.Context) (context.Context, context.CancelFunc) {
	if _, ok := ctx.Deadline(); ok {
		return ctx, func() {}
	}
	return context.WithTimeout(ctx, s.timeout)
}

var acquireScript = redis.NewScript(`
local cur = redis.call('GET', KEYS[1])
if cur == ARGV[1] then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  return redis.call('GET', KEYS[2])
end
if cur then
  return redis.error_reply('LEASEHELD ' .. cur)
end
local t = redis.call('INCR', KEYS[2])
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
return tostring(t)
`)

var releaseScript = redis.NewScript(`
if redis.call('GET', KEYS[2]) == ARGV[1] then
  redis.call('DEL', KEYS[1])
end
return 0
`)

var appendScript = redis.NewScript(`
local cur = redis.call('GET', KEYS[1]) or '0'
if cur ~= ARGV[1] then
  return redis.error_reply('FENCED ' .. cur)
end
local n = redis.call('LLEN', KEYS[2]) + tonumber(redis.call('GET', KEYS[3]) or '0')
if tostring(n + 1) ~= ARGV[2] then
  return redis.error_reply('CONFLICT ' .. n)
end
for i = 3, #ARGV, 256 do
  redis.call('RPUSH', KEYS[2], unpack(ARGV, i, math.min(i + 255, #ARGV)))
end
return n + #ARGV - 2
`)

var snapshotScript = redis.NewScript(`
local cur = redis.call('GET', KEYS[1]) or '0'
if cur ~= ARGV[1] then
  return redis.error_reply('FENCED ' .. cur)
end
local base = tonumber(redis.call('GET', KEYS[4]) or '0')
local n = redis.call('LLEN', KEYS[2]) + base
if tonumber(ARGV[2]) > n then
  return redis.error_reply('BEYOND ' .. n)
end
if tonumber(ARGV[2]) < base then
  return redis.error_reply('BELOW ' .. base)
end
redis.call('HSET', KEYS[3], 'index', ARGV[2], 'data', ARGV[3])
return 0
`)

// readScript returns the records from index ARGV[1] (at most ARGV[2]),
// atomically with the compaction point they are numbered from.
var readScript = redis.NewScript(`
local base = tonumber(redis.call('GET', KEYS[2]) or '0')
local from = tonumber(ARGV[1])
if from <= base then
  return redis.error_reply('COMPACTED ' .. base)
end
return redis.call('LRANGE', KEYS[1], from - 1 - base, from - 2 - base + tonumber(ARGV[2]))
`)

var lastScript = redis.NewScript(`
return redis.call('LLEN', KEYS[1]) + tonumber(redis.call('GET', KEYS[2]) or '0')
`)

// compactScript drops the records up to index ARGV[2] from the head.
var compactScript = redis.NewScript(`
local cur = redis.call('GET', KEYS[1]) or '0'
if cur ~= ARGV[1] then
  return redis.error_reply('FENCED ' .. cur)
end
local through = tonumber(ARGV[2])
local snap = tonumber(redis.call('HGET', KEYS[4], 'index') or '0')
if through > snap then
  return redis.error_reply('SNAPSHOT ' .. snap)
end
local base = tonumber(redis.call('GET', KEYS[3]) or '0')
if through <= base then
  return 0
end
redis.call('LTRIM', KEYS[2], through - base, -1)
redis.call('SET', KEYS[3], tostring(through))
return through - base
`)

func mapErr(err error) error {
	if err == nil {
		return nil
	}
	msg := err.Error()
	switch {
	case strings.HasPrefix(msg, "FENCED"):
		return fmt.Errorf("%w (current token %s)", store.ErrFenced, strings.TrimPrefix(msg, "FENCED "))
	case strings.HasPrefix(msg, "CONFLICT"):
		return fmt.Errorf("%w: the log has %s records", store.ErrConflict, strings.TrimPrefix(msg, "CONFLICT "))
	case strings.HasPrefix(msg, "LEASEHELD"):
		return fmt.Errorf("%w: %s", store.ErrLeaseHeld, strings.TrimPrefix(msg, "LEASEHELD "))
	case strings.HasPrefix(msg, "BEYOND"):
		return fmt.Errorf("%w: snapshot beyond the log's %s records", store.ErrInvalid, strings.TrimPrefix(msg, "BEYOND "))
	case strings.HasPrefix(msg, "BELOW"):
		return fmt.Errorf("%w: snapshot below the compacted log's first %s records", store.ErrInvalid, strings.TrimPrefix(msg, "BELOW "))
	case strings.HasPrefix(msg, "COMPACTED"):
		return fmt.Errorf("%w: the records up to %s were compacted", store.ErrCompacted, strings.TrimPrefix(msg, "COMPACTED "))
	case strings.HasPrefix(msg, "SNAPSHOT"):
		return fmt.Errorf("%w: compact beyond the snapshot at %s", store.ErrInvalid, strings.TrimPrefix(msg, "SNAPSHOT "))
	}
	return fmt.Errorf("valkey: %w", err)
}

// Acquire implements store.Store. The lease expires on the server's clock.
func (s *Store) Acquire(ctx context.Context, holder string, ttl time.Duration) (uint64, error) {
	if holder == "" || ttl < time.Millisecond {
		return 0, fmt.Errorf("%w: holder and a ttl of at least 1 ms are required", store.ErrInvalid)
	}
	ctx, cancel := s.ctx(ctx)
	defer cancel()
	v, err := acquireScript.Run(ctx, s.c, []string{s.kLease, s.kToken}, holder, ttl.Milliseconds()).Text()
	if err != nil {
		return 0, mapErr(err)
	}
	return strconv.ParseUint(v, 10, 64)
}

// Release implements store.Store.
func (s *Store) Release(ctx context.Context, token uint64) error {
	ctx, cancel := s.ctx(ctx)
	defer cancel()
	return mapErr(releaseScript.Run(ctx, s.c, []string{s.kLease, s.kToken}, strconv.FormatUint(token, 10)).Err())
}

// Append implements store.Store.
func (s *Store) Append(ctx context.Context, token uint64, recs []store.Record) error {
	if err := store.CheckBatch(token, recs); err != nil {
		return err
	}
	args := make([]any, 0, len(recs)+2)
	args = append(args, strconv.FormatUint(token, 10), strconv.FormatUint(recs[0].Index, 10))
	for _, r := range recs {
		args = append(args, r.Data)
	}
	ctx, cancel := s.ctx(ctx)
	defer cancel()
	return mapErr(appendScript.Run(ctx, s.c, []string{s.kToken, s.kLog, s.kBase}, args...).Err())
}

// Read implements store.Store.
func (s *Store) Read(ctx context.Context, from uint64, max int) ([]store.Record, error) {
	if from == 0 || max <= 0 {
		return nil, fmt.Errorf("%w: read from %d max %d", store.ErrInvalid, from, max)
	}
	ctx, cancel := s.ctx(ctx)
	defer cancel()
	// Past any real log (2^62 records): an empty page, without index
	// arithmetic that Lua's doubles would round.
	if from > 1<<62 {
		return nil, nil
	}
	vals, err := readScript.Run(ctx, s.c, []string{s.kLog, s.kBase}, strconv.FormatUint(from, 10), max).StringSlice()
	if err != nil {
		return nil, mapErr(err)
	}
	out := make([]store.Record, len(vals))
	for i, v := range vals {
		out[i] = store.Record{Index: from + uint64(i), Data: []byte(v)}
	}
	return out, nil
}

// Last implements store.Store.
func (s *Store) Last(ctx context.Context) (uint64, error) {
	ctx, cancel := s.ctx(ctx)
	defer cancel()
	n, err := lastScript.Run(ctx, s.c, []string{s.kLog, s.kBase}).Int64()
	return uint64(n), mapErr(err)
}

// First implements store.Store.
func (s *Store) First(ctx context.Context) (uint64, error) {
	ctx, cancel := s.ctx(ctx)
	defer cancel()
	base, err := s.c.Get(ctx, s.kBase).Uint64()
	if errors.Is(err, redis.Nil) {
		return 1, nil
	}
	if err != nil {
		return 0, mapErr(err)
	}
	return base + 1, nil
}

// Compact implements store.Store: one script trims the list's head.
func (s *Store) Compact(ctx context.Context, token, through uint64) error {
	if token == 0 {
		return fmt.Errorf("%w: compact needs a token", store.ErrInvalid)
	}
	ctx, cancel := s.ctx(ctx)
	defer cancel()
	return mapErr(compactScript.Run(ctx, s.c, []string{s.kToken, s.kLog, s.kBase, s.kSnap},
		strconv.FormatUint(token, 10), strconv.FormatUint(through, 10)).Err())
}

// SaveSnapshot implements store.Store.
func (s *Store) SaveSnapshot(ctx context.Context, token, index uint64, data []byte) error {
	if token == 0 || index == 0 {
		return fmt.Errorf("%w: snapshot needs a token and an index", store.ErrInvalid)
	}
	ctx, cancel := s.ctx(ctx)
	defer cancel()
	return mapErr(snapshotScript.Run(ctx, s.c, []string{s.kToken, s.kLog, s.kSnap, s.kBase},
		strconv.FormatUint(token, 10), strconv.FormatUint(index, 10), data).Err())
}

// LoadSnapshot implements store.Store.
func (s *Store) LoadSnapshot(ctx context.Context) (uint64, []byte, error) {
	ctx, cancel := s.ctx(ctx)
	defer cancel()
	vals, err := s.c.HMGet(ctx, s.kSnap, "index", "data").Result()
	if err != nil {
		return 0, nil, mapErr(err)
	}
	is, ok1 := vals[0].(string)
	ds, ok2 := vals[1].(string)
	if !ok1 || !ok2 {
		return 0, nil, store.ErrNoSnapshot
	}
	idx, err := strconv.ParseUint(is, 10, 64)
	if err != nil {
		return 0, nil, fmt.Errorf("valkey: snapshot index %q: %w", is, err)
	}
	return idx, []byte(ds), nil
}

// LeaseTTL is the remaining lease time on the server: 0 exactly when the
// lease is free (its key is gone), so a caller that waits for 0 and then
// calls Acquire cannot find the old lease still live.
func (s *Store) LeaseTTL(ctx context.Context) (time.Duration, error) {
	ctx, cancel := s.ctx(ctx)
	defer cancel()
	d, err := s.c.PTTL(ctx, s.kLease).Result()
	if err != nil {
		return 0, mapErr(err)
	}
	return leaseRemaining(d)
}

// leaseRemaining maps a PTTL reply to the time left on the lease. The
// server keeps a key until its clock is past the expiry time and reports
// whole milliseconds, so PTTL 0 is a live key with under 1 ms left: that is
// reported as 1 ms, not as free. go-redis passes the replies -2 (no key)
// and -1 (no expiry) through unscaled.
func leaseRemaining(pttl time.Duration) (time.Duration, error) {
	switch {
	case pttl == -2:
		return 0, nil
	case pttl < 0:
		return 0, errors.New("valkey: the lease key has no expiry")
	case pttl < time.Millisecond:
		return time.Millisecond, nil
	}
	return pttl, nil
}

// Close implements store.Store.
func (s *Store) Close() error {
	if err := s.c.Close(); err != nil && !errors.Is(err, redis.ErrClosed) {
		return err
	}
	return nil
}
