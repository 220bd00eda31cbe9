package main

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
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
	// What the node reported: its accelerators (GPUs, and cpu with host
	// memory), backends and dtypes; empty for a node from before reports.
	Accelerators []acceleratorJSON `json:"accelerators"`
	Backends     []string          `json:"backends"`
	DTypes       []string          `json:"dtypes"`
	// Fit is, with --job, whether the node can take that job and why.
	Fit *eligibilityJSON `json:"fit,omitempty"`
}

type acceleratorJSON struct {
	Name     string `json:"name"`
	TotalMiB uint64 `json:"total_mib"`
	FreeMiB  uint64 `json:"free_mib"`
	Compute  string `json:"compute,omitempty"`
}

// hardwareText is a node's report in one cell: "NVIDIA L4 23034/22000 MiB
// (8.9), cpu 64000/60000 MiB; torch bfloat16 nf4".
func (n nodeJSON) hardwareText() string {
	var parts []string
	for _, a := range n.Accelerators {
		s := fmt.Sprintf("%s %d/%d MiB", a.Name, a.TotalMiB, a.FreeMiB)
		if a.Compute != "" {
			s += " (" + a.Compute + ")"
		}
		parts = append(parts, s)
	}
	if len(parts) == 0 {
		return fmt.Sprintf("%s %d MiB (unreported)", orDash(n.GPUModel), n.VRAMMiB)
	}
	return strings.Join(parts, ", ") + "; " + strings.Join(append(slices.Clone(n.Backends), n.DTypes...), " ")
}

func newNodeList(o *orchestratorFlags, timeout *time.Duration) *cobra.Command {
	var asJSON bool
	var job string
	cmd := &cobra.Command{
		Use:   "list [--job ID] [--json]",
		Short: "List registered nodes: liveness, hardware, job and eligibility",
		Long: `list prints every node hanzod has registered, sorted by id. With --json it
prints one object {"nodes": [...]}, each node with:

  id (the node's Ed25519 public key, 64 hex characters; also its ledger
  account), status (active|failed), address, region, gpu_model, vram_mib,
  attestation ("unverified" unless a verifier vouched), job ("" when idle),
  uptime_bp (uptime over the last 24 h in basis points, 10000 = 100%),
  eligible, ineligible (why it cannot join a job with no VRAM minimum;
  "" when eligible), accelerators (each {name, total_mib, free_mib,
  compute}: its GPUs and "cpu" with host memory), backends and dtypes
  (what it trains with), and with --job ID fit: {node, eligible, reason,
  device, need_mib, available_mib}, whether it can take that job, and why
  not with the numbers (docs/job-file.md, "Where a job runs").

The hardware is what the node reported and signed. With --job the
ELIGIBLE column is for that job.`,
		Args: exactArgs(0),
		RunE: func(cmd *cobra.Command, args []string) error {
			resp, err := call(cmd, o, *timeout, "list nodes", func(ctx context.Context, c *client) (*pb.ListNodesResponse, error) {
				return c.api.ListNodes(ctx, &pb.ListNodesRequest{Job: job})
			})
			if err != nil {
				return err
			}
			nodes := make([]nodeJSON, 0, len(resp.Nodes))
			for _, n := range resp.Nodes {
				nodes = append(nodes, nodeJSON{
					ID: n.Id, Status: n.Status, Address: n.Address, Region: n.Region, GPUModel: n.GpuModel, VRAMMiB: n.VramMib,
					Attestation: n.Attestation, Job: n.Job, UptimeBP: n.UptimeBp, Eligible: n.Ineligible == "", Ineligible: n.Ineligible,
					Accelerators: []acceleratorJSON{}, Backends: nonNil(n.Backends), DTypes: nonNil(n.Dtypes),
				})
				nj := &nodes[len(nodes)-1]
				for _, a := range n.Accelerators {
					nj.Accelerators = append(nj.Accelerators, acceleratorJSON{Name: a.Name, TotalMiB: a.TotalMib, FreeMiB: a.FreeMib, Compute: a.Compute})
				}
				if n.Fit != nil {
					f := eligibilityOut(n.Fit)
					nj.Fit = &f
				}
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
			fmt.Fprintln(tw, "ID\tSTATUS\tGPU\tVRAM MiB\tREGION\tUPTIME\tJOB\tHARDWARE\tELIGIBLE")
			for _, n := range nodes {
				eligible := "yes"
				switch {
				case n.Fit != nil && n.Fit.Eligible:
					eligible = "yes: " + n.Fit.Reason
				case n.Fit != nil:
					eligible = "no: " + n.Fit.Reason
				case !n.Eligible:
					eligible = "no: " + n.Ineligible
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\t%d.%02d%%\t%s\t%s\t%s\n", n.ID, n.Status, orDash(n.GPUModel), n.VRAMMiB,
					orDash(n.Region), n.UptimeBP/100, n.UptimeBP%100, orDash(n.Job), n.hardwareText(), eligible)
			}
			return tw.Flush()
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, `print {"nodes": [...]}`)
	cmd.Flags().StringVar(&job, "job", "", "say for each node whether it can take job ID, and why not (with the numbers)")
	return cmd
}
