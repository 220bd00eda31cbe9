package state

import (
	"bytes"
	"encoding/json"
	"fmt"

	"github.com/zooai/gym/orchestrator/ledger"
	"github.com/zooai/gym/protocol/hardware"
	"github.com/zooai/gym/protocol/jobspec"
	"github.com/zooai/gym/protocol/nodeauth"
)

// Event is one entry of the append-only log. Index is its 1-based position,
// At the orchestrator's wall clock (unix milliseconds) when it was decided.
type Event struct {
	Index uint64
	At    int64
	Body  Body
}

// Body is the payload of an event; Kind names it in the encoding.
type Body interface{ Kind() string }

// Params are the rules Apply depends on. They are fixed by the first event
// of a log (Genesis) so that every replay uses the same ones.
type Params struct {
	// MaxStepMs bounds how much observed time one event can add, so a clock
	// jump or an orchestrator outage does not count as node silence.
	MaxStepMs int64 `json:"max_step_ms"`
	// UptimeWindowMs is the uptime window (24 h); older down intervals are
	// forgotten.
	UptimeWindowMs int64 `json:"uptime_window_ms"`
}

// Link is one measured bandwidth from the reporting node to Peer.
type Link = nodeauth.Link

// The event bodies. Each is a fact that happened; Apply never refuses a
// well-formed log.
type (
	// Genesis starts a log.
	Genesis struct {
		Params Params `json:"params"`
	}
	// Ticked advances time; the daemon ticks once a second.
	Ticked struct{}
	// NodeRegistered records a node's signed self-description. A node that
	// registers again updates it.
	NodeRegistered struct {
		Node        string `json:"node"`
		Seq         uint64 `json:"seq"`
		Address     string `json:"address"`
		Region      string `json:"region"`
		GPUModel    string `json:"gpu_model"`
		VRAMMiB     uint64 `json:"vram_mib"`
		Attestation string `json:"attestation"`
		Report      []byte `json:"report,omitempty"` // signed hardware report as sent
		// ProbeAddress is where the node answers bandwidth probes.
		ProbeAddress string `json:"probe_address,omitempty"`
		// Role is RoleValidator for a validator, "" for a compute node.
		Role string `json:"role,omitempty"`
		// Hardware is the node's signed report of its accelerators,
		// backends and dtypes; absent from nodes (and logs) from before
		// reports, judged by gpu model and VRAM alone.
		Hardware hardware.Report `json:"hardware,omitzero"`
	}
	// HeartbeatReceived marks a node alive (and recovered if it had failed).
	HeartbeatReceived struct {
		Node string `json:"node"`
		Seq  uint64 `json:"seq"`
	}
	// NodeFailed marks a node failed; it has been down since Since
	// (observed milliseconds, its last heartbeat).
	NodeFailed struct {
		Node   string `json:"node"`
		Since  int64  `json:"since"`
		Reason string `json:"reason"`
	}
	// NodeExpired removes a node from the registry: it registered without
	// the stake its role needs and had none UnstakedTTL later (observed
	// time), and was in no job. Its ledger account stays; it may register
	// again.
	NodeExpired struct {
		Node   string `json:"node"`
		Reason string `json:"reason"`
	}
	// BandwidthReported stores a member's measurements to its peers.
	BandwidthReported struct {
		Node  string `json:"node"`
		Seq   uint64 `json:"seq"`
		Job   string `json:"job"`
		Links []Link `json:"links"`
	}
	// JobSubmitted adds a Pending job.
	JobSubmitted struct {
		Job  string       `json:"job"`
		Spec jobspec.Spec `json:"spec"`
		// By and Seq: the signing submitter and its sequence number
		// (empty for the operator's submissions).
		By  string `json:"by,omitempty"`
		Seq uint64 `json:"seq,omitempty"`
		// Escrow is what By set aside from its free balance to fund the
		// job's rewards (Machine.JobEscrow): its epochs are paid from it
		// and the rest is released when the job ends.
		Escrow ledger.Amount `json:"escrow,omitempty"`
		// Shape is the base's dimensions as hanzod read them from its
		// config.json when the job was submitted (nil: hanzod could not
		// read it, and schedules by min_vram_mib alone; also every job
		// logged before the field existed).
		Shape *hardware.Shape `json:"shape,omitempty"`
	}
	// JobTransitioned moves a job between states; the only way a job's
	// state changes.
	JobTransitioned struct {
		Job    string   `json:"job"`
		From   JobState `json:"from"`
		To     JobState `json:"to"`
		Reason string   `json:"reason,omitempty"`
		// Members is set when entering Provisioning.
		Members []string `json:"members,omitempty"`
		// CID is set when leaving Aggregating.
		CID string `json:"cid,omitempty"`
	}
	// MemberChanged removes or adds a member of a Provisioning job.
	MemberChanged struct {
		Job    string `json:"job"`
		Node   string `json:"node"`
		Added  bool   `json:"added"`
		Reason string `json:"reason"`
	}
	// RingConfigured publishes a ring configuration of a job.
	RingConfigured struct {
		Job        string   `json:"job"`
		ConfigID   string   `json:"config_id"`
		Generation uint64   `json:"generation"`
		Ring       []string `json:"ring"`
		// Groups are the sizes of the two-level all-reduce's groups of
		// consecutive members (ring.Config.Groups); empty: a flat ring.
		Groups     []int  `json:"groups,omitempty"`
		Bottleneck uint64 `json:"bottleneck_kbps"`
		Cause      string `json:"cause"`
		// Resync marks a fresh configuration of the same members, issued
		// when the ring's failure reports contradict each other.
		Resync bool `json:"resync,omitempty"`
	}
	// JobPaused and JobResumed bracket a running job that lost too many
	// members to continue its epoch.
	JobPaused struct {
		Job    string `json:"job"`
		Reason string `json:"reason"`
	}
	JobResumed struct {
		Job string `json:"job"`
	}
	// Ledger events.
	// Minted, Bonded, Unbonded and Withdrawn carry the operation's
	// request id when it had one (the idempotency key).
	Minted struct {
		Account string        `json:"account"`
		Amount  ledger.Amount `json:"amount"`
		Request string        `json:"request,omitempty"`
	}
	Bonded struct {
		Account string        `json:"account"`
		Amount  ledger.Amount `json:"amount"`
		Request string        `json:"request,omitempty"`
	}
	Unbonded struct {
		Account   string        `json:"account"`
		Amount    ledger.Amount `json:"amount"`
		ReleaseAt int64         `json:"release_at"`
		Request   string        `json:"request,omitempty"`
	}
	Withdrawn struct {
		Account string        `json:"account"`
		Amount  ledger.Amount `json:"amount"`
		Request string        `json:"request,omitempty"`
	}
	Slashed struct {
		Account  string        `json:"account"`
		Offence  int           `json:"offence"`
		Amount   ledger.Amount `json:"amount"`
		Ban      bool          `json:"ban"`
		Reason   string        `json:"reason"`
		Evidence []byte        `json:"evidence"`
	}
	// RewardsPaid pays an epoch: Total is what it earned (its Samples
	// at the per-sample rate, capped), split into Payouts; From is the
	// submitter whose escrow pays it, empty for the treasury. Rounding
	// dust stays with the payer.
	RewardsPaid struct {
		Job     string          `json:"job"`
		Epoch   int             `json:"epoch"`
		Total   ledger.Amount   `json:"total"`
		Payouts []ledger.Payout `json:"payouts"`
		Samples uint64          `json:"samples,omitempty"`
		From    string          `json:"from,omitempty"`
	}
	// EscrowReleased returns what is left of a job's escrow to its
	// submitter's free balance when the job ends (published or failed).
	EscrowReleased struct {
		Job     string        `json:"job"`
		Account string        `json:"account"`
		Amount  ledger.Amount `json:"amount"`
	}
)

