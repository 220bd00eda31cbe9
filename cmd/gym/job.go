package main

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/ipfs/go-cid"
	"github.com/spf13/cobra"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/proto"

	"path/filepath"

	pb "github.com/zooai/gym/api/hanzod/v1"
	"github.com/zooai/gym/artifact/store"
	"github.com/zooai/gym/artifact/transfer"
	"github.com/zooai/gym/internal/atomicfile"
	"github.com/zooai/gym/keys/nodekey"
	"github.com/zooai/gym/model/peft"
	"github.com/zooai/gym/protocol/jobspec"
	"github.com/zooai/gym/protocol/nodeauth"
)

func newJob(o *orchestratorFlags) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "job",
		Short: "Submit training jobs to hanzod and follow them",
		Long: `job talks to the orchestrator, hanzod, at --orchestrator (default
ORCHESTRATOR_URL, else localhost:9550). A job file (YAML, docs/job-file.md;
examples/builtin-job.yaml trains on gym workers) names the model, dataset,
GSPO settings, epochs, node counts, aggregation rule and run settings.
'gym job checkpoint' fetches a published checkpoint.

Exit status: 0 done, 1 the job file is invalid or hanzod refused or could
not be reached (the message says what to do), 2 the command was misused.`,
	}
	var timeout time.Duration
	timeoutFlag(cmd, &timeout)
	cmd.AddCommand(newJobSubmit(o, &timeout), newJobList(o, &timeout), newJobStatus(o, &timeout), newJobCheckpoint(o, &timeout))
	return cmd
}

