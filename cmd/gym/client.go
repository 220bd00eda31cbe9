package main

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	pb "github.com/zooai/gym/api/hanzod/v1"
)

// defaultOrchestrator is where hanzod listens by default (SPEC.md: gRPC on
// 9550).
const (
	defaultOrchestrator = "localhost:9550"
	defaultGRPCPort     = "9550"
	// maxReply bounds a reply from hanzod; ListNodes and ListJobs are not
	// paginated yet, so allow well beyond gRPC's 4 MiB default.
	maxReply = 64 << 20
)

// orchestratorFlags are how gym reaches hanzod: root flags shared by the
// job, node and ledger commands.
type orchestratorFlags struct {
	addr       string // --orchestrator
	tlsCA      string // --tls-ca
	serverName string // --tls-server-name
}

func envOr(name, def string) string {
	if v, ok := os.LookupEnv(name); ok && v != "" {
		return v
	}
	return def
}

func (o *orchestratorFlags) register(cmd *cobra.Command) {
	f := cmd.PersistentFlags()
	f.StringVar(&o.addr, "orchestrator", envOr("ORCHESTRATOR_URL", defaultOrchestrator),
		"hanzod address: HOST[:PORT] (TLS unless HOST is loopback), grpc://HOST:PORT (plaintext) or grpcs://HOST:PORT (TLS) [ORCHESTRATOR_URL]")
	f.StringVar(&o.tlsCA, "tls-ca", os.Getenv("ORCHESTRATOR_TLS_CA"),
		"PEM certificates to trust for hanzod: its CA, or its own certificate (pinned: accepted exactly, at any address); implies TLS [ORCHESTRATOR_TLS_CA]")
	f.StringVar(&o.serverName, "tls-server-name", os.Getenv("ORCHESTRATOR_TLS_SERVER_NAME"),
		"name to verify in hanzod's certificate, when it differs from the host in --orchestrator [ORCHESTRATOR_TLS_SERVER_NAME]")
}

// target is a parsed --orchestrator.
type target struct {
	hostport string // for dialing
	tls      bool
}

