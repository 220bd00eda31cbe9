package state

import (
	"fmt"
	"net"
	"sort"

	"github.com/zooai/gym/protocol/hardware"
	"github.com/zooai/gym/protocol/nodeauth"
)

// NodeStatus is a node's liveness.
type NodeStatus string

// Node statuses.
const (
	StatusActive NodeStatus = "active"
	StatusFailed NodeStatus = "failed"
)

// Interval is a closed span of observed time in milliseconds.
type Interval struct {
	From int64 `json:"from"`
	To   int64 `json:"to"`
}

// Node is a registered node. Times are observed milliseconds.
type Node struct {
	ID           string     `json:"id"`
	Address      string     `json:"address"`
	Region       string     `json:"region"`
	GPUModel     string     `json:"gpu_model"`
	VRAMMiB      uint64     `json:"vram_mib"`
	Attestation  string     `json:"attestation"`
	Report       []byte     `json:"report,omitempty"`
	ProbeAddress string     `json:"probe_address,omitempty"`
	RegisteredAt int64      `json:"registered_at"`
	LastSeq      uint64     `json:"last_seq"`
	LastSeen     int64      `json:"last_seen"`
	Status       NodeStatus `json:"status"`
	DownSince    int64      `json:"down_since,omitempty"`
	Down         []Interval `json:"down,omitempty"`
	Job          string     `json:"job,omitempty"`
	// RemovedFrom lists jobs whose ring this node was taken out of and
	// has not been heard from since (cleared by its next request).
	RemovedFrom []string `json:"removed_from,omitempty"`
	// Role is "" for a compute node, RoleValidator for a validator (as it
	// registered).
	Role string `json:"role,omitempty"`
	// MissedChecks counts the checks this validator let expire.
	MissedChecks int `json:"missed_checks,omitempty"`
	// Hardware is what the node reported it has (package hardware); zero
	// for a node that registered before reports existed.
	Hardware hardware.Report `json:"hardware,omitzero"`
}

// Reported is n's hardware report, or for a node that sent none the one
// accelerator its gpu model and VRAM describe (hardware.Legacy).
func (n *Node) Reported() hardware.Report {
	if n.Hardware.Empty() {
		return hardware.Legacy(n.GPUModel, n.VRAMMiB)
	}
	return n.Hardware
}

// Bounds on what a node may send.
const (
	maxAddress = 256
	maxRegion  = 64
	maxGPU     = 128
	maxReport  = 64 << 10
	maxVRAMMiB = 1 << 24 // 16 TiB
	maxLinks   = 4096
)

// checkSeqLead refuses a sequence number far ahead of now
// (nodeauth.SeqLimit).
func (m *Machine) checkSeqLead(now int64, seq uint64) error {
	if limit := nodeauth.SeqLimit(now, m.cfg.MaxSkew, m.cfg.MaxSeqLead); seq > limit {
		return fmt.Errorf("%w: sequence %d is ahead of the orchestrator's clock (at most %d: sequence numbers follow its time in nanoseconds; check the node's sequence file, nodeclient's auth-seq)", ErrUnauthenticated, seq, limit)
	}
	return nil
}

// Staked reports whether account id's bonded stake reaches what a node of
// role needs to count: MinValidatorStake for a validator, MinStake for a
// compute node.
func (m *Machine) Staked(id, role string) bool {
	need := m.cfg.MinStake
	if role == RoleValidator {
		need = m.cfg.MinValidatorStake
	}
	return m.ledger.Bonded(id) >= need
}

// authenticate checks a node request's key, signature, timestamp and
// sequence number (not ahead of the clock, above the last), in that
// order.
func (m *Machine) authenticate(now int64, a Auth, msg []byte) (*Node, error) {
	pub, err := ParsePublicKey(a.Node)
	if err != nil {
		return nil, err
	}
	if err := verifyNode(a.Node, pub, msg, a.Sig); err != nil {
		return nil, err
	}
	if d := now - a.Timestamp; d > m.cfg.MaxSkew.Milliseconds() || -d > m.cfg.MaxSkew.Milliseconds() {
		return nil, fmt.Errorf("%w: request time %d is %d ms from the orchestrator's %d (allowed %v; check the node's clock)", ErrStale, a.Timestamp, d, now, m.cfg.MaxSkew)
	}
	if err := m.checkSeqLead(now, a.Seq); err != nil {
		return nil, err
	}
	n := m.nodes[a.Node]
	if n != nil && a.Seq <= n.LastSeq {
		return nil, fmt.Errorf("%w: sequence %d, the last accepted was %d (use a higher one)", ErrReplay, a.Seq, n.LastSeq)
	}
	if m.ledger.Banned(a.Node) {
		return nil, fmt.Errorf("%w: node %s is banned", ErrPermission, a.Node)
	}
	return n, nil
}

