package worker_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/zooai/gym/orchestrator/state"
	"github.com/zooai/gym/worker"
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
