package server

import (
	"context"
	"fmt"
	"io"
	"net"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/grpc/tap"
)

// Transport bounds what a peer may hold open before any handler runs
// (docs/orchestrator.md, "Limits"): its connections (Listener), its
// calls in flight (a tap on every new stream, which runs before the
// stream's first message is read), the streams of one connection and the
// size of its header lists (HTTP/2 settings). Messages are bounded by
// gRPC itself at Config.MaxMessageBytes: a larger one is refused from its
// 5-byte length prefix, before its bytes are read.
type Transport struct {
	// MaxConnsPerHost and MaxConns bound open connections from one peer
	// host (an IPv6 /64) and in all; a connection past either is closed
	// as soon as it is accepted.
	MaxConnsPerHost, MaxConns int
	// MaxStreams bounds the concurrent streams of one connection.
	MaxStreams uint32
	// MaxCallsPerHost and MaxCalls bound calls in flight from one peer
	// host and in all: a stream past either is refused with
	// ResourceExhausted before its message is read. Each call holds at most
	// one message (MaxMessageBytes), or for an admitted delta upload its
	// file and traces, so memory in requests is bounded by MaxCalls ×
	// MaxMessageBytes plus the uploads in flight.
	MaxCallsPerHost, MaxCalls int
	// MaxHeaderListBytes bounds a request's header list (metadata).
	MaxHeaderListBytes uint32
	// HandshakeTimeout bounds a connection's TLS and HTTP/2 handshake.
	HandshakeTimeout time.Duration
}

// DefaultTransport admits 32 connections and 64 calls in flight per host
// (a host runs a few workers, each one connection and a few calls at
// once), 4096 connections and 1024 calls in all, 32 streams a
// connection, 16 KiB of headers.
func DefaultTransport() Transport {
	return Transport{MaxConnsPerHost: 32, MaxConns: 4096, MaxStreams: 32, MaxCallsPerHost: 64, MaxCalls: 1024,
		MaxHeaderListBytes: 16 << 10, HandshakeTimeout: 10 * time.Second}
}

// Validate checks the limits.
func (t Transport) Validate() error {
	if t.MaxConnsPerHost < 1 || t.MaxConns < t.MaxConnsPerHost || t.MaxStreams < 1 || t.MaxCallsPerHost < 1 ||
		t.MaxCalls < t.MaxCallsPerHost || t.MaxHeaderListBytes < 1024 || t.HandshakeTimeout <= 0 {
		return fmt.Errorf("server: transport limits need MaxConns ≥ MaxConnsPerHost ≥ 1, MaxCalls ≥ MaxCallsPerHost ≥ 1, MaxStreams ≥ 1, MaxHeaderListBytes ≥ 1024 and a positive HandshakeTimeout")
	}
	return nil
}

// gate counts connections and calls by peer host.
type gate struct {
	mu              sync.Mutex
	conns, calls    map[string]int
	nconns, ncalls  int
	refusedConns    uint64
	refusedCalls    uint64
	refusedByHost   uint64 // of refusedCalls, by the per-host bound
	refusedConnHost uint64 // of refusedConns, by the per-host bound
}

func newGate() *gate { return &gate{conns: map[string]int{}, calls: map[string]int{}} }

// tapCall admits a new stream from ctx's peer or refuses it. It runs with
// the connection's lock held: it must not block.
func (s *Server) tapCall(ctx context.Context, info *tap.Info) (context.Context, error) {
	host := peerHost(ctx)
	g, t := s.gate, s.cfg.Transport
	g.mu.Lock()
	if g.calls[host] >= t.MaxCallsPerHost || g.ncalls >= t.MaxCalls {
		g.refusedCalls++
		byHost := g.calls[host] >= t.MaxCallsPerHost
		if byHost {
			g.refusedByHost++
		}
		g.mu.Unlock()
		if byHost {
			return nil, status.Errorf(codes.ResourceExhausted, "%s has %d calls in flight (at most %d); wait for their answers", host, t.MaxCallsPerHost, t.MaxCallsPerHost)
		}
		return nil, status.Errorf(codes.ResourceExhausted, "hanzod has %d calls in flight (at most %d); retry later", t.MaxCalls, t.MaxCalls)
	}
	g.calls[host]++
	g.ncalls++
	g.mu.Unlock()
	// A stream's context ends when the stream does, whatever ends it.
	context.AfterFunc(ctx, func() {
		g.mu.Lock()
		if g.calls[host]--; g.calls[host] <= 0 {
			delete(g.calls, host)
		}
		g.ncalls--
		g.mu.Unlock()
	})
	return ctx, nil
}

