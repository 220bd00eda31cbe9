package server

import (
	"bytes"
	"context"
	"testing"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"google.golang.org/grpc/codes"

	pb "github.com/zooai/gym/api/hanzod/v1"
	"github.com/zooai/gym/internal/promdoc"
)

// TestRequestMetrics: every call is counted by method and result and timed
// in the method's histogram; every method's series exist before its first
// call; the exposition parses as Prometheus text.
func TestRequestMetrics(t *testing.T) {
	cfg := DefaultConfig()
	cfg.NodeRate, cfg.NodeBurst = 1, 2
	e := start(t, cfg, true)
	ctx := context.Background()
	a := &node{key: key("a"), e: e}
	for range 2 {
		if _, err := a.register(ctx); err != nil {
			t.Fatal(err)
		}
	}
	_, err := a.register(ctx) // third within the second: limited
	wantCode(t, err, codes.ResourceExhausted)
	_, err = e.orch.GetJob(ctx, &pb.GetJobRequest{Job: "no-such-job"})
	wantCode(t, err, codes.NotFound)

	var b bytes.Buffer
	e.srv.WriteMetrics(&b)
	parser := expfmt.NewTextParser(model.LegacyValidation)
	fams, err := parser.TextToMetricFamilies(bytes.NewReader(b.Bytes()))
	if err != nil {
		t.Fatalf("exposition does not parse: %v\n%s", err, b.String())
	}
	count := func(method, result string) float64 {
		for _, m := range fams["gym_hanzod_requests_total"].GetMetric() {
			l := map[string]string{}
			for _, p := range m.GetLabel() {
				l[p.GetName()] = p.GetValue()
			}
			if l["method"] == method && l["result"] == result {
				return m.GetCounter().GetValue()
			}
		}
		t.Fatalf("no gym_hanzod_requests_total{method=%q,result=%q}", method, result)
		return 0
	}
	for _, c := range []struct {
		method, result string
		want           float64
	}{
		{"NodeService/Register", "ok", 2},
		{"NodeService/Register", "limited", 1},
		{"OrchestratorService/GetJob", "client_error", 1},
		{"OrchestratorService/GetJob", "ok", 0},
		{"NodeService/UploadDelta", "server_error", 0}, // never called: present with 0
	} {
		if got := count(c.method, c.result); got != c.want {
			t.Errorf("%s %s: %v calls, want %v", c.method, c.result, got, c.want)
		}
	}
	var seen bool
	for _, m := range fams["gym_hanzod_request_seconds"].GetMetric() {
		if m.GetLabel()[0].GetValue() == "NodeService/Register" {
			seen = true
			if h := m.GetHistogram(); h.GetSampleCount() != 3 || h.GetSampleSum() <= 0 {
				t.Errorf("Register histogram: %d samples, sum %v; want 3, > 0", h.GetSampleCount(), h.GetSampleSum())
			}
		}
	}
	if !seen {
		t.Error("no histogram for NodeService/Register")
	}
	// The types are the ones a doc row would name.
	if d := promdoc.Compare(b.Bytes(), []byte("| `gym_hanzod_request_seconds` | histogram |\n| `gym_hanzod_requests_total` | counter |\n| `gym_hanzod_deltas_refused_total` | counter |\n| `gym_hanzod_deltas_in_flight` | gauge |\n"+
		"| `gym_hanzod_connections` | gauge |\n| `gym_hanzod_connections_refused_total` | counter |\n| `gym_hanzod_calls_in_flight` | gauge |\n| `gym_hanzod_calls_refused_total` | counter |\n"), "gym_hanzod_"); len(d) > 0 {
		t.Error(d)
	}
}

func TestResultOf(t *testing.T) {
	for c, want := range map[codes.Code]string{
		codes.OK: "ok", codes.InvalidArgument: "client_error", codes.Unauthenticated: "client_error",
		codes.ResourceExhausted: "limited", codes.DeadlineExceeded: "canceled", codes.Canceled: "canceled",
		codes.Internal: "server_error", codes.Unavailable: "server_error", codes.Unknown: "server_error",
	} {
		if got := resultOf(c); got != want {
			t.Errorf("%v: %s, want %s", c, got, want)
		}
	}
	if got := shortMethod(pb.NodeService_Register_FullMethodName); got != "NodeService/Register" {
		t.Errorf("shortMethod: %s", got)
	}
}
