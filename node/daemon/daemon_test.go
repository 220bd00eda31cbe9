package daemon_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ipfs/go-cid"

	"github.com/zooai/gym/artifact"
	"github.com/zooai/gym/artifact/store"
	"github.com/zooai/gym/node/backend/torch"
	"github.com/zooai/gym/node/daemon"
	"github.com/zooai/gym/node/worker"
)

type artifacts struct{ st *store.Store }

func (a artifacts) Store() *store.Store                      { return a.st }
func (a artifacts) FetchBase(context.Context, cid.Cid) error { return nil }

// A node whose torch backend cannot start is refused with the reason, and
// the caches of bases and datasets are kept under the node's directory.
func TestStartRefusesTorchWithoutPython(t *testing.T) {
	dir := t.TempDir()
	st, err := store.Open(store.Config{Dir: filepath.Join(dir, "store"), Limits: artifact.DefaultLimits()})
	if err != nil {
		t.Fatal(err)
	}
	_, err = daemon.Start(context.Background(), daemon.Config{Worker: worker.DefaultConfig(), Artifacts: artifacts{st},
		Torch: &torch.Options{Python: filepath.Join(dir, "no-python")}})
	if err == nil || !strings.Contains(err.Error(), "torch backend") {
		t.Fatalf("Start without a Python: %v", err)
	}
	for _, d := range []string{"bases", "datasets"} {
		if fi, err := os.Stat(filepath.Join(dir, d)); err != nil || !fi.IsDir() {
			t.Errorf("the %s cache is not under the node's directory: %v", d, err)
		}
	}
}
