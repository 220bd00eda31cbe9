// Package store defines where the orchestrator's event log, snapshots and
// leader lease live. Implementations: store/bolt (embedded, the default:
// one directory, one process) and store/valkey (Redis protocol, several
// hanzod replicas). Both pass the shared suite in store/storetest.
//
// The log can be compacted: Compact drops the records up to an index the
// latest snapshot covers, and the log keeps its numbering (First says where
// it now starts; reading before it is ErrCompacted).
//
// Every write carries a fencing token obtained from Acquire. The store
// refuses a write whose token is not the newest it issued, atomically with
// the write itself, so a leader that lost its lease (paused, partitioned,
// or simply slow) cannot append after its successor took over.
package store

import (
	"context"
	"errors"
	"time"
)

// Sentinel errors.
var (
	// ErrFenced: the token is not the current lease's; the caller is no
	// longer the leader and must stop writing.
	ErrFenced = errors.New("store: fenced: a newer leader holds the lease")
	// ErrLeaseHeld: another holder's lease is still live.
	ErrLeaseHeld = errors.New("store: lease held by another holder")
	// ErrConflict: the append does not start right after the last record.
	ErrConflict = errors.New("store: append does not follow the last record")
	// ErrNoSnapshot: no snapshot has been saved.
	ErrNoSnapshot = errors.New("store: no snapshot")
	// ErrInvalid: bad arguments (empty batch, zero token, oversized record).
	ErrInvalid = errors.New("store: invalid argument")
	// ErrCompacted: the records asked for were dropped by Compact; the
	// snapshot covers them.
	ErrCompacted = errors.New("store: records compacted")
)

// MaxRecord bounds one record.
const MaxRecord = 4 << 20

// Record is one log entry: Index counts from 1 without gaps.
type Record struct {
	Index uint64
	Data  []byte
}

// Store is a durable append-only log with snapshots and a leader lease.
// An acknowledged Append or SaveSnapshot survives a crash of the process
// (and, for Valkey, of the server when it runs with appendfsync always).
type Store interface {
	// Acquire takes the lease for holder for ttl, or renews it when holder
	// already has it (keeping its token). A new acquisition issues a new
	// token, larger than every token issued before. It fails with
	// ErrLeaseHeld while another holder's lease is live.
	Acquire(ctx context.Context, holder string, ttl time.Duration) (token uint64, err error)
	// Release ends the lease if token is current (a no-op otherwise).
	Release(ctx context.Context, token uint64) error
	// Append writes recs, which must be numbered Last()+1, Last()+2, …,
	// all or none, if token is the current one.
	Append(ctx context.Context, token uint64, recs []Record) error
	// Read returns up to max records starting at index from (≥ 1). It
	// fails with ErrCompacted when from is below First.
	Read(ctx context.Context, from uint64, max int) ([]Record, error)
	// Last is the index of the last record appended (0 when none ever
	// was; compaction does not change it).
	Last(ctx context.Context) (uint64, error)
	// First is the index of the first record kept: 1 until Compact dropped
	// some, then the index after the last one dropped.
	First(ctx context.Context) (uint64, error)
	// Compact drops the records up to and including index through, if
	// token is current. through must not exceed the latest snapshot's
	// index (ErrInvalid): every dropped record stays covered by a
	// snapshot. Compacting below First again does nothing.
	Compact(ctx context.Context, token, through uint64) error
	// SaveSnapshot stores the state after record index, if token is current.
	SaveSnapshot(ctx context.Context, token, index uint64, data []byte) error
	// LoadSnapshot returns the latest snapshot or ErrNoSnapshot.
	LoadSnapshot(ctx context.Context) (index uint64, data []byte, err error)
	Close() error
}

// CheckBatch validates the shape of an append.
func CheckBatch(token uint64, recs []Record) error {
	if token == 0 {
		return errors.Join(ErrInvalid, errors.New("zero token"))
	}
	if len(recs) == 0 {
		return errors.Join(ErrInvalid, errors.New("empty append"))
	}
	for i, r := range recs {
		if r.Index != recs[0].Index+uint64(i) || r.Index == 0 {
			return errors.Join(ErrInvalid, errors.New("records are not numbered consecutively from 1"))
		}
		if len(r.Data) > MaxRecord {
			return errors.Join(ErrInvalid, errors.New("record exceeds MaxRecord"))
		}
	}
	return nil
}
