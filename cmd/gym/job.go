package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"google.golang.org/grpc/codes"

	pb "github.com/zooai/gym/api/hanzod/v1"
)

func newJob(o *orchestratorFlags) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "job",
		Short: "Submit training jobs to hanzod and follow them",
		Long: `job talks to the orchestrator, hanzod, at --orchestrator (default
ORCHESTRATOR_URL, else localhost:9550). A job file (YAML, docs/job-file.md;
examples/job.yaml is a working one) names the model, dataset, GSPO settings,
epochs, node counts and aggregation rule.

Exit status: 0 done, 1 the job file is invalid or hanzod refused or could
not be reached (the message says what to do), 2 the command was misused.`,
	}
	var timeout time.Duration
	timeoutFlag(cmd, &timeout)
	cmd.AddCommand(newJobSubmit(o, &timeout), newJobList(o, &timeout), newJobStatus(o, &timeout))
	return cmd
}

func newJobSubmit(o *orchestratorFlags, timeout *time.Duration) *cobra.Command {
	var dryRun bool
	cmd := &cobra.Command{
		Use:   "submit [--dry-run] FILE.yaml",
		Short: "Submit a job file; print the new job's id",
		Long: `submit reads FILE.yaml, checks every field (problems are reported with their
line, all at once), sends the job to hanzod and prints the job id it
assigned (job-NNNNNNNN) on a line of its own. FILE "-" is standard input.

A relative deadline (72h, 7d) counts from now. With --dry-run nothing is
sent: submit prints the job as it would be sent, as JSON, with defaults
filled in and the deadline resolved.

The gspo section is sent whole, with a default for every key the file
leaves out (without the section, every default); 'gym job status' shows
what hanzod recorded.`,
		Args: exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			j, err := readJobFile(args[0], cmd.InOrStdin(), time.Now())
			if err != nil {
				return err
			}
			if dryRun {
				enc := json.NewEncoder(cmd.OutOrStdout())
				enc.SetIndent("", "  ")
				return enc.Encode(j)
			}
			resp, err := call(cmd, o, *timeout, "submit "+args[0], func(ctx context.Context, c *client) (*pb.SubmitJobResponse, error) {
				return c.api.SubmitJob(ctx, &pb.SubmitJobRequest{Spec: j.spec()})
			})
			if err != nil {
				return err
			}
			fmt.Fprintln(cmd.OutOrStdout(), resp.Job)
			return nil
		},
	}
	cmd.Flags().BoolVar(&dryRun, "dry-run", false, "check the file and print the job as JSON; send nothing")
	return cmd
}

func newJobList(o *orchestratorFlags, timeout *time.Duration) *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "list [--json]",
		Short: "List every job hanzod knows, oldest first",
		Long: `list prints one line per job: id, state, epoch, node counts, model and
dataset. With --json it prints one object {"jobs": [...]}, each job as
'gym job status --json' prints it.`,
		Args: exactArgs(0),
		RunE: func(cmd *cobra.Command, args []string) error {
			resp, err := call(cmd, o, *timeout, "list jobs", func(ctx context.Context, c *client) (*pb.ListJobsResponse, error) {
				return c.api.ListJobs(ctx, &pb.ListJobsRequest{})
			})
			if err != nil {
				return err
			}
			jobs := make([]jobJSON, 0, len(resp.Jobs))
			for _, j := range resp.Jobs {
				jobs = append(jobs, jobOut(j))
			}
			w := cmd.OutOrStdout()
			if asJSON {
				return json.NewEncoder(w).Encode(struct {
					Jobs []jobJSON `json:"jobs"`
				}{jobs})
			}
			if len(jobs) == 0 {
				fmt.Fprintln(w, "no jobs")
				return nil
			}
			tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
			fmt.Fprintln(tw, "ID\tSTATE\tEPOCH\tNODES\tMODEL\tDATASET")
			for _, j := range jobs {
				fmt.Fprintf(tw, "%s\t%s\t%d/%d\t%s\t%s\t%s\n", j.ID, j.stateText(), j.Epoch, j.Spec.Epochs, j.nodesText(), j.Spec.Model, j.Spec.Dataset)
			}
			return tw.Flush()
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, `print {"jobs": [...]}`)
	return cmd
}

