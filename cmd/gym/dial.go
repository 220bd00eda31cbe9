package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/zooai/gym/node/nodeclient"
	"github.com/zooai/gym/node/worker"
)

// dialHanzod connects gym worker to hanzod over gRPC (TLS unless the
// address is loopback or grpc://), with the node client signing every
// request. Fetched checkpoints are kept under --data (or a temporary
// directory removed when the worker ends).
func dialHanzod(ctx context.Context, o DialOptions) (worker.Orchestrator, io.Closer, error) {
	of := orchestratorFlags{addr: o.Addr, tlsCA: o.TLSCA, serverName: o.TLSServerName}
	// Replicas: grpc://HOST:PORT,HOST:PORT,… (one scheme for all); calls
	// go to whichever leads (nodeclient.Replicas).
	scheme, list, hasScheme := strings.Cut(o.Addr, "://")
	if !hasScheme {
		scheme, list = "", o.Addr
	}
	var hostports []string
	var t target
	for _, a := range strings.Split(list, ",") {
		if hasScheme {
			a = scheme + "://" + a
		}
		ta, err := parseTarget(a, of.tlsCA != "")
		if err != nil {
			return nil, nil, err
		}
		if len(hostports) > 0 && ta.tls != t.tls {
			return nil, nil, usageError{fmt.Errorf("--orchestrator %q: the replicas must all use TLS or none", o.Addr)}
		}
		t = ta
		hostports = append(hostports, ta.hostport)
	}
	dialTarget, replicaOpts := nodeclient.Replicas(hostports)
	var err error
	creds := insecure.NewCredentials()
	if t.tls {
		cfg, err := of.tlsConfig()
		if err != nil {
			return nil, nil, err
		}
		creds = credentials.NewTLS(cfg)
	}
	conn, err := grpc.NewClient(dialTarget, append(replicaOpts, grpc.WithTransportCredentials(creds), grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(maxReply)))...)
	if err != nil {
		return nil, nil, usageError{fmt.Errorf("--orchestrator %q: %v", o.Addr, err)}
	}
	dir, tmp := o.DataDir, ""
	if dir == "" {
		if tmp, err = os.MkdirTemp("", "gym-worker-"); err != nil {
			conn.Close()
			return nil, nil, err
		}
		dir = tmp
	}
	c, err := nodeclient.New(nodeclient.Config{Key: o.Key, Conn: conn, Dir: filepath.Clean(dir), Role: o.Role, Hardware: o.Hardware})
	if err != nil {
		conn.Close()
		return nil, nil, err
	}
	return c, closerFunc(func() error {
		err := errors.Join(c.Close(), conn.Close())
		if tmp != "" {
			os.RemoveAll(tmp)
		}
		return err
	}), nil
}

type closerFunc func() error

func (f closerFunc) Close() error { return f() }