func newJobSubmit(o *orchestratorFlags, timeout *time.Duration) *cobra.Command {
	var dryRun bool
	var keyPath, tokenFile string
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
what hanzod recorded.

Who may submit: with --key FILE the submission is signed by that key (a
node key file, 'gym keygen'), whose ledger account must exist; the job's
submitter is that key (a different submitter in the file is refused),
its utility at most 1 + the key's bonded stake / 1000 GYM, and a key has
at most 8 unfinished jobs. Without --key only hanzod's operator may
submit: from loopback, or with the admin token (--admin-token-file FILE,
or ORCHESTRATOR_ADMIN_TOKEN).`,
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
			req := &pb.SubmitJobRequest{Spec: jobspec.ToProto(j.Spec())}
			var token string
			if keyPath != "" {
				key, err := nodekey.Load(keyPath)
				if err != nil {
					return err
				}
				if req, err = signedSubmit(key, j.Spec(), time.Now()); err != nil {
					return err
				}
			} else if token, err = adminToken(tokenFile); err != nil {
				return err
			}
			resp, err := call(cmd, o, *timeout, "submit "+args[0], func(ctx context.Context, c *client) (*pb.SubmitJobResponse, error) {
				if token != "" {
					ctx = metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+token)
				}
				return c.api.SubmitJob(ctx, req)
			})
			if err != nil {
				return err
			}
			fmt.Fprintln(cmd.OutOrStdout(), resp.Job)
			return nil
		},
	}
	cmd.Flags().BoolVar(&dryRun, "dry-run", false, "check the file and print the job as JSON; send nothing")
	cmd.Flags().StringVar(&keyPath, "key", "", "sign the submission with this key file (its ledger account is the submitter)")
	cmd.Flags().StringVar(&tokenFile, "admin-token-file", "", "without --key: file holding hanzod's admin token; default: ORCHESTRATOR_ADMIN_TOKEN, else none (loopback)")
	return cmd
}

// signedSubmit is a job submission signed by key at now (sequence: the
// clock in nanoseconds, so each submission's is above the last).
func signedSubmit(key ed25519.PrivateKey, spec jobspec.Spec, now time.Time) (*pb.SubmitJobRequest, error) {
	b, err := proto.Marshal(jobspec.ToProto(spec))
	if err != nil {
		return nil, err
	}
	s := nodeauth.SubmitJob{Auth: nodeauth.Auth{Seq: uint64(now.UnixNano()), Timestamp: now.UnixMilli()}, Spec: b}
	nodeauth.SignSubmitJob(key, &s)
	return &pb.SubmitJobRequest{SpecBytes: b, Auth: &pb.Auth{Node: s.Node, Seq: s.Seq, TimestampMs: s.Timestamp, Signature: s.Sig}}, nil
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
		Short: "Show one job: state, epoch, members, ring, checkpoints and settlement",
		Long: `status prints a job's state and progress. With --json it prints one object:

  id, state (pending|provisioning|running|aggregating|published|failed),
  epoch (the current one, 0 before the first), paused, reason (why it
  failed, else ""), members (chosen while provisioning), ring (null, or
  {config_id, generation, members in ring order, bottleneck_kbps}), cids
  (published checkpoints), spec {model, dataset, epochs, min_nodes,
  max_nodes, min_vram_mib, aggregation, utility, submitter, deadline
  (RFC 3339 or null), backend, dtype, steps_per_epoch, prompts_per_step, seed, byzantine,
  spot_check_bp (basis points replayed, 0: none), gspo (null for a job
  hanzod recorded none for, else {importance_sampling_level, beta,
  group_size, aggregate_interval, use_4bit, lora_rank, lora_alpha,
  max_seq_len, gradient_accumulation_steps, learning_rate, warmup_steps,
  weight_decay}), data and reward (a dataset's mapping and the reward
  list, docs/datasets.md; left out when not given)}, checkpoints ([{epoch, cid}], the cids by epoch),
  artifacts (hanzod's artifact server, KEYHEX@host:port, "" when it runs
  none: 'gym job checkpoint' fetches from it), refusals ([{node, reason}]:
  the nodes that refused the job, such as a worker whose memory the job
  does not fit, or whose copy of the base model did not verify), settled
  (the settlement record is written and the stakes the job locked are
  released), memory_estimated (hanzod read the base's config.json and
  checks the job's memory estimate against each node's), and while the
  job is pending pending_reason (why it waits, with the numbers) and
  eligibility ([{node, eligible, reason, device, need_mib,
  available_mib}]: each node's fit for the job, the first 256 by id;
  docs/job-file.md, "Where a job runs").

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
	// Checkpoints are the published checkpoints by epoch (cids, numbered).
	Checkpoints []checkpointJSON `json:"checkpoints"`
	// Artifacts is hanzod's artifact server, KEYHEX@host:port ("" when it
	// runs none): where 'gym job checkpoint' fetches from, and the key that
	// must have signed every checkpoint's manifest.
	Artifacts string `json:"artifacts"`
	// Refusals are the nodes that refused the job, and why (their signed
	// word, recorded by hanzod).
	Refusals []refusalJSON `json:"refusals"`
	// Settled: hanzod wrote the job's settlement record and released the
	// stakes it locked.
	Settled bool `json:"settled"`
	// While pending: why the job waits, with the numbers, and every
	// node's eligibility for it (job status only; ListJobs leaves them
	// out). MemoryEstimated: hanzod read the base's config.json and checks
	// each node's memory against the job's estimate.
	PendingReason   string            `json:"pending_reason,omitempty"`
	Eligibility     []eligibilityJSON `json:"eligibility,omitempty"`
	MemoryEstimated bool              `json:"memory_estimated"`
}

// eligibilityJSON is whether a node can take a job: how it would run it
// (eligible) or why it cannot, with the estimate and the memory it has.
type eligibilityJSON struct {
	Node         string `json:"node"`
	Eligible     bool   `json:"eligible"`
	Reason       string `json:"reason"`
	Device       string `json:"device,omitempty"`
	NeedMiB      uint64 `json:"need_mib,omitempty"`
	AvailableMiB uint64 `json:"available_mib,omitempty"`
}

func eligibilityOut(e *pb.Eligibility) eligibilityJSON {
	return eligibilityJSON{Node: e.Node, Eligible: e.Eligible, Reason: e.Reason, Device: e.Device, NeedMiB: e.NeedMib, AvailableMiB: e.AvailableMib}
}

