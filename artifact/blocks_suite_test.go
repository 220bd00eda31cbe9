package artifact_test

import (
	"testing"

	"github.com/zooai/gym/artifact"
	"github.com/zooai/gym/artifact/blockstest"
)

func TestMemBlocksSuite(t *testing.T) {
	blockstest.Run(t, func(*testing.T) artifact.Blocks { return artifact.NewMemBlocks() })
}
