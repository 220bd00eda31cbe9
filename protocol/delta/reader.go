package delta

import (
	"context"
	"crypto/ed25519"
	"encoding/binary"
	"errors"
	"fmt"
	"hash"
	"io"
	"math/bits"
	"strings"

	"github.com/zooai/gym/keys/edkey"

	"github.com/klauspost/compress/zstd"
	"github.com/pierrec/lz4/v4"
)

// Entry describes one tensor entry of a file.
type Entry struct {
	Name        string
	DType       DType
	Shape       []uint64
	Offset      int64 // file offset of the entry's name_len field
	DataOffset  int64 // file offset of the entry's data
	StoredBytes int64 // bytes of data as stored (the frame, or the raw bytes)
}

// NumBytes is the decoded size of the entry's data.
func (e *Entry) NumBytes() uint64 {
	n, _ := numBytes(e.Shape, e.DType.Size())
	return n
}

// Info is what a reader learned about a file. Only when the reading function
// returned a nil error has the file verified; with an error, Info holds what
// was parsed before the fault, for diagnostics.
type Info struct {
	Header    Header
	Entries   []Entry   // in file order, __metadata__ included
	Metadata  *Metadata // nil when the file has no __metadata__ entry
	Signature [SignatureSize]byte
	PublicKey ed25519.PublicKey
	Size      int64 // bytes in the file
}

// Tensor is a named tensor with its raw little-endian element bytes.
type Tensor struct {
	Name  string
	DType DType
	Shape []uint64
	Data  []byte
}

// Unverified is a tensor decoded from a file whose signature has not been
// checked yet. Anything derived from its data must be discarded unless the
// call that produced it returns a nil error.
type Unverified struct {
	Entry
	data   []byte
	stream io.Reader // decodeStream only
}

// UnverifiedData returns the decoded bytes. Stream reuses the slice for the
// next tensor: it is valid only until the callback returns.
func (u *Unverified) UnverifiedData() []byte { return u.data }

// Delta is a verified file with its tensors (the __metadata__ entry is in
// Info.Metadata, not in Tensors).
type Delta struct {
	Info    *Info
	Tensors []Tensor
}

// Read reads and verifies a whole file and returns its tensors, or an error;
// it never returns tensors from a file that did not verify. Memory is the
// total of the tensors plus a constant.
func Read(ctx context.Context, r io.Reader, lim Limits) (*Delta, error) {
	var ts []Tensor
	info, err := scan(ctx, r, -1, lim, decodeOwn, func(u *Unverified) error {
		ts = append(ts, Tensor{Name: u.Name, DType: u.DType, Shape: u.Shape, Data: u.data})
		return nil
	}, nil)
	if err != nil {
		return nil, err
	}
	return &Delta{Info: info, Tensors: ts}, nil
}

// Verify reads a whole file and checks every rule, the checksum and the
// signature without keeping any tensor: memory stays at a few MiB (plus the
// window of a Zstandard frame, at most its tensor's size).
func Verify(ctx context.Context, r io.Reader, lim Limits) (*Info, error) {
	return scan(ctx, r, -1, lim, decodeDiscard, nil, nil)
}

// Stream reads a file in one pass and calls fn with each tensor as soon as
// it is decoded, before the file has verified. Stream returns nil only if the
// whole file verified; otherwise whatever fn did with the data must be
// undone. An error from fn stops the stream and is returned as is. One buffer
// is reused for every tensor, so memory is the largest tensor plus a
// constant; fn must copy what it keeps.
func Stream(ctx context.Context, r io.Reader, lim Limits, fn func(*Unverified) error) (*Info, error) {
	if fn == nil {
		return nil, errors.New("delta: Stream needs a function")
	}
	return scan(ctx, r, -1, lim, decodeReuse, fn, nil)
}

