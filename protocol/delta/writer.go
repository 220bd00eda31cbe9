package delta

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/sha3"
	"errors"
	"fmt"
	"io"
	"runtime"
	"strings"

	"github.com/klauspost/compress/zstd"
	"github.com/pierrec/lz4/v4"
)

// WriteOptions control how a file is written. The output depends only on
// the tensors, the key and Compression, Flags and Metadata: Concurrency
// changes the speed, never the bytes.
type WriteOptions struct {
	Compression Compression
	Flags       Flags     // FlagLoRA, FlagFull
	Metadata    *Metadata // written first, as the __metadata__ entry, when set
	Concurrency int       // tensors compressed at once; 0 means GOMAXPROCS
}

// Write writes a signed file holding tensors in the given order to w and
// returns its Info. It validates every tensor before writing a byte.
//
// Each tensor is compressed into its own frame on Concurrency goroutines
// while the payload checksum is computed, in order, as frames complete; then
// the signature digest is computed over header ‖ payload while the bytes go
// out. The two SHA3-256 passes are sequential by the format's construction
// (the checksum sits in the header the signature digest starts with).
func Write(ctx context.Context, w io.Writer, key ed25519.PrivateKey, tensors []Tensor, opts WriteOptions) (*Info, error) {
	if err := checkPrivateKey(key); err != nil {
		return nil, err
	}
	if !opts.Compression.Valid() {
		return nil, fmt.Errorf("%w %d", ErrCompression, opts.Compression)
	}
	if opts.Flags&reservedFlags != 0 {
		return nil, fmt.Errorf("%w: %#02x", ErrFlags, uint8(opts.Flags))
	}
	all := tensors
	if opts.Metadata != nil {
		js, err := opts.Metadata.MarshalJSON()
		if err != nil {
			return nil, fmt.Errorf("%w: %v", ErrMetadata, err)
		}
		meta := Tensor{Name: MetadataName, DType: Int8, Shape: []uint64{uint64(len(js))}, Data: js}
		all = append([]Tensor{meta}, tensors...)
	}
	if err := checkTensors(all, opts.Metadata != nil); err != nil {
		return nil, err
	}

	// Compress in parallel; results[i] is ready when done[i] is closed.
	type result struct {
		head, body []byte
		err        error
	}
	results := make([]result, len(all))
	done := make([]chan struct{}, len(all))
	for i := range done {
		done[i] = make(chan struct{})
	}
	workers := opts.Concurrency
	if workers <= 0 {
		workers = runtime.GOMAXPROCS(0)
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	next := make(chan int)
	go func() {
		defer close(next)
		for i := range all {
			select {
			case next <- i:
			case <-ctx.Done():
				return
			}
		}
	}()
	for range min(workers, len(all)) {
		go func() {
			var c compressor
			defer c.close()
			for i := range next {
				t := &all[i]
				r := &results[i]
				r.head = appendEntryHeader(nil, t.Name, t.DType, t.Shape)
				r.body, r.err = c.compress(opts.Compression, t.Data)
				close(done[i])
			}
		}()
	}

	info := &Info{Header: Header{Version: Version, Compression: opts.Compression, Flags: opts.Flags}}
	sum := sha3.New256()
	off := int64(HeaderSize)
	for i := range all {
		select {
		case <-done[i]:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		r := &results[i]
		if r.err != nil {
			return nil, fmt.Errorf("delta: compressing %q: %w", all[i].Name, r.err)
		}
		sum.Write(r.head)
		sum.Write(r.body)
		info.Entries = append(info.Entries, Entry{
			Name: all[i].Name, DType: all[i].DType, Shape: all[i].Shape,
			Offset: off, DataOffset: off + int64(len(r.head)), StoredBytes: int64(len(r.body)),
		})
		off += int64(len(r.head) + len(r.body))
	}
	copy(info.Header.Checksum[:], sum.Sum(nil))
	hdr := info.Header.marshal()

	// Second pass: hash header ‖ payload while another goroutine writes it.
	sig := sha3.New256()
	out := make(chan []byte, 64)
	werr := make(chan error, 1)
	go func() {
		var err error
		for b := range out {
			if err == nil {
				_, err = w.Write(b)
			}
		}
		werr <- err
	}()
	send := func(b []byte) {
		sig.Write(b)
		if len(b) > 0 {
			out <- b
		}
	}
	send(hdr[:])
	for i := range results {
		send(results[i].head)
		send(results[i].body)
	}
	close(out)
	if err := <-werr; err != nil {
		return nil, err
	}
	signature := ed25519.Sign(key, sig.Sum(nil))
	copy(info.Signature[:], signature)
	info.PublicKey = key.Public().(ed25519.PublicKey)
	if _, err := w.Write(append(signature, info.PublicKey...)); err != nil {
		return nil, err
	}
	info.Size = off + TrailerSize
	if opts.Metadata != nil {
		info.Metadata = opts.Metadata
	}
	return info, nil
}

func checkPrivateKey(key ed25519.PrivateKey) error {
	if len(key) != ed25519.PrivateKeySize {
		return fmt.Errorf("%w: private key of %d bytes, want %d", ErrKey, len(key), ed25519.PrivateKeySize)
	}
	if !bytes.Equal(ed25519.NewKeyFromSeed(key.Seed()), key) {
		return fmt.Errorf("%w: private key's public half does not match its seed", ErrKey)
	}
	return nil
}

// checkTensors applies the reader's rules to what is about to be written.
func checkTensors(ts []Tensor, withMeta bool) error {
	seen := make(map[string]struct{}, len(ts))
	for i, t := range ts {
		fail := func(sentinel error, detail string) error {
			return &Error{Offset: -1, Entry: i, Name: t.Name, Err: sentinel, Detail: detail}
		}
		if err := CheckName(t.Name); err != nil {
			return fail(ErrName, strings.TrimPrefix(err.Error(), ErrName.Error()+": "))
		}
		switch {
		case uint64(len(t.Name)) > 1<<32-1:
			return fail(ErrName, "name longer than 2^32-1 bytes")
		case t.Name == MetadataName && (!withMeta || i != 0):
			return fail(ErrName, "reserved name: pass metadata in WriteOptions.Metadata")
		case !t.DType.Valid():
			return fail(ErrDType, fmt.Sprintf("dtype %d", uint8(t.DType)))
		case len(t.Shape) > 255:
			return fail(ErrShape, fmt.Sprintf("rank %d exceeds 255", len(t.Shape)))
		}
		if _, dup := seen[t.Name]; dup {
			return fail(ErrDuplicate, "the name appears twice")
		}
		seen[t.Name] = struct{}{}
		n, ok := numBytes(t.Shape, t.DType.Size())
		if !ok {
			return fail(ErrShape, fmt.Sprintf("shape %v overflows 64 bits", t.Shape))
		}
		// An empty tensor's dimensions are bounded as a reader with the
		// default limits bounds them.
		if ext, ok := extent(t.Shape, t.DType.Size()); !ok || ext > max(n, DefaultLimits().MaxTensorBytes) {
			return fail(ErrShape, fmt.Sprintf("shape %v of %s: dimensions too large for a tensor of %d bytes (zeros counted as 1)", t.Shape, t.DType, n))
		}
		if n != uint64(len(t.Data)) {
			return fail(ErrSize, fmt.Sprintf("shape %v of %s needs %d bytes, data has %d", t.Shape, t.DType, n, len(t.Data)))
		}
	}
	return nil
}

// compressor holds one goroutine's reusable encoders.
type compressor struct {
	lz4  *lz4.Writer
	zstd *zstd.Encoder
}

func (c *compressor) close() {
	if c.zstd != nil {
		c.zstd.Close()
	}
}

// compress returns data as one frame with its content size in the header.
func (c *compressor) compress(kind Compression, data []byte) ([]byte, error) {
	switch kind {
	case None:
		return data, nil
	case LZ4:
		var buf bytes.Buffer
		buf.Grow(lz4.CompressBlockBound(len(data)) + 32)
		if c.lz4 == nil {
			c.lz4 = lz4.NewWriter(nil)
		}
		c.lz4.Reset(&buf)
		if err := c.lz4.Apply(lz4.BlockSizeOption(lz4.Block1Mb), lz4.ChecksumOption(false),
			lz4.SizeOption(uint64(len(data))), lz4.ConcurrencyOption(1)); err != nil {
			return nil, err
		}
		if _, err := c.lz4.Write(data); err != nil {
			return nil, err
		}
		if err := c.lz4.Close(); err != nil {
			return nil, err
		}
		return buf.Bytes(), nil
	case Zstd:
		if c.zstd == nil {
			z, err := zstd.NewWriter(nil, zstd.WithEncoderConcurrency(1), zstd.WithEncoderCRC(false),
				zstd.WithZeroFrames(true), zstd.WithEncoderLevel(zstd.SpeedDefault))
			if err != nil {
				return nil, err
			}
			c.zstd = z
		}
		return c.zstd.EncodeAll(data, make([]byte, 0, len(data)+len(data)/128+64)), nil
	}
	return nil, errors.New("unknown compression")
}
