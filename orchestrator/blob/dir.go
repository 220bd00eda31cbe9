package blob

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/zooai/gym/internal/atomicfile"
)

// Dir is the Store in a directory (the embedded store's data directory):
// name a/b/c is the file ROOT/a/b/c, written atomically and fsynced.
type Dir struct {
	root string
}

// NewDir returns the store rooted at root (made when missing).
func NewDir(root string) (*Dir, error) {
	if err := os.MkdirAll(root, 0o755); err != nil {
		return nil, fmt.Errorf("blob: %w", err)
	}
	return &Dir{root: root}, nil
}

// Path is the file that holds name.
func (d *Dir) Path(name string) string { return filepath.Join(d.root, filepath.FromSlash(name)) }

// Put implements Store.
func (d *Dir) Put(ctx context.Context, name string, data []byte) error {
	if err := check(name, data); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	p := d.Path(name)
	if old, err := os.ReadFile(p); err == nil {
		if !bytes.Equal(old, data) {
			return fmt.Errorf("%w: %s", ErrConflict, name)
		}
		return nil
	}
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return fmt.Errorf("blob: %w", err)
	}
	err := atomicfile.WriteBytes(p, 0o644, false, data)
	if errors.Is(err, fs.ErrExist) { // a racing Put of the same name
		old, rerr := os.ReadFile(p)
		if rerr == nil && bytes.Equal(old, data) {
			return nil
		}
		return fmt.Errorf("%w: %s", ErrConflict, name)
	}
	return err
}

// Get implements Store.
func (d *Dir) Get(ctx context.Context, name string) ([]byte, error) {
	if err := ValidName(name); err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	b, err := os.ReadFile(d.Path(name))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("%w: %s", ErrNotFound, name)
	}
	return b, err
}

// DeleteDir implements Store: it removes the directory's files (also
// the temporary files of writes interrupted there) one by one, then the
// directory if nothing else is left in it. Interrupted, it leaves the
// rest for the next call.
func (d *Dir) DeleteDir(ctx context.Context, dir string) (Reclaimed, error) {
	if err := ValidName(dir); err != nil {
		return Reclaimed{}, err
	}
	if err := ctx.Err(); err != nil {
		return Reclaimed{}, err
	}
	p := d.Path(dir)
	ents, err := os.ReadDir(p)
	if errors.Is(err, fs.ErrNotExist) {
		return Reclaimed{}, nil
	}
	if err != nil {
		return Reclaimed{}, fmt.Errorf("blob: %w", err)
	}
	var r Reclaimed
	for _, e := range ents {
		if !e.Type().IsRegular() {
			continue // a directory of deeper names
		}
		fi, err := e.Info()
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return r, fmt.Errorf("blob: %w", err)
		}
		if err := os.Remove(filepath.Join(p, e.Name())); errors.Is(err, fs.ErrNotExist) {
			continue
		} else if err != nil {
			return r, fmt.Errorf("blob: %w", err)
		}
		if ValidName(e.Name()) == nil && !strings.HasPrefix(e.Name(), ".") {
			r.Blobs++
		}
		r.Bytes += fi.Size()
	}
	_ = os.Remove(p) // fails while deeper names or a racing write remain
	return r, nil
}
