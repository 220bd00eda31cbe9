package worker

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/zooai/gym/model/envserver"
	"github.com/zooai/gym/model/reward"
)

// TestEnvMetrics: the calls to a job's environment servers are exported
// in the Prometheus text format, failures by kind (here a server nobody
// listens on: the dial fails, then the breaker skips).
func TestEnvMetrics(t *testing.T) {
	cfg := envserver.DefaultConfig()
	cfg.Attempts = 1
	e := envserver.NewEnv(context.Background(), "http://127.0.0.1:1", cfg, nil)
	for range envserver.BreakAfter + 2 {
		if _, _, err := e.Reward(reward.Sample{Prompt: "p", Completion: "c"}); err == nil {
			t.Fatal("a call to nobody succeeded")
		}
	}
	var b bytes.Buffer
	if err := writeEnvMetrics(&b, []*envserver.Env{e}); err != nil {
		t.Fatal(err)
	}
	p := expfmt.NewTextParser(model.LegacyValidation)
	fams, err := p.TextToMetricFamilies(bytes.NewReader(b.Bytes()))
	if err != nil {
		t.Fatalf("not the text format: %v\n%s", err, b.String())
	}
	for _, name := range []string{"gym_env_calls_total", "gym_env_retries_total", "gym_env_call_duration_seconds"} {
		if fams[name] == nil {
			t.Errorf("%s missing", name)
		}
	}
	for _, want := range []string{`gym_env_calls_total{endpoint="/health",outcome="connection"} 3`, `gym_env_calls_total{endpoint="/score",outcome="skipped"} 2`} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("no %s in\n%s", want, b.String())
		}
	}
	b.Reset()
	if err := writeEnvMetrics(&b, nil); err != nil || b.Len() != 0 {
		t.Errorf("a job without servers: %q %v", b.String(), err)
	}
}
