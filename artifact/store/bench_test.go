package store

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/ipfs/go-cid"
	"github.com/zooai/gym/artifact"
)

// readingGetter hides a session's LeafSize: the walk reads and hashes
// every leaf, as Complete did before it sized leaves from the disk.
type readingGetter struct{ s *Session }

func (g readingGetter) Get(ctx context.Context, c cid.Cid) ([]byte, error) { return g.s.Get(ctx, c) }

// BenchmarkCompleteWalk walks a stored 256 MiB artifact the way Complete
// does (a session, leaves sized from the disk) against the walk that reads
// and hashes every leaf, in one run:
//
//	go test ./artifact/store -run - -bench CompleteWalk -benchtime 5x
func BenchmarkCompleteWalk(b *testing.B) {
	ctx := context.Background()
	src := b.TempDir()
	if err := os.WriteFile(filepath.Join(src, "w.bin"), randBytes(5, 256<<20), 0o644); err != nil {
		b.Fatal(err)
	}
	s, err := Open(DefaultConfig(b.TempDir()))
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	rec, err := s.Publish(ctx, src, Meta{Kind: artifact.KindCheckpoint, Name: "b"}, key(1), now)
	if err != nil {
		b.Fatal(err)
	}
	root, _ := cid.Decode(rec.Root)
	for _, tc := range []struct {
		name   string
		getter func(*Session) artifact.Getter
	}{
		{"read-every-leaf", func(ss *Session) artifact.Getter { return readingGetter{ss} }},
		{"size-leaves", func(ss *Session) artifact.Getter { return ss }},
	} {
		b.Run(tc.name, func(b *testing.B) {
			b.SetBytes(int64(rec.BlockBytes))
			for b.Loop() {
				ss := s.Session()
				if _, err := artifact.Walk(ctx, tc.getter(ss), root, s.cfg.Limits); err != nil {
					b.Fatal(err)
				}
				ss.Close()
			}
		})
	}
}