func newJobStatus(o *orchestratorFlags, timeout *time.Duration) *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "status [--json] JOB",
		Short: "Show one job: state, epoch, members, ring and checkpoints",
		Long: `status prints a job's state and progress. With --json it prints one object:

  id, state (pending|provisioning|running|aggregating|published|failed),
  epoch (the current one, 0 before the first), paused, reason (why it
  failed, else ""), members (chosen while provisioning), ring (null, or
  {config_id, generation, members in ring order, bottleneck_kbps}), cids
  (published checkpoints), spec {model, dataset, epochs, min_nodes,
  max_nodes, min_vram_mib, aggregation, utility, submitter, deadline
  (RFC 3339 or null), gspo (null for a job hanzod recorded none for, else
  {importance_sampling_level, beta, group_size, aggregate_interval,
  use_4bit, lora_rank, lora_alpha, max_seq_len,
  gradient_accumulation_steps, learning_rate, warmup_steps,
  weight_decay})}.

Lists are never null.`,
		Args: exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			id := strings.TrimSpace(args[0])
			if id == "" {
				return usageError{fmt.Errorf("job status needs a job id such as job-00000001 ('gym job list' shows them)")}
			}
			resp, err := call(cmd, o, *timeout, "job "+id, func(ctx context.Context, c *client) (*pb.Job, error) {
				return c.api.GetJob(ctx, &pb.GetJobRequest{Job: id})
			})
			if ce, ok := err.(*callError); ok && ce.code == codes.NotFound {
				return fmt.Errorf("job %q not found; 'gym job list' shows the jobs hanzod knows", id)
			}
			if err != nil {
				return err
			}
			j := jobOut(resp)
			if asJSON {
				return json.NewEncoder(cmd.OutOrStdout()).Encode(j)
			}
			printJob(cmd.OutOrStdout(), j)
			return nil
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print one JSON object")
	return cmd
}

// jobJSON is a job in 'gym job status --json' and 'gym job list --json';
// scripts rely on it.
type jobJSON struct {
	ID      string    `json:"id"`
	State   string    `json:"state"`
	Epoch   int32     `json:"epoch"`
	Paused  bool      `json:"paused"`
	Reason  string    `json:"reason"`
	Members []string  `json:"members"`
	Ring    *ringJSON `json:"ring"`
	CIDs    []string  `json:"cids"`
	Spec    specJSON  `json:"spec"`
}

type ringJSON struct {
	ConfigID       string   `json:"config_id"`
	Generation     uint64   `json:"generation"`
	Members        []string `json:"members"`
	BottleneckKbps uint64   `json:"bottleneck_kbps"`
}

