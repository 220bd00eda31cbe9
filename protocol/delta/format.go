package delta

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math/bits"
	"strings"

	"github.com/zooai/gym/model/tensorname"
)

// Sizes of the fixed parts of a file.
const (
	HeaderSize    = 24
	SignatureSize = 64
	PublicKeySize = 32
	TrailerSize   = SignatureSize + PublicKeySize
	ChecksumSize  = 16

	// Version is the only format version this package reads and writes.
	Version = 1
	// MetadataName is the reserved entry that carries the JSON metadata.
	MetadataName = "__metadata__"
)

var magic = [5]byte{'D', 'E', 'L', 'T', 'A'}

// Sentinel errors. Every error returned for a malformed file wraps one of
// these (and truncation also wraps io.ErrUnexpectedEOF), so callers can test
// with errors.Is.
var (
	ErrMagic        = errors.New("delta: not a delta file (bad magic)")
	ErrVersion      = errors.New("delta: unsupported version")
	ErrCompression  = errors.New("delta: unknown compression")
	ErrFlags        = errors.New("delta: reserved flag bits set")
	ErrDType        = errors.New("delta: unknown dtype")
	ErrName         = errors.New("delta: bad tensor name")
	ErrDuplicate    = errors.New("delta: duplicate tensor name")
	ErrShape        = errors.New("delta: bad shape")
	ErrLimit        = errors.New("delta: limit exceeded")
	ErrFrame        = errors.New("delta: malformed compressed frame")
	ErrSize         = errors.New("delta: decoded size does not match shape")
	ErrTrailingData = errors.New("delta: trailing bytes after the last entry")
	ErrChecksum     = errors.New("delta: checksum mismatch")
	ErrSignature    = errors.New("delta: signature does not verify")
	ErrKey          = errors.New("delta: bad key")
	ErrMetadata     = errors.New("delta: bad metadata")
	ErrModified     = errors.New("delta: file changed after it was verified")
	// ErrRatio wraps ErrLimit: the tensors declare more decoded bytes than
	// Limits.MaxRatio times the file's size.
	ErrRatio = fmt.Errorf("%w: decompression ratio", ErrLimit)
	// ErrTruncated wraps io.ErrUnexpectedEOF: errors.Is matches either.
	ErrTruncated = fmt.Errorf("delta: truncated file: %w", io.ErrUnexpectedEOF)
)

// Error describes what is wrong with a file and where. It wraps a sentinel.
type Error struct {
	Offset int64  // file offset of the entry (or field) at fault; -1 when not tied to one
	Entry  int    // index of the entry at fault; -1 when not tied to one
	Name   string // name of the entry, when known
	Err    error  // sentinel (possibly wrapping a cause)
	Detail string // what exactly is wrong
}

func (e *Error) Error() string {
	var where string
	switch {
	case e.Entry >= 0 && e.Name != "":
		where = fmt.Sprintf("entry %d %q at offset %d: ", e.Entry, e.Name, e.Offset)
	case e.Entry >= 0:
		where = fmt.Sprintf("entry %d at offset %d: ", e.Entry, e.Offset)
	case e.Offset >= 0:
		where = fmt.Sprintf("offset %d: ", e.Offset)
	}
	msg := e.Err.Error()
	if e.Detail != "" {
		return msg + ": " + where + e.Detail
	}
	return msg + ": " + where[:max(0, len(where)-2)]
}

func (e *Error) Unwrap() error { return e.Err }

// DType is the element type of a tensor.
type DType uint8

// The four element types of version 1.
const (
	FP32 DType = 0
	FP16 DType = 1
	BF16 DType = 2
	Int8 DType = 3
)

// Size is the width of one element in bytes (0 for an unknown dtype).
func (d DType) Size() int {
	switch d {
	case FP32:
		return 4
	case FP16, BF16:
		return 2
	case Int8:
		return 1
	}
	return 0
}

// Valid reports whether d is one of the version 1 dtypes.
func (d DType) Valid() bool { return d <= Int8 }

func (d DType) String() string {
	switch d {
	case FP32:
		return "fp32"
	case FP16:
		return "fp16"
	case BF16:
		return "bf16"
	case Int8:
		return "int8"
	}
	return fmt.Sprintf("dtype(%d)", uint8(d))
}

