// Package blob is where hanzod keeps the bytes an epoch's merge needs —
// the accepted delta files, the evidence of slashes and the checkpoints of
// record — so that every replica can read them: a directory for the
// embedded store (one replica), Valkey next to the event log for several
// (orchestrator/store/valkey.Blobs), and an in-memory twin for tests. All
// pass one suite (blobtest).
//
// Blobs are immutable and named by what they contain: a delta by its
// signature digest, a checkpoint's files by the checkpoint's root CID (the
// digest and the CID are in the event log). A Put of a name that exists
// with the same bytes is a no-op; with other bytes it is refused
// (ErrConflict), so a deposed leader can never replace what the current
// one wrote. Put returns once the bytes are durable: the judge writes a
// blob before it logs the verdict that depends on it.
//
// DeleteDir removes a directory's blobs at once (the deltas and evidence
// of a job once it settled): it is idempotent, and a name deleted may be
// put again (a deposed leader writing late), which the next DeleteDir
// removes.
package blob

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
)

// Store keeps immutable named blobs.
type Store interface {
	// Put stores data under name, durably; the same bytes again are a
	// no-op, other bytes ErrConflict.
	Put(ctx context.Context, name string, data []byte) error
	// Get returns the bytes under name (ErrNotFound when absent).
	Get(ctx context.Context, name string) ([]byte, error)
	// DeleteDir removes every blob named dir/NAME, NAME without '/'
	// (names deeper below dir stay), and says how many blobs and bytes it
	// removed. A directory without blobs is no error: deleting twice
	// reclaims nothing the second time.
	DeleteDir(ctx context.Context, dir string) (Reclaimed, error)
}

// Reclaimed is what a DeleteDir removed.
type Reclaimed struct {
	Blobs int
	Bytes int64
}

// Add returns the sum of r and o.
func (r Reclaimed) Add(o Reclaimed) Reclaimed {
	return Reclaimed{Blobs: r.Blobs + o.Blobs, Bytes: r.Bytes + o.Bytes}
}

// InDir reports whether name is dir/NAME with NAME without '/'.
func InDir(name, dir string) bool {
	rest, ok := strings.CutPrefix(name, dir+"/")
	return ok && rest != "" && !strings.Contains(rest, "/")
}

var (
	// ErrNotFound is returned by Get for a name that was never put.
	ErrNotFound = errors.New("blob: not found")
	// ErrConflict is returned by Put when the name holds other bytes.
	ErrConflict = errors.New("blob: name already holds other bytes")
	// ErrName is returned for a name ValidName refuses.
	ErrName = errors.New("blob: invalid name")
	// ErrTooLarge is returned by Put for a blob above MaxSize.
	ErrTooLarge = errors.New("blob: too large")
)

// MaxSize bounds one blob (a delta file is at most 64 MiB; a checkpoint's
// weights of a LoRA adapter are of the same order).
const MaxSize = 256 << 20

// ValidName checks a name: 1–512 bytes of path segments separated by
// '/', each of [A-Za-z0-9._-], not empty, not "." or "..". The directory
// store maps a name onto a path below its root, so nothing else may pass.
func ValidName(name string) error {
	if name == "" || len(name) > 512 {
		return fmt.Errorf("%w: %q: length %d not in 1–512", ErrName, name, len(name))
	}
	for _, seg := range strings.Split(name, "/") {
		if seg == "" || seg == "." || seg == ".." {
			return fmt.Errorf("%w: %q: empty, . or .. segment", ErrName, name)
		}
		for _, c := range []byte(seg) {
			if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-') {
				return fmt.Errorf("%w: %q: byte %q", ErrName, name, c)
			}
		}
	}
	return nil
}

func check(name string, data []byte) error {
	if err := ValidName(name); err != nil {
		return err
	}
	if len(data) > MaxSize {
		return fmt.Errorf("%w: %s is %d bytes (at most %d)", ErrTooLarge, name, len(data), MaxSize)
	}
	return nil
}

// Mem is the in-memory Store (tests; a replica set in one process).
type Mem struct {
	mu sync.Mutex
	m  map[string][]byte
}

// NewMem returns an empty in-memory store.
func NewMem() *Mem { return &Mem{m: map[string][]byte{}} }

// Put implements Store.
func (s *Mem) Put(ctx context.Context, name string, data []byte) error {
	if err := check(name, data); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if old, ok := s.m[name]; ok {
		if string(old) != string(data) {
			return fmt.Errorf("%w: %s", ErrConflict, name)
		}
		return nil
	}
	s.m[name] = append([]byte(nil), data...)
	return nil
}

// Get implements Store.
func (s *Mem) Get(ctx context.Context, name string) ([]byte, error) {
	if err := ValidName(name); err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	b, ok := s.m[name]
	if !ok {
		return nil, fmt.Errorf("%w: %s", ErrNotFound, name)
	}
	return append([]byte(nil), b...), nil
}

// DeleteDir implements Store.
func (s *Mem) DeleteDir(ctx context.Context, dir string) (Reclaimed, error) {
	if err := ValidName(dir); err != nil {
		return Reclaimed{}, err
	}
	if err := ctx.Err(); err != nil {
		return Reclaimed{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	var r Reclaimed
	for name, b := range s.m {
		if InDir(name, dir) {
			r.Blobs++
			r.Bytes += int64(len(b))
			delete(s.m, name)
		}
	}
	return r, nil
}
