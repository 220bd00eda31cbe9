// Package worker is a Zoo Gym compute node: it registers with the
// orchestrator (hanzod), measures bandwidth to its peers while a job is
// provisioned, then trains the job's LoRA adapter with GSPO epoch by epoch,
// submitting a signed delta for every sync and averaging contributions with
// its ring neighbours over the authenticated ring all-reduce.
//
// # Protocol
//
// Run listens for the ring (protocol/ring/tcp, mutual TLS bound to the node key) and
// for bandwidth probes (plain TCP; a prober signs the server's random
// challenge with its node key, and only peers hanzod named to this node
// — probe peers or ring members — receive Config.ProbeBytes bytes, which
// the prober times: ProbeDomain), and
// registers both addresses. One heartbeat loop keeps the latest Assignment;
// every orchestrator heartbeat goes through a single rate limiter, so calls
// are never closer than Config.MinGap (1 s: hanzod refuses closer ones),
// with exponential backoff on errors. A heartbeat failing with
// ErrUnknownNode (the orchestrator restarted or forgot the node) makes the
// worker register again.
//
// Provisioning: each peer in Assignment.ProbePeers is measured once per job
// — the fastest of three transfers within Config.ProbeTimeout, a refused
// connection tried again — (no byte arrived: 0 kbit/s) and the result is
// sent with ReportBandwidth. The probe server keeps connections from the
// hosts of named peers outside the pool that strangers' connections share,
// so a flood from other addresses cannot make them measure 0.
//
// The base model: a job's model is "builtin" or the CID of a base-model
// artifact (jobspec.ModelCID). The worker's own base (Config.Base) and the
// built-in one are at hand; another is fetched from hanzod and peers,
// verified against its CID and cached under the data directory
// (Config.Bases, package basecache), then parsed once: decoded for the go
// backend; for a backend that loads the directory itself (torch:
// backend.DirLoader) only its config.json and tokenizer are read
// (basemodel.OpenConfig) and the backend is given the verified directory,
// so the weights never enter this process. Before the weights
// are read, the job's memory is estimated from the base's config.json
// (jobconf.EstimateMemory) and compared with Config.MemoryLimit (or the
// host's available memory). The plan is jobconf.FromSpec on that base. A
// job whose spec does not match the operator's Constraints, whose base does
// not verify or cannot be fetched, or that does not fit, is refused: the
// refusal is sent to hanzod (RefuseJob: the job's status lists it and the
// node leaves the job), then emitted (event job_refused), and the worker
// stays idle. Epoch e starts from
// jobconf's initial adapter (e = 1 without a checkpoint) or from
// FetchCheckpoint(Assignment.Checkpoint), with fresh AdamW moments, so the
// orchestrator can replay an epoch from its checkpoint; the job's outer
// optimiser starts fresh, or from the checkpoint's state where the job
// carries it across epochs (jobconf.Plan.ResumeOuter). For sync k the
// worker remembers the adapter S_k, trains Interval steps, and takes its
// contribution δ = adapter − S_k, clipped to the L2 norm plan.ClipNorm. It
// signs δ as a delta (metadata: job, node, epoch, sync, step
// plan.SyncStep(e,k), sequence, base = Digest(S_k), claimed loss = the mean
// of the sync's per-step losses, samples) and submits it; transient errors
// are retried with the same bytes, a rejection is reported as an event. The
// sequence is max(previous + 1, unix nanoseconds), persisted in
// DataDir/sequence when DataDir is set, so it grows across restarts. Every
// sync but the last is all-reduced (mean) around the ring and the adapter
// becomes S_k + mean, keeping the optimiser moments. After the last sync the
// worker waits for the orchestrator's merge: the job running epoch e+1 from
// a new checkpoint, or Published, or Failed.
//
// A ring call failing with *ring.PeerError is reported (ReportSuspect, with
// the evidence the ring collected against the suspect as JSON, see
// SuspectEvidence); the worker then polls until the orchestrator publishes
// a ring of a higher generation, installs it and retries the same
// contribution. A worker dropped from the ring, or whose job or epoch moved
// on, abandons the epoch and waits for a new assignment.
//
// # Events
//
// Progress is reported through Config.OnEvent; `gym worker --json` prints
// each Event as one JSON object per line. Fields (omitted when zero):
//
//	time        RFC 3339 time of the event (always)
//	kind        event kind, below (always)
//	node        this node's id, 64 hex characters (always)
//	job, state  job id and its state as last seen
//	epoch, sync epoch (1-based) and sync within the epoch (1-based)
//	step        global training step
//	reward      mean reward of a step's samples
//	loss        a step's loss; for delta_submitted the claimed loss
//	seconds     duration: ring_reduced (the call), ring_recovered (failure
//	            to successful retry), step, epoch_done (the epoch)
//	sequence    the delta's sequence number
//	verdict     accepted, duplicate or rejected (delta events)
//	reason      the orchestrator's rejection kind; job_refused: why
//	suspect     the node a failed ring call blames
//	generation  ring generation in use; members its size
//	adapter     Digest (hex SHA3-256) of the adapter after a ring sync or
//	            at epoch start: identical on every honest member
//	attack      the attack applied to the contribution, if any
//	detail      free text
//
// Kinds: registered, assigned (job, state, epoch or ring changed), idle,
// job_refused (detail: whether hanzod was told), base_ready (a base named
// by CID verified and parsed; detail: the CID and its directory),
// bandwidth_reported, checkpoint_loaded, epoch_started, step,
// delta_submitted, delta_rejected, ring_reduced, ring_failed,
// ring_recovered, rebased (the sync's all-reduce replaced by hanzod's
// state rebuilt from the honest deltas after a cheater's ejection; detail:
// its CID; docs/byzantine.md), epoch_done, epoch_abandoned (dropped from the ring, the
// job moved on, or an error: detail says which), job_done (state published
// or failed).
//
// # Attacks
//
// Config.Attack makes a worker misbehave, to demonstrate detection:
// signflip (δ×(−1000), unclipped, in the delta and the ring: refused by the
// ring's norm check), noise (δ plus Gaussian noise of norm 0.9·C, clipped:
// caught by the judge's screening while the epoch runs), replay (from the second sync on, the first
// sync's tensors re-signed with fresh metadata), equivocate (after the
// honest delta, a second one, δ×2, for the same slot), ring (honest
// deltas, δ×(−1000) into the all-reduce), and the in-bound attacks of the
// literature built from the sync's honest updates (package attack): alie,
// alie-adaptive (the largest z the judge's outlier tests do not flag),
// ipm, mimic and mimic-noise, at the strengths of Config.AttackParams
// (zero: the literature's). Those read the honest updates through
// Config.Peek, a side channel only test clusters provide (PeekDirs: the
// honest workers' kept delta files; docs/threat-model.md).
package worker
