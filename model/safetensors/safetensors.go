// Package safetensors reads and writes the Hugging Face safetensors tensor
// file format.
//
// A safetensors file is laid out as
//
//	[8 bytes]  N, a little-endian uint64: the length of the header
//	[N bytes]  a UTF-8 JSON object (the header)
//	[rest]     the data buffer
//
// The header maps each tensor name to an object
//
//	{"dtype": "F32", "shape": [2, 3], "data_offsets": [begin, end]}
//
// whose offsets are relative to the start of the data buffer, plus an
// optional "__metadata__" entry holding an object of string to string.
//
// # Strictness
//
// Files are treated as hostile input. [Parse] reads only the header (through
// an [io.ReaderAt], so a multi-gigabyte checkpoint is never loaded as a
// whole), caps how much it is willing to allocate ([Limits]), and rejects
// anything the Rust reference implementation rejects plus a few things it
// silently accepts:
//
//   - the header length must fit the configured cap and the file;
//   - the header must be valid UTF-8, start with '{' and be exactly one JSON
//     object, optionally followed by whitespace (the writer pads with spaces);
//   - duplicate keys (tensor names, entry fields, metadata keys) are errors
//     rather than "last one wins";
//   - every tensor entry has exactly the fields dtype, shape and data_offsets
//     with the right JSON types; numbers must be non-negative integers
//     written without fraction or exponent;
//   - the dtype must be known, the rank bounded, and shape × dtype size must
//     neither overflow nor differ from end-begin;
//   - the tensors must tile the data buffer exactly: no overlaps, no holes,
//     and no trailing bytes after the last tensor (zero-size tensors are
//     allowed anywhere they do not fall inside another tensor);
//   - lone UTF-16 surrogates in \u escapes are rejected, as serde_json does.
//
// Every error returned by this package starts with "safetensors: " and wraps
// one of the exported sentinel errors (use [errors.Is]); errors about a
// particular tensor name it.
//
// # Why not a third-party library
//
// The available Go implementations read the whole file (or whole header)
// into memory without caps and decode the header with encoding/json into
// maps, which silently accepts duplicate keys and replaces invalid input.
// We need hard allocation caps, duplicate detection, and streaming tensor
// reads from an io.ReaderAt (an *os.File, a section of an archive, an HTTP
// range reader), and the format is small enough that a careful
// standard-library-only implementation is the safer dependency.
package safetensors

import (
	"bytes"
	"cmp"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"math/bits"
	"slices"
	"strconv"
	"strings"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/zooai/gym/model/tensorname"
)

