package store

import (
	"testing"

	"github.com/zooai/gym/artifact"
	"github.com/zooai/gym/artifact/blockstest"
)

func TestStoreBlocksSuite(t *testing.T) {
	blockstest.Run(t, func(t *testing.T) artifact.Blocks { return open(t, t.TempDir(), 0) })
}