func (Genesis) Kind() string           { return "genesis" }
func (Ticked) Kind() string            { return "ticked" }
func (NodeRegistered) Kind() string    { return "node_registered" }
func (HeartbeatReceived) Kind() string { return "heartbeat" }
func (NodeFailed) Kind() string        { return "node_failed" }
func (NodeExpired) Kind() string       { return "node_expired" }
func (BandwidthReported) Kind() string { return "bandwidth_reported" }
func (JobSubmitted) Kind() string      { return "job_submitted" }
func (JobTransitioned) Kind() string   { return "job_transitioned" }
func (MemberChanged) Kind() string     { return "member_changed" }
func (RingConfigured) Kind() string    { return "ring_configured" }
func (JobPaused) Kind() string         { return "job_paused" }
func (JobResumed) Kind() string        { return "job_resumed" }
func (Minted) Kind() string            { return "minted" }
func (Bonded) Kind() string            { return "bonded" }
func (Unbonded) Kind() string          { return "unbonded" }
func (Withdrawn) Kind() string         { return "withdrawn" }
func (Slashed) Kind() string           { return "slashed" }
func (RewardsPaid) Kind() string       { return "rewards_paid" }
func (EscrowReleased) Kind() string    { return "escrow_released" }

var bodyTypes = map[string]func() Body{
	"genesis":              func() Body { return &Genesis{} },
	"ticked":               func() Body { return &Ticked{} },
	"node_registered":      func() Body { return &NodeRegistered{} },
	"heartbeat":            func() Body { return &HeartbeatReceived{} },
	"node_failed":          func() Body { return &NodeFailed{} },
	"node_expired":         func() Body { return &NodeExpired{} },
	"bandwidth_reported":   func() Body { return &BandwidthReported{} },
	"job_submitted":        func() Body { return &JobSubmitted{} },
	"job_transitioned":     func() Body { return &JobTransitioned{} },
	"member_changed":       func() Body { return &MemberChanged{} },
	"ring_configured":      func() Body { return &RingConfigured{} },
	"job_paused":           func() Body { return &JobPaused{} },
	"job_resumed":          func() Body { return &JobResumed{} },
	"minted":               func() Body { return &Minted{} },
	"bonded":               func() Body { return &Bonded{} },
	"unbonded":             func() Body { return &Unbonded{} },
	"withdrawn":            func() Body { return &Withdrawn{} },
	"slashed":              func() Body { return &Slashed{} },
	"rewards_paid":         func() Body { return &RewardsPaid{} },
	"escrow_released":      func() Body { return &EscrowReleased{} },
	"suspect_reported":     func() Body { return &SuspectReported{} },
	"delta_judged":         func() Body { return &DeltaJudged{} },
	"job_refused":          func() Body { return &JobRefused{} },
	"checkpoint_published": func() Body { return &CheckpointPublished{} },
	"job_settled":          func() Body { return &JobSettled{} },
	"check_assigned":       func() Body { return &CheckAssigned{} },
	"verdict_recorded":     func() Body { return &VerdictRecorded{} },
	"check_expired":        func() Body { return &CheckExpired{} },
	"nodes_watched":        func() Body { return &NodesWatched{} },
	"rebase_set":           func() Body { return &RebaseSet{} },
	"rebase_published":     func() Body { return &RebasePublished{} },
}