// Sentinel errors. Every error returned by Parse, ReadTensor and Write wraps
// exactly one of these (truncation errors additionally wrap
// io.ErrUnexpectedEOF).
var (
	// ErrTruncated: the file is shorter than 8 bytes, shorter than 8+N, or
	// the reader returned fewer bytes than the size promised. Always also
	// wraps io.ErrUnexpectedEOF.
	ErrTruncated = errors.New("safetensors: file truncated")
	// ErrHeaderTooLarge: the header length exceeds Limits.MaxHeaderBytes.
	ErrHeaderTooLarge = errors.New("safetensors: header too large")
	// ErrInvalidHeader: the header is not valid UTF-8 or not a single valid
	// JSON object.
	ErrInvalidHeader = errors.New("safetensors: invalid header")
	// ErrInvalidHeaderStart: the header does not start with '{'.
	ErrInvalidHeaderStart = errors.New("safetensors: header does not start with '{'")
	// ErrInvalidTensorInfo: a tensor entry is not an object, lacks a field,
	// has an unknown or duplicate field, or a field has the wrong JSON type.
	ErrInvalidTensorInfo = errors.New("safetensors: invalid tensor entry")
	// ErrUnknownDType: the dtype is not one DTypeSize knows.
	ErrUnknownDType = errors.New("safetensors: unknown dtype")
	// ErrRankTooLarge: the shape has more than Limits.MaxRank dimensions.
	ErrRankTooLarge = errors.New("safetensors: rank too large")
	// ErrShapeOverflow: the element count or byte size of a tensor does not
	// fit in 64 bits.
	ErrShapeOverflow = errors.New("safetensors: shape overflows")
	// ErrInvalidOffsets: begin > end, an offset does not fit in int64, or
	// end lies beyond the data buffer.
	ErrInvalidOffsets = errors.New("safetensors: invalid data offsets")
	// ErrSizeMismatch: end-begin (or len(Data) when writing) differs from
	// the number of elements times the dtype size.
	ErrSizeMismatch = errors.New("safetensors: size does not match shape and dtype")
	// ErrOverlap: two tensors share bytes of the data buffer.
	ErrOverlap = errors.New("safetensors: overlapping tensors")
	// ErrHole: some bytes of the data buffer belong to no tensor.
	ErrHole = errors.New("safetensors: data buffer not fully covered")
	// ErrTooManyTensors: more than Limits.MaxTensors tensor entries.
	ErrTooManyTensors = errors.New("safetensors: too many tensors")
	// ErrInvalidMetadata: __metadata__ is not an object of strings, appears
	// twice, or has duplicate keys (or, when writing, is not valid UTF-8).
	ErrInvalidMetadata = errors.New("safetensors: invalid __metadata__")
	// ErrEmptyName: a tensor has an empty name.
	ErrEmptyName = errors.New("safetensors: empty tensor name")
	// ErrDuplicateName: two tensors have the same name.
	ErrDuplicateName = errors.New("safetensors: duplicate tensor name")
	// ErrInvalidName: a tensor name breaks package tensorname's rule
	// (control characters, a leading '/' or '\\', a ".." segment), or (Write
	// only) is not valid UTF-8 or is the reserved "__metadata__".
	ErrInvalidName = errors.New("safetensors: invalid tensor name")
)

const metadataKey = "__metadata__"

// Limits bounds the resources Parse is willing to spend on a header. A zero
// (or negative) field means "use the default" from DefaultLimits.
type Limits struct {
	// MaxHeaderBytes caps the JSON header length N (default 100 MiB, the
	// order of magnitude of the Rust reference's 100 MB cap).
	MaxHeaderBytes int64
	// MaxTensors caps the number of tensor entries (default 1<<20).
	MaxTensors int
	// MaxRank caps the number of dimensions of a tensor (default 16).
	MaxRank int
}

// DefaultLimits returns the limits used for zero fields of a Limits.
func DefaultLimits() Limits {
	return Limits{
		MaxHeaderBytes: 100 << 20,
		MaxTensors:     1 << 20,
		MaxRank:        16,
	}
}

func (l Limits) withDefaults() Limits {
	d := DefaultLimits()
	if l.MaxHeaderBytes <= 0 {
		l.MaxHeaderBytes = d.MaxHeaderBytes
	}
	if l.MaxTensors <= 0 {
		l.MaxTensors = d.MaxTensors
	}
	if l.MaxRank <= 0 {
		l.MaxRank = d.MaxRank
	}
	return l
}

// TensorInfo describes one tensor of a parsed file.
type TensorInfo struct {
	Name  string
	DType string
	Shape []uint64
	// Begin and End are byte offsets within the data buffer (not the file);
	// the tensor occupies [Begin, End).
	Begin, End int64
}

// Size returns the tensor's size in bytes (End - Begin).
func (t TensorInfo) Size() int64 { return t.End - t.Begin }

// File is the parsed header of a safetensors file.
type File struct {
	// Metadata is the "__metadata__" object; nil when absent.
	Metadata map[string]string
	// Tensors are sorted by Begin (ties broken by End, then Name), i.e. in
	// the order their data appears in the file.
	Tensors []TensorInfo
	// DataOffset is the absolute file offset of the data buffer (8+N).
	DataOffset int64

	// Set by Parse: the data buffer length, used to bound ReadTensor.
	dataLen int64
	bounded bool
	index   map[string]int
}

// Lookup returns the tensor with the given name.
func (f *File) Lookup(name string) (TensorInfo, bool) {
	if i, ok := f.index[name]; ok && i < len(f.Tensors) && f.Tensors[i].Name == name {
		return f.Tensors[i], true
	}
	for _, t := range f.Tensors {
		if t.Name == name {
			return t, true
		}
	}
	return TensorInfo{}, false
}

