// Package nodeauth defines the requests a node signs for hanzod (register,
// heartbeat, bandwidth report, ring failure report, job refusal), what a
// validator signs (the checks it asks for, its verdicts), the job submission a
// submitter signs, and the exact bytes signed for each: the wire's
// signature format, shared by the clients that sign and the orchestrator
// that verifies.
package nodeauth

import (
	"bytes"
	"crypto/ed25519"
	"encoding/binary"
	"encoding/hex"
	"math"
	"time"

	"github.com/zooai/gym/protocol/hardware"
)

// Domain is the signature domain tag of node requests; the request kind and
// a NUL follow it, so a signature for one kind never verifies as another.
// v2 added the audience (Auth.Audience) to every request's signed bytes.
const Domain = "zoo-gym/hanzod/v2/"

// Auth is the signed envelope of a node's request. Node is the node's
// Ed25519 public key in hex; Seq must grow with every request the node
// makes and stay below hanzod's clock in nanoseconds plus its allowed
// lead (docs/orchestrator.md); Timestamp is the node's clock (unix
// milliseconds) and must be within the orchestrator's allowed skew of its
// own; Sig signs the request's SignedBytes.
//
// Audience is the public key of the hanzod the request is for (its
// instance key, which replicas of one deployment share). It is signed but
// not sent: the verifier fills it with its own key, so a request signed
// for one hanzod does not verify at another. Empty only for a hanzod
// without an instance key (tests) and for job submissions (SubmitJob).
type Auth struct {
	Node      string
	Seq       uint64
	Timestamp int64
	Sig       []byte
	Audience  ed25519.PublicKey
}

// SeqLimit is the highest sequence number a signed request may carry at
// hanzod's time now (unix milliseconds): now + maxSkew in nanoseconds,
// plus lead. Clients take sequence numbers from (hanzod's) clock in
// nanoseconds, so this refuses only numbers from nowhere, which would
// otherwise lock their key out (every later number must be higher).
func SeqLimit(now int64, maxSkew, lead time.Duration) uint64 {
	t := now + maxSkew.Milliseconds()
	if t <= 0 {
		return uint64(max(lead, 0))
	}
	if uint64(t) > (math.MaxUint64-uint64(max(lead, 0)))/1e6 {
		return math.MaxUint64
	}
	return uint64(t)*1e6 + uint64(max(lead, 0))
}

// Sign fills a.Sig for the request whose SignedBytes are msg.
func (a *Auth) Sign(key ed25519.PrivateKey, msg []byte) { a.Sig = ed25519.Sign(key, msg) }

// Node requests.
type (
	// Register announces a node and its hardware as the node reports it.
	Register struct {
		Auth
		Address  string
		Region   string
		GPUModel string
		VRAMMiB  uint64
		// Report is an optional hardware attestation document, passed to the
		// orchestrator's verifier.
		Report []byte
		// ProbeAddress (optional) is where the node answers bandwidth
		// probes; signed only when set, so older signatures still verify.
		ProbeAddress string
		// Role (optional) is "validator" for a validator (docs/validators.md),
		// empty for a compute node; signed only when set.
		Role string
		// Hardware (optional) is what the node has: its accelerators, the
		// backends it runs and the types it trains in (package hardware);
		// signed only when not empty, so older signatures still verify.
		Hardware hardware.Report
	}
	// Heartbeat says the node is alive (every 10 s).
	Heartbeat struct {
		Auth
	}
	// ReportBandwidth carries a member's measurements to the other members
	// of a Provisioning job.
	ReportBandwidth struct {
		Auth
		Job   string
		Links []Link
	}
	// ReportSuspect is a ring member's report that a neighbour failed an
	// all-reduce of configuration ConfigID.
	ReportSuspect struct {
		Auth
		Job      string
		ConfigID string
		Suspect  string
		Kind     string // timeout, broken, misbehaved, norm
		Evidence []byte
	}
	// RefuseJob is a node's word that it will not run a job it was
	// assigned, and why (for people: the job's status shows it).
	RefuseJob struct {
		Auth
		Job    string
		Reason string
	}
)

// SubmitJob is a job submission signed by a submitter's key (same format
// as a node key; Auth.Node is the submitter's key in hex). Spec is the
// serialized JobSpec message exactly as sent: the signature covers those
// bytes, not a re-encoding of them.
type SubmitJob struct {
	Auth
	Spec []byte
}

// SignedBytes is what a submitter signs.
func (s SubmitJob) SignedBytes() []byte {
	e := header("submitjob", s.Auth)
	e.str(string(s.Spec))
	return e.Bytes()
}

// SignSubmitJob signs s in place with the submitter's key.
func SignSubmitJob(key ed25519.PrivateKey, s *SubmitJob) {
	s.Node = nodeID(key)
	s.Sign(key, s.SignedBytes())
}

// Link is one measured bandwidth from the reporting node to Peer (the
// JSON form is the orchestrator's event log's).
type Link struct {
	Peer string `json:"peer"`
	Kbps uint64 `json:"kbps"`
}

type enc struct{ bytes.Buffer }

func (e *enc) str(s string) {
	_ = binary.Write(&e.Buffer, binary.BigEndian, uint32(len(s)))
	e.WriteString(s)
}
func (e *enc) u64(v uint64) { _ = binary.Write(&e.Buffer, binary.BigEndian, v) }
func (e *enc) strs(s []string) {
	e.u64(uint64(len(s)))
	for _, v := range s {
		e.str(v)
	}
}