type checkpointJSON struct {
	Epoch int    `json:"epoch"`
	CID   string `json:"cid"`
	// IPFS is where its pinning on hanzod's IPFS node stands, when hanzod
	// pins (IPFS_URL): "pinned", or "pending: N tries, last error: …".
	IPFS string `json:"ipfs,omitempty"`
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
	// The run settings, with the job file's meanings: what hanzod applies
	// (its defaults filled in for a job submitted without them).
	StepsPerEpoch  int32  `json:"steps_per_epoch"`
	PromptsPerStep int32  `json:"prompts_per_step"`
	Seed           uint64 `json:"seed"`
	Byzantine      int32  `json:"byzantine"`
	SpotCheckBP    int    `json:"spot_check_bp"`
	// GSPO uses the job file's keys; nil for a job without settings.
	GSPO *jobspec.GSPO `json:"gspo"`
	// Backend and DType are what workers must train with (go, torch or
	// any; any, float32, bfloat16 or float16).
	Backend string `json:"backend"`
	DType   string `json:"dtype"`
	// Data and Reward are the dataset mapping and the reward list
	// (docs/datasets.md), left out for a built-in task with the default.
	Data   *jobspec.Data   `json:"data,omitempty"`
	Reward jobspec.Rewards `json:"reward,omitempty"`
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

// refusalJSON is a node's refusal of a job.
type refusalJSON struct {
	Node   string `json:"node"`
	Reason string `json:"reason"`
}

func jobOut(j *pb.Job) jobJSON {
	out := jobJSON{ID: j.Id, State: j.State, Epoch: j.Epoch, Paused: j.Paused, Reason: j.Reason, Members: nonNil(j.Members), CIDs: nonNil(j.Cids),
		Checkpoints: []checkpointJSON{}, Artifacts: j.Artifacts, Settled: j.Settled, Refusals: []refusalJSON{},
		PendingReason: j.PendingReason, MemoryEstimated: j.MemoryEstimated}
	for _, e := range j.Eligibility {
		out.Eligibility = append(out.Eligibility, eligibilityOut(e))
	}
	for _, r := range j.Refusals {
		out.Refusals = append(out.Refusals, refusalJSON{Node: r.Node, Reason: r.Reason})
	}
	for i, c := range j.Cids {
		out.Checkpoints = append(out.Checkpoints, checkpointJSON{Epoch: i + 1, CID: c})
	}
	for _, p := range j.Pins {
		for i := range out.Checkpoints {
			if ck := &out.Checkpoints[i]; ck.CID == p.Cid {
				ck.IPFS = p.State
				if p.State != "pinned" {
					ck.IPFS = fmt.Sprintf("%s: %d tries, last error: %s", p.State, p.Attempts, p.Error)
				}
			}
		}
	}
	if r := j.Ring; r != nil {
		out.Ring = &ringJSON{ConfigID: r.ConfigId, Generation: r.Generation, Members: nonNil(r.Members), BottleneckKbps: r.BottleneckKbps}
	}
	if s := j.Spec; s != nil {
		out.Spec = specJSON{Backend: orDefault(s.Backend, jobspec.Fields.Backend.Default), DType: orDefault(s.Dtype, jobspec.Fields.DType.Default), Model: s.Model, Dataset: s.Dataset, Epochs: s.Epochs, MinNodes: s.MinNodes, MaxNodes: s.MaxNodes,
			MinVRAMMiB: s.MinVramMib, Aggregation: s.Aggregation, Utility: s.Utility, Submitter: s.Submitter,
			StepsPerEpoch: s.StepsPerEpoch, PromptsPerStep: s.PromptsPerStep, Seed: s.Seed, Byzantine: s.Byzantine, SpotCheckBP: jobspec.Spec{SpotCheckBP: int(s.SpotCheckBp)}.SpotCheckShare()}
		if s.Gspo != nil {
			g := jobspec.GSPOFromProto(s.Gspo)
			out.Spec.GSPO = &g
		}
		if d := jobspec.DataFromProto(s.Data); d != (jobspec.Data{}) {
			out.Spec.Data = &d
		}
		out.Spec.Reward = jobspec.RewardsFromProto(s.Reward)
		if out.Spec.StepsPerEpoch == 0 && s.Gspo != nil {
			out.Spec.StepsPerEpoch = s.Gspo.GetAggregateInterval() // one sync per epoch
		}
		if out.Spec.PromptsPerStep == 0 {
			out.Spec.PromptsPerStep = int32(jobspec.Fields.PromptsPerStep.Default)
		}
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

func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

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
		fmt.Fprintf(w, ", each with at least %d MiB of device memory", j.Spec.MinVRAMMiB)
	}
	fmt.Fprintln(w)
	memory := "estimated from the base's config.json, checked against each node's memory"
	if !j.MemoryEstimated {
		memory = "not estimated (hanzod has not read the base's config.json); nodes matched by min_vram_mib"
	}
	fmt.Fprintf(w, "backend      %s, dtype %s; memory %s\n", j.Spec.Backend, j.Spec.DType, memory)
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
		fmt.Fprintf(w, "             LoRA rank %d, alpha %s on %s, 4-bit base %v, max %d tokens, %d accumulation steps\n",
			g.LoRARank, fnum(g.LoRAAlpha), strings.Join(g.Targets(), " "), g.Use4Bit, g.MaxSeqLen, g.GradientAccumulationSteps)
	}
	fmt.Fprintf(w, "run          %d steps per epoch, %d prompts per step, seed %d\n", j.Spec.StepsPerEpoch, j.Spec.PromptsPerStep, j.Spec.Seed)
	fmt.Fprintf(w, "defence      tolerates %d Byzantine worker(s); replays %s of the deltas\n", j.Spec.Byzantine, basisPoints(j.Spec.SpotCheckBP))
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
	if len(j.Checkpoints) > 0 {
		fmt.Fprintf(w, "checkpoints  %d\n", len(j.Checkpoints))
		for _, c := range j.Checkpoints {
			fmt.Fprintf(w, "  epoch %d  %s\n", c.Epoch, c.CID)
			if c.IPFS != "" {
				fmt.Fprintf(w, "           IPFS: %s\n", c.IPFS)
			}
		}
	}
	if j.PendingReason != "" {
		fmt.Fprintf(w, "waiting      %s\n", j.PendingReason)
	}
	if len(j.Eligibility) > 0 {
		fmt.Fprintf(w, "nodes for it %d listed\n", len(j.Eligibility))
		for _, e := range j.Eligibility {
			mark := "no "
			if e.Eligible {
				mark = "yes"
			}
			fmt.Fprintf(w, "  %s %s  %s\n", mark, e.Node, e.Reason)
		}
	}
	if len(j.Refusals) > 0 {
		fmt.Fprintf(w, "refused by   %d node(s)\n", len(j.Refusals))
		for _, r := range j.Refusals {
			fmt.Fprintf(w, "  %s  %s\n", r.Node, r.Reason)
		}
	}
	fmt.Fprintf(w, "artifacts    %s\n", orDash(j.Artifacts))
	settled := "no"
	if j.Settled {
		settled = "yes (stakes released)"
	}
	fmt.Fprintf(w, "settled      %s\n", settled)
	if len(j.Checkpoints) > 0 && j.Artifacts != "" {
		fmt.Fprintf(w, "fetch with   gym job checkpoint %s --out DIR\n", j.ID)
	}
}

