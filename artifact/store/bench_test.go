package store

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/zooai/gym/artifact"
)

// BenchmarkCompleteWalk walks a stored 256 MiB artifact the way Complete
// does after a fetch (through the session that wrote the blocks: leaves
// sized from the disk) against a walk through a fresh session, which reads
// and hashes every leaf (what Complete did for every fetch before), in one
// run:
//
//	go test ./artifact/store -run - -bench CompleteWalk -benchtime 5x
func BenchmarkCompleteWalk(b *testing.B) {
	ctx := context.Background()
	src := b.TempDir()
	if err := os.WriteFile(filepath.Join(src, "w.bin"), randBytes(5, 256<<20), 0o644); err != nil {
		b.Fatal(err)
	}
	staging := artifact.NewMemBlocks()
	res, err := artifact.Import(ctx, staging, src)
	if err != nil {
		b.Fatal(err)
	}
	ix, err := artifact.Walk(ctx, staging, res.Root, artifact.DefaultLimits())
	if err != nil {
		b.Fatal(err)
	}
	s, err := Open(DefaultConfig(b.TempDir()))
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	writer := s.Session()
	defer writer.Close()
	for _, c := range ix.Blocks {
		d, _ := staging.Get(ctx, c)
		if err := writer.Put(ctx, c, d); err != nil {
			b.Fatal(err)
		}
	}
	for _, tc := range []struct {
		name    string
		session func() (*Session, func())
	}{
		{"fresh-session-reads-every-leaf", func() (*Session, func()) { ss := s.Session(); return ss, ss.Close }},
		{"writing-session-sizes-leaves", func() (*Session, func()) { return writer, func() {} }},
	} {
		b.Run(tc.name, func(b *testing.B) {
			b.SetBytes(int64(ix.BlockBytes))
			for b.Loop() {
				ss, done := tc.session()
				if _, err := artifact.Walk(ctx, ss, res.Root, s.cfg.Limits); err != nil {
					b.Fatal(err)
				}
				done()
			}
		})
	}
}