var dtypeSizes = map[string]int{
	"F64": 8, "F32": 4, "F16": 2, "BF16": 2,
	"I64": 8, "I32": 4, "I16": 2, "I8": 1,
	"U64": 8, "U32": 4, "U16": 2, "U8": 1,
	"BOOL": 1, "F8_E4M3": 1, "F8_E5M2": 1,
}

// dtypeNames maps each known dtype to itself, to intern parsed names.
var dtypeNames = func() map[string]string {
	m := make(map[string]string, len(dtypeSizes))
	for k := range dtypeSizes {
		m[k] = k
	}
	return m
}()

// DTypeSize returns the size in bytes of one element of dtype, and whether
// the dtype is known. Known dtypes: F64 F32 F16 BF16 I64 I32 I16 I8 U64 U32
// U16 U8 BOOL F8_E4M3 F8_E5M2. Names are case-sensitive, as in the format.
func DTypeSize(dtype string) (int, bool) {
	n, ok := dtypeSizes[dtype]
	return n, ok
}

// byteSize returns numel(shape)*DTypeSize(dtype) with overflow checking.
func byteSize(name, dtype string, shape []uint64) (uint64, error) {
	esize, ok := DTypeSize(dtype)
	if !ok {
		return 0, fmt.Errorf("%w: tensor %q: %q", ErrUnknownDType, name, dtype)
	}
	numel := uint64(1)
	for _, d := range shape {
		hi, lo := bits.Mul64(numel, d)
		if hi != 0 {
			return 0, fmt.Errorf("%w: tensor %q: shape %v has more than 2^64 elements", ErrShapeOverflow, name, shape)
		}
		numel = lo
	}
	hi, lo := bits.Mul64(numel, uint64(esize))
	if hi != 0 {
		return 0, fmt.Errorf("%w: tensor %q: %d elements of %s exceed 2^64 bytes", ErrShapeOverflow, name, numel, dtype)
	}
	// Every dimension is bounded, even beside a 0: with zeros counted as 1
	// the tensor must still fit in a file ([0, 2^64-1, 2^64-1] does not).
	span := uint64(esize)
	for _, d := range shape {
		hi, s := bits.Mul64(span, max(d, 1))
		if hi != 0 || s > math.MaxInt64 {
			return 0, fmt.Errorf("%w: tensor %q: shape %v of %s spans more than 2^63-1 bytes with its zeros counted as 1", ErrShapeOverflow, name, shape, dtype)
		}
		span = s
	}
	return lo, nil
}

// checkName applies package tensorname's rule.
func checkName(name string) error {
	if err := tensorname.Check(name); err != nil {
		return fmt.Errorf("%w: %s", ErrInvalidName, strings.TrimPrefix(err.Error(), tensorname.ErrName.Error()+": "))
	}
	return nil
}

// readFullAt reads len(buf) bytes at off, mapping short reads to
// ErrTruncated/io.ErrUnexpectedEOF.
func readFullAt(r io.ReaderAt, buf []byte, off int64, what string) error {
	n, err := r.ReadAt(buf, off)
	if n == len(buf) {
		return nil // io.ReaderAt may return io.EOF with a full read
	}
	if err == nil || err == io.EOF {
		return fmt.Errorf("%w: reading %s: got %d of %d bytes at offset %d: %w",
			ErrTruncated, what, n, len(buf), off, io.ErrUnexpectedEOF)
	}
	return fmt.Errorf("safetensors: reading %s at offset %d: %w", what, off, err)
}

