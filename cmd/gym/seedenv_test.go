package main

import (
	"context"
	"io"
	"strings"
	"testing"

	"github.com/zooai/gym/node/worker"
)

// TestUse4Bit: the seed's USE_4BIT is refused when it asks for what this
// build cannot do, before anything connects; false is accepted.
func TestUse4Bit(t *testing.T) {
	for _, c := range []struct {
		v, err string
	}{{"true", "needs the torch backend"}, {"1", "needs the torch backend"}, {"maybe", "want true or false"}, {"false", "dialled"}} {
		t.Setenv("USE_4BIT", c.v)
		cmd := newWorkerCmd(func(ctx context.Context, o DialOptions) (worker.Orchestrator, io.Closer, error) {
			return nil, nil, io.ErrUnexpectedEOF
		})
		t.Setenv("ORCHESTRATOR_URL", "127.0.0.1:1")
		cmd.SetArgs([]string{"--data", t.TempDir()})
		cmd.SetOut(io.Discard)
		cmd.SetErr(io.Discard)
		err := cmd.ExecuteContext(context.Background())
		got := ""
		if err != nil {
			got = err.Error()
		}
		if c.err == "dialled" {
			if err == nil || strings.Contains(got, "USE_4BIT") {
				t.Errorf("USE_4BIT=%s: %v", c.v, err)
			}
			continue
		}
		if !strings.Contains(got, c.err) || !isUsage(err) {
			t.Errorf("USE_4BIT=%s: %v", c.v, err)
		}
	}
}
