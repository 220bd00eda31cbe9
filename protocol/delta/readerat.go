package delta

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"

	"github.com/cespare/xxhash/v2"
)

// File is a verified delta file read at random: Open checks the whole file
// once (both digests, every rule, every frame decoded and discarded) and
// indexes its entries; Tensor then decodes one tensor at a time with memory
// bounded by that tensor.
//
// Open cannot stop the bytes behind the io.ReaderAt from changing afterwards,
// so it records a 64-bit xxHash of every entry's stored bytes and Tensor
// refuses data that no longer matches (ErrModified). That catches accidental
// rewrites and torn copies; against someone who can write the file on purpose,
// keep it where only you can write (a content-addressed store does this).
type File struct {
	ra    io.ReaderAt
	info  *Info
	index map[string]int
	sums  []uint64
	lim   Limits
	pool  sync.Pool // *decoders
	// inspected: Inspect walked the frames without decoding them, so a
	// frame that does not decode is the file's fault, not a change.
	inspected bool
}

// Open verifies the size bytes of ra and returns the indexed file.
func Open(ctx context.Context, ra io.ReaderAt, size int64, lim Limits) (*File, error) {
	var sums []uint64
	info, err := scan(ctx, io.NewSectionReader(ra, 0, size), size, lim, decodeDiscard, nil, &sums)
	if err != nil {
		return nil, err
	}
	f := &File{ra: ra, info: info, index: make(map[string]int, len(info.Entries)), sums: sums, lim: lim.withDefaults()}
	for i, e := range info.Entries {
		f.index[e.Name] = i
	}
	return f, nil
}

// Inspect checks the size bytes of ra like Open — header, every entry's
// name, dtype and shape against lim, the metadata, the checksum and the
// signature — but decompresses nothing except the metadata: each tensor's
// frame is walked block by block (its length bounded by the declared size)
// and its contents skipped. The cost is a pass over the stored bytes, so a
// small file that declares huge tensors (a decompression bomb) costs what
// it weighs, and the caller can compare the declared shapes
// (Info().Entries) with what it expects before decoding any tensor.
//
// What Inspect cannot know without decoding is whether each frame really
// decodes to its declared size: Tensor finds that out, and then returns an
// error wrapping ErrFrame or ErrSize (not ErrModified). The signature
// covers the stored bytes, so a file that verifies here was signed as it
// is, whatever its frames decode to.
func Inspect(ctx context.Context, ra io.ReaderAt, size int64, lim Limits) (*File, error) {
	var sums []uint64
	info, err := scan(ctx, io.NewSectionReader(ra, 0, size), size, lim, decodeSkip, nil, &sums)
	if err != nil {
		return nil, err
	}
	f := &File{ra: ra, info: info, index: make(map[string]int, len(info.Entries)), sums: sums, inspected: true}
	for i, e := range info.Entries {
		f.index[e.Name] = i
	}
	return f, nil
}

// PeekSigner reads the header and the trailer's public key of a file of
// size bytes at their fixed places (the first 24 bytes, the last 32),
// checking only the header's fields: nothing is verified, so the key says
// only who the file claims to be from. A server uses it to refuse files of
// unknown signers before it hashes or decodes anything.
func PeekSigner(ra io.ReaderAt, size int64) (Header, []byte, error) {
	if size < HeaderSize+TrailerSize {
		var b [HeaderSize]byte
		n, _ := ra.ReadAt(b[:min(size, HeaderSize)], 0)
		if err := checkShortHeader(b[:n]); err != nil {
			return Header{}, nil, err
		}
		return Header{}, nil, &Error{Offset: size, Entry: -1, Err: ErrTruncated, Detail: fmt.Sprintf("%d bytes: too short for the 24-byte header and the 96-byte trailer", size)}
	}
	var b [HeaderSize]byte
	if _, err := ra.ReadAt(b[:], 0); err != nil {
		return Header{}, nil, readErr(err)
	}
	h, err := parseHeader(b[:])
	if err != nil {
		return Header{}, nil, err
	}
	key := make([]byte, PublicKeySize)
	if _, err := ra.ReadAt(key, size-PublicKeySize); err != nil {
		return Header{}, nil, readErr(err)
	}
	return h, key, nil
}

// Info describes the verified file.
func (f *File) Info() *Info { return f.info }

// Tensor decodes the named tensor. The File may be used from several
// goroutines at once.
func (f *File) Tensor(name string) (Tensor, error) {
	i, ok := f.index[name]
	if !ok || name == MetadataName {
		return Tensor{}, fmt.Errorf("delta: no tensor %q", name)
	}
	e := &f.info.Entries[i]
	d, _ := f.pool.Get().(*decoders)
	if d == nil {
		d = &decoders{maxWindow: f.lim.MaxWindowBytes}
	}
	defer f.pool.Put(d)
	h := xxhash.New()
	src := io.TeeReader(io.NewSectionReader(f.ra, e.DataOffset, e.StoredBytes), h)
	data, _, err := d.decode(src, f.info.Header.Compression, e.NumBytes(), decodeOwn, nil)
	switch {
	case err == nil && h.Sum64() != f.sums[i]:
		return Tensor{}, &Error{Offset: e.Offset, Entry: i, Name: name, Err: ErrModified, Detail: "stored bytes differ from those verified"}
	case err != nil && f.inspected && isFormatErr(err):
		return Tensor{}, &Error{Offset: e.Offset, Entry: i, Name: name, Err: err, Detail: "the frame does not decode to the declared shape"}
	case err != nil && isFormatErr(err):
		// It decoded when Open verified it: the bytes have changed since.
		return Tensor{}, &Error{Offset: e.Offset, Entry: i, Name: name, Err: ErrModified, Detail: err.Error()}
	case err != nil:
		return Tensor{}, fmt.Errorf("delta: reading %q: %w", name, err)
	}
	return Tensor{Name: e.Name, DType: e.DType, Shape: e.Shape, Data: data}, nil
}

func isFormatErr(err error) bool {
	for _, s := range []error{ErrTruncated, ErrFrame, ErrSize, ErrLimit} {
		if errors.Is(err, s) {
			return true
		}
	}
	return false
}