// basisPoints writes a share given in basis points as a percentage.
func basisPoints(bp int) string {
	if bp == 0 {
		return "none"
	}
	return strconv.FormatFloat(float64(bp)/100, 'f', -1, 64) + "%"
}

func newJobCheckpoint(o *orchestratorFlags, timeout *time.Duration) *cobra.Command {
	var c checkpointFetch
	cmd := &cobra.Command{
		Use:   "checkpoint JOB --out DIR [--epoch N] [--key KEY] [--store STORE] [--from HOST:PORT]",
		Short: "Fetch a job's published checkpoint into a directory (PEFT layout)",
		Long: `checkpoint asks hanzod for the job, then fetches the checkpoint of --epoch
(default: the latest published) from the artifact server the job names and
writes it to DIR in the Hugging Face PEFT layout: adapter_model.safetensors,
adapter_config.json and README.md (the model card). 'gym eval --checkpoint
DIR' evaluates it.

Every block is checked against its CID as it arrives, the whole tree against
the manifest at the end, and the manifest must be signed by the artifact
server's key as 'gym job status' reports it (artifacts: KEYHEX@host:port);
anything else is refused. Progress goes to standard error; the checkpoint's
CID to standard output.

The artifact server lets any key read published checkpoints, but every
request is signed: --key KEY signs with a node key ('gym keygen'), else a
throwaway key is made for this run. DIR must not exist or be empty.

--store keeps the blocks in an artifact store (an interrupted fetch resumes
from it); without it they go to a temporary store removed afterwards.
--from reaches the artifact server at another address (when hanzod
advertises one you cannot reach); its key stays the one hanzod reports.`,
		Args: exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c.job = strings.TrimSpace(args[0])
			if c.job == "" {
				return usageError{fmt.Errorf("job checkpoint needs a job id such as job-00000001 ('gym job list' shows them)")}
			}
			if c.out == "" {
				return usageError{errors.New("--out DIR is required: the directory to write the checkpoint to")}
			}
			if c.epoch < 0 {
				return usageError{fmt.Errorf("--epoch %d: want an epoch number from 1, or 0 for the latest", c.epoch)}
			}
			if err := checkOutDir(c.out); err != nil {
				return err
			}
			resp, err := call(cmd, o, *timeout, "job "+c.job, func(ctx context.Context, cl *client) (*pb.Job, error) {
				return cl.api.GetJob(ctx, &pb.GetJobRequest{Job: c.job})
			})
			if ce, ok := err.(*callError); ok && ce.code == codes.NotFound {
				return fmt.Errorf("job %q not found; 'gym job list' shows the jobs hanzod knows", c.job)
			}
			if err != nil {
				return err
			}
			t, _ := parseTarget(o.addr, o.tlsCA != "")
			c.orchestratorHost, _, _ = net.SplitHostPort(t.hostport)
			c.stderr = cmd.ErrOrStderr()
			root, err := c.run(cmd.Context(), jobOut(resp))
			if err != nil {
				return err
			}
			fmt.Fprintln(cmd.OutOrStdout(), root)
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&c.out, "out", "", "directory to write the checkpoint to; must not exist or be empty (required)")
	f.IntVar(&c.epoch, "epoch", 0, "the epoch whose checkpoint to fetch (0: the latest published)")
	f.StringVar(&c.keyPath, "key", "", "node key to sign the requests with (default: a throwaway key)")
	f.StringVar(&c.store, "store", "", "artifact store to fetch into and keep (default: a temporary one)")
	f.StringVar(&c.from, "from", "", "reach the artifact server at HOST:PORT instead of the address hanzod reports")
	return cmd
}

