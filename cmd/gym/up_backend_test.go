package main

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/zooai/gym/jobspec"
)

// gym up --backend: one name for every worker or one per worker; the job
// asks for go, torch or any accordingly.
func TestUpBackendFlag(t *testing.T) {
	base := upOptions{workers: 4, epochs: 1, stepsPerEpoch: 5, interval: 5, prompts: 4, task: "addition", out: "x", threads: 1, evalSize: 500, shardSize: 128, timeout: time.Minute, replicas: 1, ledger: "embedded", dataFlags: dataFlags{data: jobspec.Data{Answer: defaultAnswerField}}}
	for _, c := range []struct {
		flag, job, err string
		per            []string
	}{
		{"go", "", "", []string{"go", "go", "go", "go"}},
		{"torch", "torch", "", []string{"torch", "torch", "torch", "torch"}},
		{"go,go,torch,torch", "any", "", []string{"go", "go", "torch", "torch"}},
		{"go,torch", "", "2 backends for 4 workers", nil},
		{"go,jax,go,go", "", "not a backend", nil},
	} {
		o := base
		o.backend = c.flag
		err := o.check()
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("--backend %s: %v, want %q", c.flag, err, c.err)
			}
			continue
		}
		if err != nil || !slices.Equal(o.backends, c.per) || upSpec(o, "builtin").Backend != c.job {
			t.Errorf("--backend %s: %v, workers %v, job %q", c.flag, err, o.backends, upSpec(o, "builtin").Backend)
		}
	}
}
