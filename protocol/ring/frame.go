package ring

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
)

// Protocol constants. The frame layout (little-endian) is:
//
//	off  size  field
//	  0     4  length: bytes after this field (HeaderSize-4+payload)
//	  4     1  version (2)
//	  5     1  kind (1 = segment)
//	  6     1  wire dtype of the payload (0 fp32, 1 bf16)
//	  7     1  phase (0 scatter-reduce, 1 all-gather; 2, 3 the same in a
//	           two-level call's shard ring)
//	  8     4  round within the phase, 0..N-2
//	 12     4  chunk index, 0..N-1
//	 16     4  segment index within the chunk
//	 20     4  sender's ring index
//	 24     4  receiver's ring index
//	 28     4  count: elements in the payload
//	 32     8  epoch
//	 40     8  step (the caller's training step)
//	 48     8  seq (the call's sequence number within the configuration)
//	 56     8  total: elements of the whole vector
//	 64     8  offset: element offset of the payload in the vector
//	 72    32  configuration id
//	104    32  BLAKE3-256 of the payload, PayloadHash (zero when authentication is off)
//	136    64  Ed25519 signature (zero when authentication is off)
//	200     -  payload: count × dtype size bytes
//
// The signature covers SignTag ‖ u32 len(job) ‖ job ‖ frame[4:136]: every
// header field but the length prefix and the signature itself, which
// includes the payload hash. Version 1 was the same layout with SHA-256 as
// the payload hash; the version and the tag changed with the hash, so a
// version-1 signature never verifies as a version-2 one.
const (
	Version    = 2
	HeaderSize = 200
	SignTag    = "zoo-gym/ring/segment/v2\x00"
	configTag  = "zoo-gym/ring/config/v2"
	// twoLevelTag and partTag start the ids of a two-level configuration
	// and of its sub-rings, so no flat configuration shares their id.
	twoLevelTag = "zoo-gym/ring/config/v2/two-level"
	partTag     = "zoo-gym/ring/config/v2/part"

	kindSegment = 1

	offVersion  = 4
	offHash     = 104
	offSig      = 136
	signedStart = 4
	signedEnd   = offSig
)

// Wire is the element type on the wire.
type Wire uint8

const (
	FP32 Wire = 0 // 4 bytes per element, exact
	BF16 Wire = 1 // 2 bytes per element; sums are still accumulated in float32
)

func (w Wire) String() string {
	switch w {
	case FP32:
		return "fp32"
	case BF16:
		return "bf16"
	}
	return fmt.Sprintf("wire(%d)", uint8(w))
}

// Size returns the bytes per element, 0 for an unknown Wire.
func (w Wire) Size() int {
	switch w {
	case FP32:
		return 4
	case BF16:
		return 2
	}
	return 0
}

// ParseWire parses "fp32" or "bf16".
func ParseWire(s string) (Wire, error) {
	switch s {
	case "fp32":
		return FP32, nil
	case "bf16":
		return BF16, nil
	}
	return 0, fmt.Errorf("ring: unknown wire format %q (want fp32 or bf16)", s)
}

// Phase is the half of the algorithm a frame belongs to. A flat ring and
// a two-level call's group rings use ScatterReduce and AllGather; its
// shard rings (across groups) use CrossScatter and CrossGather, so that a
// frame says by itself whether its partial sum holds one contribution per
// member it passed or a whole group's (the norm bound, Contributions).
type Phase uint8

const (
	ScatterReduce Phase = 0
	AllGather     Phase = 1
	CrossScatter  Phase = 2 // scatter-reduce of a shard ring
	CrossGather   Phase = 3 // all-gather of a shard ring
)

// gather reports whether p is an all-gather phase.
func (p Phase) gather() bool { return p == AllGather || p == CrossGather }

func (p Phase) String() string {
	switch p {
	case ScatterReduce:
		return "scatter-reduce"
	case AllGather:
		return "all-gather"
	case CrossScatter:
		return "cross scatter-reduce"
	case CrossGather:
		return "cross all-gather"
	}
	return fmt.Sprintf("phase(%d)", uint8(p))
}

// ErrFrame is wrapped by every error about a malformed frame.
var ErrFrame = errors.New("ring: malformed frame")

// ErrFrameTooLarge is returned for a length prefix above the cap.
var ErrFrameTooLarge = errors.New("ring: frame too large")

// Header is the decoded fixed part of a frame.
type Header struct {
	Wire     Wire
	Phase    Phase
	Round    uint32
	Chunk    uint32
	Segment  uint32
	Sender   uint32
	Receiver uint32
	Count    uint32
	Epoch    uint64
	Step     uint64
	Seq      uint64
	Total    uint64
	Offset   uint64
	ConfigID ID
	Hash     [32]byte
	Sig      [64]byte
}