// checkpointFetch is one 'gym job checkpoint'.
type checkpointFetch struct {
	job, out, keyPath, store, from string
	epoch                          int
	orchestratorHost               string // where hanzod was reached
	stderr                         io.Writer
}

// checkOutDir refuses an output directory that holds anything.
func checkOutDir(dir string) error {
	entries, err := os.ReadDir(dir)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return nil
	case err != nil:
		return fmt.Errorf("--out %s: %w", dir, err)
	case len(entries) > 0:
		return fmt.Errorf("--out %s is not empty; give a new directory (nothing is overwritten)", dir)
	}
	return nil
}

// pick chooses the checkpoint to fetch, or says why there is none.
func (c *checkpointFetch) pick(j jobJSON) (checkpointJSON, error) {
	n := len(j.Checkpoints)
	if n == 0 {
		switch j.State {
		case "failed":
			return checkpointJSON{}, fmt.Errorf("job %s failed before publishing a checkpoint (%s); nothing to fetch", j.ID, orDash(j.Reason))
		case "pending":
			return checkpointJSON{}, fmt.Errorf("job %s has no checkpoint yet: it is pending, waiting for %d idle eligible nodes (10,000 GYM bonded each; 'gym node list' shows them); try again once epoch 1 is published ('gym job status %s')",
				j.ID, j.Spec.MinNodes, j.ID)
		case "provisioning":
			return checkpointJSON{}, fmt.Errorf("job %s has no checkpoint yet: it is provisioning (its nodes are measuring bandwidth to form the ring); try again once epoch 1 is published ('gym job status %s')", j.ID, j.ID)
		}
		return checkpointJSON{}, fmt.Errorf("job %s has no checkpoint yet: it is %s in epoch %d of %d; the first is published when epoch 1 ends ('gym job status %s' shows it)",
			j.ID, j.stateText(), j.Epoch, j.Spec.Epochs, j.ID)
	}
	if c.epoch == 0 {
		return j.Checkpoints[n-1], nil
	}
	if c.epoch > n {
		what := fmt.Sprintf("epochs 1 to %d are", n)
		if n == 1 {
			what = "epoch 1 is"
		}
		return checkpointJSON{}, fmt.Errorf("job %s has not published epoch %d: %s published (the job is %s, epoch %d of %d)", j.ID, c.epoch, what, j.stateText(), j.Epoch, j.Spec.Epochs)
	}
	return j.Checkpoints[c.epoch-1], nil
}

