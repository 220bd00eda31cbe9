package server

import (
	"context"
	"io"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/common/expfmt"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	pb "github.com/zooai/gym/api/hanzod/v1"
)

// Request metrics: how long each gRPC method takes and how its calls end,
// measured by interceptors around every handler (docs/metrics.md). The
// series of every method of both services exist from the start, with
// zeros, so a dashboard never sees a series appear or vanish.

// latencyBuckets are the upper bounds, in seconds, of the request-latency
// histogram: 0.5 ms (a heartbeat on a quiet replica) to 30 s (a delta that
// waited for a judging slot, then was judged).
var latencyBuckets = []float64{0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30}

// Result classes of a call, from its gRPC status code.
const (
	resultOK       = "ok"
	resultClient   = "client_error" // the caller's request was refused: fix the request
	resultLimit    = "limited"      // ResourceExhausted: a rate or in-flight limit; retry later
	resultCanceled = "canceled"     // the caller gave up (Canceled, DeadlineExceeded)
	resultServer   = "server_error" // hanzod failed (Internal, Unavailable, Unknown, …)
)

var results = []string{resultOK, resultClient, resultLimit, resultCanceled, resultServer}

// resultOf classes a status code.
func resultOf(c codes.Code) string {
	switch c {
	case codes.OK:
		return resultOK
	case codes.InvalidArgument, codes.NotFound, codes.AlreadyExists, codes.PermissionDenied,
		codes.Unauthenticated, codes.FailedPrecondition, codes.OutOfRange, codes.Aborted:
		return resultClient
	case codes.ResourceExhausted:
		return resultLimit
	case codes.Canceled, codes.DeadlineExceeded:
		return resultCanceled
	default:
		return resultServer
	}
}

// requestMetrics are the request histograms and counters of one server,
// in a registry of their own (no global state).
type requestMetrics struct {
	reg     *prometheus.Registry
	seconds *prometheus.HistogramVec
	total   *prometheus.CounterVec
}

// methods lists the short names ("Service/Method") of every method the
// server registers.
func methods() []string {
	var out []string
	for _, d := range []grpc.ServiceDesc{pb.NodeService_ServiceDesc, pb.OrchestratorService_ServiceDesc} {
		svc := d.ServiceName[strings.LastIndexByte(d.ServiceName, '.')+1:]
		for _, m := range d.Methods {
			out = append(out, svc+"/"+m.MethodName)
		}
		for _, s := range d.Streams {
			out = append(out, svc+"/"+s.StreamName)
		}
	}
	return out
}

func newRequestMetrics() *requestMetrics {
	m := &requestMetrics{
		reg: prometheus.NewRegistry(),
		seconds: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "gym_hanzod_request_seconds",
			Help:    "Time hanzod took to answer a gRPC call, by method, from the call reaching the handler to its answer.",
			Buckets: latencyBuckets,
		}, []string{"method"}),
		total: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "gym_hanzod_requests_total",
			Help: "gRPC calls answered, by method and result (ok, client_error, limited, canceled, server_error).",
		}, []string{"method", "result"}),
	}
	m.reg.MustRegister(m.seconds, m.total)
	for _, name := range methods() {
		m.seconds.WithLabelValues(name)
		for _, r := range results {
			m.total.WithLabelValues(name, r)
		}
	}
	return m
}

// shortMethod turns "/zoo.gym.hanzod.v1.NodeService/Register" into
// "NodeService/Register".
func shortMethod(full string) string {
	full = strings.TrimPrefix(full, "/")
	svc, method, ok := strings.Cut(full, "/")
	if !ok {
		return full
	}
	return svc[strings.LastIndexByte(svc, '.')+1:] + "/" + method
}

// observe records one call that took d and ended with err.
func (m *requestMetrics) observe(full string, d time.Duration, err error) {
	name := shortMethod(full)
	m.seconds.WithLabelValues(name).Observe(d.Seconds())
	m.total.WithLabelValues(name, resultOf(status.Code(err))).Inc()
}

func (m *requestMetrics) unary(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
	start := time.Now()
	resp, err := h(ctx, req)
	m.observe(info.FullMethod, time.Since(start), err)
	return resp, err
}

func (m *requestMetrics) stream(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, h grpc.StreamHandler) error {
	start := time.Now()
	err := h(srv, ss)
	m.observe(info.FullMethod, time.Since(start), err)
	return err
}

// write writes the metrics in the Prometheus text format.
func (m *requestMetrics) write(w io.Writer) error {
	mfs, err := m.reg.Gather()
	if err != nil {
		return err
	}
	enc := expfmt.NewEncoder(w, expfmt.NewFormat(expfmt.TypeTextPlain))
	for _, mf := range mfs {
		if err := enc.Encode(mf); err != nil {
			return err
		}
	}
	return nil
}