// ParseDType maps "fp32", "fp16", "bf16", "int8" to a DType.
func ParseDType(s string) (DType, error) {
	for d := FP32; d <= Int8; d++ {
		if d.String() == s {
			return d, nil
		}
	}
	return 0, fmt.Errorf("%w %q (want fp32, fp16, bf16 or int8)", ErrDType, s)
}

// Compression is the per-tensor frame format of a file.
type Compression uint8

// The compressions of version 1.
const (
	None Compression = 0
	LZ4  Compression = 1
	Zstd Compression = 2
)

// Valid reports whether c is one of the version 1 compressions.
func (c Compression) Valid() bool { return c <= Zstd }

func (c Compression) String() string {
	switch c {
	case None:
		return "none"
	case LZ4:
		return "lz4"
	case Zstd:
		return "zstd"
	}
	return fmt.Sprintf("compression(%d)", uint8(c))
}

// ParseCompression maps "none", "lz4", "zstd" to a Compression.
func ParseCompression(s string) (Compression, error) {
	for c := None; c <= Zstd; c++ {
		if c.String() == s {
			return c, nil
		}
	}
	return 0, fmt.Errorf("%w %q (want none, lz4 or zstd)", ErrCompression, s)
}

// Flags is the header's flag byte.
type Flags uint8

// Flag bits of version 1. All other bits must be zero.
const (
	FlagLoRA Flags = 1 << 0
	FlagFull Flags = 1 << 1

	reservedFlags = ^(FlagLoRA | FlagFull)
)

// Header is the fixed 24-byte start of a file.
type Header struct {
	Version     uint8
	Compression Compression
	Flags       Flags
	Checksum    [ChecksumSize]byte
}

func (h *Header) marshal() [HeaderSize]byte {
	var b [HeaderSize]byte
	copy(b[:5], magic[:])
	b[5] = h.Version
	b[6] = byte(h.Compression)
	b[7] = byte(h.Flags)
	copy(b[8:], h.Checksum[:])
	return b
}

// parseHeader checks the header in the order a reader meets the fields.
func parseHeader(b []byte) (Header, error) {
	var h Header
	if [5]byte(b[:5]) != magic {
		return h, &Error{Offset: 0, Entry: -1, Err: ErrMagic, Detail: fmt.Sprintf("file starts with %q, want \"DELTA\"", b[:5])}
	}
	h.Version = b[5]
	if h.Version != Version {
		return h, &Error{Offset: 5, Entry: -1, Err: ErrVersion, Detail: fmt.Sprintf("version %d, this reader knows version %d", b[5], Version)}
	}
	h.Compression = Compression(b[6])
	if !h.Compression.Valid() {
		return h, &Error{Offset: 6, Entry: -1, Err: ErrCompression, Detail: fmt.Sprintf("compression byte %d (want 0 none, 1 lz4, 2 zstd)", b[6])}
	}
	h.Flags = Flags(b[7])
	if h.Flags&reservedFlags != 0 {
		return h, &Error{Offset: 7, Entry: -1, Err: ErrFlags, Detail: fmt.Sprintf("flags %#02x (only bit 0 LoRA and bit 1 full are defined)", b[7])}
	}
	copy(h.Checksum[:], b[8:HeaderSize])
	return h, nil
}

// numBytes returns numel(shape) × size, or false if it overflows uint64.
func numBytes(shape []uint64, size int) (uint64, bool) {
	n := uint64(size)
	for _, d := range shape {
		hi, lo := bits.Mul64(n, d)
		if hi != 0 {
			return 0, false
		}
		n = lo
	}
	return n, true
}

// extent is numBytes with every 0 dimension counted as 1: what bounds each
// dimension, so that an empty tensor cannot carry dimensions no real tensor
// could have (such as [0, 2^64-1, 2^64-1], whose strides overflow).
func extent(shape []uint64, size int) (uint64, bool) {
	n := uint64(size)
	for _, d := range shape {
		hi, lo := bits.Mul64(n, max(d, 1))
		if hi != 0 {
			return 0, false
		}
		n = lo
	}
	return n, true
}

// CheckName reports whether s may name a tensor (package tensorname has
// the rule: UTF-8, no control characters, no leading '/' or '\\', no ".."
// segment); the error wraps ErrName.
func CheckName(s string) error {
	if err := tensorname.Check(s); err != nil {
		return fmt.Errorf("%w: %s", ErrName, strings.TrimPrefix(err.Error(), tensorname.ErrName.Error()+": "))
	}
	return nil
}