func header(kind string, a Auth) *enc {
	e := &enc{}
	e.WriteString(Domain)
	e.WriteString(kind)
	e.WriteByte(0)
	e.str(string(a.Audience))
	e.str(a.Node)
	e.u64(a.Seq)
	e.u64(uint64(a.Timestamp))
	return e
}

// SignedBytes is what a node signs: the domain tag, the kind and a NUL,
// the audience (hanzod's raw 32-byte key), the node, sequence and
// timestamp, then every field (strings and byte strings as a 4-byte
// big-endian length and the bytes, integers as 8 bytes big-endian) in
// declaration order. The optional fields at the end are written only when
// they or a later one are set; a list is its length as 8 bytes and then its
// elements, an accelerator its name, total and free MiB and compute
// capability.
func (r Register) SignedBytes() []byte {
	e := header("register", r.Auth)
	e.str(r.Address)
	e.str(r.Region)
	e.str(r.GPUModel)
	e.u64(r.VRAMMiB)
	e.str(string(r.Report))
	hw := !r.Hardware.Empty()
	if r.ProbeAddress != "" || r.Role != "" || hw {
		e.str(r.ProbeAddress)
	}
	if r.Role != "" || hw {
		e.str(r.Role)
	}
	if hw {
		e.u64(uint64(len(r.Hardware.Accelerators)))
		for _, a := range r.Hardware.Accelerators {
			e.str(a.Name)
			e.u64(a.TotalMiB)
			e.u64(a.FreeMiB)
			e.str(a.Compute)
		}
		e.strs(r.Hardware.Backends)
		e.strs(r.Hardware.DTypes)
	}
	return e.Bytes()
}

// SignedBytes is what a node signs.
func (h Heartbeat) SignedBytes() []byte { return header("heartbeat", h.Auth).Bytes() }

// SignedBytes is what a node signs.
func (b ReportBandwidth) SignedBytes() []byte {
	e := header("bandwidth", b.Auth)
	e.str(b.Job)
	e.u64(uint64(len(b.Links)))
	for _, l := range b.Links {
		e.str(l.Peer)
		e.u64(l.Kbps)
	}
	return e.Bytes()
}

// SignedBytes is what a node signs.
func (r ReportSuspect) SignedBytes() []byte {
	e := header("suspect", r.Auth)
	e.str(r.Job)
	e.str(r.ConfigID)
	e.str(r.Suspect)
	e.str(r.Kind)
	e.str(string(r.Evidence))
	return e.Bytes()
}

// SignedBytes is what a node signs.
func (r RefuseJob) SignedBytes() []byte {
	e := header("refuse", r.Auth)
	e.str(r.Job)
	e.str(r.Reason)
	return e.Bytes()
}

func nodeID(key ed25519.PrivateKey) string {
	return hex.EncodeToString(key.Public().(ed25519.PublicKey))
}

// SignRegister signs r in place with the node's key (and sets Auth.Node to
// its public key).
func SignRegister(key ed25519.PrivateKey, r *Register) {
	r.Node = nodeID(key)
	r.Sign(key, r.SignedBytes())
}

// SignHeartbeat signs h in place.
func SignHeartbeat(key ed25519.PrivateKey, h *Heartbeat) {
	h.Node = nodeID(key)
	h.Sign(key, h.SignedBytes())
}

// SignBandwidth signs b in place.
func SignBandwidth(key ed25519.PrivateKey, b *ReportBandwidth) {
	b.Node = nodeID(key)
	b.Sign(key, b.SignedBytes())
}

// SignSuspect signs r in place.
func SignSuspect(key ed25519.PrivateKey, r *ReportSuspect) {
	r.Node = nodeID(key)
	r.Sign(key, r.SignedBytes())
}

// SignRefuse signs r in place.
func SignRefuse(key ed25519.PrivateKey, r *RefuseJob) {
	r.Node = nodeID(key)
	r.Sign(key, r.SignedBytes())
}

// Validator requests.
type (
	// ListChecks asks for the checks assigned to the signing validator
	// that it has not answered. It changes nothing, so it carries no
	// sequence number that hanzod must see grow (Seq is signed, not
	// checked); the timestamp bounds its replay.
	ListChecks struct {
		Auth
	}
	// SubmitVerdict is a validator's signed verdict on a check it was
	// assigned: the delta of Subject's slot (Epoch, Step) of Job with file
	// digest Digest, checked from the package Package (a CID). Outcome is
	// pass, fail or unverifiable; Check names the failed check; Figures is
	// the JSON of the measured differences (docs/validators.md).
	SubmitVerdict struct {
		Auth
		Job     string
		Epoch   uint64
		Step    uint64
		Subject string
		Digest  string
		Package string
		Outcome string
		Check   string
		Detail  string
		Figures string
	}
)

// SignedBytes is what a validator signs.
func (l ListChecks) SignedBytes() []byte { return header("listchecks", l.Auth).Bytes() }

// SignedBytes is what a validator signs.
func (v SubmitVerdict) SignedBytes() []byte {
	e := header("verdict", v.Auth)
	e.str(v.Job)
	e.u64(v.Epoch)
	e.u64(v.Step)
	e.str(v.Subject)
	e.str(v.Digest)
	e.str(v.Package)
	e.str(v.Outcome)
	e.str(v.Check)
	e.str(v.Detail)
	e.str(v.Figures)
	return e.Bytes()
}

// SignListChecks signs l in place.
func SignListChecks(key ed25519.PrivateKey, l *ListChecks) {
	l.Node = nodeID(key)
	l.Sign(key, l.SignedBytes())
}

// SignVerdict signs v in place.
func SignVerdict(key ed25519.PrivateKey, v *SubmitVerdict) {
	v.Node = nodeID(key)
	v.Sign(key, v.SignedBytes())
}
