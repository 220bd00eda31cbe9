package state

import (
	"crypto/ed25519"
	"encoding/hex"
	"fmt"

	"github.com/zooai/gym/keys/edkey"
	"github.com/zooai/gym/orchestrator/ledger"
	"github.com/zooai/gym/protocol/hardware"
	"github.com/zooai/gym/protocol/jobspec"
	"github.com/zooai/gym/protocol/nodeauth"
)

// Command is a request to change the state. Step validates it into events.
type Command interface{ command() }

// Auth is the signed envelope of a node's request (nodeauth.Auth); its
// Timestamp must be within Config.MaxSkew of the orchestrator's clock.
type Auth = nodeauth.Auth

// Node requests (signed). Their fields and the bytes a node signs are
// nodeauth's (the node client builds them there); here they are commands.
type (
	// Register announces a node and its hardware as the node reports it.
	Register nodeauth.Register
	// Heartbeat says the node is alive (every 10 s).
	Heartbeat nodeauth.Heartbeat
	// ReportBandwidth carries a member's measurements to the other members
	// of a Provisioning job.
	ReportBandwidth nodeauth.ReportBandwidth
)

// Operator and internal commands. The API authenticates their callers;
// they carry no node signature.
type (
	// Tick advances time: failures, timeouts, deadlines and scheduling.
	Tick struct{}
	// SubmitJob adds a job. By is the key (hex) whose signature over the
	// submission the API verified, with the signature's Seq and Timestamp;
	// empty By is the operator's submission (the API checked its token).
	// A signed submission is bounded (Machine.submit): its submitter is
	// By, By's ledger account exists, Seq exceeds By's last, the
	// timestamp is within MaxSkew, the utility is at most
	// MaxUtility(By), and By has fewer than MaxOpenPerSubmitter open jobs.
	//
	// Shape is the base's dimensions, when the API could read its
	// config.json (hanzod's artifact store, or the built-in base): the
	// scheduler then checks every node's reported memory against the
	// job's estimate (package hardware). nil: min_vram_mib alone.
	SubmitJob struct {
		Spec      jobspec.Spec
		By        string
		Seq       uint64
		Timestamp int64
		Shape     *hardware.Shape
	}
	// EndEpoch moves a Running job to Aggregating.
	EndEpoch struct {
		Job   string
		Epoch int
	}
	// PublishCheckpoint records the merged checkpoint of the epoch being
	// aggregated; the job runs its next epoch or, after the last, is
	// Published.
	PublishCheckpoint struct {
		Job   string
		Epoch int
		CID   string
		// Record and Signature (hex) are the orchestrator-signed
		// publication record, kept in the log when given.
		Record, Signature string
	}
	// FailJob fails a job on the operator's or validator's word.
	FailJob struct {
		Job    string
		Reason string
	}
	// Deposit mints tokens into an account (a deposit bridged from the
	// chain, or an emission into the treasury). Request, when set, makes
	// the operation idempotent (as for Bond, Unbond and Withdraw): a
	// command whose Request was already carried out changes nothing and
	// succeeds; the same Request with other arguments is refused.
	Deposit struct {
		Account string
		Amount  ledger.Amount
		Request string
	}
	// Bond, Unbond and Withdraw move an account's stake.
	Bond struct {
		Account string
		Amount  ledger.Amount
		Request string
	}
	Unbond struct {
		Account string
		Amount  ledger.Amount
		Request string
	}
	Withdraw struct {
		Account string
		Request string
	}
	// Slash punishes a node; the evidence is kept in the ledger.
	Slash struct {
		Node     string
		Reason   string
		Evidence []byte
	}
	// PayRewards distributes an epoch's rewards from the treasury.
	PayRewards struct {
		Job           string
		Epoch         int
		Total         ledger.Amount
		Contributions []ledger.Contribution
	}
)