// Parse reads and validates the header of a safetensors file of the given
// size. It never allocates more than the header length (capped by
// lim.MaxHeaderBytes and by size) plus O(number of tensors). Zero fields of
// lim take their defaults. Parse does not read the data buffer; it trusts
// size to be the real size of the file behind r.
func Parse(r io.ReaderAt, size int64, lim Limits) (*File, error) {
	lim = lim.withDefaults()
	if size < 8 {
		return nil, fmt.Errorf("%w: file is %d bytes, need at least 8: %w", ErrTruncated, size, io.ErrUnexpectedEOF)
	}
	var pre [8]byte
	if err := readFullAt(r, pre[:], 0, "header length"); err != nil {
		return nil, err
	}
	n := binary.LittleEndian.Uint64(pre[:])
	if n > uint64(lim.MaxHeaderBytes) {
		return nil, fmt.Errorf("%w: header length %d exceeds limit %d", ErrHeaderTooLarge, n, lim.MaxHeaderBytes)
	}
	if n > uint64(size-8) {
		return nil, fmt.Errorf("%w: header length %d exceeds the %d bytes after the length prefix: %w",
			ErrTruncated, n, size-8, io.ErrUnexpectedEOF)
	}
	header := make([]byte, n)
	if err := readFullAt(r, header, 8, "header"); err != nil {
		return nil, err
	}
	dataOffset := 8 + int64(n)
	f, err := parseHeader(header, size-dataOffset, lim)
	if err != nil {
		return nil, err
	}
	f.DataOffset = dataOffset
	return f, nil
}

// parseHeader validates the JSON header against a data buffer of dataLen
// bytes.
func parseHeader(header []byte, dataLen int64, lim Limits) (*File, error) {
	if len(header) == 0 || header[0] != '{' {
		return nil, fmt.Errorf("%w", ErrInvalidHeaderStart)
	}
	if !utf8.Valid(header) {
		return nil, fmt.Errorf("%w: not valid UTF-8", ErrInvalidHeader)
	}
	p := &parser{b: header}
	f := &File{dataLen: dataLen, bounded: true}
	seen := make(map[string]int)
	sawMeta := false

	err := p.members("", func(key []byte) error {
		name := string(key)
		if name == metadataKey {
			if sawMeta {
				return fmt.Errorf("%w: appears twice", ErrInvalidMetadata)
			}
			sawMeta = true
			m, err := p.metadata()
			f.Metadata = m
			return err
		}
		if name == "" {
			return fmt.Errorf("%w: tensor \"\" (header entry %d)", ErrEmptyName, len(f.Tensors)+1)
		}
		if err := checkName(name); err != nil {
			return err
		}
		if _, dup := seen[name]; dup {
			return fmt.Errorf("%w: tensor %q", ErrDuplicateName, name)
		}
		if len(f.Tensors) >= lim.MaxTensors {
			return fmt.Errorf("%w: more than %d (at tensor %q)", ErrTooManyTensors, lim.MaxTensors, name)
		}
		t, err := p.tensor(name, lim)
		if err != nil {
			return err
		}
		if err := checkInfo(t, dataLen); err != nil {
			return err
		}
		seen[name] = len(f.Tensors)
		f.Tensors = append(f.Tensors, t)
		return nil
	})
	if err != nil {
		return nil, err
	}
	p.ws()
	if p.i != len(p.b) {
		return nil, p.syntax("trailing data after header object")
	}

	slices.SortFunc(f.Tensors, func(a, b TensorInfo) int {
		if c := cmp.Compare(a.Begin, b.Begin); c != 0 {
			return c
		}
		if c := cmp.Compare(a.End, b.End); c != 0 {
			return c
		}
		return cmp.Compare(a.Name, b.Name)
	})
	var pos int64
	prev := ""
	for i, t := range f.Tensors {
		switch {
		case t.Begin < pos:
			return nil, fmt.Errorf("%w: tensor %q [%d,%d) overlaps tensor %q ending at %d",
				ErrOverlap, t.Name, t.Begin, t.End, prev, pos)
		case t.Begin > pos:
			return nil, fmt.Errorf("%w: %d unused bytes before tensor %q at [%d,%d)",
				ErrHole, t.Begin-pos, t.Name, pos, t.Begin)
		}
		pos = t.End
		prev = t.Name
		seen[t.Name] = i
	}
	if pos != dataLen {
		if prev == "" {
			return nil, fmt.Errorf("%w: %d bytes of data but no tensors", ErrHole, dataLen)
		}
		return nil, fmt.Errorf("%w: %d unused bytes after last tensor %q", ErrHole, dataLen-pos, prev)
	}
	f.index = seen
	return f, nil
}

