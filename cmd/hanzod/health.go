package main

import (
	"context"
	"crypto/tls"
	"flag"
	"fmt"
	"os"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
)

// health is `hanzod health`: the container health check and the
// Kubernetes exec probe (images have no shell or curl). It asks the gRPC
// health service of the hanzod at --addr; with --leader only SERVING (this
// replica holds the lease) passes, else any answer does (a standby is
// alive). It tries TLS first without checking the certificate — it talks
// to its own container, sends nothing secret and trusts no reply beyond
// the status — then plaintext.
func health(args []string) error {
	fs := flag.NewFlagSet("hanzod health", flag.ContinueOnError)
	addr := fs.String("addr", "127.0.0.1:9550", "hanzod's gRPC address")
	leader := fs.Bool("leader", false, "pass only when this replica is the leader (SERVING)")
	timeout := fs.Duration("timeout", 3*time.Second, "give up after this long")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("hanzod health: unexpected argument %q", fs.Arg(0))
	}
	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()
	var lastErr error
	for _, creds := range []credentials.TransportCredentials{
		credentials.NewTLS(&tls.Config{InsecureSkipVerify: true, MinVersion: tls.VersionTLS13}), // #nosec: a probe of its own container
		insecure.NewCredentials(),
	} {
		conn, err := grpc.NewClient(*addr, grpc.WithTransportCredentials(creds))
		if err != nil {
			return err
		}
		resp, err := healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{})
		conn.Close()
		if err != nil {
			lastErr = err
			continue
		}
		st := resp.GetStatus()
		fmt.Fprintln(os.Stdout, st)
		if *leader && st != healthpb.HealthCheckResponse_SERVING {
			return fmt.Errorf("hanzod health: %s: not the leader", st)
		}
		return nil
	}
	return fmt.Errorf("hanzod health: %s: %w", *addr, lastErr)
}
