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
}

// Open verifies the size bytes of ra and returns the indexed file.
func Open(ctx context.Context, ra io.ReaderAt, size int64, lim Limits) (*File, error) {
	var sums []uint64
	info, err := scan(ctx, io.NewSectionReader(ra, 0, size), lim, decodeDiscard, nil, &sums)
	if err != nil {
		return nil, err
	}
	f := &File{ra: ra, info: info, index: make(map[string]int, len(info.Entries)), sums: sums, lim: lim.withDefaults()}
	for i, e := range info.Entries {
		f.index[e.Name] = i
	}
	return f, nil
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