func (Register) command()          {}
func (Heartbeat) command()         {}
func (ReportBandwidth) command()   {}
func (Tick) command()              {}
func (SubmitJob) command()         {}
func (EndEpoch) command()          {}
func (PublishCheckpoint) command() {}
func (FailJob) command()           {}
func (Deposit) command()           {}
func (Bond) command()              {}
func (Unbond) command()            {}
func (Withdraw) command()          {}
func (Slash) command()             {}
func (PayRewards) command()        {}

// Domain is the signature domain tag of node requests (nodeauth.Domain).
const Domain = nodeauth.Domain

// SignedBytes is what a node signs (nodeauth.Register.SignedBytes).
func (r Register) SignedBytes() []byte { return nodeauth.Register(r).SignedBytes() }

// SignedBytes is what a node signs.
func (h Heartbeat) SignedBytes() []byte { return nodeauth.Heartbeat(h).SignedBytes() }

// SignedBytes is what a node signs.
func (b ReportBandwidth) SignedBytes() []byte { return nodeauth.ReportBandwidth(b).SignedBytes() }

// SignRegister, SignHeartbeat and SignBandwidth sign a request in place
// with the node's key (and set Auth.Node to its public key).
func SignRegister(key ed25519.PrivateKey, r *Register) {
	nodeauth.SignRegister(key, (*nodeauth.Register)(r))
}

// SignHeartbeat signs h in place.
func SignHeartbeat(key ed25519.PrivateKey, h *Heartbeat) {
	nodeauth.SignHeartbeat(key, (*nodeauth.Heartbeat)(h))
}

// SignBandwidth signs b in place.
func SignBandwidth(key ed25519.PrivateKey, b *ReportBandwidth) {
	nodeauth.SignBandwidth(key, (*nodeauth.ReportBandwidth)(b))
}

// ParsePublicKey decodes a node id (64 lowercase hex characters) and
// refuses keys package edkey refuses: not on the curve, not canonical, or
// of small order (such a key makes signatures meaningless: many messages
// verify under it).
func ParsePublicKey(node string) (ed25519.PublicKey, error) {
	if len(node) != 2*ed25519.PublicKeySize {
		return nil, fmt.Errorf("%w: node id must be %d hex characters, got %d", ErrInvalidKey, 2*ed25519.PublicKeySize, len(node))
	}
	raw, err := hex.DecodeString(node)
	if err != nil || hex.EncodeToString(raw) != node {
		return nil, fmt.Errorf("%w: node id must be lowercase hex", ErrInvalidKey)
	}
	if err := edkey.CheckPublicKey(raw); err != nil {
		return nil, fmt.Errorf("%w: node key %s", ErrInvalidKey, edkey.Reason(err))
	}
	return ed25519.PublicKey(raw), nil
}

// verifyNode checks a node request's signature under its key (already
// checked by ParsePublicKey): 64 bytes, S canonical, and valid.
func verifyNode(node string, pub ed25519.PublicKey, msg, sig []byte) error {
	if err := edkey.CheckSignature(sig); err != nil {
		return fmt.Errorf("%w: signature of node %s %s", ErrUnauthenticated, node, edkey.Reason(err))
	}
	if !ed25519.Verify(pub, msg, sig) {
		return fmt.Errorf("%w: signature does not verify under node %s (sign SignedBytes with the node key)", ErrUnauthenticated, node)
	}
	return nil
}

// Verifier checks a node's hardware report. It must be deterministic for a
// given report: its answer is recorded in the log, not recomputed on replay.
type Verifier interface {
	Verify(node string, gpuModel string, vramMiB uint64, report []byte) string
}

// Unverified is the attestation recorded when nothing was verified.
const Unverified = "unverified"

// NoVerifier records every report as unverified: the node's claims are
// kept as claims, signed by the node, and never presented as attested.
type NoVerifier struct{}

// Verify implements Verifier.
func (NoVerifier) Verify(string, string, uint64, []byte) string { return Unverified }
