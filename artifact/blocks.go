// Package artifact is the content-addressing core of Zoo Gym's checkpoint
// artifacts: it turns a file or a directory into the UnixFS DAG that
// `ipfs add -r --cid-version=1` builds (CIDv1, raw leaves, 256 KiB fixed-size
// chunks, balanced layout, sha2-256, basic directories that become HAMT
// shards above kubo's size threshold), walks and verifies such DAGs block by
// block, moves them in and out of CAR files, and signs the versioned
// manifest that names an artifact.
//
// The package does no network I/O and keeps no state on disk: blocks live
// behind the Blocks interface (MemBlocks here, the on-disk store in
// artifact/store), and time is always passed in.
package artifact

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/ipfs/go-cid"
	mh "github.com/multiformats/go-multihash"
)

// Errors. Every error about content wraps one of these.
var (
	ErrNotFound       = errors.New("artifact: block not found")
	ErrHashMismatch   = errors.New("artifact: block does not hash to its CID")
	ErrUnsupportedCID = errors.New("artifact: unsupported CID (want sha2-256, raw or dag-pb)")
	ErrTooLarge       = errors.New("artifact: over size limit")
	ErrBadDAG         = errors.New("artifact: malformed UnixFS DAG")
	ErrHostilePath    = errors.New("artifact: refused path")
	ErrNotRegular     = errors.New("artifact: not a regular file or directory")
)

// MaxBlockSize bounds every block read, fetched or stored. kubo's chunks are
// 256 KiB and its nodes far smaller; a basic directory may pass 256 KiB a
// little before it is sharded. 2 MiB is the bitswap limit as well.
const MaxBlockSize = 2 << 20

// Blocks holds blocks by CID. Put must refuse a block that does not hash to
// its CID; Get returns ErrNotFound (wrapped) for an absent block.
type Blocks interface {
	Get(ctx context.Context, c cid.Cid) ([]byte, error)
	Has(ctx context.Context, c cid.Cid) (bool, error)
	Put(ctx context.Context, c cid.Cid, data []byte) error
}

// CheckCID reports whether c is a CID this package accepts: sha2-256 over a
// raw or dag-pb block (CIDv1, or CIDv0 for old dag-pb content).
func CheckCID(c cid.Cid) error {
	if !c.Defined() {
		return fmt.Errorf("%w: undefined", ErrUnsupportedCID)
	}
	p := c.Prefix()
	if p.MhType != mh.SHA2_256 || p.MhLength != 32 {
		return fmt.Errorf("%w: %s uses multihash 0x%x", ErrUnsupportedCID, c, p.MhType)
	}
	if p.Codec != cid.Raw && p.Codec != cid.DagProtobuf {
		return fmt.Errorf("%w: %s has codec 0x%x", ErrUnsupportedCID, c, p.Codec)
	}
	return nil
}

// Check verifies that data is the block c names: an accepted CID, at most
// MaxBlockSize bytes, and the bytes hash to the CID's multihash.
func Check(c cid.Cid, data []byte) error {
	if err := CheckCID(c); err != nil {
		return err
	}
	if len(data) > MaxBlockSize {
		return fmt.Errorf("%w: block %s of %d bytes (limit %d)", ErrTooLarge, c, len(data), MaxBlockSize)
	}
	sum, err := mh.Sum(data, mh.SHA2_256, -1)
	if err != nil {
		return err
	}
	if !bytes.Equal(sum, c.Hash()) {
		return fmt.Errorf("%w: %s", ErrHashMismatch, c)
	}
	return nil
}

// MemBlocks is an in-memory Blocks, safe for concurrent use.
type MemBlocks struct {
	mu sync.RWMutex
	m  map[string][]byte // by multihash: CIDv0 and v1 of a block share it
}

// NewMemBlocks returns an empty MemBlocks.
func NewMemBlocks() *MemBlocks { return &MemBlocks{m: map[string][]byte{}} }

// Get returns a copy of the block.
func (b *MemBlocks) Get(_ context.Context, c cid.Cid) ([]byte, error) {
	b.mu.RLock()
	d, ok := b.m[string(c.Hash())]
	b.mu.RUnlock()
	if !ok {
		return nil, fmt.Errorf("%w: %s", ErrNotFound, c)
	}
	return bytes.Clone(d), nil
}

// Has reports whether the block is held.
func (b *MemBlocks) Has(_ context.Context, c cid.Cid) (bool, error) {
	b.mu.RLock()
	_, ok := b.m[string(c.Hash())]
	b.mu.RUnlock()
	return ok, nil
}

// Put stores a verified copy of data.
func (b *MemBlocks) Put(_ context.Context, c cid.Cid, data []byte) error {
	if err := Check(c, data); err != nil {
		return err
	}
	b.mu.Lock()
	b.m[string(c.Hash())] = bytes.Clone(data)
	b.mu.Unlock()
	return nil
}

// Len returns the number of blocks held.
func (b *MemBlocks) Len() int {
	b.mu.RLock()
	defer b.mu.RUnlock()
	return len(b.m)
}
