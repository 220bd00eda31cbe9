package state

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"sort"

	"github.com/zooai/gym/orchestrator/ledger"
)

// snapshotVersion changes whenever the snapshot layout does.
const snapshotVersion = 1

type snapshot struct {
	Version  int              `json:"version"`
	Applied  uint64           `json:"applied"`
	Started  bool             `json:"started"`
	Params   Params           `json:"params"`
	LastAt   int64            `json:"last_at"`
	Observed int64            `json:"observed"`
	NextJob  uint64           `json:"next_job"`
	Nodes    map[string]*Node `json:"nodes"` // encoding/json sorts map keys
	Jobs     map[string]*Job  `json:"jobs"`
	Ledger   ledger.Snapshot  `json:"ledger"`
	// Submitters: each signing submitter's last sequence number;
	// Requests: the ledger request ids carried out, oldest first.
	Submitters map[string]uint64 `json:"submitters,omitempty"`
	Requests   []LedgerRequest   `json:"requests,omitempty"`
}

// Marshal serialises the whole state canonically: the same state always
// gives the same bytes (struct fields in declaration order, map keys
// sorted by encoding/json, lists kept in the order the events made them).
// It is both the snapshot format and what replay tests compare.
func (m *Machine) Marshal() []byte {
	s := snapshot{
		Version: snapshotVersion, Applied: m.applied, Started: m.started, Params: m.params,
		LastAt: m.lastAt, Observed: m.observed, NextJob: m.nextJob,
		Nodes: m.nodes, Jobs: m.jobs, Ledger: m.ledger.Snapshot(),
		Submitters: m.submitSeq, Requests: m.requests,
	}
	b, err := json.Marshal(s)
	if err != nil {
		panic(err) // plain data: cannot fail
	}
	return b
}

// Restore builds a machine from Marshal's output; replay the log after
// Applied() on top of it.
func Restore(cfg Config, data []byte) (*Machine, error) {
	m, err := New(cfg)
	if err != nil {
		return nil, err
	}
	var s snapshot
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&s); err != nil {
		return nil, fmt.Errorf("%w: snapshot: %v", ErrCorrupt, err)
	}
	if s.Version != snapshotVersion {
		return nil, fmt.Errorf("%w: snapshot version %d, this build reads %d", ErrCorrupt, s.Version, snapshotVersion)
	}
	l, err := ledger.Restore(s.Ledger)
	if err != nil {
		return nil, fmt.Errorf("%w: snapshot: %v", ErrCorrupt, err)
	}
	m.applied, m.started, m.params, m.lastAt, m.observed, m.nextJob = s.Applied, s.Started, s.Params, s.LastAt, s.Observed, s.NextJob
	m.ledger = l
	if s.Nodes != nil {
		m.nodes = s.Nodes
	}
	if s.Jobs != nil {
		m.jobs = s.Jobs
	}
	if s.Submitters != nil {
		m.submitSeq = s.Submitters
	}
	for _, r := range s.Requests {
		if err := m.remember(r); err != nil {
			return nil, fmt.Errorf("%w: snapshot: %v", ErrCorrupt, err)
		}
	}
	for id, n := range m.nodes {
		if n == nil || n.ID != id {
			return nil, fmt.Errorf("%w: snapshot node %q", ErrCorrupt, id)
		}
		m.ids = append(m.ids, id)
	}
	sort.Strings(m.ids)
	for id, j := range m.jobs {
		if j == nil || j.ID != id {
			return nil, fmt.Errorf("%w: snapshot job %q", ErrCorrupt, id)
		}
	}
	if !bytes.Equal(m.Marshal(), data) {
		return nil, fmt.Errorf("%w: snapshot is not in canonical form", ErrCorrupt)
	}
	return m, nil
}

// Node returns a copy of a node, or false.
func (m *Machine) Node(id string) (Node, bool) {
	n, ok := m.nodes[id]
	if !ok {
		return Node{}, false
	}
	return *n, true
}

// Nodes lists the node ids in sorted order.
func (m *Machine) Nodes() []string { return m.nodeIDs() }

// Job returns a copy of a job, or false. The copy shares its slices and
// maps with the machine: read it inside Engine.View, or Clone it to keep it.
func (m *Machine) Job(id string) (Job, bool) {
	j, ok := m.jobs[id]
	if !ok {
		return Job{}, false
	}
	return *j, true
}

// Clone returns a deep copy of j that shares nothing with the machine.
func (j Job) Clone() Job {
	c := j
	c.RingGroups = slices.Clone(j.RingGroups)
	c.Members, c.Ring, c.CIDs, c.PaidEpochs, c.Participants = slices.Clone(j.Members), slices.Clone(j.Ring),
		slices.Clone(j.CIDs), slices.Clone(j.PaidEpochs), slices.Clone(j.Participants)
	c.Bandwidth = nil
	if j.Bandwidth != nil {
		c.Bandwidth = make(map[string]map[string]uint64, len(j.Bandwidth))
		for k, v := range j.Bandwidth {
			c.Bandwidth[k] = maps.Clone(v)
		}
	}
	c.Suspects = nil
	if j.Suspects != nil {
		c.Suspects = make(map[string][]string, len(j.Suspects))
		for k, v := range j.Suspects {
			c.Suspects[k] = slices.Clone(v)
		}
	}
	c.Slots = maps.Clone(j.Slots)
	c.Refusals = maps.Clone(j.Refusals)
	c.Watch = maps.Clone(j.Watch)
	c.Rebases = slices.Clone(j.Rebases)
	c.Checks = nil
	if j.Checks != nil {
		c.Checks = make(map[string]*Check, len(j.Checks))
		for k, v := range j.Checks {
			c.Checks[k] = v.clone()
		}
	}
	c.Tally = nil
	if j.Tally != nil {
		c.Tally = make(map[string]*Tally, len(j.Tally))
		for k, v := range j.Tally {
			t := *v
			c.Tally[k] = &t
		}
	}
	return c
}

// Jobs lists the job ids in sorted (submission) order.
func (m *Machine) Jobs() []string { return m.jobIDs() }

// Account returns a ledger account.
func (m *Machine) Account(id string) ledger.Account { return m.ledger.Account(id) }

// CheckLedger verifies the ledger's conservation invariant.
func (m *Machine) CheckLedger() error { return m.ledger.Check() }

// Treasury is what the treasury holds (it funds rewards).
func (m *Machine) Treasury() ledger.Amount { return m.ledger.TreasuryBalance() }