// Listener bounds l's connections by peer host and in all
// (Transport.MaxConnsPerHost, MaxConns): a connection past a bound is
// closed as soon as it is accepted. Serve hanzod's gRPC on it.
func (s *Server) Listener(l net.Listener) net.Listener { return &limitListener{Listener: l, s: s} }

type limitListener struct {
	net.Listener
	s *Server
}

func (l *limitListener) Accept() (net.Conn, error) {
	g, t := l.s.gate, l.s.cfg.Transport
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		host := addrHost(c.RemoteAddr())
		g.mu.Lock()
		if g.conns[host] >= t.MaxConnsPerHost || g.nconns >= t.MaxConns {
			g.refusedConns++
			if g.conns[host] >= t.MaxConnsPerHost {
				g.refusedConnHost++
			}
			g.mu.Unlock()
			c.Close()
			continue
		}
		g.conns[host]++
		g.nconns++
		g.mu.Unlock()
		return &countedConn{Conn: c, release: sync.OnceFunc(func() {
			g.mu.Lock()
			if g.conns[host]--; g.conns[host] <= 0 {
				delete(g.conns, host)
			}
			g.nconns--
			g.mu.Unlock()
		})}, nil
	}
}

type countedConn struct {
	net.Conn
	release func()
}

func (c *countedConn) Close() error {
	c.release()
	return c.Conn.Close()
}

// transportOptions are the grpc.Server options of the transport limits.
func (s *Server) transportOptions() []grpc.ServerOption {
	t := s.cfg.Transport
	return []grpc.ServerOption{
		grpc.MaxRecvMsgSize(s.cfg.MaxMessageBytes),
		grpc.MaxConcurrentStreams(t.MaxStreams),
		grpc.MaxHeaderListSize(t.MaxHeaderListBytes),
		grpc.InTapHandle(s.tapCall),
		grpc.ConnectionTimeout(t.HandshakeTimeout),
		grpc.ForceServerCodecV2(newLenientCodec()),
	}
}

// write writes the gate's figures in the Prometheus text format.
func (g *gate) write(w io.Writer) {
	g.mu.Lock()
	defer g.mu.Unlock()
	fmt.Fprintf(w, "# HELP gym_hanzod_connections Open gRPC connections.\n# TYPE gym_hanzod_connections gauge\ngym_hanzod_connections %d\n", g.nconns)
	fmt.Fprintf(w, "# HELP gym_hanzod_connections_refused_total Connections closed on accept by a bound (host: the peer host's, total: hanzod's).\n# TYPE gym_hanzod_connections_refused_total counter\n")
	fmt.Fprintf(w, "gym_hanzod_connections_refused_total{bound=\"host\"} %d\ngym_hanzod_connections_refused_total{bound=\"total\"} %d\n", g.refusedConnHost, g.refusedConns-g.refusedConnHost)
	fmt.Fprintf(w, "# HELP gym_hanzod_calls_in_flight Calls in flight.\n# TYPE gym_hanzod_calls_in_flight gauge\ngym_hanzod_calls_in_flight %d\n", g.ncalls)
	fmt.Fprintf(w, "# HELP gym_hanzod_calls_refused_total Calls refused before their message was read, by a bound (host: the peer host's, total: hanzod's).\n# TYPE gym_hanzod_calls_refused_total counter\n")
	fmt.Fprintf(w, "gym_hanzod_calls_refused_total{bound=\"host\"} %d\ngym_hanzod_calls_refused_total{bound=\"total\"} %d\n", g.refusedByHost, g.refusedCalls-g.refusedByHost)
}