// server is the artifact server to fetch from, with the key that must
// sign the manifest.
func (c *checkpointFetch) server(j jobJSON) (transfer.Peer, error) {
	if j.Artifacts == "" {
		return transfer.Peer{}, fmt.Errorf("hanzod names no artifact server for job %s (it runs with --artifacts \"\"); ask its operator to start it with --artifacts HOST:PORT", j.ID)
	}
	peer, err := transfer.ParsePeer(j.Artifacts)
	if err != nil || peer.Key == nil {
		return transfer.Peer{}, fmt.Errorf("hanzod reported the artifact server %q, which is not KEYHEX@host:port; is hanzod as new as this gym?", j.Artifacts)
	}
	u, err := url.Parse(peer.URL)
	if err != nil || u.Host == "" {
		return transfer.Peer{}, fmt.Errorf("hanzod reported the artifact server %q: bad address", j.Artifacts)
	}
	switch host, port, _ := net.SplitHostPort(u.Host); {
	case c.from != "":
		if _, _, err := net.SplitHostPort(c.from); err != nil {
			return transfer.Peer{}, usageError{fmt.Errorf("--from %q: want HOST:PORT", c.from)}
		}
		u.Host = c.from
	case isLoopbackHost(host) && c.orchestratorHost != "" && !isLoopbackHost(c.orchestratorHost):
		// hanzod advertises loopback when it was not told its address
		// (--artifacts-advertise): it is on the host we reached it at.
		u.Host = net.JoinHostPort(c.orchestratorHost, port)
		fmt.Fprintf(c.stderr, "hanzod advertises its artifact server at %s; using %s, hanzod's host (--from overrides)\n", net.JoinHostPort(host, port), u.Host)
	}
	peer.URL = u.String()
	return peer, nil
}

