package main

import (
	"context"
	"encoding/json"
	"fmt"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	pb "github.com/zooai/gym/api/hanzod/v1"
)

func newNode(o *orchestratorFlags) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "node",
		Short: "Show the worker nodes registered with hanzod",
	}
	var timeout time.Duration
	timeoutFlag(cmd, &timeout)
	cmd.AddCommand(newNodeList(o, &timeout))
	return cmd
}

// nodeJSON is a node in 'gym node list --json'; scripts rely on it.
type nodeJSON struct {
	ID          string `json:"id"`
	Status      string `json:"status"`
	Address     string `json:"address"`
	Region      string `json:"region"`
	GPUModel    string `json:"gpu_model"`
	VRAMMiB     uint64 `json:"vram_mib"`
	Attestation string `json:"attestation"`
	Job         string `json:"job"`
	UptimeBP    int32  `json:"uptime_bp"`
	Eligible    bool   `json:"eligible"`
	Ineligible  string `json:"ineligible"`
}

func newNodeList(o *orchestratorFlags, timeout *time.Duration) *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "list [--json]",
		Short: "List registered nodes: liveness, hardware, job and eligibility",
		Long: `list prints every node hanzod has registered, sorted by id. With --json it
prints one object {"nodes": [...]}, each node with:

  id (the node's Ed25519 public key, 64 hex characters; also its ledger
  account), status (active|failed), address, region, gpu_model, vram_mib,
  attestation ("unverified" unless a verifier vouched), job ("" when idle),
  uptime_bp (uptime over the last 24 h in basis points, 10000 = 100%),
  eligible, ineligible (why it cannot join a job with no VRAM minimum;
  "" when eligible).

The hardware is what the node reported and signed.`,
		Args: exactArgs(0),
		RunE: func(cmd *cobra.Command, args []string) error {
			resp, err := call(cmd, o, *timeout, "list nodes", func(ctx context.Context, c *client) (*pb.ListNodesResponse, error) {
				return c.api.ListNodes(ctx, &pb.ListNodesRequest{})
			})
			if err != nil {
				return err
			}
			nodes := make([]nodeJSON, 0, len(resp.Nodes))
			for _, n := range resp.Nodes {
				nodes = append(nodes, nodeJSON{
					ID: n.Id, Status: n.Status, Address: n.Address, Region: n.Region, GPUModel: n.GpuModel, VRAMMiB: n.VramMib,
					Attestation: n.Attestation, Job: n.Job, UptimeBP: n.UptimeBp, Eligible: n.Ineligible == "", Ineligible: n.Ineligible,
				})
			}
			w := cmd.OutOrStdout()
			if asJSON {
				return json.NewEncoder(w).Encode(struct {
					Nodes []nodeJSON `json:"nodes"`
				}{nodes})
			}
			if len(nodes) == 0 {
				fmt.Fprintln(w, "no nodes registered")
				return nil
			}
			tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
			fmt.Fprintln(tw, "ID\tSTATUS\tGPU\tVRAM MiB\tREGION\tUPTIME\tJOB\tELIGIBLE")
			for _, n := range nodes {
				eligible := "yes"
				if !n.Eligible {
					eligible = "no: " + n.Ineligible
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\t%d.%02d%%\t%s\t%s\n", n.ID, n.Status, orDash(n.GPUModel), n.VRAMMiB,
					orDash(n.Region), n.UptimeBP/100, n.UptimeBP%100, orDash(n.Job), eligible)
			}
			return tw.Flush()
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, `print {"nodes": [...]}`)
	return cmd
}