// checkInfo validates one tensor's dtype, shape and offsets against a data
// buffer of dataLen bytes (dataLen < 0: unbounded).
func checkInfo(t TensorInfo, dataLen int64) error {
	nbytes, err := byteSize(t.Name, t.DType, t.Shape)
	if err != nil {
		return err
	}
	if t.Begin < 0 || t.End < 0 {
		return fmt.Errorf("%w: tensor %q: negative offset [%d,%d)", ErrInvalidOffsets, t.Name, t.Begin, t.End)
	}
	if t.Begin > t.End {
		return fmt.Errorf("%w: tensor %q: begin %d > end %d", ErrInvalidOffsets, t.Name, t.Begin, t.End)
	}
	if dataLen >= 0 && t.End > dataLen {
		return fmt.Errorf("%w: tensor %q: end %d beyond data buffer of %d bytes", ErrInvalidOffsets, t.Name, t.End, dataLen)
	}
	if uint64(t.End-t.Begin) != nbytes {
		return fmt.Errorf("%w: tensor %q: %s%v needs %d bytes, offsets [%d,%d) give %d",
			ErrSizeMismatch, t.Name, t.DType, t.Shape, nbytes, t.Begin, t.End, t.End-t.Begin)
	}
	return nil
}

// ReadTensor reads one tensor's bytes from r, which must be the reader f was
// parsed from. t is validated again (dtype, shape, offsets, and, for a File
// returned by Parse, the data buffer bounds) before anything is allocated.
func (f *File) ReadTensor(r io.ReaderAt, t TensorInfo) ([]byte, error) {
	dataLen := int64(-1)
	if f.bounded {
		dataLen = f.dataLen
	}
	if err := checkInfo(t, dataLen); err != nil {
		return nil, err
	}
	if f.DataOffset < 0 || t.End > math.MaxInt64-f.DataOffset {
		return nil, fmt.Errorf("%w: tensor %q: data offset %d + end %d overflows", ErrInvalidOffsets, t.Name, f.DataOffset, t.End)
	}
	n := t.Size()
	if uint64(n) > uint64(math.MaxInt) {
		return nil, fmt.Errorf("%w: tensor %q: %d bytes do not fit in memory on this platform", ErrShapeOverflow, t.Name, n)
	}
	buf := make([]byte, n)
	if n == 0 {
		return buf, nil
	}
	if err := readFullAt(r, buf, f.DataOffset+t.Begin, fmt.Sprintf("tensor %q", t.Name)); err != nil {
		return nil, err
	}
	return buf, nil
}

// parser is a minimal strict JSON scanner over the (already UTF-8 validated)
// header. It only understands what a safetensors header may contain; any
// other value type is reported as a type error by the caller.
type parser struct {
	b []byte
	i int
}

func (p *parser) peek() byte {
	if p.i < len(p.b) {
		return p.b[p.i]
	}
	return 0
}

func (p *parser) eat(c byte) bool {
	if p.i < len(p.b) && p.b[p.i] == c {
		p.i++
		return true
	}
	return false
}

func (p *parser) ws() {
	for p.i < len(p.b) {
		switch p.b[p.i] {
		case ' ', '\t', '\n', '\r':
			p.i++
		default:
			return
		}
	}
}

func (p *parser) syntax(msg string) error {
	if p.i >= len(p.b) {
		return fmt.Errorf("%w: JSON syntax error at end of header: %s", ErrInvalidHeader, msg)
	}
	return fmt.Errorf("%w: JSON syntax error at byte %d (%q): %s", ErrInvalidHeader, p.i, p.b[p.i], msg)
}