type specJSON struct {
	Model       string  `json:"model"`
	Dataset     string  `json:"dataset"`
	Epochs      int32   `json:"epochs"`
	MinNodes    int32   `json:"min_nodes"`
	MaxNodes    int32   `json:"max_nodes"`
	MinVRAMMiB  uint64  `json:"min_vram_mib"`
	Aggregation string  `json:"aggregation"`
	Utility     uint64  `json:"utility"`
	Submitter   string  `json:"submitter"`
	Deadline    *string `json:"deadline"`
	// GSPO uses the job file's keys; nil for a job without settings.
	GSPO *gspoConfig `json:"gspo"`
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

func rfc3339ms(ms int64) string {
	return time.UnixMilli(ms).UTC().Format(time.RFC3339Nano)
}

func jobOut(j *pb.Job) jobJSON {
	out := jobJSON{ID: j.Id, State: j.State, Epoch: j.Epoch, Paused: j.Paused, Reason: j.Reason, Members: nonNil(j.Members), CIDs: nonNil(j.Cids)}
	if r := j.Ring; r != nil {
		out.Ring = &ringJSON{ConfigID: r.ConfigId, Generation: r.Generation, Members: nonNil(r.Members), BottleneckKbps: r.BottleneckKbps}
	}
	if s := j.Spec; s != nil {
		out.Spec = specJSON{Model: s.Model, Dataset: s.Dataset, Epochs: s.Epochs, MinNodes: s.MinNodes, MaxNodes: s.MaxNodes,
			MinVRAMMiB: s.MinVramMib, Aggregation: s.Aggregation, Utility: s.Utility, Submitter: s.Submitter, GSPO: gspoFrom(s.Gspo)}
		if s.DeadlineUnixMs != 0 {
			d := rfc3339ms(s.DeadlineUnixMs)
			out.Spec.Deadline = &d
		}
	}
	return out
}

func (j jobJSON) stateText() string {
	if j.Paused {
		return j.State + " (paused)"
	}
	return j.State
}

func (j jobJSON) nodesText() string {
	n := len(j.Members)
	if j.Ring != nil {
		n = len(j.Ring.Members)
	}
	want := fmt.Sprint(j.Spec.MinNodes)
	if j.Spec.MaxNodes > j.Spec.MinNodes {
		want += fmt.Sprintf("-%d", j.Spec.MaxNodes)
	}
	return fmt.Sprintf("%d of %s", n, want)
}

// fnum writes a real number in its shortest exact form (2e-05, 0.1, 32).
func fnum(v float64) string { return strconv.FormatFloat(v, 'g', -1, 64) }

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func printJob(w io.Writer, j jobJSON) {
	fmt.Fprintf(w, "job          %s\n", j.ID)
	fmt.Fprintf(w, "state        %s\n", j.stateText())
	if j.Reason != "" {
		fmt.Fprintf(w, "reason       %s\n", j.Reason)
	}
	fmt.Fprintf(w, "epoch        %d of %d\n", j.Epoch, j.Spec.Epochs)
	fmt.Fprintf(w, "model        %s\n", j.Spec.Model)
	fmt.Fprintf(w, "dataset      %s\n", j.Spec.Dataset)
	fmt.Fprintf(w, "nodes        %s", j.nodesText())
	if j.Spec.MinVRAMMiB > 0 {
		fmt.Fprintf(w, ", each with at least %d MiB of GPU memory", j.Spec.MinVRAMMiB)
	}
	fmt.Fprintln(w)
	fmt.Fprintf(w, "aggregation  %s\n", j.Spec.Aggregation)
	fmt.Fprintf(w, "utility      %d\n", j.Spec.Utility)
	fmt.Fprintf(w, "submitter    %s\n", orDash(j.Spec.Submitter))
	deadline := "none"
	if j.Spec.Deadline != nil {
		deadline = *j.Spec.Deadline
	}
	fmt.Fprintf(w, "deadline     %s\n", deadline)
	if g := j.Spec.GSPO; g != nil {
		fmt.Fprintf(w, "gspo         %s, beta %s, group %d, sync every %d steps, learning rate %s (warm-up %d steps, weight decay %s)\n",
			g.ImportanceSamplingLevel, fnum(g.Beta), g.GroupSize, g.AggregateInterval, fnum(g.LearningRate), g.WarmupSteps, fnum(g.WeightDecay))
		fmt.Fprintf(w, "             LoRA rank %d, alpha %s, 4-bit base %v, max %d tokens, %d accumulation steps\n",
			g.LoRARank, fnum(g.LoRAAlpha), g.Use4Bit, g.MaxSeqLen, g.GradientAccumulationSteps)
	}
	if len(j.Members) > 0 && j.Ring == nil {
		fmt.Fprintf(w, "members      %d (measuring bandwidth)\n", len(j.Members))
		for _, m := range j.Members {
			fmt.Fprintf(w, "  %s\n", m)
		}
	}
	if r := j.Ring; r != nil {
		fmt.Fprintf(w, "ring         %s, generation %d, bottleneck %d kbit/s\n", r.ConfigID, r.Generation, r.BottleneckKbps)
		for i, m := range r.Members {
			fmt.Fprintf(w, "  %2d %s\n", i, m)
		}
	}
	if len(j.CIDs) > 0 {
		fmt.Fprintf(w, "checkpoints  %d\n", len(j.CIDs))
		for i, c := range j.CIDs {
			fmt.Fprintf(w, "  epoch %d  %s\n", i+1, c)
		}
	}
}
