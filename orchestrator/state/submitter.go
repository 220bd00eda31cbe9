package state

import (
	"fmt"

	"github.com/zooai/gym/orchestrator/ledger"
	"github.com/zooai/gym/protocol/jobspec"
)

// MaxUtility is the largest utility a signed submission by account may
// ask for: 1 + its bonded stake / UtilityUnit (integer division), so a
// submitter with no stake gets utility 1 and priority (Priority) is bought
// with stake it risks, not claimed. The operator's submissions are bounded
// only by jobspec's range.
func (m *Machine) MaxUtility(account string) uint64 {
	return 1 + uint64(m.ledger.Bonded(account)/m.cfg.UtilityUnit)
}

// checkSubmitter applies the rules of a signed submission (SubmitJob.By):
// the submitter is the signer, the signer's account exists, the sequence
// number is fresh and the timestamp recent, the utility within
// MaxUtility, and the signer has fewer than MaxOpenPerSubmitter open jobs.
func (m *Machine) checkSubmitter(now int64, c SubmitJob, spec *jobspec.Spec) error {
	if _, err := ParsePublicKey(c.By); err != nil {
		return err
	}
	if d := now - c.Timestamp; d > m.cfg.MaxSkew.Milliseconds() || -d > m.cfg.MaxSkew.Milliseconds() {
		return fmt.Errorf("%w: submission time %d is %d ms from the orchestrator's %d (allowed %v; check the clock)", ErrStale, c.Timestamp, d, now, m.cfg.MaxSkew)
	}
	if err := m.checkSeqLead(now, c.Seq); err != nil {
		return err
	}
	if c.Seq <= m.submitSeq[c.By] {
		return fmt.Errorf("%w: submission sequence %d, the last accepted was %d (use a higher one)", ErrReplay, c.Seq, m.submitSeq[c.By])
	}
	switch spec.Submitter {
	case "":
		spec.Submitter = c.By
	case c.By:
	default:
		return fmt.Errorf("%w: the submission names submitter %s but is signed by %s (the submitter is the signing key)", ErrPermission, spec.Submitter, c.By)
	}
	if !m.ledger.Has(c.By) {
		return fmt.Errorf("%w: submitter %s has no ledger account (a deposit creates one)", ErrPermission, c.By)
	}
	if m.ledger.Banned(c.By) {
		return fmt.Errorf("%w: submitter %s is banned", ErrPermission, c.By)
	}
	if max := m.MaxUtility(c.By); spec.Utility > max {
		return fmt.Errorf("%w: utility %d exceeds %d, what %s's bonded stake of %d µGYM allows (1 + bonded / %d)", ErrPermission,
			spec.Utility, max, c.By, m.ledger.Bonded(c.By), m.cfg.UtilityUnit)
	}
	open := 0
	for _, j := range m.jobs {
		if !j.State.Terminal() && j.Spec.Submitter == c.By {
			open++
		}
	}
	if open >= m.cfg.MaxOpenPerSubmitter {
		return fmt.Errorf("%w: submitter %s has %d open jobs, the limit is %d", ErrExhausted, c.By, open, m.cfg.MaxOpenPerSubmitter)
	}
	return nil
}

// LedgerRequest is a ledger operation carried out under a request id: the
// idempotency record that makes a retried operation a no-op.
type LedgerRequest struct {
	ID      string        `json:"id"`
	Kind    string        `json:"kind"` // deposit, bond, unbond, withdraw
	Account string        `json:"account"`
	Amount  ledger.Amount `json:"amount"`
}

// maxRequests bounds the request ids remembered; the oldest are forgotten
// first (a retry comes within minutes, not after 100,000 other operations).
const maxRequests = 100_000

// checkRequestID checks the form of a request id: 1..128 printable ASCII
// bytes.
func checkRequestID(id string) error {
	if len(id) > 128 {
		return fmt.Errorf("%w: request id of %d bytes (at most 128)", ErrInvalid, len(id))
	}
	for i := 0; i < len(id); i++ {
		if id[i] < 0x21 || id[i] > 0x7e {
			return fmt.Errorf("%w: request id holds byte %#x (printable ASCII only)", ErrInvalid, id[i])
		}
	}
	return nil
}

func requestOf(cmd Command) LedgerRequest {
	switch c := cmd.(type) {
	case Deposit:
		return LedgerRequest{ID: c.Request, Kind: "deposit", Account: c.Account, Amount: c.Amount}
	case Bond:
		return LedgerRequest{ID: c.Request, Kind: "bond", Account: c.Account, Amount: c.Amount}
	case Unbond:
		return LedgerRequest{ID: c.Request, Kind: "unbond", Account: c.Account, Amount: c.Amount}
	case Withdraw:
		return LedgerRequest{ID: c.Request, Kind: "withdraw", Account: c.Account}
	}
	return LedgerRequest{}
}

// checkRequest reports whether cmd's request id was already carried out
// (done: the command is a retry and changes nothing), or an error when the
// id is malformed or was used for a different operation.
func (m *Machine) checkRequest(cmd Command) (done bool, err error) {
	r := requestOf(cmd)
	if r.ID == "" {
		return false, nil
	}
	if err := checkRequestID(r.ID); err != nil {
		return false, err
	}
	i, ok := m.requested[r.ID]
	if !ok {
		return false, nil
	}
	was := m.requests[i-m.dropped]
	if was.Kind != r.Kind || was.Account != r.Account || (r.Kind != "withdraw" && was.Amount != r.Amount) {
		return false, fmt.Errorf("%w: request id %q was used for %s of %d to %s; use a new id for a new operation",
			ErrPrecondition, r.ID, was.Kind, was.Amount, was.Account)
	}
	return true, nil
}

// applyLedger applies a ledger event and records its request id.
func (m *Machine) applyLedger(r LedgerRequest, apply func() error) error {
	if r.ID != "" {
		if _, ok := m.requested[r.ID]; ok {
			return fmt.Errorf("request id %q carried out twice", r.ID)
		}
	}
	if err := apply(); err != nil {
		return err
	}
	if r.ID == "" {
		return nil
	}
	return m.remember(r)
}

// remember records a carried-out request id, forgetting the oldest beyond
// maxRequests.
func (m *Machine) remember(r LedgerRequest) error {
	if r.ID == "" {
		return fmt.Errorf("empty request id")
	}
	if _, ok := m.requested[r.ID]; ok {
		return fmt.Errorf("request id %q twice", r.ID)
	}
	if len(m.requests) >= maxRequests {
		delete(m.requested, m.requests[0].ID)
		m.requests = m.requests[1:]
		m.dropped++
	}
	m.requested[r.ID] = m.dropped + len(m.requests)
	m.requests = append(m.requests, r)
	return nil
}