// kind names the JSON value type starting at the cursor, for type errors.
// ok is false when no JSON value starts there (a syntax error instead).
func (p *parser) kind() (kind string, ok bool) {
	rest := p.b[p.i:]
	switch c := p.peek(); {
	case c == '{':
		return "object", true
	case c == '[':
		return "array", true
	case c == '"':
		return "string", true
	case bytes.HasPrefix(rest, []byte("true")) || bytes.HasPrefix(rest, []byte("false")):
		return "boolean", true
	case bytes.HasPrefix(rest, []byte("null")):
		return "null", true
	case c == '-' || (c >= '0' && c <= '9'):
		return "number", true
	}
	return "", false
}

// typeErr reports that the value at the cursor has the wrong JSON type, or
// a syntax error if no JSON value starts there.
func (p *parser) typeErr(sentinel error, what string) error {
	k, ok := p.kind()
	if !ok {
		return p.syntax("expected a JSON value")
	}
	return fmt.Errorf("%w: %s, got %s", sentinel, what, k)
}

func hexVal(c byte) (rune, bool) {
	switch {
	case c >= '0' && c <= '9':
		return rune(c - '0'), true
	case c >= 'a' && c <= 'f':
		return rune(c-'a') + 10, true
	case c >= 'A' && c <= 'F':
		return rune(c-'A') + 10, true
	}
	return 0, false
}

// hex4 reads 4 hex digits at the cursor.
func (p *parser) hex4() (rune, error) {
	if p.i+4 > len(p.b) {
		return 0, p.syntax("truncated \\u escape")
	}
	var r rune
	for k := 0; k < 4; k++ {
		v, ok := hexVal(p.b[p.i])
		if !ok {
			return 0, p.syntax("invalid hex digit in \\u escape")
		}
		r = r<<4 | v
		p.i++
	}
	return r, nil
}

// str parses a JSON string at the cursor (which must be '"').
func (p *parser) str() (string, error) {
	b, err := p.strBytes()
	return string(b), err
}

// strBytes parses a JSON string at the cursor (which must be '"'). Without
// escapes the result aliases the header; callers must not modify it.
func (p *parser) strBytes() ([]byte, error) {
	p.i++ // opening quote
	start := p.i
	// Fast path: no escapes.
	for p.i < len(p.b) {
		c := p.b[p.i]
		if c == '"' {
			s := p.b[start:p.i]
			p.i++
			return s, nil
		}
		if c == '\\' {
			break
		}
		if c < 0x20 {
			return nil, p.syntax("control character in string")
		}
		p.i++
	}
	out := append([]byte(nil), p.b[start:p.i]...)
	for {
		if p.i >= len(p.b) {
			return nil, p.syntax("unterminated string")
		}
		c := p.b[p.i]
		switch {
		case c == '"':
			p.i++
			return out, nil
		case c < 0x20:
			return nil, p.syntax("control character in string")
		case c != '\\':
			out = append(out, c)
			p.i++
			continue
		}
		p.i++ // backslash
		if p.i >= len(p.b) {
			return nil, p.syntax("unterminated escape")
		}
		e := p.b[p.i]
		p.i++
		switch e {
		case '"', '\\', '/':
			out = append(out, e)
		case 'b':
			out = append(out, '\b')
		case 'f':
			out = append(out, '\f')
		case 'n':
			out = append(out, '\n')
		case 'r':
			out = append(out, '\r')
		case 't':
			out = append(out, '\t')
		case 'u':
			r, err := p.hex4()
			if err != nil {
				return nil, err
			}
			if utf16.IsSurrogate(r) {
				if r >= 0xDC00 || p.i+2 > len(p.b) || p.b[p.i] != '\\' || p.b[p.i+1] != 'u' {
					return nil, p.syntax("lone UTF-16 surrogate in \\u escape")
				}
				p.i += 2
				r2, err := p.hex4()
				if err != nil {
					return nil, err
				}
				r = utf16.DecodeRune(r, r2)
				if r == utf8.RuneError {
					return nil, p.syntax("invalid UTF-16 surrogate pair in \\u escape")
				}
			}
			out = utf8.AppendRune(out, r)
		default:
			p.i--
			return nil, p.syntax("invalid escape")
		}
	}
}