// StreamData reads a file in one pass like Stream, but hands fn each
// tensor's decoded bytes as a reader instead of a buffer, so memory stays at
// a few MiB (plus the window of a Zstandard frame, at most 8 MiB for the
// frames this package writes) whatever the tensors' sizes. The data is
// unverified, as with Stream: StreamData returns nil only if the whole file
// verified, and whatever fn did with the bytes must be undone otherwise.
//
// data yields exactly the tensor's decoded bytes and then io.EOF; it is
// valid until fn returns, and what fn leaves unread is decoded and
// discarded. e.StoredBytes is not known yet (Info.Entries has it once the
// stream returns). A read error of data is the file's fault and StreamData
// reports it as such, even if fn returns it; any other error from fn stops
// the stream and is returned as is. The __metadata__ entry is not handed
// to fn (it is in Info.Metadata).
func StreamData(ctx context.Context, r io.Reader, lim Limits, fn func(e *Entry, data io.Reader) error) (*Info, error) {
	if fn == nil {
		return nil, errors.New("delta: StreamData needs a function")
	}
	return scan(ctx, r, -1, lim, decodeStream, func(u *Unverified) error { return fn(&u.Entry, u.stream) }, nil)
}

// Skim checks a file's structure, limits, checksum and signature without
// decompressing any tensor: frames are parsed (their structure, declared
// sizes and windows checked) and passed over. It reads every byte once and
// costs little more than hashing them, so a file that declares more than
// the limits allow, or is not signed by the key its trailer names, is
// refused before anything is decoded. A file Skim accepts may still hold a
// frame that does not decode to its shape: Verify, Read and StreamData
// check that. Metadata is decoded (it is small) and in Info.Metadata.
func Skim(ctx context.Context, r io.Reader, lim Limits) (*Info, error) {
	return scan(ctx, r, -1, lim, decodeSkip, nil, nil)
}

// decodeMode says what happens to decoded tensor bytes.
type decodeMode int

const (
	decodeDiscard decodeMode = iota // decode to check, keep nothing
	decodeOwn                       // a fresh buffer per tensor, owned by the caller
	decodeReuse                     // one buffer reused for every tensor
	decodeStream                    // no buffer: the callback reads the decoder
	decodeSkip                      // walk the frame's structure, decompress nothing
)

