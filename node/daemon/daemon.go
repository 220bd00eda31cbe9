// Package daemon wires a compute node, as orchestrator/daemon wires
// hanzod: given a worker's configuration and its client of hanzod, Start
// adds the caches of the bases and datasets jobs name by CID (fetched
// into the client's artifact store from hanzod and peers, exported and
// verified under the node's directory), starts the torch backend when the
// node trains with it, and builds the worker; Run runs it and releases
// everything. `gym worker` and devnet/localcluster's in-process workers
// both start their nodes here, so a node is put together in one place.
//
// What stays with the caller is what differs between them: flags and
// their checks (cmd/gym), dialling hanzod, and the artifact server a
// command-line node may serve.
package daemon

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"

	"github.com/ipfs/go-cid"

	"github.com/zooai/gym/artifact"
	"github.com/zooai/gym/artifact/basecache"
	"github.com/zooai/gym/artifact/store"
	"github.com/zooai/gym/node/backend/torch"
	"github.com/zooai/gym/node/worker"
)

// Artifacts is what the caches of bases and datasets by CID need of the
// node's client of hanzod (nodeclient.Client): its artifact store, and
// fetches into it.
type Artifacts interface {
	Store() *store.Store
	FetchBase(ctx context.Context, root cid.Cid) error
}

// Config is a node to start.
type Config struct {
	// Worker is the worker's configuration, its Orchestrator set. Start
	// fills in Bases, Datasets and Backend where they are nil.
	Worker worker.Config
	// Artifacts, when not nil, backs the caches of bases and datasets
	// named by CID, kept under Dir/bases and Dir/datasets.
	Artifacts Artifacts
	// Dir is the node's directory for those caches ("": the artifact
	// store's parent directory).
	Dir string
	// Torch, when not nil, is the torch backend to start: the worker
	// trains with it (Worker.Backend).
	Torch *torch.Options
}

// Caches are a node's caches of the bases and the datasets jobs name by
// CID, under dir/bases and dir/datasets (dir "": the artifact store's
// parent directory), fetched through a.
func Caches(a Artifacts, dir string) (bases, datasets *basecache.Cache, err error) {
	if dir == "" {
		dir = filepath.Dir(a.Store().Dir())
	}
	if bases, err = basecache.New(filepath.Join(dir, "bases"), a.Store(), a.FetchBase); err != nil {
		return nil, nil, err
	}
	if datasets, err = basecache.NewKind(artifact.KindDataset, filepath.Join(dir, "datasets"), a.Store(), a.FetchBase); err != nil {
		return nil, nil, err
	}
	return bases, datasets, nil
}

// Node is a started compute node.
type Node struct {
	w     *worker.Worker
	torch *torch.Backend
}

// Start builds the node: caches, backend, worker. On error everything it
// started is released.
func Start(ctx context.Context, cfg Config) (*Node, error) {
	wc := cfg.Worker
	if a := cfg.Artifacts; a != nil && (wc.Bases == nil || wc.Datasets == nil) {
		bases, datasets, err := Caches(a, cfg.Dir)
		if err != nil {
			return nil, err
		}
		if wc.Bases == nil {
			wc.Bases = bases
		}
		if wc.Datasets == nil {
			wc.Datasets = datasets
		}
	}
	n := &Node{}
	if cfg.Torch != nil && wc.Backend == nil {
		tb, err := torch.New(ctx, *cfg.Torch)
		if err != nil {
			return nil, fmt.Errorf("node: the torch backend: %w", err)
		}
		n.torch, wc.Backend = tb, tb
	}
	w, err := worker.New(wc)
	if err != nil {
		n.Close()
		return nil, err
	}
	n.w = w
	return n, nil
}

// Worker is the node's worker.
func (n *Node) Worker() *worker.Worker { return n.w }

// Torch is the torch backend Start started (nil: none).
func (n *Node) Torch() *torch.Backend { return n.torch }

// Run runs the worker until ctx ends or the worker stops, then releases
// what Start started.
func (n *Node) Run(ctx context.Context) error {
	if n.w == nil {
		return errors.New("node: not started")
	}
	err := n.w.Run(ctx)
	n.Close()
	return err
}

// Close releases what Start started (the torch backend's process).
// Idempotent.
func (n *Node) Close() error {
	if n.torch != nil {
		err := n.torch.Close()
		n.torch = nil
		return err
	}
	return nil
}
