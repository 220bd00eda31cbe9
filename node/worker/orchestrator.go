package worker

import (
	"context"

	"github.com/zooai/gym/model/llama"
	"github.com/zooai/gym/protocol/jobspec"
)

// Peer is another node as the orchestrator describes it.
type Peer struct {
	ID   string // Ed25519 public key, 64 hex characters
	Addr string // ring address (Ring.Members) or probe address (ProbePeers)
}

// Ring is a ring configuration published by the orchestrator.
type Ring struct {
	ConfigID   string
	Generation uint64
	Members    []Peer // in ring order
	Groups     []int  // two-level all-reduce: group sizes of consecutive members; nil: flat
}

// Assignment is what the orchestrator wants this node to do.
type Assignment struct {
	Job        string // empty: idle
	State      string // pending, provisioning, running, aggregating, published, failed
	Epoch      int    // 1-based
	Paused     bool
	Spec       jobspec.Spec
	ProbePeers []Peer // provisioning: measure bandwidth to these
	Ring       *Ring  // running: the current ring (nil when this node is not in it)
	// Checkpoint is the CID of the checkpoint of record Epoch starts from;
	// empty for epoch 1 (every worker starts from jobconf's initial adapter).
	Checkpoint string
	// JobBinding is hanzod's binding of the job to its instance
	// (jobconf.Binding): every delta of the job carries it.
	JobBinding string
	// Rebases are the running epoch's rebases (docs/byzantine.md).
	Rebases []Rebase
}

// Rebase tells the members of a running epoch to continue, at the
// all-reduce of sync Sync, from a state hanzod rebuilt from the honest
// deltas after it ejected a member proven to cheat, instead of from the
// ring's result. Checkpoint (a CID) and Digest (jobconf.Digest of its
// adapter) are empty until hanzod publishes the state.
type Rebase struct {
	Epoch, Sync        int
	Checkpoint, Digest string
}

// rebaseAt returns the rebase of epoch e at sync k among rs.
func rebaseAt(rs []Rebase, e, k int) (Rebase, bool) {
	for _, r := range rs {
		if r.Epoch == e && r.Sync == k {
			return r, true
		}
	}
	return Rebase{}, false
}

// Verdict is the orchestrator's answer to a submitted delta.
type Verdict struct {
	Accepted  bool
	Duplicate bool   // the same delta was already accepted (a retry)
	Reason    string // rejection kind, e.g. "signature", "stale", "equivocation", "shape"
	Detail    string
	// Rebases are the rebases of the delta's epoch so far (with an
	// accepted or duplicate verdict).
	Rebases []Rebase
}

// Suspect is a ring failure report.
type Suspect struct {
	Job      string
	ConfigID string // the orchestrator's configuration id of the failed ring
	Node     string // the suspect
	Kind     string // timeout, broken, misbehaved, norm
	Evidence []byte // JSON of the ring evidence when there is some
}

// Orchestrator is the worker's view of hanzod. The gRPC client
// (nodeclient) implements it; the tests run workers against the real
// hanzod in process (localcluster). Every call is signed with the node key
// by the implementation.
type Orchestrator interface {
	Register(ctx context.Context, ringAddr, probeAddr string) error
	Heartbeat(ctx context.Context) (Assignment, error)
	ReportBandwidth(ctx context.Context, job string, kbps map[string]uint64) (Assignment, error)
	// SubmitDelta sends a signed delta file and its sync's trace bundle,
	// zstd-compressed (nil when the delta names none).
	SubmitDelta(ctx context.Context, file, traces []byte) (Verdict, error)
	ReportSuspect(ctx context.Context, s Suspect) error
	// RefuseJob tells hanzod that this node will not run job, and why:
	// hanzod records it in the job's status and takes the node out.
	RefuseJob(ctx context.Context, job, reason string) error
	// FetchCheckpoint returns the adapter of a published checkpoint for a
	// base model of shape mc, and the outer optimiser's state it carries
	// (the bytes of its jobconf.OuterFile; nil when it has none).
	FetchCheckpoint(ctx context.Context, cid string, mc llama.Config) (*llama.Adapter, []byte, error)
}