func isLoopbackHost(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// parseTarget reads --orchestrator. Without a scheme TLS follows what
// hanzod does by default: on off loopback, off on loopback; a CA file
// turns it on.
func parseTarget(s string, haveCA bool) (target, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return target{}, usageError{errors.New("--orchestrator is empty (give HOST:PORT, e.g. localhost:9550)")}
	}
	mode := "auto"
	hostport := s
	if scheme, _, ok := strings.Cut(s, "://"); ok {
		u, err := url.Parse(s)
		if err != nil {
			return target{}, usageError{fmt.Errorf("--orchestrator %q: %v", s, err)}
		}
		switch strings.ToLower(scheme) {
		case "grpc", "http":
			mode = "plaintext"
		case "grpcs", "https":
			mode = "tls"
		default:
			return target{}, usageError{fmt.Errorf("--orchestrator %q: scheme %q: want grpc:// (plaintext) or grpcs:// (TLS)", s, scheme)}
		}
		if (u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.User != nil || u.Fragment != "" {
			return target{}, usageError{fmt.Errorf("--orchestrator %q: give only a scheme, host and port, e.g. grpcs://%s", s, u.Host)}
		}
		hostport = u.Host
	}
	host, port, err := net.SplitHostPort(hostport)
	if err != nil {
		// No port: hanzod's default. A bare IPv6 address has colons too.
		host, port = strings.Trim(hostport, "[]"), defaultGRPCPort
		if strings.ContainsAny(host, "[]/ ") || (strings.Contains(host, ":") && net.ParseIP(host) == nil) {
			return target{}, usageError{fmt.Errorf("--orchestrator %q: want HOST[:PORT]", s)}
		}
	}
	if host == "" {
		host = "localhost"
	}
	if p, err := net.LookupPort("tcp", port); err != nil || p == 0 {
		return target{}, usageError{fmt.Errorf("--orchestrator %q: bad port %q", s, port)}
	}
	t := target{hostport: net.JoinHostPort(host, port)}
	switch mode {
	case "plaintext":
		if haveCA {
			return target{}, usageError{fmt.Errorf("--orchestrator %q is plaintext but --tls-ca is set: use grpcs://", s)}
		}
	case "tls":
		t.tls = true
	default:
		t.tls = haveCA || !isLoopbackHost(host)
	}
	return t, nil
}

// tlsConfig builds a TLS 1.3 client config. Certificates in the CA file are
// trusted as roots; a server presenting exactly one of them is accepted
// whatever its name (pinning, for hanzod's self-signed certificate, whose
// names are its host name and localhost only).
func (o *orchestratorFlags) tlsConfig() (*tls.Config, error) {
	cfg := &tls.Config{MinVersion: tls.VersionTLS13, ServerName: o.serverName}
	if o.tlsCA == "" {
		return cfg, nil // system roots
	}
	data, err := os.ReadFile(o.tlsCA)
	if err != nil {
		return nil, fmt.Errorf("--tls-ca: %w", err)
	}
	var pinned []*x509.Certificate
	pool := x509.NewCertPool()
	for rest := data; ; {
		var b *pem.Block
		b, rest = pem.Decode(rest)
		if b == nil {
			break
		}
		if b.Type != "CERTIFICATE" {
			continue
		}
		c, err := x509.ParseCertificate(b.Bytes)
		if err != nil {
			return nil, fmt.Errorf("--tls-ca %s: %w", o.tlsCA, err)
		}
		pinned = append(pinned, c)
		pool.AddCert(c)
	}
	if len(pinned) == 0 {
		return nil, usageError{fmt.Errorf("--tls-ca %s holds no PEM certificate (hanzod's self-signed one is tls-cert.pem in its data directory)", o.tlsCA)}
	}
	// Verification is done below, in VerifyConnection: the handshake still
	// proves the server holds the key of the certificate it presents.
	cfg.InsecureSkipVerify = true
	cfg.VerifyConnection = func(cs tls.ConnectionState) error {
		if len(cs.PeerCertificates) == 0 {
			return errors.New("hanzod presented no certificate")
		}
		leaf := cs.PeerCertificates[0]
		for _, p := range pinned {
			if bytes.Equal(leaf.Raw, p.Raw) {
				return nil
			}
		}
		inter := x509.NewCertPool()
		for _, c := range cs.PeerCertificates[1:] {
			inter.AddCert(c)
		}
		_, err := leaf.Verify(x509.VerifyOptions{Roots: pool, Intermediates: inter, DNSName: cs.ServerName})
		return err
	}
	return cfg, nil
}

// client is a connection to hanzod for one command.
type client struct {
	target target
	conn   *grpc.ClientConn
	api    pb.OrchestratorServiceClient
}

func (o *orchestratorFlags) dial() (*client, error) {
	t, err := parseTarget(o.addr, o.tlsCA != "")
	if err != nil {
		return nil, err
	}
	creds := insecure.NewCredentials()
	if t.tls {
		cfg, err := o.tlsConfig()
		if err != nil {
			return nil, err
		}
		creds = credentials.NewTLS(cfg)
	} else if o.serverName != "" {
		return nil, usageError{errors.New("--tls-server-name needs TLS (grpcs:// or --tls-ca)")}
	}
	conn, err := grpc.NewClient(t.hostport, grpc.WithTransportCredentials(creds),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(maxReply)))
	if err != nil {
		return nil, usageError{fmt.Errorf("--orchestrator %q: %v", o.addr, err)}
	}
	return &client{target: t, conn: conn, api: pb.NewOrchestratorServiceClient(conn)}, nil
}

func (c *client) Close() error { return c.conn.Close() }

// timeoutFlag adds --timeout to a command group.
func timeoutFlag(cmd *cobra.Command, d *time.Duration) {
	cmd.PersistentFlags().DurationVar(d, "timeout", 10*time.Second, "give up on hanzod after this long")
}

