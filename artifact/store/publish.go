package store

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"strings"
	"time"

	"github.com/ipfs/go-cid"
	"github.com/zooai/gym/artifact"
)

// Meta is what a publisher says about an artifact; the rest of the
// manifest comes from the DAG.
type Meta struct {
	Kind    artifact.Kind
	Name    string
	Version uint64        // 0: one more than the newest known
	TTL     time.Duration // manifest lifetime; 0: 30 days
}

// Publish imports src (a file or a directory) into the store, signs its
// manifest with key and completes it. On failure the blocks it added are
// removed again.
func (s *Store) Publish(ctx context.Context, src string, meta Meta, key ed25519.PrivateKey, now time.Time) (*Record, error) {
	sess := s.Session()
	sess.hashed = true
	defer sess.Close()
	res, err := artifact.Import(ctx, sess, src)
	if err == nil {
		var sm *artifact.Signed
		sm, err = s.sign(res, meta, key, now)
		if err == nil {
			var r *Record
			if r, err = sess.Complete(ctx, sm, now); err == nil {
				return r, nil
			}
		}
	}
	sess.Discard(context.WithoutCancel(ctx))
	return nil, err
}

func (s *Store) sign(res artifact.Imported, meta Meta, key ed25519.PrivateKey, now time.Time) (*artifact.Signed, error) {
	if meta.Version == 0 {
		meta.Version = 1
		if k := s.Known(meta.Kind, meta.Name); k != nil {
			meta.Version = k.Manifest.Version + 1
		}
	}
	if meta.TTL == 0 {
		meta.TTL = 30 * 24 * time.Hour
	}
	return artifact.Sign(artifact.Manifest{
		Format:  artifact.ManifestFormat,
		Kind:    meta.Kind,
		Name:    meta.Name,
		Version: meta.Version,
		Root:    res.Root.String(),
		Size:    res.Size,
		Files:   res.Files,
		Created: now,
		Expires: now.Add(meta.TTL),
	}, key)
}

// Export writes the files of the complete artifact root under out (created
// if missing): a directory artifact's tree, or a one-file artifact as
// out/fileName. It refuses to replace anything, to write through a
// symlink, or to write outside out.
func (s *Store) Export(ctx context.Context, root cid.Cid, out, fileName string) error {
	if _, err := s.Artifact(root); err != nil {
		return err
	}
	ix, err := artifact.Walk(ctx, s, root, s.cfg.Limits)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(out, 0o755); err != nil {
		return err
	}
	r, err := os.OpenRoot(out)
	if err != nil {
		return err
	}
	defer r.Close()
	for _, d := range ix.Dirs {
		if err := mkdirsIn(r, d); err != nil {
			return err
		}
	}
	for _, f := range ix.Files {
		p := f.Path
		if p == "" {
			if err := artifact.ValidName(fileName); err != nil {
				return err
			}
			p = fileName
		}
		if err := mkdirsIn(r, path.Dir(p)); err != nil {
			return err
		}
		if err := exportFile(ctx, s, r, p, ix.FileCIDs[f.Path], f.Size); err != nil {
			return err
		}
	}
	return nil
}

func mkdirsIn(r *os.Root, dir string) error {
	if dir == "." || dir == "" {
		return nil
	}
	p := ""
	for _, el := range strings.Split(dir, "/") {
		p = path.Join(p, el)
		st, err := r.Lstat(p)
		if errors.Is(err, fs.ErrNotExist) {
			if err := r.Mkdir(p, 0o755); err != nil {
				return err
			}
			continue
		}
		if err != nil {
			return err
		}
		if !st.IsDir() {
			return fmt.Errorf("%w: %s is %v", ErrHostileFile, p, st.Mode().Type())
		}
	}
	return nil
}

func exportFile(ctx context.Context, g artifact.Getter, r *os.Root, p string, c cid.Cid, size uint64) error {
	if _, err := r.Lstat(p); err == nil {
		return fmt.Errorf("store: export: %s: %w", p, fs.ErrExist)
	} else if !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	src, err := artifact.FileReader(ctx, g, c)
	if err != nil {
		return err
	}
	var rnd [8]byte
	rand.Read(rnd[:])
	tmp := path.Join(path.Dir(p), ".gym-export-"+hex.EncodeToString(rnd[:]))
	f, err := r.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL|noFollow, 0o644)
	if err != nil {
		return err
	}
	defer r.Remove(tmp)
	n, err := io.Copy(f, src)
	if err == nil && uint64(n) != size {
		err = fmt.Errorf("%w: %s: %d bytes, want %d", artifact.ErrBadDAG, p, n, size)
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	// Link, unlike rename, refuses to replace a file that appeared meanwhile.
	return r.Link(tmp, p)
}
