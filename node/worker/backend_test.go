package worker_test

import (
	"cmp"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ipfs/go-cid"

	"github.com/zooai/gym/artifact/basecache"
	"github.com/zooai/gym/devnet/localcluster"
	"github.com/zooai/gym/internal/tinyllama"
	"github.com/zooai/gym/model/basemodel"
	"github.com/zooai/gym/model/llama"
	"github.com/zooai/gym/node/backend"
	"github.com/zooai/gym/node/worker"
	"github.com/zooai/gym/orchestrator/state"
	"github.com/zooai/gym/protocol/jobconf"
)

// TestRefusesJobOfAnotherBackend: a go worker refuses a job that asks for
// the torch backend, and the job does not start with it.
func TestRefusesJobOfAnotherBackend(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	spec := tinySpec(1, 2)
	spec.Backend = "torch"
	refused := make(chan worker.Event, 1)
	cl, nodes := startNodes(t, ctx, spec, 3, func(i int, c *worker.Config, nd *node) {
		if i != 0 {
			return
		}
		nd.on = func(e worker.Event) {
			if e.Kind == worker.EventJobRefused {
				select {
				case refused <- e:
				default:
				}
			}
		}
	})
	select {
	case e := <-refused:
		if !strings.Contains(e.Reason, "torch backend") || !strings.Contains(e.Reason, "with go") {
			t.Errorf("refusal %q does not say why", e.Reason)
		}
	case <-ctx.Done():
		t.Fatal("the job was not refused")
	}
	for _, n := range nodes {
		n.Kill()
		waitDone(t, ctx, n)
	}
	if st := cl.state(t).State; st != state.Provisioning && st != state.Pending {
		t.Errorf("job is %s: go workers took a torch job", st)
	}
}

// dirBackend is a backend that loads the base from its directory itself,
// as the torch backend's process does (backend.DirLoader), then trains with
// the Go engine: the worker must hand it a base without weights and the
// verified directory.
type dirBackend struct {
	backend.GoBackend
	mu     sync.Mutex
	loaded map[string]*basemodel.Base // by directory
	starts int
	err    error // the first wrong Job seen
}

func (*dirBackend) LoadsBaseDir() bool { return true }

func (d *dirBackend) Start(ctx context.Context, j backend.Job) (backend.Trainer, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.starts++
	if !j.Base.ConfigOnly || j.Base.Weights.Embed.Len() > 0 || j.BaseDir == "" {
		err := fmt.Errorf("job base %s: config only %v, weights decoded %v, directory %q", j.Base.Name, j.Base.ConfigOnly, j.Base.Weights.Embed.Len() > 0, j.BaseDir)
		d.err = cmp.Or(d.err, err)
		return nil, err
	}
	b := d.loaded[j.BaseDir]
	if b == nil {
		var err error
		if b, err = basemodel.Open(j.BaseDir); err != nil {
			return nil, err
		}
		b.Name = j.Base.Name
		d.loaded[j.BaseDir] = b
	}
	j.Base = b
	return d.GoBackend.Start(ctx, j)
}

// noDecode fails every Open: the weight loader a worker must not call for
// a backend that loads the base directory itself.
type noDecode struct {
	worker.Bases
	opens *atomic.Int32
}

func (n noDecode) Open(ctx context.Context, root cid.Cid) (*basemodel.Base, error) {
	n.opens.Add(1)
	return nil, fmt.Errorf("test: the worker decoded base %s's weights for a backend that loads the directory itself", root)
}

// TestDirLoaderGetsBytes: a job on a base named by CID, trained by
// workers whose backend loads the base directory itself (a DirLoader, as
// torch is). Each worker fetches and verifies the base and reads only its
// config and tokenizer: the weight loader (Bases.Open) is never called —
// it fails here — and the backend is given a base without weights and the
// verified directory, from which it loads them. The job publishes.
func TestDirLoaderGetsBytes(t *testing.T) {
	long(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	model := filepath.Join(t.TempDir(), "qwen2-tiny")
	w, err := tinyllama.Weights(tinyllama.Config(), 3, 0.2)
	if err != nil {
		t.Fatal(err)
	}
	if err := llama.Save(model, w); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(model, "tokenizer.json"), tinyllama.TokenizerJSON(), 0o644); err != nil {
		t.Fatal(err)
	}
	root, err := basecache.DirCID(ctx, model)
	if err != nil {
		t.Fatal(err)
	}
	spec := tinySpec(1, 4)
	spec.Model, spec.PromptsPerStep, spec.GSPO = root.String(), 4, jobconf.BuiltinGSPO(2)
	var opens atomic.Int32
	var refused atomic.Value
	backends := make([]*dirBackend, 3)
	cl, nodes := startNodesWith(t, ctx, spec, 3, func(c *localcluster.Config) { c.ModelDir, c.ModelWork = model, "self" },
		func(i int, c *worker.Config, nd *node) {
			backends[i] = &dirBackend{loaded: map[string]*basemodel.Base{}}
			c.Backend, c.Bases, c.ExitWhenDone = backends[i], noDecode{c.Bases, &opens}, true
			nd.on = func(e worker.Event) {
				if e.Kind == worker.EventJobRefused {
					refused.CompareAndSwap(nil, fmt.Sprintf("w%d refused the job: %s", i, e.Reason))
					cancel() // the job cannot publish: end the test now
				}
			}
		})
	for _, nd := range nodes {
		select {
		case <-nd.Done():
		case <-ctx.Done():
		}
	}
	if r := refused.Load(); r != nil {
		t.Fatal(r)
	}
	waitDone(t, ctx, nodes...)
	if st := cl.state(t); st.State != state.Published {
		t.Fatalf("job %s (refusals %v)", st.State, st.Refusals)
	}
	if n := opens.Load(); n != 0 {
		t.Errorf("Bases.Open called %d times", n)
	}
	for i, b := range backends {
		if b.err != nil || b.starts == 0 {
			t.Errorf("w%d: %d trainer starts, %v", i, b.starts, b.err)
		}
		ready := nodes[i].Events(worker.EventBaseReady)
		if len(ready) != 1 || !strings.Contains(ready[0].Detail, "config and tokenizer read") || !strings.Contains(ready[0].Detail, root.String()) {
			t.Errorf("w%d: base_ready events %v", i, ready)
		}
	}
}