// NumBytes is the decoded byte size of a tensor with this dtype and shape; ok
// is false when it overflows uint64 or the dtype is unknown.
func NumBytes(d DType, shape []uint64) (n uint64, ok bool) {
	if !d.Valid() {
		return 0, false
	}
	return numBytes(shape, d.Size())
}

// appendEntryHeader appends name_len · name · dtype · rank · shape.
func appendEntryHeader(b []byte, name string, d DType, shape []uint64) []byte {
	b = binary.LittleEndian.AppendUint32(b, uint32(len(name)))
	b = append(b, name...)
	b = append(b, byte(d), byte(len(shape)))
	for _, s := range shape {
		b = binary.LittleEndian.AppendUint64(b, s)
	}
	return b
}

// Limits caps what a reader accepts. A zero field means the default of
// DefaultLimits.
type Limits struct {
	MaxNameLen       int    // bytes in one tensor name
	MaxRank          int    // dimensions of one tensor (at most 255)
	MaxTensorBytes   uint64 // decoded bytes of one tensor
	MaxTotalBytes    uint64 // decoded bytes of all tensors together
	MaxTensors       int    // entries in one file
	MaxMetadataBytes int    // bytes of the __metadata__ JSON
	// MaxWindowBytes caps the window of a Zstandard frame (for a
	// single-segment frame, its content size): the history a decoder keeps,
	// hence the memory a streaming read needs whatever the tensor's size.
	MaxWindowBytes uint64
	// MaxRatio caps the decoded bytes of all entries together per byte of
	// the file (ErrRatio): a file of S bytes may declare at most
	// MaxRatio × S. Real tensors barely compress (an fp32 or bf16 adapter
	// packs to 0.9–1.0 of its size, one whose B matrices are still zero to
	// about half), while a compression bomb declares thousands of bytes per
	// stored byte (a Zstandard RLE block is 4 bytes for 128 KiB of zeros).
	// 0 means no ratio bound, and DefaultLimits sets none.
	//
	// Open and Inspect know the size before they read, and so do the
	// one-pass readers (Read, Verify, Stream, StreamData, Skim) given a
	// reader with a Len method (bytes.Reader, strings.Reader): they refuse
	// at the first entry whose declared size takes the total past the
	// bound, before decoding it. Given another reader (a file, a network
	// stream), the one-pass readers learn the size at the end of the file
	// and refuse there: Skim decodes nothing, so skimming first (as gym
	// delta unpack does) refuses a bomb before anything is decoded.
	MaxRatio uint64
}

// DefaultLimits are generous enough for any LoRA or full delta of a 70B-class
// model shard and small enough that a hostile file cannot exhaust a server.
func DefaultLimits() Limits {
	return Limits{
		MaxNameLen:       1024,
		MaxRank:          8,
		MaxTensorBytes:   4 << 30,
		MaxTotalBytes:    64 << 30,
		MaxTensors:       1 << 20,
		MaxMetadataBytes: 1 << 20,
		// libzstd's own default cap (ZSTD_WINDOWLOG_LIMIT_DEFAULT = 27):
		// every frame zstd writes without --long or --ultra fits. This
		// package writes windows of at most 8 MiB.
		MaxWindowBytes: 128 << 20,
	}
}

func (l Limits) withDefaults() Limits {
	d := DefaultLimits()
	if l.MaxNameLen <= 0 {
		l.MaxNameLen = d.MaxNameLen
	}
	if l.MaxRank <= 0 {
		l.MaxRank = d.MaxRank
	}
	l.MaxRank = min(l.MaxRank, 255)
	if l.MaxTensorBytes == 0 {
		l.MaxTensorBytes = d.MaxTensorBytes
	}
	if l.MaxTotalBytes == 0 {
		l.MaxTotalBytes = d.MaxTotalBytes
	}
	if l.MaxTensors <= 0 {
		l.MaxTensors = d.MaxTensors
	}
	if l.MaxMetadataBytes <= 0 {
		l.MaxMetadataBytes = d.MaxMetadataBytes
	}
	if l.MaxWindowBytes == 0 {
		l.MaxWindowBytes = d.MaxWindowBytes
	}
	return l
}
