package epoch

import (
	"testing"

	"github.com/zooai/gym/protocol/jobconf"
)

// A delta escapes exact replay only when it claims torch on a job that
// allows torch: on a go job (the default) a torch label changes nothing.
func TestTorchExemption(t *testing.T) {
	for _, c := range []struct {
		job, delta string
		exempt     bool
	}{
		{"go", "torch", false}, {"", "torch", false}, {"go", "go", false},
		{"torch", "torch", true}, {"any", "torch", true}, {"any", "go", false}, {"any", "", false},
	} {
		if got := torchExempt(jobconf.Plan{Backend: c.job}, Delta{Backend: c.delta}); got != c.exempt {
			t.Errorf("job %q, delta %q: exempt %v, want %v", c.job, c.delta, got, c.exempt)
		}
	}
}
