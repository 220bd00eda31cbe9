package blob_test

import (
	"testing"

	"github.com/zooai/gym/orchestrator/blob"
	"github.com/zooai/gym/orchestrator/blob/blobtest"
)

func TestMem(t *testing.T) {
	blobtest.Run(t, func(t *testing.T) *blobtest.Env { return &blobtest.Env{Store: blob.NewMem()} })
}

func TestDir(t *testing.T) {
	blobtest.Run(t, func(t *testing.T) *blobtest.Env {
		dir := t.TempDir()
		s, err := blob.NewDir(dir)
		if err != nil {
			t.Fatal(err)
		}
		return &blobtest.Env{Store: s, Other: func(t *testing.T) blob.Store {
			o, err := blob.NewDir(dir)
			if err != nil {
				t.Fatal(err)
			}
			return o
		}}
	})
}
