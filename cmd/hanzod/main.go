// Command hanzod is the Zoo Gym orchestrator: it schedules jobs, registers
// nodes, builds and repairs rings, validates and merges deltas, publishes
// checkpoints and keeps the stake ledger.
//
// Only its command line exists in this release; the service is built in the
// orchestrator issue. It refuses to start rather than pretend to run.
package main

import (
	"flag"
	"fmt"
	"os"
)

func main() {
	fs := flag.NewFlagSet("hanzod", flag.ContinueOnError)
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), `hanzod: the Zoo Gym orchestrator.

Usage: hanzod --data DIR [--listen ADDR] [--metrics ADDR] [--store embedded|valkey --valkey URL]

`)
		fs.PrintDefaults()
	}
	fs.String("data", "", "directory for the event log and snapshots")
	fs.String("listen", ":9550", "gRPC address for nodes and clients")
	fs.String("metrics", ":9551", "Prometheus metrics address")
	fs.String("store", "embedded", "state store: embedded or valkey")
	fs.String("valkey", "", "Valkey URL when --store valkey")
	if err := fs.Parse(os.Args[1:]); err != nil {
		if err == flag.ErrHelp {
			os.Exit(0)
		}
		os.Exit(2)
	}
	fmt.Fprintln(os.Stderr, "hanzod: the orchestrator service is not part of this release yet; nothing was started.")
	os.Exit(1)
}
