package ring

import (
	"crypto/ed25519"
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/zooai/gym/keys/edkey"
)

// Violation names what was wrong with a dropped frame.
type Violation uint8

const (
	Malformed     Violation = iota + 1 // undecodable frame: bad length, version, kind, size
	StaleConfig                        // another configuration id (an old ring, or a future one)
	WrongSender                        // sender is not this node's predecessor
	WrongReceiver                      // receiver is not this node
	BadSignature                       // signature does not verify under the predecessor's key
	WrongCall                          // signed for another epoch, step or call sequence: a replay
	WrongRound                         // phase, round, chunk or segment outside this call's schedule
	WrongSize                          // total, offset, count or wire format not the expected ones
	Duplicate                          // a segment already applied in this call
	Corrupt                            // payload does not hash to the signed hash
	NormExceeded                       // partial sum's norm above contributions × clip bound
)

var violationNames = [...]string{
	Malformed: "malformed", StaleConfig: "stale-config", WrongSender: "wrong-sender",
	WrongReceiver: "wrong-receiver", BadSignature: "bad-signature", WrongCall: "wrong-call",
	WrongRound: "wrong-round", WrongSize: "wrong-size", Duplicate: "duplicate",
	Corrupt: "corrupt", NormExceeded: "norm-exceeded",
}

func (v Violation) String() string {
	if int(v) < len(violationNames) && violationNames[v] != "" {
		return violationNames[v]
	}
	return fmt.Sprintf("violation(%d)", uint8(v))
}

// Evidence describes one dropped frame. Signed is true when the frame's
// signature verified under Claimed's key: then SignedBytes and Signature
// prove that Claimed sent it (check with ed25519.Verify). Otherwise the
// frame only shows what arrived on the link from Suspect.
type Evidence struct {
	Kind        Violation
	Suspect     int    // ring index of the node the link connects to (the predecessor)
	SuspectID   string // its member id
	Claimed     int    // sender index written in the frame, -1 if undecodable
	Signed      bool
	SignedBytes []byte // what the signature covers (nil when undecodable)
	Signature   []byte
	Payload     []byte // kept for NormExceeded, where it is the proof
	ConfigID    ID     // the receiver's configuration
	Part        string // the sub-ring of a two-level call ("group K", "shard S"); "" in a flat ring
	Seq         uint64 // the receiver's call
	Detail      string
}

// Reporter receives evidence. Report is called on the receiving goroutine:
// keep it short (queue the evidence, do not block).
type Reporter interface {
	Report(Evidence)
}

// ReporterFunc adapts a function to Reporter.
type ReporterFunc func(Evidence)

// Report calls f(e).
func (f ReporterFunc) Report(e Evidence) { f(e) }

// Errors a failed AllReduce wraps. A *PeerError carries the suspect.
var (
	ErrTimeout    = errors.New("ring: neighbour silent past the timeout")
	ErrBroken     = errors.New("ring: connection broken")
	ErrMisbehaved = errors.New("ring: neighbour sent invalid frames")
	ErrClosed     = errors.New("ring: communicator closed")
	// ErrStalled ends a call when this process itself did not run for half
	// the timeout or more (stopped, paused, starved): its neighbours have
	// given up on it or soon will, and none of them is to blame. Not a
	// *PeerError; the caller waits for the configuration the orchestrator
	// publishes and retries.
	ErrStalled = errors.New("ring: this node itself did not run (stopped, paused or starved)")
	ErrSize    = errors.New("ring: buffer too large")
	ErrBuffers = errors.New("ring: dst and src must have the same length and must not overlap")
)

// PeerError ends a call that failed because of a neighbour. The caller
// reports Suspect to the orchestrator, installs the configuration it
// publishes (Reconfigure) and retries.
type PeerError struct {
	Suspect   int    // ring index in the failed configuration
	SuspectID string // member id
	// Part is the sub-ring of a two-level call that failed ("group K",
	// "shard S"; "" in a flat ring). Suspect is then the index in the
	// two-level configuration (its Members), not in the sub-ring.
	Part  string
	Phase Phase // where this node was when it gave up
	Round int
	Err   error // ErrTimeout, ErrBroken or ErrMisbehaved, possibly wrapping the cause
}

func (e *PeerError) Error() string {
	if e.Part != "" {
		return fmt.Sprintf("ring: suspect %s (index %d) in %s during %s round %d: %v", e.SuspectID, e.Suspect, e.Part, e.Phase, e.Round, e.Err)
	}
	return fmt.Sprintf("ring: suspect %s (index %d) during %s round %d: %v", e.SuspectID, e.Suspect, e.Phase, e.Round, e.Err)
}

func (e *PeerError) Unwrap() error { return e.Err }

// SignedFrame is what a signed piece of evidence proves, once OpenEvidence
// has checked it: the signer sent, for Job, a frame with header Header
// (its Sig is the checked signature) whose payload is the one given.
type SignedFrame struct {
	Job     string
	Header  Header
	NormSq  float64 // squared L2 norm of the payload's elements
	Payload []byte
}

// ErrEvidence is wrapped by every reason OpenEvidence refuses evidence.
var ErrEvidence = errors.New("ring: evidence does not prove what it claims")

// OpenEvidence checks a frame's evidence as a third party (an
// orchestrator) can: signedBytes (Evidence.SignedBytes) must be a version-2
// segment's signed part, signature must verify under the signer's public
// key, and payload must hash to the signed hash and hold the header's
// count of elements. Nothing else is trusted: the returned header is read
// from the signed bytes.
func OpenEvidence(signer ed25519.PublicKey, signedBytes, signature, payload []byte) (SignedFrame, error) {
	var f SignedFrame
	if err := edkey.CheckPublicKey(signer); err != nil {
		return f, fmt.Errorf("%w: signer's key %s", ErrEvidence, edkey.Reason(err))
	}
	if err := edkey.CheckSignature(signature); err != nil {
		return f, fmt.Errorf("%w: signature %s", ErrEvidence, edkey.Reason(err))
	}
	le := binary.LittleEndian
	tag := len(SignTag)
	if len(signedBytes) < tag+4 || string(signedBytes[:tag]) != SignTag {
		return f, fmt.Errorf("%w: not a version-%d ring segment signature", ErrEvidence, Version)
	}
	jobLen := int(le.Uint32(signedBytes[tag:]))
	if jobLen > len(signedBytes) || len(signedBytes) != tag+4+jobLen+signedEnd-signedStart {
		return f, fmt.Errorf("%w: signed bytes of the wrong length", ErrEvidence)
	}
	if !ed25519.Verify(signer, signedBytes, signature) {
		return f, fmt.Errorf("%w: the signature does not verify under the signer's key", ErrEvidence)
	}
	f.Job = string(signedBytes[tag+4 : tag+4+jobLen])
	// Rebuild the frame from the signed header fields and the payload, and
	// decode it strictly.
	fr := make([]byte, HeaderSize+len(payload))
	le.PutUint32(fr, uint32(len(fr)-4))
	copy(fr[signedStart:signedEnd], signedBytes[tag+4+jobLen:])
	copy(fr[offSig:HeaderSize], signature)
	copy(fr[HeaderSize:], payload)
	h, p, err := DecodeFrame(fr, len(fr))
	if err != nil {
		return f, fmt.Errorf("%w: %w", ErrEvidence, err)
	}
	if PayloadHash(p) != h.Hash {
		return f, fmt.Errorf("%w: the payload does not hash to the signed hash", ErrEvidence)
	}
	f.Header, f.Payload, f.NormSq = h, p, SumSquares(h.Wire, p)
	return f, nil
}