// uint parses a non-negative JSON integer at the cursor. It fully scans any
// JSON number so that syntax errors are reported as such; a valid number
// that is negative, fractional or has an exponent yields isInt=false, and
// one above 2^64-1 yields overflow=true.
func (p *parser) uint() (v uint64, isInt, overflow bool, err error) {
	start := p.i
	neg := p.eat('-')
	switch c := p.peek(); {
	case c == '0':
		p.i++
	case c >= '1' && c <= '9':
		for p.i < len(p.b) && p.b[p.i] >= '0' && p.b[p.i] <= '9' {
			p.i++
		}
	default:
		return 0, false, false, p.syntax("invalid number")
	}
	intEnd := p.i
	frac := false
	if p.eat('.') {
		frac = true
		if c := p.peek(); c < '0' || c > '9' {
			return 0, false, false, p.syntax("invalid number fraction")
		}
		for p.i < len(p.b) && p.b[p.i] >= '0' && p.b[p.i] <= '9' {
			p.i++
		}
	}
	if c := p.peek(); c == 'e' || c == 'E' {
		frac = true
		p.i++
		if c := p.peek(); c == '+' || c == '-' {
			p.i++
		}
		if c := p.peek(); c < '0' || c > '9' {
			return 0, false, false, p.syntax("invalid number exponent")
		}
		for p.i < len(p.b) && p.b[p.i] >= '0' && p.b[p.i] <= '9' {
			p.i++
		}
	}
	if neg || frac {
		return 0, false, false, nil
	}
	for _, c := range p.b[start:intEnd] {
		hi, lo := bits.Mul64(v, 10)
		lo, carry := bits.Add64(lo, uint64(c-'0'), 0)
		if hi|carry != 0 {
			return 0, true, true, nil
		}
		v = lo
	}
	return v, true, false, nil
}

// members parses the members of the JSON object at the cursor (which must be
// '{'), calling member with each key with the cursor at its value; member
// must consume the value. in names the object in syntax errors ("" for the
// header). The key aliases the header when it has no escapes.
func (p *parser) members(in string, member func(key []byte) error) error {
	suffix := ""
	if in != "" {
		suffix = " in " + in
	}
	p.i++ // '{'
	p.ws()
	if p.eat('}') {
		return nil
	}
	for {
		p.ws()
		if p.peek() != '"' {
			return p.syntax("expected string key" + suffix)
		}
		key, err := p.strBytes()
		if err != nil {
			return err
		}
		p.ws()
		if !p.eat(':') {
			return p.syntax("expected ':'")
		}
		p.ws()
		if err := member(key); err != nil {
			return err
		}
		p.ws()
		if p.eat(',') {
			continue
		}
		if p.eat('}') {
			return nil
		}
		return p.syntax("expected ',' or '}'" + suffix)
	}
}

// metadata parses the value of "__metadata__".
func (p *parser) metadata() (map[string]string, error) {
	if p.peek() != '{' {
		return nil, p.typeErr(ErrInvalidMetadata, "expected object")
	}
	m := make(map[string]string)
	err := p.members("__metadata__", func(key []byte) error {
		k := string(key)
		if p.peek() != '"' {
			return p.typeErr(ErrInvalidMetadata, fmt.Sprintf("key %q: expected string value", k))
		}
		v, err := p.str()
		if err != nil {
			return err
		}
		if _, dup := m[k]; dup {
			return fmt.Errorf("%w: duplicate key %q", ErrInvalidMetadata, k)
		}
		m[k] = v
		return nil
	})
	if err != nil {
		return nil, err
	}
	return m, nil
}

