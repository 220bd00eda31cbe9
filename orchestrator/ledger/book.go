package ledger

import (
	"context"
	"crypto/ed25519"
	"errors"
	"fmt"
	"time"
)

// Book is a stake ledger hanzod drives from outside its state machine: the
// in-memory Twin, or the contracts on an EVM chain (orchestrator/ledger/evm).
// Both pass one conformance suite (orchestrator/ledger/ledgertest), so what
// the orchestrator sees does not depend on where the ledger lives.
//
// Accounts are strings the implementation maps to its holders (the chain
// ledger to Ethereum addresses); Treasury names the pool rewards are paid
// from and slashed stake goes to. Errors wrap this package's sentinels.
type Book interface {
	// Deposit creates amt in account's free balance (Treasury: in the pool).
	Deposit(ctx context.Context, account string, amt Amount) error
	// Stake moves amt of account's free balance into stake for role; the
	// stake must reach the role's minimum, one role at a time.
	Stake(ctx context.Context, account string, role Role, amt Amount) error
	// Unbond starts releasing amt of bonded stake (withdrawable after the
	// unbonding delay, slashable until then). What stays bonded is zero or
	// at least the role's minimum; refused while the account is locked.
	Unbond(ctx context.Context, account string, amt Amount) error
	// Withdraw moves every matured unbonding entry to the free balance.
	Withdraw(ctx context.Context, account string) (Amount, error)
	// Lock keeps the accounts from unbonding until Unlock for the same job.
	Lock(ctx context.Context, job string, accounts []string) error
	Unlock(ctx context.Context, job string, accounts []string) error
	// Slash punishes account's next offence (5%, 25%, everything and a ban)
	// and keeps the evidence's keccak256.
	Slash(ctx context.Context, account string, evidence []byte) (SlashRecord, error)
	// PayEpoch pays the payouts from the treasury, once per job and epoch.
	PayEpoch(ctx context.Context, job string, epoch uint64, payouts []Payout) error
	// Publish records a checkpoint publication, once per job and epoch.
	Publish(ctx context.Context, p Publication) error
	// Publication reads a record back (false when there is none).
	Publication(ctx context.Context, job string, epoch uint64) (Publication, bool, error)
	// Position is the account's holdings, stake, locks and offences.
	Position(ctx context.Context, account string) (Position, error)
	// Treasury is the pool's balance.
	Treasury(ctx context.Context) (Amount, error)
}

// Sentinel errors of the Book operations (beside ErrInsufficient, ErrAmount,
// ErrBanned, ErrAccount and ErrNothing).
var (
	ErrBelowMinimum     = errors.New("ledger: stake below the role's minimum")
	ErrRole             = errors.New("ledger: invalid or mismatched role")
	ErrLocked           = errors.New("ledger: stake locked by an unsettled job")
	ErrAlreadyPaid      = errors.New("ledger: epoch already paid")
	ErrAlreadyPublished = errors.New("ledger: epoch already published")
	ErrUnauthorized     = errors.New("ledger: caller not authorised")
	ErrPublication      = errors.New("ledger: invalid publication record")
)

// Role is what an account stakes for.
type Role uint8

// The staking roles (their values are the contract's ROLE_* constants).
const (
	RoleNone Role = iota
	RoleNode
	RoleValidator
	RoleOrchestrator
)

func (r Role) String() string {
	switch r {
	case RoleNone:
		return "none"
	case RoleNode:
		return "node"
	case RoleValidator:
		return "validator"
	case RoleOrchestrator:
		return "orchestrator"
	}
	return fmt.Sprintf("role(%d)", uint8(r))
}

// ParseRole reads a role name.
func ParseRole(s string) (Role, error) {
	for _, r := range []Role{RoleNode, RoleValidator, RoleOrchestrator} {
		if r.String() == s {
			return r, nil
		}
	}
	return RoleNone, fmt.Errorf("%w: %q (node, validator or orchestrator)", ErrRole, s)
}

// MinStake is a role's minimum stake (seed 000, "Staking and Slashing").
func MinStake(r Role) (Amount, error) {
	switch r {
	case RoleNode:
		return 10_000 * GYM, nil
	case RoleValidator:
		return 25_000 * GYM, nil
	case RoleOrchestrator:
		return 50_000 * GYM, nil
	}
	return 0, fmt.Errorf("%w: %v", ErrRole, r)
}

// SlashRecord is one offence as a Book keeps it.
type SlashRecord struct {
	Offence      int      `json:"offence"`
	Pct          int      `json:"pct"`
	Amount       Amount   `json:"amount"`
	Banned       bool     `json:"banned"`
	EvidenceHash [32]byte `json:"evidence_hash"` // keccak256
}

// Position is an account as a Book reports it. ReleaseAt of the unbonding
// entries is unix milliseconds.
type Position struct {
	Free      Amount        `json:"free"`
	Bonded    Amount        `json:"bonded"`
	Role      Role          `json:"role"`
	Unbonding []Unbonding   `json:"unbonding,omitempty"`
	Locks     int           `json:"locks"`
	Banned    bool          `json:"banned"`
	Slashes   []SlashRecord `json:"slashes,omitempty"`
}

// Unbonded is the sum of the unbonding entries.
func (p Position) Unbonded() Amount {
	var t Amount
	for _, u := range p.Unbonding {
		t += u.Amount
	}
	return t
}

// Publication is the record of a published checkpoint: its IPFS CID, the
// weights' CID, the Hugging Face Hub repo, and hanzod's Ed25519 signature
// of its publication record.
type Publication struct {
	Job        string            `json:"job"`
	Epoch      uint64            `json:"epoch"`
	CID        string            `json:"cid"`
	WeightsCID string            `json:"weights_cid,omitempty"`
	HubRepo    string            `json:"hub_repo,omitempty"`
	Signer     ed25519.PublicKey `json:"signer"`
	Signature  []byte            `json:"signature"`
}

// Check validates the record's shape (not the signature, whose message
// is the caller's).
func (p Publication) Check() error {
	switch {
	case p.Job == "":
		return fmt.Errorf("%w: no job", ErrPublication)
	case p.CID == "":
		return fmt.Errorf("%w: no CID", ErrPublication)
	case len(p.Signer) != ed25519.PublicKeySize:
		return fmt.Errorf("%w: signer key of %d bytes", ErrPublication, len(p.Signer))
	case len(p.Signature) != ed25519.SignatureSize:
		return fmt.Errorf("%w: signature of %d bytes", ErrPublication, len(p.Signature))
	}
	return nil
}

// slashPct is the percentage of offence n (1-based).
func slashPct(n int) int {
	switch n {
	case 1:
		return FirstSlashBP / 100
	case 2:
		return SecondSlashBP / 100
	}
	return 100
}

// ms converts a duration to milliseconds.
func ms(d time.Duration) int64 { return d.Milliseconds() }