type wireEvent struct {
	Index uint64          `json:"i"`
	At    int64           `json:"at"`
	Type  string          `json:"type"`
	Body  json.RawMessage `json:"body"`
}

// MaxEventSize bounds one encoded event.
const MaxEventSize = 1 << 20

// Encode returns the canonical encoding of e: compact JSON with fields in
// declaration order. The same event always encodes to the same bytes.
func (e Event) Encode() ([]byte, error) {
	if e.Body == nil {
		return nil, fmt.Errorf("%w: event %d has no body", ErrCorrupt, e.Index)
	}
	body, err := json.Marshal(e.Body)
	if err != nil {
		return nil, err
	}
	return json.Marshal(wireEvent{Index: e.Index, At: e.At, Type: e.Body.Kind(), Body: body})
}

// DecodeEvent parses an encoded event. Unknown fields and types are
// refused: a log this version does not fully understand must not be
// replayed into a different state.
func DecodeEvent(data []byte) (Event, error) {
	if len(data) > MaxEventSize {
		return Event{}, fmt.Errorf("%w: event of %d bytes exceeds %d", ErrCorrupt, len(data), MaxEventSize)
	}
	var w wireEvent
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&w); err != nil {
		return Event{}, fmt.Errorf("%w: %v", ErrCorrupt, err)
	}
	mk, ok := bodyTypes[w.Type]
	if !ok {
		return Event{}, fmt.Errorf("%w: unknown event type %q", ErrCorrupt, w.Type)
	}
	b := mk()
	bd := json.NewDecoder(bytes.NewReader(w.Body))
	bd.DisallowUnknownFields()
	if err := bd.Decode(b); err != nil {
		return Event{}, fmt.Errorf("%w: %s body: %v", ErrCorrupt, w.Type, err)
	}
	// Store the value, not the pointer, so decoded events equal decided ones.
	var v Body
	switch p := b.(type) {
	case *Genesis:
		v = *p
	case *Ticked:
		v = *p
	case *NodeRegistered:
		v = *p
	case *HeartbeatReceived:
		v = *p
	case *NodeFailed:
		v = *p
	case *NodeExpired:
		v = *p
	case *BandwidthReported:
		v = *p
	case *JobSubmitted:
		v = *p
	case *JobTransitioned:
		v = *p
	case *MemberChanged:
		v = *p
	case *RingConfigured:
		v = *p
	case *JobPaused:
		v = *p
	case *JobResumed:
		v = *p
	case *Minted:
		v = *p
	case *Bonded:
		v = *p
	case *Unbonded:
		v = *p
	case *Withdrawn:
		v = *p
	case *Slashed:
		v = *p
	case *RewardsPaid:
		v = *p
	case *EscrowReleased:
		v = *p
	case *SuspectReported:
		v = *p
	case *DeltaJudged:
		v = *p
	case *JobRefused:
		v = *p
	case *CheckpointPublished:
		v = *p
	case *JobSettled:
		v = *p
	case *CheckAssigned:
		v = *p
	case *VerdictRecorded:
		v = *p
	case *CheckExpired:
		v = *p
	case *NodesWatched:
		v = *p
	case *RebaseSet:
		v = *p
	case *RebasePublished:
		v = *p
	}
	return Event{Index: w.Index, At: w.At, Body: v}, nil
}