// DecodeFrame parses a whole frame (length prefix included) strictly:
// known version, kind, wire and phase; the length prefix equal to len(b)-4,
// at most maxFrame bytes in all; the payload exactly Count elements. It
// returns the header and the payload, which aliases b.
func DecodeFrame(b []byte, maxFrame int) (Header, []byte, error) {
	var h Header
	if len(b) < HeaderSize {
		return h, nil, fmt.Errorf("%w: %d bytes, header is %d: %w", ErrFrame, len(b), HeaderSize, io.ErrUnexpectedEOF)
	}
	if len(b) > maxFrame {
		return h, nil, fmt.Errorf("%w: %d bytes, cap %d", ErrFrameTooLarge, len(b), maxFrame)
	}
	le := binary.LittleEndian
	if n := le.Uint32(b[0:]); uint64(n) != uint64(len(b)-4) {
		return h, nil, fmt.Errorf("%w: length prefix %d, frame has %d bytes after it", ErrFrame, n, len(b)-4)
	}
	if b[offVersion] != Version {
		return h, nil, fmt.Errorf("%w: version %d, want %d", ErrFrame, b[offVersion], Version)
	}
	if b[5] != kindSegment {
		return h, nil, fmt.Errorf("%w: unknown kind %d", ErrFrame, b[5])
	}
	h.Wire = Wire(b[6])
	if h.Wire.Size() == 0 {
		return h, nil, fmt.Errorf("%w: unknown wire dtype %d", ErrFrame, b[6])
	}
	h.Phase = Phase(b[7])
	if h.Phase > CrossGather {
		return h, nil, fmt.Errorf("%w: unknown phase %d", ErrFrame, b[7])
	}
	h.Round = le.Uint32(b[8:])
	h.Chunk = le.Uint32(b[12:])
	h.Segment = le.Uint32(b[16:])
	h.Sender = le.Uint32(b[20:])
	h.Receiver = le.Uint32(b[24:])
	h.Count = le.Uint32(b[28:])
	h.Epoch = le.Uint64(b[32:])
	h.Step = le.Uint64(b[40:])
	h.Seq = le.Uint64(b[48:])
	h.Total = le.Uint64(b[56:])
	h.Offset = le.Uint64(b[64:])
	copy(h.ConfigID[:], b[72:104])
	copy(h.Hash[:], b[offHash:offSig])
	copy(h.Sig[:], b[offSig:HeaderSize])
	payload := b[HeaderSize:]
	if uint64(len(payload)) != uint64(h.Count)*uint64(h.Wire.Size()) {
		return h, nil, fmt.Errorf("%w: payload %d bytes, count %d × %d", ErrFrame, len(payload), h.Count, h.Wire.Size())
	}
	if h.Offset > h.Total || uint64(h.Count) > h.Total-h.Offset {
		return h, nil, fmt.Errorf("%w: elements [%d, %d+%d) outside a vector of %d", ErrFrame, h.Offset, h.Offset, h.Count, h.Total)
	}
	return h, payload, nil
}

// putHeader writes h (without signature) into the first HeaderSize bytes of
// b, with the length prefix for a payload of payloadLen bytes.
func putHeader(b []byte, h *Header, payloadLen int) {
	le := binary.LittleEndian
	le.PutUint32(b[0:], uint32(HeaderSize-4+payloadLen))
	b[4] = Version
	b[5] = kindSegment
	b[6] = byte(h.Wire)
	b[7] = byte(h.Phase)
	le.PutUint32(b[8:], h.Round)
	le.PutUint32(b[12:], h.Chunk)
	le.PutUint32(b[16:], h.Segment)
	le.PutUint32(b[20:], h.Sender)
	le.PutUint32(b[24:], h.Receiver)
	le.PutUint32(b[28:], h.Count)
	le.PutUint64(b[32:], h.Epoch)
	le.PutUint64(b[40:], h.Step)
	le.PutUint64(b[48:], h.Seq)
	le.PutUint64(b[56:], h.Total)
	le.PutUint64(b[64:], h.Offset)
	copy(b[72:104], h.ConfigID[:])
	copy(b[offHash:offSig], h.Hash[:])
	copy(b[offSig:HeaderSize], h.Sig[:])
}

// EncodeFrame returns a new frame for h and payload (h.Sig as given). It is
// for tests and tools; the communicator encodes in place without allocating.
func EncodeFrame(h Header, payload []byte) []byte {
	b := make([]byte, HeaderSize+len(payload))
	putHeader(b, &h, len(payload))
	copy(b[HeaderSize:], payload)
	return b
}

// signingPrefix is SignTag ‖ u32 len(job) ‖ job.
func signingPrefix(job string) []byte {
	p := make([]byte, 0, len(SignTag)+4+len(job)+signedEnd-signedStart)
	p = append(p, SignTag...)
	p = binary.LittleEndian.AppendUint32(p, uint32(len(job)))
	return append(p, job...)
}

// SignedBytes returns the bytes a frame's signature covers, given the job.
// Anyone holding a frame and the sender's public key can check evidence.
func SignedBytes(job string, frame []byte) []byte {
	if len(frame) < HeaderSize {
		return nil
	}
	return append(signingPrefix(job), frame[signedStart:signedEnd]...)
}
