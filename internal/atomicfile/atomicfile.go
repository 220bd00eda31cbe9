// Package atomicfile writes files and directories so that readers see
// either the old content or the complete new one, never a part: the bytes
// go to a temporary file (or directory) next to the target, are synced, and
// are renamed (or, when an existing file must not be replaced, hard-linked)
// into place; the parent directory is synced after, so the new name
// survives a crash too. Every atomic write in the project goes through here.
package atomicfile

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
)

// Write calls write with a temporary file and puts it at path with mode
// perm. With replace false it fails, writing nothing, if path exists —
// even if it appears while write runs.
func Write(path string, perm fs.FileMode, replace bool, write func(io.Writer) error) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if err := tmp.Chmod(perm); err != nil {
		tmp.Close()
		return err
	}
	if err := write(tmp); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	if replace {
		if err := os.Rename(tmp.Name(), path); err != nil {
			return err
		}
		return syncDir(filepath.Dir(path))
	}
	if err := os.Link(tmp.Name(), path); err != nil {
		if os.IsExist(err) {
			return fmt.Errorf("%s: %w", path, fs.ErrExist)
		}
		return err
	}
	return syncDir(filepath.Dir(path))
}

// WriteBytes is Write with the content in memory.
func WriteBytes(path string, perm fs.FileMode, replace bool, b []byte) error {
	return Write(path, perm, replace, func(w io.Writer) error { _, err := w.Write(b); return err })
}

// Dir creates the directory path (mode perm) whole: fill writes into a
// temporary directory beside it, every regular file in it is synced, and it
// is renamed into place. It fails with fs.ErrExist, leaving path as it was,
// if path exists (os.Rename refuses any existing directory) — even if it
// appears while fill runs.
func Dir(path string, perm fs.FileMode, fill func(tmp string) error) error {
	path = filepath.Clean(path)
	parent := filepath.Dir(path)
	if err := os.MkdirAll(parent, 0o755); err != nil {
		return err
	}
	tmp, err := os.MkdirTemp(parent, "."+filepath.Base(path)+".partial-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	if err := fill(tmp); err != nil {
		return err
	}
	err = filepath.WalkDir(tmp, func(p string, d fs.DirEntry, err error) error {
		if err != nil || !(d.Type().IsRegular() || d.IsDir()) {
			return err
		}
		return syncPath(p)
	})
	if err != nil {
		return err
	}
	if err := os.Chmod(tmp, perm); err != nil {
		return err
	}
	if err := os.Rename(tmp, path); err != nil {
		if errors.Is(err, fs.ErrExist) { // EEXIST, or ENOTEMPTY from rename(2)
			return fmt.Errorf("%s: %w", path, fs.ErrExist)
		}
		return err
	}
	return syncDir(parent)
}

func syncPath(p string) error {
	f, err := os.Open(p)
	if err != nil {
		return err
	}
	err = f.Sync()
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// syncDir makes a rename in dir durable.
func syncDir(dir string) error { return syncPath(dir) }