// call runs one request with the command's timeout and explains a failure.
func call[T any](cmd *cobra.Command, o *orchestratorFlags, timeout time.Duration, what string, do func(context.Context, *client) (T, error)) (T, error) {
	var zero T
	if timeout <= 0 {
		return zero, usageError{fmt.Errorf("--timeout %v: want a positive duration, e.g. 10s", timeout)}
	}
	c, err := o.dial()
	if err != nil {
		return zero, err
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(cmd.Context(), timeout)
	defer cancel()
	out, err := do(ctx, c)
	if err != nil {
		return zero, c.explain(what, timeout, err)
	}
	return out, nil
}

// callError is a failed request to hanzod, explained.
type callError struct {
	code codes.Code
	msg  string
}

func (e *callError) Error() string { return e.msg }

// explain turns a gRPC failure into a message that says what happened and
// what to do about it.
func (c *client) explain(what string, timeout time.Duration, err error) error {
	st, ok := status.FromError(err)
	if !ok {
		return fmt.Errorf("%s: %w", what, err)
	}
	addr, msg := c.target.hostport, st.Message()
	var text string
	switch st.Code() {
	case codes.Unavailable:
		text = unreachable(addr, c.target.tls, msg)
	case codes.DeadlineExceeded:
		text = fmt.Sprintf("hanzod at %s did not answer within %v (raise --timeout, or check that hanzod is not overloaded or stopped)", addr, timeout)
	case codes.Canceled:
		text = "interrupted"
	case codes.InvalidArgument:
		text = fmt.Sprintf("hanzod refused the request: %s (fix the value it names and retry)", msg)
	case codes.NotFound:
		text = msg
	case codes.Unauthenticated:
		text = fmt.Sprintf("hanzod did not accept our credentials: %s", msg)
	case codes.PermissionDenied:
		text = fmt.Sprintf("not allowed: %s", msg)
	case codes.FailedPrecondition:
		text = fmt.Sprintf("not possible in the current state: %s", msg)
	case codes.ResourceExhausted:
		text = fmt.Sprintf("hanzod is at a limit: %s (retry later, or make the request smaller)", msg)
	case codes.Unimplemented:
		text = fmt.Sprintf("the server at %s does not implement this call (is it hanzod, and as new as this gym?): %s", addr, msg)
	default:
		text = fmt.Sprintf("hanzod failed (%s): %s (its log says more)", st.Code(), msg)
	}
	return &callError{code: st.Code(), msg: what + ": " + text}
}

// unreachable explains an Unavailable status: a standby replica, TLS on one
// side only, an untrusted certificate, or nothing listening.
func unreachable(addr string, useTLS bool, msg string) string {
	switch {
	case strings.Contains(msg, "not the leader") || strings.Contains(msg, "fenced"):
		return fmt.Sprintf("hanzod at %s is a standby replica (%s); point --orchestrator at the leader, or retry once a leader is elected", addr, msg)
	case strings.Contains(msg, "first record does not look like a TLS handshake"):
		return fmt.Sprintf("hanzod at %s serves plaintext (as it does on loopback or with --insecure); use --orchestrator grpc://%s", addr, addr)
	case strings.Contains(msg, "x509:") || strings.Contains(msg, "certificate"):
		return fmt.Sprintf("hanzod's TLS certificate at %s is not trusted (%s); pass --tls-ca FILE with the CA that signed it, or with hanzod's own certificate to pin it (tls-cert.pem in its data directory when it made a self-signed one)", addr, msg)
	case strings.Contains(msg, "connection refused"):
		return fmt.Sprintf("nothing listens at %s: is hanzod running? Start it with 'hanzod --data DIR', or point --orchestrator (or ORCHESTRATOR_URL) at it", addr)
	case !useTLS && (strings.Contains(msg, "preface") || strings.Contains(msg, "EOF") || strings.Contains(msg, "connection reset")):
		return fmt.Sprintf("hanzod at %s closed the plaintext connection; it probably requires TLS (it does whenever it listens beyond loopback): use --orchestrator grpcs://%s with --tls-ca FILE (%s)", addr, addr, msg)
	case strings.Contains(msg, "no such host") || strings.Contains(msg, "produced zero addresses"):
		return fmt.Sprintf("cannot resolve the host of %s (%s); check --orchestrator", addr, msg)
	}
	return fmt.Sprintf("cannot reach hanzod at %s: %s (check --orchestrator and that hanzod runs)", addr, msg)
}