// scan runs the pipeline, decoding data as mode says and calling fn (if not
// nil) with each tensor. With sums set, it also records an xxHash64 of every
// entry's stored bytes (for Open). size is r's length when the caller knows
// it (-1 otherwise; a reader with a Len method, like bytes.Reader, tells
// it): Limits.MaxRatio is then applied to each entry's declaration, before
// its data is read. The whole of r is the file (its last 96 bytes are the
// trailer), so its length is the file's size.
func scan(ctx context.Context, r io.Reader, size int64, lim Limits, mode decodeMode, fn func(*Unverified) error, sums *[]uint64) (*Info, error) {
	if l, ok := r.(interface{ Len() int }); ok && size < 0 {
		size = int64(l.Len())
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	p := startPump(ctx, r)
	cr := &chunkReader{ctx: ctx, p: p}
	ps := newParser(cr, lim.withDefaults())
	ps.size = size
	info, err := ps.run(mode, fn, sums)
	cr.close()
	if !cr.drained {
		// The parser stopped before the end of the input (a malformed file,
		// a callback's error, cancellation): do not wait on the source.
		p.abandon()
		return info, err
	}
	p.stop()
	info.Size = p.size
	if p.trailerLen == TrailerSize {
		copy(info.Signature[:], p.trailer[:SignatureSize])
		info.PublicKey = ed25519.PublicKey(append([]byte(nil), p.trailer[SignatureSize:]...))
	}
	if err != nil {
		if errors.Is(err, ErrTruncated) && ps.headerLen < HeaderSize && p.err == nil {
			// A file too short for header and trailer: the pump held its
			// bytes back as the trailer. Say what the bytes are, if not a delta.
			whole := append(ps.header[:ps.headerLen:ps.headerLen], p.trailer[:p.trailerLen]...)
			if herr := checkShortHeader(whole); herr != nil {
				return info, herr
			}
		}
		return info, err
	}
	if p.err != nil {
		return info, p.err
	}
	if p.trailerLen < TrailerSize {
		return info, &Error{Offset: p.size, Entry: -1, Err: ErrTruncated, Detail: "no room for the 96-byte trailer"}
	}
	if err := ps.checkRatio(p.size); err != nil {
		return info, err
	}
	var sum [32]byte
	p.sum.Sum(sum[:0])
	if [ChecksumSize]byte(sum[:ChecksumSize]) != info.Header.Checksum {
		return info, &Error{Offset: 8, Entry: -1, Err: ErrChecksum, Detail: fmt.Sprintf("header says %x, payload hashes to %x", info.Header.Checksum, sum[:ChecksumSize])}
	}
	if err := edkey.CheckPublicKey(info.PublicKey); err != nil {
		return info, &Error{Offset: p.size - PublicKeySize, Entry: -1, Err: ErrKey, Detail: "trailer key " + edkey.Reason(err)}
	}
	if err := edkey.CheckSignature(info.Signature[:]); err != nil {
		return info, &Error{Offset: p.size - TrailerSize, Entry: -1, Err: ErrSignature, Detail: "signature " + edkey.Reason(err)}
	}
	var digest [32]byte
	p.sig.Sum(digest[:0])
	if !ed25519.Verify(info.PublicKey, digest[:], info.Signature[:]) {
		return info, &Error{Offset: p.size - TrailerSize, Entry: -1, Err: ErrSignature, Detail: fmt.Sprintf("signature does not verify under the trailer's key %x", []byte(info.PublicKey))}
	}
	return info, nil
}

// parser reads entries from a byte stream positioned at the header.
type parser struct {
	r     *chunkReader
	lim   Limits
	info  *Info
	names map[string]struct{}
	total uint64
	dec   decoders
	buf   [8]byte

	header    [HeaderSize]byte
	headerLen int
	size      int64 // the file's length when known before reading, else -1
}

// ratioRefused reports whether total decoded bytes exceed lim.MaxRatio
// times a file of size bytes.
func ratioRefused(total uint64, size int64, ratio uint64) bool {
	if ratio == 0 || size < 0 {
		return false
	}
	hi, lo := bits.Mul64(ratio, uint64(size))
	return hi == 0 && total > lo
}

// checkRatio applies Limits.MaxRatio to the whole file once its size is
// known.
func (p *parser) checkRatio(size int64) error {
	if !ratioRefused(p.total, size, p.lim.MaxRatio) {
		return nil
	}
	return p.fail(-1, -1, "", ErrRatio, p.ratioDetail(p.total, size))
}

func (p *parser) ratioDetail(total uint64, size int64) string {
	return fmt.Sprintf("the entries declare %d decoded bytes, %.0f per byte of the %d-byte file; the limit is %d per byte (%d bytes)",
		total, float64(total)/float64(max(size, 1)), size, p.lim.MaxRatio, p.lim.MaxRatio*uint64(size))
}

// checkShortHeader reports what is wrong with the start of a file that is
// too short to be a delta, when that start already rules it out.
func checkShortHeader(b []byte) error {
	if len(b) >= HeaderSize {
		_, err := parseHeader(b)
		return err
	}
	if len(b) >= len(magic) && [5]byte(b[:5]) != magic {
		return &Error{Offset: 0, Entry: -1, Err: ErrMagic, Detail: fmt.Sprintf("file starts with %q, want \"DELTA\"", b[:5])}
	}
	return nil
}

func newParser(r *chunkReader, lim Limits) *parser {
	return &parser{r: r, lim: lim, info: &Info{}, names: make(map[string]struct{}), dec: decoders{maxWindow: lim.MaxWindowBytes}}
}

func (p *parser) run(mode decodeMode, fn func(*Unverified) error, sums *[]uint64) (*Info, error) {
	defer p.dec.close()
	n, err := io.ReadFull(p.r, p.header[:])
	p.headerLen = n
	if err != nil {
		return p.info, p.fail(-1, 0, "", readErr(err), "file too short for the 24-byte header and the 96-byte trailer")
	}
	h, err := parseHeader(p.header[:])
	if err != nil {
		return p.info, err
	}
	p.info.Header = h
	var tap hash.Hash64
	if sums != nil {
		tap = newTap()
		p.r.tap = tap
	}
	for i := 0; ; i++ {
		e, err := p.entryHeader(i)
		if err == io.EOF {
			return p.info, nil
		}
		if err != nil {
			return p.info, err
		}
		isMeta := e.Name == MetadataName
		if tap != nil {
			tap.Reset()
		}
		m := mode
		if isMeta {
			m = decodeOwn
		}
		var sink func(io.Reader) error
		if m == decodeStream {
			sink = func(r io.Reader) error { return fn(&Unverified{Entry: *e, stream: r}) }
		}
		data, err := p.data(i, e, m, sink)
		if err != nil {
			return p.info, err
		}
		if tap != nil {
			*sums = append(*sums, tap.Sum64())
		}
		p.info.Entries = append(p.info.Entries, *e)
		if isMeta {
			m, err := ParseMetadata(data)
			if err != nil {
				return p.info, p.fail(i, e.Offset, e.Name, ErrMetadata, err.Error())
			}
			p.info.Metadata = m
			continue
		}
		if fn != nil && m != decodeStream {
			if err := fn(&Unverified{Entry: *e, data: data}); err != nil {
				return p.info, err
			}
		}
	}
}

func (p *parser) fail(entry int, off int64, name string, sentinel error, detail string) error {
	return &Error{Offset: off, Entry: entry, Name: name, Err: sentinel, Detail: detail}
}

// readErr maps the end of input inside a structure to ErrTruncated and
// passes I/O errors through.
func readErr(err error) error {
	if err == io.EOF || err == io.ErrUnexpectedEOF {
		return ErrTruncated
	}
	return err
}

var errTrailing = fmt.Errorf("%w: %w", ErrTrailingData, io.ErrUnexpectedEOF)

// entryHeader parses name_len · name · dtype · rank · shape, or returns io.EOF
// at a clean end of the payload.
func (p *parser) entryHeader(i int) (*Entry, error) {
	off := p.r.off
	n, err := io.ReadFull(p.r, p.buf[:4])
	if err == io.EOF {
		return nil, io.EOF
	}
	if err == io.ErrUnexpectedEOF {
		return nil, p.fail(-1, off, "", errTrailing, fmt.Sprintf("%d bytes after the last entry are not a whole entry", n))
	}
	if err != nil {
		return nil, err
	}
	if i >= p.lim.MaxTensors {
		return nil, p.fail(i, off, "", ErrLimit, fmt.Sprintf("more than %d entries", p.lim.MaxTensors))
	}
	nameLen := binary.LittleEndian.Uint32(p.buf[:4])
	if nameLen == 0 {
		return nil, p.fail(i, off, "", ErrName, "empty name")
	}
	if uint64(nameLen) > uint64(p.lim.MaxNameLen) {
		return nil, p.fail(i, off, "", ErrLimit, fmt.Sprintf("name of %d bytes exceeds the %d-byte limit", nameLen, p.lim.MaxNameLen))
	}
	nb := make([]byte, nameLen)
	if _, err := io.ReadFull(p.r, nb); err != nil {
		return nil, p.fail(i, off, "", readErr(err), "inside the name")
	}
	if err := CheckName(string(nb)); err != nil {
		return nil, p.fail(i, off, "", ErrName, strings.TrimPrefix(err.Error(), ErrName.Error()+": "))
	}
	e := &Entry{Name: string(nb), Offset: off}
	if _, dup := p.names[e.Name]; dup {
		return nil, p.fail(i, off, e.Name, ErrDuplicate, "the name appears twice")
	}
	if _, err := io.ReadFull(p.r, p.buf[:2]); err != nil {
		return nil, p.fail(i, off, e.Name, readErr(err), "inside the dtype and rank")
	}
	e.DType = DType(p.buf[0])
	if !e.DType.Valid() {
		return nil, p.fail(i, off, e.Name, ErrDType, fmt.Sprintf("dtype byte %d (want 0 fp32, 1 fp16, 2 bf16, 3 int8)", p.buf[0]))
	}
	rank := int(p.buf[1])
	if rank > p.lim.MaxRank {
		return nil, p.fail(i, off, e.Name, ErrLimit, fmt.Sprintf("rank %d exceeds the limit of %d", rank, p.lim.MaxRank))
	}
	e.Shape = make([]uint64, rank)
	for d := range e.Shape {
		if _, err := io.ReadFull(p.r, p.buf[:8]); err != nil {
			return nil, p.fail(i, off, e.Name, readErr(err), "inside the shape")
		}
		e.Shape[d] = binary.LittleEndian.Uint64(p.buf[:8])
	}
	size, ok := numBytes(e.Shape, e.DType.Size())
	if !ok {
		return nil, p.fail(i, off, e.Name, ErrShape, fmt.Sprintf("shape %v of %s overflows 64 bits", e.Shape, e.DType))
	}
	if size > p.lim.MaxTensorBytes {
		return nil, p.fail(i, off, e.Name, ErrLimit, fmt.Sprintf("%d bytes exceed the per-tensor limit of %d", size, p.lim.MaxTensorBytes))
	}
	// An empty tensor's other dimensions are bounded as if it were not empty.
	if ext, ok := extent(e.Shape, e.DType.Size()); !ok {
		return nil, p.fail(i, off, e.Name, ErrShape, fmt.Sprintf("shape %v of %s overflows 64 bits with its zero dimensions counted as 1", e.Shape, e.DType))
	} else if ext > p.lim.MaxTensorBytes {
		return nil, p.fail(i, off, e.Name, ErrLimit, fmt.Sprintf("shape %v of %s: dimensions span %d bytes (zeros counted as 1), over the per-tensor limit of %d", e.Shape, e.DType, ext, p.lim.MaxTensorBytes))
	}
	if p.total+size > p.lim.MaxTotalBytes || p.total+size < p.total {
		return nil, p.fail(i, off, e.Name, ErrLimit, fmt.Sprintf("tensors total more than the limit of %d bytes", p.lim.MaxTotalBytes))
	}
	if ratioRefused(p.total+size, p.size, p.lim.MaxRatio) {
		return nil, p.fail(i, off, e.Name, ErrRatio, p.ratioDetail(p.total+size, p.size)+", counting the entries up to this one")
	}
	if e.Name == MetadataName {
		if e.DType != Int8 || rank != 1 {
			return nil, p.fail(i, off, e.Name, ErrMetadata, fmt.Sprintf("must be int8 of rank 1, is %s of rank %d", e.DType, rank))
		}
		if size > uint64(p.lim.MaxMetadataBytes) {
			return nil, p.fail(i, off, e.Name, ErrLimit, fmt.Sprintf("metadata of %d bytes exceeds the limit of %d", size, p.lim.MaxMetadataBytes))
		}
	}
	p.total += size
	p.names[e.Name] = struct{}{}
	e.DataOffset = p.r.off
	return e, nil
}

// data reads and decodes the entry's data.
func (p *parser) data(i int, e *Entry, mode decodeMode, sink func(io.Reader) error) ([]byte, error) {
	want := e.NumBytes()
	data, stored, err := p.dec.decode(p.r, p.info.Header.Compression, want, mode, sink)
	e.StoredBytes = stored
	if err != nil {
		var fe *Error
		if errors.As(err, &fe) {
			return nil, err
		}
		if errors.Is(err, ErrTruncated) || errors.Is(err, ErrFrame) || errors.Is(err, ErrSize) || errors.Is(err, ErrLimit) {
			return nil, p.fail(i, e.Offset, e.Name, err, "")
		}
		return nil, err
	}
	return data, nil
}

// decoders decodes data fields, reusing the decompressors across entries.
type decoders struct {
	maxWindow uint64 // Limits.MaxWindowBytes
	fr        frameReader
	lz4       *lz4.Reader
	zstd      *zstd.Decoder
	one       [1]byte
	scratch   []byte // for decodeDiscard
	reuse     []byte // for decodeReuse
}

func (d *decoders) close() {
	if d.zstd != nil {
		d.zstd.Close()
	}
}

// decode reads one data field of want decoded bytes from src. It returns the
// bytes (nil when discarding) and how many stored bytes the field took.
//
// In decodeStream mode it calls sink with a reader of the decoded bytes
// instead; an error of sink's own (not a read error of that reader) is
// returned as a *callerError.
func (d *decoders) decode(src io.Reader, c Compression, want uint64, mode decodeMode, sink func(io.Reader) error) ([]byte, int64, error) {
	if mode == decodeSkip {
		return d.skip(src, c, want)
	}
	if c == None {
		b, got, err := d.read(src, want, mode, sink)
		if err != nil {
			if ce, ok := err.(*callerError); ok {
				return nil, int64(got), ce.err
			}
			return nil, int64(got), readErr(err)
		}
		return b, int64(want), nil
	}
	d.fr.reset(src, c, want, d.maxWindow)
	var dec io.Reader
	if c == LZ4 {
		if d.lz4 == nil {
			d.lz4 = lz4.NewReader(nil)
		}
		d.lz4.Reset(&d.fr)
		dec = d.lz4
	} else {
		if d.zstd == nil {
			z, err := zstd.NewReader(nil, zstd.WithDecoderConcurrency(1), zstd.WithDecoderLowmem(true),
				zstd.WithDecoderMaxWindow(1<<40), zstd.WithDecoderMaxMemory(1<<62))
			if err != nil {
				return nil, 0, err
			}
			d.zstd = z
		}
		if err := d.zstd.Reset(&d.fr); err != nil {
			return nil, 0, d.frameErr(err)
		}
		dec = d.zstd
	}
	b, got, err := d.read(dec, want, mode, sink)
	if err != nil {
		if ce, ok := err.(*callerError); ok {
			return nil, int64(d.fr.n), ce.err
		}
		if err == io.EOF || err == io.ErrUnexpectedEOF {
			if d.fr.err != nil {
				return nil, int64(d.fr.n), d.fr.err
			}
			return nil, int64(d.fr.n), fmt.Errorf("%w: frame decodes to %d bytes, shape needs %d", ErrSize, got, want)
		}
		return nil, int64(d.fr.n), d.frameErr(err)
	}
	// The frame must end exactly here: one more byte means it decodes to more
	// than the shape, and the decoder must have consumed the whole frame.
	n, err := dec.Read(d.one[:])
	for n == 0 && err == nil {
		n, err = dec.Read(d.one[:])
	}
	if n > 0 {
		return nil, int64(d.fr.n), fmt.Errorf("%w: frame decodes to more than the %d bytes the shape needs", ErrSize, want)
	}
	if err != io.EOF {
		return nil, int64(d.fr.n), d.frameErr(err)
	}
	if !d.fr.finished() {
		if d.fr.err != nil {
			return nil, int64(d.fr.n), d.fr.err
		}
		return nil, int64(d.fr.n), fmt.Errorf("%w: %w", ErrFrame, errFrameStopped)
	}
	return b, int64(d.fr.n), nil
}

// skip passes over one data field of want decoded bytes without
// decompressing it: raw data is read and discarded, a frame is walked block
// by block (its header, block sizes and checksum fields, bounded by the
// shape as when decoding) and its block contents discarded. It costs the
// stored bytes, whatever the frame would decode to; whether the frame
// really decodes to want bytes is found only by decoding it.
func (d *decoders) skip(src io.Reader, c Compression, want uint64) ([]byte, int64, error) {
	if d.scratch == nil {
		d.scratch = make([]byte, 64<<10)
	}
	if c == None {
		n, err := io.CopyBuffer(io.Discard, io.LimitReader(src, int64(min(want, 1<<62))), d.scratch)
		if err == nil && uint64(n) < want {
			err = io.ErrUnexpectedEOF
		}
		if err != nil {
			return nil, n, readErr(err)
		}
		return nil, n, nil
	}
	d.fr.reset(src, c, want, d.maxWindow)
	_, err := io.CopyBuffer(io.Discard, &d.fr, d.scratch)
	if err != nil {
		return nil, int64(d.fr.n), err
	}
	if !d.fr.finished() {
		return nil, int64(d.fr.n), fmt.Errorf("%w: %w", ErrFrame, errFrameStopped)
	}
	return nil, int64(d.fr.n), nil
}

// frameErr prefers the frame reader's own diagnosis (truncation, structure)
// over the decoder's report of its consequence.
func (d *decoders) frameErr(err error) error {
	if d.fr.err != nil {
		return d.fr.err
	}
	return fmt.Errorf("%w: %w", ErrFrame, err)
}

// callerError carries an error of decodeStream's sink through decode.
type callerError struct{ err error }

func (e *callerError) Error() string { return e.err.Error() }

// read reads exactly n bytes from r as mode says (through sink in
// decodeStream mode) and returns them, how many arrived and the error.
func (d *decoders) read(r io.Reader, n uint64, mode decodeMode, sink func(io.Reader) error) ([]byte, uint64, error) {
	if mode != decodeStream {
		b, err := d.readN(r, n, mode)
		if mode == decodeDiscard && err == nil {
			return nil, n, nil
		}
		return b, uint64(len(b)), err
	}
	dr := &dataReader{r: r, left: n}
	if err := sink(dr); err != nil && dr.err == nil {
		return nil, n - dr.left, &callerError{err}
	}
	if dr.err != nil {
		return nil, n - dr.left, dr.err
	}
	// Decode and discard what the callback left unread.
	_, err := d.readN(dr, dr.left, decodeDiscard)
	if err != nil && dr.err != nil {
		err = dr.err
	}
	return nil, n - dr.left, err
}

// dataReader yields exactly left bytes of r, then io.EOF; an early end or
// a read error of r is kept in err (sticky) for the decoder to diagnose.
type dataReader struct {
	r    io.Reader
	left uint64
	err  error
}

func (dr *dataReader) Read(p []byte) (int, error) {
	if dr.err != nil {
		return 0, dr.err
	}
	if dr.left == 0 {
		return 0, io.EOF
	}
	if uint64(len(p)) > dr.left {
		p = p[:dr.left]
	}
	n, err := dr.r.Read(p)
	dr.left -= uint64(n)
	switch {
	case err == io.EOF && dr.left > 0:
		dr.err = io.ErrUnexpectedEOF
	case err != nil && err != io.EOF:
		dr.err = err
	}
	if n > 0 {
		return n, nil
	}
	if dr.err != nil {
		return 0, dr.err
	}
	if dr.left == 0 {
		return 0, io.EOF
	}
	return 0, nil
}

// readN reads exactly n bytes from r. Buffers grow as bytes arrive (so a
// file that lies about sizes costs at most what it actually delivers, plus
// the first 16 MiB).
func (d *decoders) readN(r io.Reader, n uint64, mode decodeMode) ([]byte, error) {
	if mode == decodeDiscard {
		if d.scratch == nil {
			d.scratch = make([]byte, 64<<10)
		}
		for n > 0 {
			k, err := r.Read(d.scratch[:min(n, uint64(len(d.scratch)))])
			n -= uint64(k)
			if err != nil && n > 0 {
				if err == io.EOF {
					err = io.ErrUnexpectedEOF
				}
				return nil, err
			}
		}
		return nil, nil
	}
	var buf []byte
	if mode == decodeReuse {
		buf = d.reuse[:0]
	}
	if cap(buf) == 0 {
		buf = make([]byte, 0, min(n, 16<<20))
	}
	for uint64(len(buf)) < n {
		if len(buf) == cap(buf) {
			buf = append(buf, make([]byte, min(n-uint64(len(buf)), uint64(cap(buf))))...)[:len(buf)]
		}
		k, err := r.Read(buf[len(buf):min(uint64(cap(buf)), n)])
		buf = buf[:len(buf)+k]
		if err != nil && uint64(len(buf)) < n {
			if err == io.EOF {
				err = io.ErrUnexpectedEOF
			}
			return buf, err
		}
	}
	if mode == decodeReuse {
		d.reuse = buf
	}
	return buf, nil
}
