package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/zooai/gym/nodeclient"
	"github.com/zooai/gym/worker"
)

// dialHanzod connects gym worker to hanzod over gRPC (TLS unless the
// address is loopback or grpc://), with the node client signing every
// request. Fetched checkpoints are kept under --data (or a temporary
// directory removed when the worker ends).
func dialHanzod(ctx context.Context, o DialOptions) (worker.Orchestrator, io.Closer, error) {
	of := orchestratorFlags{addr: o.Addr, tlsCA: o.TLSCA, serverName: o.TLSServerName}
	t, err := parseTarget(o.Addr, of.tlsCA != "")
	if err != nil {
		return nil, nil, err
	}
	creds := insecure.NewCredentials()
	if t.tls {
		cfg, err := of.tlsConfig()
		if err != nil {
			return nil, nil, err
		}
		creds = credentials.NewTLS(cfg)
	}
	conn, err := grpc.NewClient(t.hostport, grpc.WithTransportCredentials(creds), grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(maxReply)))
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
	c, err := nodeclient.New(nodeclient.Config{Key: o.Key, Conn: conn, Dir: filepath.Clean(dir)})
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
