package artifact

import (
	"bytes"
	"context"
	"crypto/sha256"
	"testing"

	"github.com/ipfs/go-cid"
)

// Publishing cost against the floor set by hashing: BenchmarkImport builds
// the DAG of 64 MiB into memory (chunking, hashing every leaf and node,
// plus Put's re-verification); BenchmarkSHA256 only hashes the same bytes.
const benchSize = 64 << 20

func BenchmarkImport(b *testing.B) {
	data := pattern(benchSize, 5)
	b.SetBytes(benchSize)
	for b.Loop() {
		if _, _, err := ImportReader(context.Background(), NewMemBlocks(), bytes.NewReader(data)); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkImportNoVerify is Import into a sink that does not re-hash.
func BenchmarkImportNoVerify(b *testing.B) {
	data := pattern(benchSize, 5)
	b.SetBytes(benchSize)
	for b.Loop() {
		if _, _, err := ImportReader(context.Background(), discard{}, bytes.NewReader(data)); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkSHA256(b *testing.B) {
	data := pattern(benchSize, 5)
	b.SetBytes(benchSize)
	for b.Loop() {
		sha256.Sum256(data)
	}
}

type discard struct{}

func (discard) Get(context.Context, cid.Cid) ([]byte, error) { return nil, ErrNotFound }
func (discard) Has(context.Context, cid.Cid) (bool, error)   { return false, nil }
func (discard) Put(context.Context, cid.Cid, []byte) error   { return nil }