// run fetches the checkpoint and writes it to c.out; it returns its CID.
func (c *checkpointFetch) run(ctx context.Context, j jobJSON) (string, error) {
	ck, err := c.pick(j)
	if err != nil {
		return "", err
	}
	peer, err := c.server(j)
	if err != nil {
		return "", err
	}
	root, err := cid.Decode(ck.CID)
	if err != nil {
		return "", fmt.Errorf("hanzod reported checkpoint %q for epoch %d, which is not a CID: %w", ck.CID, ck.Epoch, err)
	}
	var key ed25519.PrivateKey
	if c.keyPath != "" {
		if key, err = nodekey.Load(c.keyPath); err != nil {
			return "", fmt.Errorf("--key: %w", err)
		}
	} else {
		if key, err = nodekey.Generate(rand.Reader); err != nil {
			return "", err
		}
		fmt.Fprintf(c.stderr, "no --key: signing the requests with a throwaway key %s (published checkpoints are readable with any key)\n", nodekey.PublicHex(key))
	}
	dir := c.store
	if dir == "" {
		if dir, err = os.MkdirTemp("", "gym-checkpoint-"); err != nil {
			return "", err
		}
		defer os.RemoveAll(dir)
	}
	cfg := store.DefaultConfig(dir)
	cfg.Quota = 0
	st, err := store.Open(cfg)
	if err != nil {
		return "", fmt.Errorf("--store %s: %w", dir, err)
	}
	defer st.Close()

	fmt.Fprintf(c.stderr, "fetching the checkpoint of epoch %d of %s (%s) from %s\n", ck.Epoch, j.ID, ck.CID, peer.URL)
	client := &transfer.Client{Key: key, HTTP: &http.Client{Transport: transfer.NewTransport()}}
	g := transfer.Get{Client: client, Peers: []transfer.Peer{peer}, Store: st,
		Trust: func(k ed25519.PublicKey) bool { return k.Equal(peer.Key) }}
	bar := newProgressBar(c.stderr)
	g.Fetch.Progress = bar.update
	rec, stats, err := transfer.GetArtifact(ctx, root, g)
	bar.done(stats)
	if err != nil {
		return "", c.explainFetch(peer, err)
	}

	// Write next to DIR, then move into place: DIR appears whole or not
	// at all.
	// The base model is not at hand here: the adapter's config is
	// checked, its tensors are checked by whoever loads it on the base.
	var pc peft.Config
	err = atomicfile.Dir(c.out, 0o755, func(tmp string) error {
		if err := st.Export(ctx, root, tmp, ""); err != nil {
			return err
		}
		raw, err := os.ReadFile(filepath.Join(tmp, peft.ConfigFile))
		if err == nil {
			pc, err = peft.ParseConfig(raw)
		}
		if err == nil {
			_, err = os.Stat(filepath.Join(tmp, peft.WeightsFile))
		}
		if err != nil {
			return fmt.Errorf("checkpoint %s is not a PEFT adapter: %w", ck.CID, err)
		}
		return nil
	})
	if errors.Is(err, fs.ErrExist) {
		return "", fmt.Errorf("--out %s exists: give a new directory", c.out)
	}
	if err != nil {
		return "", err
	}
	m := rec.Manifest.Manifest
	fmt.Fprintf(c.stderr, "verified: %d files, %d bytes, signed by the artifact server %s; LoRA rank %d on %s\n",
		len(m.Files), m.Size, hex.EncodeToString(peer.Key), pc.Adapter.Rank, orDash(pc.BaseModel))
	fmt.Fprintf(c.stderr, "wrote %s (%s, %s, %s); evaluate it with: gym eval [--model DIR] --checkpoint %s\n", c.out, peft.WeightsFile, peft.ConfigFile, peft.CardFile, c.out)
	return rec.Root, nil
}

// explainFetch says what a failed fetch means and what to do.
func (c *checkpointFetch) explainFetch(peer transfer.Peer, err error) error {
	switch {
	case errors.Is(err, transfer.ErrUntrusted):
		return fmt.Errorf("the checkpoint's manifest is not signed by the artifact server's key %s, as hanzod reported it; refusing it (%w)", hex.EncodeToString(peer.Key), err)
	case errors.Is(err, transfer.ErrRefused):
		return fmt.Errorf("the artifact server at %s refused the request (%w); a hanzod older than this gym serves registered nodes only: pass --key with a registered node's key", peer.URL, err)
	case errors.Is(err, transfer.ErrMissing):
		return fmt.Errorf("the artifact server at %s does not hold the checkpoint (%w); it may have been collected: ask hanzod's operator", peer.URL, err)
	case errors.Is(err, transfer.ErrSource), errors.Is(err, transfer.ErrExhausted):
		return fmt.Errorf("cannot fetch from the artifact server at %s (%w); check that it is reachable from here (hanzod's --artifacts and --artifacts-advertise; --from HOST:PORT reaches it at another address) and run the command again", peer.URL, err)
	}
	return fmt.Errorf("fetch from %s: %w", peer.URL, err)
}