func (m *Machine) register(now int64, r Register) error {
	switch {
	case len(r.Address) == 0 || len(r.Address) > maxAddress:
		return fmt.Errorf("%w: address must be host:port of at most %d bytes", ErrInvalid, maxAddress)
	case len(r.Region) > maxRegion:
		return fmt.Errorf("%w: region longer than %d bytes", ErrInvalid, maxRegion)
	case len(r.GPUModel) == 0 || len(r.GPUModel) > maxGPU:
		return fmt.Errorf("%w: gpu model must be 1..%d bytes", ErrInvalid, maxGPU)
	case r.VRAMMiB == 0 || r.VRAMMiB > maxVRAMMiB:
		return fmt.Errorf("%w: vram %d MiB outside 1..%d", ErrInvalid, r.VRAMMiB, maxVRAMMiB)
	case len(r.Report) > maxReport:
		return fmt.Errorf("%w: hardware report of %d bytes exceeds %d", ErrInvalid, len(r.Report), maxReport)
	case len(r.Report) > m.cfg.MaxUnstakedReport && !m.Staked(r.Node, r.Role):
		return fmt.Errorf("%w: hardware report of %d bytes: at most %d until the key's bonded stake reaches its role's minimum (bond first, or send a shorter report)", ErrPermission, len(r.Report), m.cfg.MaxUnstakedReport)
	}
	if _, port, err := net.SplitHostPort(r.Address); err != nil || port == "" {
		return fmt.Errorf("%w: address %q is not host:port", ErrInvalid, r.Address)
	}
	if err := r.Hardware.Validate(); err != nil {
		return fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	if r.Role != "" && r.Role != RoleValidator {
		return fmt.Errorf("%w: role %q (empty for a compute node, or validator)", ErrInvalid, r.Role)
	}
	if r.ProbeAddress != "" {
		if _, port, err := net.SplitHostPort(r.ProbeAddress); err != nil || port == "" || len(r.ProbeAddress) > maxAddress {
			return fmt.Errorf("%w: probe address %q is not host:port", ErrInvalid, r.ProbeAddress)
		}
	}
	n, err := m.authenticate(now, r.Auth, r.SignedBytes())
	if err != nil {
		return err
	}
	if n == nil && len(m.nodes) >= m.cfg.MaxNodes {
		return fmt.Errorf("%w: the registry holds its limit of %d nodes", ErrExhausted, m.cfg.MaxNodes)
	}
	if n == nil && !m.Staked(r.Node, r.Role) && m.unstakedNodes() >= m.cfg.MaxUnstakedNodes {
		return fmt.Errorf("%w: the registry holds its limit of %d nodes without stake (bond the role's minimum stake first: staked nodes are admitted up to %d)", ErrExhausted, m.cfg.MaxUnstakedNodes, m.cfg.MaxNodes)
	}
	m.emit(now, NodeRegistered{
		Node: r.Node, Seq: r.Seq, Address: r.Address, Region: r.Region, GPUModel: r.GPUModel, VRAMMiB: r.VRAMMiB,
		Attestation: m.cfg.Verifier.Verify(r.Node, r.GPUModel, r.VRAMMiB, r.Report),
		Report:      r.Report, ProbeAddress: r.ProbeAddress, Role: r.Role, Hardware: r.Hardware,
	})
	// A ring member that registers again has restarted: it lost its
	// place in the epoch (and its ring address may have changed). Take it
	// out now instead of letting the ring time out on it; it rejoins at
	// the next epoch boundary.
	if n != nil && n.Job != "" {
		if j := m.jobs[n.Job]; j != nil && (j.State == Running || j.State == Aggregating) && contains(j.Ring, n.ID) {
			m.lose(now, n, "registered again (restarted)")
		}
	}
	return nil
}

func (m *Machine) applyRegistered(e NodeRegistered) error {
	n := m.nodes[e.Node]
	if n == nil {
		n = &Node{ID: e.Node, RegisteredAt: m.observed, Status: StatusActive, LastSeen: m.observed}
		m.nodes[e.Node] = n
		m.addID(e.Node)
	} else if e.Seq <= n.LastSeq {
		return fmt.Errorf("sequence %d not above %d", e.Seq, n.LastSeq)
	}
	n.Address, n.Region, n.GPUModel, n.VRAMMiB = e.Address, e.Region, e.GPUModel, e.VRAMMiB
	n.Attestation, n.Report, n.LastSeq, n.ProbeAddress, n.Role = e.Attestation, e.Report, e.Seq, e.ProbeAddress, e.Role
	n.Hardware = e.Hardware
	m.alive(n)
	return nil
}

func (m *Machine) heartbeat(now int64, h Heartbeat) error {
	n, err := m.authenticate(now, h.Auth, h.SignedBytes())
	if err != nil {
		return err
	}
	if n == nil {
		return fmt.Errorf("%w: node %s is not registered (register first)", ErrNotFound, h.Node)
	}
	if gap, since := m.cfg.MinHeartbeatGap.Milliseconds(), m.observedAt(now)-n.LastSeen; n.Status == StatusActive && since < gap {
		return fmt.Errorf("%w: heartbeat %d ms after the previous one (at most one per %v)", ErrExhausted, since, m.cfg.MinHeartbeatGap)
	}
	m.emit(now, HeartbeatReceived{Node: h.Node, Seq: h.Seq})
	return nil
}

func (m *Machine) applyHeartbeat(e HeartbeatReceived) error {
	n := m.nodes[e.Node]
	if n == nil {
		return fmt.Errorf("heartbeat from unknown node %s", e.Node)
	}
	if e.Seq <= n.LastSeq {
		return fmt.Errorf("sequence %d not above %d", e.Seq, n.LastSeq)
	}
	n.LastSeq = e.Seq
	m.alive(n)
	return nil
}

// alive records that n was heard from now, closing a down interval.
func (m *Machine) alive(n *Node) {
	if n.Status == StatusFailed {
		n.Down = append(n.Down, Interval{From: n.DownSince, To: m.observed})
		n.Status, n.DownSince = StatusActive, 0
	}
	n.LastSeen = m.observed
	n.RemovedFrom = nil
	// Forget down time that left the uptime window.
	keep := n.Down[:0]
	for _, d := range n.Down {
		if d.To >= m.observed-m.params.UptimeWindowMs {
			keep = append(keep, d)
		}
	}
	n.Down = keep
	if len(n.Down) == 0 {
		n.Down = nil
	}
}

// unstakedNodes counts the registered nodes whose bonded stake is below
// their role's minimum.
func (m *Machine) unstakedNodes() int {
	k := 0
	for id, n := range m.nodes {
		if !m.Staked(id, n.Role) {
			k++
		}
	}
	return k
}

// expireUnstaked removes (node_expired) every node that still lacks its
// role's stake UnstakedTTL of observed time after it first registered,
// unless it is in a job that is not over: such a node was never eligible
// for one, and must not keep a place in the registry for free.
func (m *Machine) expireUnstaked(now int64) {
	ttl := m.cfg.UnstakedTTL.Milliseconds()
	var expired []string
	var busy map[string]bool
	for _, id := range m.nodeIDs() {
		n := m.nodes[id]
		if n.Job != "" || m.observed-n.RegisteredAt < ttl || m.Staked(id, n.Role) {
			continue
		}
		if busy == nil {
			busy = m.inOpenJobs()
		}
		if !busy[id] {
			expired = append(expired, id)
		}
	}
	for _, id := range expired {
		n := m.nodes[id]
		need := m.cfg.MinStake
		if n.Role == RoleValidator {
			need = m.cfg.MinValidatorStake
		}
		m.emit(now, NodeExpired{Node: id, Reason: fmt.Sprintf("bonded stake %d µGYM, below its role's minimum %d, %d ms (observed) after it registered", m.ledger.Bonded(id), need, m.observed-n.RegisteredAt)})
	}
}

// inOpenJobs is the set of nodes a job that is not over names as a member
// or in its ring.
func (m *Machine) inOpenJobs() map[string]bool {
	out := map[string]bool{}
	for _, j := range m.jobs {
		if j.State.Terminal() {
			continue
		}
		for _, id := range j.Members {
			out[id] = true
		}
		for _, id := range j.Ring {
			out[id] = true
		}
	}
	return out
}

func (m *Machine) applyExpired(e NodeExpired) error {
	n := m.nodes[e.Node]
	if n == nil || n.Job != "" {
		return fmt.Errorf("node %s is not registered or is in job", e.Node)
	}
	i := sort.SearchStrings(m.ids, e.Node)
	if i == len(m.ids) || m.ids[i] != e.Node {
		return fmt.Errorf("node %s missing from the sorted ids", e.Node)
	}
	delete(m.nodes, e.Node)
	m.ids = append(m.ids[:i], m.ids[i+1:]...)
	return nil
}

func (m *Machine) applyFailed(e NodeFailed) error {
	n := m.nodes[e.Node]
	if n == nil || n.Status != StatusActive {
		return fmt.Errorf("node %s is not active", e.Node)
	}
	n.Status, n.DownSince = StatusFailed, e.Since
	return nil
}

// UptimeBP is n's uptime in basis points over the uptime window (or since
// registration, when that is shorter), at the current observed time.
func (m *Machine) UptimeBP(n *Node) int {
	now := m.observed
	start := max(now-m.params.UptimeWindowMs, n.RegisteredAt)
	span := now - start
	if span <= 0 {
		return 10_000
	}
	overlap := func(from, to int64) int64 { return max(0, min(to, now)-max(from, start)) }
	var down int64
	for _, d := range n.Down {
		down += overlap(d.From, d.To)
	}
	if n.Status == StatusFailed {
		down += overlap(n.DownSince, now)
	}
	return int((span - down) * 10_000 / span)
}

// Ineligible says why node n cannot take a job needing minVRAM, or ""
// when it can: active, not banned, bonded stake ≥ MinStake, VRAM ≥
// minVRAM, uptime ≥ MinUptimeBP, no slash within PenaltyPeriod.
func (m *Machine) Ineligible(n *Node, minVRAM uint64, now int64) string {
	if why := m.standing(n); why != "" {
		return why
	}
	if n.VRAMMiB < minVRAM {
		return fmt.Sprintf("vram %d MiB below %d", n.VRAMMiB, minVRAM)
	}
	return m.record(n, now)
}

// JobFit is how node n would run job j (hardware.Check of its report
// against the job's backend, dtype, use_4bit, min_vram_mib and, when the
// base's shape is known, its memory estimate) and why it cannot take it,
// with the numbers ("" when it can): its standing (Ineligible's checks)
// first, then the hardware, then its record.
func (m *Machine) JobFit(n *Node, j *Job, now int64) (hardware.Fit, string) {
	f := hardware.Check(n.Reported(), j.Spec, j.Shape)
	if why := m.standing(n); why != "" {
		return f, why
	}
	if !f.OK() {
		return f, f.Reason
	}
	return f, m.record(n, now)
}

// standing says why n may take no job at all whatever its record: a
// validator, not active, banned or below MinStake.
func (m *Machine) standing(n *Node) string {
	switch {
	case n.Role == RoleValidator:
		return "a validator (it checks, it does not train)"
	case n.Status != StatusActive:
		return "not active"
	case m.ledger.Banned(n.ID):
		return "banned"
	case m.ledger.Bonded(n.ID) < m.cfg.MinStake:
		return fmt.Sprintf("bonded stake %d below %d", m.ledger.Bonded(n.ID), m.cfg.MinStake)
	}
	return ""
}

// record says why n's recent past bars it: uptime below MinUptimeBP, or a
// slash within PenaltyPeriod.
func (m *Machine) record(n *Node, now int64) string {
	if u := m.UptimeBP(n); u < m.cfg.MinUptimeBP {
		return fmt.Sprintf("uptime %d bp below %d", u, m.cfg.MinUptimeBP)
	}
	if at, ok := m.ledger.LastSlashAt(n.ID); ok && now < at+m.cfg.PenaltyPeriod.Milliseconds() {
		return "penalty after a slash"
	}
	return ""
}

// idleEligible lists nodes free for job j (JobFit), best first: highest
// uptime, then most VRAM, then node id.
func (m *Machine) idleEligible(j *Job, now int64, taken map[string]bool) []*Node {
	var out []*Node
	for _, id := range m.nodeIDs() {
		n := m.nodes[id]
		if n.Job != "" || taken[id] {
			continue
		}
		if _, why := m.JobFit(n, j, now); why == "" {
			out = append(out, n)
		}
	}
	sort.SliceStable(out, func(i, j int) bool {
		ui, uj := m.UptimeBP(out[i]), m.UptimeBP(out[j])
		if ui != uj {
			return ui > uj
		}
		return out[i].VRAMMiB > out[j].VRAMMiB
	})
	return out
}

// nodeIDs lists the node ids in sorted order (kept sorted on
// registration; callers must not modify it).
func (m *Machine) nodeIDs() []string { return m.ids }

func (m *Machine) addID(id string) {
	i := sort.SearchStrings(m.ids, id)
	m.ids = append(m.ids, "")
	copy(m.ids[i+1:], m.ids[i:])
	m.ids[i] = id
}

// detectFailures fails every active node silent for longer than FailAfter
// of observed time and repairs the jobs it belonged to.
func (m *Machine) detectFailures(now int64) {
	limit := m.cfg.FailAfter.Milliseconds()
	for _, id := range m.nodeIDs() {
		n := m.nodes[id]
		if n.Status == StatusActive && m.observed-n.LastSeen > limit {
			m.emit(now, NodeFailed{Node: id, Since: n.LastSeen, Reason: fmt.Sprintf("no heartbeat for %d ms", m.observed-n.LastSeen)})
			m.lose(now, n, "node failed")
		}
	}
}

func (m *Machine) reportBandwidth(now int64, b ReportBandwidth) error {
	if len(b.Links) > maxLinks {
		return fmt.Errorf("%w: %d links, at most %d", ErrInvalid, len(b.Links), maxLinks)
	}
	n, err := m.authenticate(now, b.Auth, b.SignedBytes())
	if err != nil {
		return err
	}
	if n == nil {
		return fmt.Errorf("%w: node %s is not registered (register first)", ErrPrecondition, b.Node)
	}
	j := m.jobs[b.Job]
	if j == nil {
		return fmt.Errorf("%w: job %q", ErrNotFound, b.Job)
	}
	if j.State != Provisioning || !contains(j.Members, b.Node) {
		return fmt.Errorf("%w: job %s is %s and node %s is not provisioning it", ErrPrecondition, b.Job, j.State, b.Node)
	}
	seen := map[string]bool{}
	for _, l := range b.Links {
		if l.Peer == b.Node || !contains(j.Members, l.Peer) || seen[l.Peer] {
			return fmt.Errorf("%w: link to %q: peers must be other members of %s, each once", ErrInvalid, l.Peer, b.Job)
		}
		seen[l.Peer] = true
	}
	links := append([]Link(nil), b.Links...)
	sort.Slice(links, func(i, k int) bool { return links[i].Peer < links[k].Peer })
	m.emit(now, BandwidthReported{Node: b.Node, Seq: b.Seq, Job: b.Job, Links: links})
	m.maybeBuild(now, j)
	return nil
}

func (m *Machine) applyBandwidth(e BandwidthReported) error {
	n, j := m.nodes[e.Node], m.jobs[e.Job]
	if n == nil || j == nil || j.State != Provisioning || !contains(j.Members, e.Node) {
		return fmt.Errorf("bandwidth from %s for %s out of place", e.Node, e.Job)
	}
	if e.Seq <= n.LastSeq {
		return fmt.Errorf("sequence %d not above %d", e.Seq, n.LastSeq)
	}
	n.LastSeq = e.Seq
	if j.Bandwidth == nil {
		j.Bandwidth = map[string]map[string]uint64{}
	}
	row := map[string]uint64{}
	for _, l := range e.Links {
		row[l.Peer] = l.Kbps
	}
	j.Bandwidth[e.Node] = row
	return nil
}

func contains(s []string, x string) bool {
	for _, v := range s {
		if v == x {
			return true
		}
	}
	return false
}