// tensor parses one tensor entry object.
func (p *parser) tensor(name string, lim Limits) (TensorInfo, error) {
	t := TensorInfo{Name: name}
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: tensor %q: %s", ErrInvalidTensorInfo, name, fmt.Sprintf(format, args...))
	}
	if p.peek() != '{' {
		return t, p.typeErr(ErrInvalidTensorInfo, fmt.Sprintf("tensor %q: expected object", name))
	}
	const (
		hasDType = 1 << iota
		hasShape
		hasOffsets
	)
	have := 0
	err := p.members("tensor "+strconv.Quote(name), func(key []byte) error {
		var err error
		var bit int
		switch string(key) {
		case "dtype":
			bit = hasDType
		case "shape":
			bit = hasShape
		case "data_offsets":
			bit = hasOffsets
		default:
			return bad("unknown field %q", key)
		}
		if have&bit != 0 {
			return bad("duplicate field %q", key)
		}
		have |= bit
		switch bit {
		case hasDType:
			if p.peek() != '"' {
				return p.typeErr(ErrInvalidTensorInfo, fmt.Sprintf("tensor %q: dtype: expected string", name))
			}
			d, err := p.strBytes()
			if err != nil {
				return err
			}
			canon, ok := dtypeNames[string(d)]
			if !ok {
				return fmt.Errorf("%w: tensor %q: %q", ErrUnknownDType, name, d)
			}
			t.DType = canon
		case hasShape:
			if t.Shape, err = p.shape(name, lim.MaxRank); err != nil {
				return err
			}
		case hasOffsets:
			if t.Begin, t.End, err = p.offsets(name); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return t, err
	}
	switch {
	case have&hasDType == 0:
		return t, bad("missing field \"dtype\"")
	case have&hasShape == 0:
		return t, bad("missing field \"shape\"")
	case have&hasOffsets == 0:
		return t, bad("missing field \"data_offsets\"")
	}
	return t, nil
}

// intArray parses an array of non-negative integers at the cursor, calling
// elem for each (with its index) and stopping early on elem's error.
func (p *parser) intArray(name, field string, elem func(i int, v uint64, overflow bool) error) (int, error) {
	if p.peek() != '[' {
		return 0, p.typeErr(ErrInvalidTensorInfo, fmt.Sprintf("tensor %q: %s: expected array", name, field))
	}
	p.i++
	p.ws()
	if p.eat(']') {
		return 0, nil
	}
	n := 0
	for {
		p.ws()
		if c := p.peek(); c != '-' && (c < '0' || c > '9') {
			return n, p.typeErr(ErrInvalidTensorInfo, fmt.Sprintf("tensor %q: %s: expected integer", name, field))
		}
		v, isInt, overflow, err := p.uint()
		if err != nil {
			return n, err
		}
		if !isInt {
			return n, fmt.Errorf("%w: tensor %q: %s: expected non-negative integer", ErrInvalidTensorInfo, name, field)
		}
		if err := elem(n, v, overflow); err != nil {
			return n, err
		}
		n++
		p.ws()
		if p.eat(',') {
			continue
		}
		if p.eat(']') {
			return n, nil
		}
		return n, p.syntax("expected ',' or ']'")
	}
}

func (p *parser) shape(name string, maxRank int) ([]uint64, error) {
	shape := make([]uint64, 0, 4)
	_, err := p.intArray(name, "shape", func(i int, v uint64, overflow bool) error {
		if i >= maxRank {
			return fmt.Errorf("%w: tensor %q: more than %d dimensions", ErrRankTooLarge, name, maxRank)
		}
		if overflow {
			return fmt.Errorf("%w: tensor %q: dimension %d exceeds 2^64-1", ErrShapeOverflow, name, i)
		}
		shape = append(shape, v)
		return nil
	})
	return shape, err
}

func (p *parser) offsets(name string) (begin, end int64, err error) {
	var off [2]int64
	n, err := p.intArray(name, "data_offsets", func(i int, v uint64, overflow bool) error {
		if i >= 2 {
			return fmt.Errorf("%w: tensor %q: data_offsets: expected 2 integers, got more", ErrInvalidTensorInfo, name)
		}
		if overflow || v > math.MaxInt64 {
			return fmt.Errorf("%w: tensor %q: data_offsets[%d] too large", ErrInvalidOffsets, name, i)
		}
		off[i] = int64(v)
		return nil
	})
	if err != nil {
		return 0, 0, err
	}
	if n != 2 {
		return 0, 0, fmt.Errorf("%w: tensor %q: data_offsets: expected 2 integers, got %d", ErrInvalidTensorInfo, name, n)
	}
	return off[0], off[1], nil
}
