package delta

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
)

// errHeadDone stops ReadHead's parser at the first tensor's data.
var errHeadDone = errors.New("delta: head read")

// ErrNoHeadMetadata reports a head whose first entry is not __metadata__.
var ErrNoHeadMetadata = errors.New("delta: the first entry is not " + MetadataName)

// ReadHead parses the start of a file — the header and its first entry,
// which must be __metadata__ and must end inside head — and returns the
// header and the metadata (Info.Entries holds the metadata entry).
// Nothing is verified: the checksum and signature need the whole file,
// so what ReadHead returns is what the file claims, for a server to
// decide from before it reads the rest (docs/orchestrator.md, "Delta
// upload"). A head that ends inside the metadata is ErrTruncated.
func ReadHead(ctx context.Context, head []byte, lim Limits) (*Info, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	// The pump keeps the last TrailerSize bytes of its input back as the
	// trailer: give it a dummy one, so that all of head is payload.
	src := io.MultiReader(bytes.NewReader(head), bytes.NewReader(make([]byte, TrailerSize)))
	p := startPump(ctx, src)
	cr := &chunkReader{ctx: ctx, p: p}
	ps := newParser(cr, lim.withDefaults())
	info, err := ps.run(decodeStream, func(*Unverified) error { return errHeadDone }, nil)
	cr.close()
	if cr.drained {
		p.stop()
	} else {
		p.abandon()
	}
	sawMeta := len(info.Entries) > 0 && info.Entries[0].Name == MetadataName && info.Metadata != nil
	switch {
	case sawMeta:
		// Whatever follows the metadata (a tensor, or a head cut
		// inside the next entry) is for the whole file's reader.
		return info, nil
	case err != nil && !errors.Is(err, errHeadDone):
		return info, err
	}
	return info, fmt.Errorf("%w (hanzod reads the metadata before the tensors: write it first, as gym and gym_protocol do)", ErrNoHeadMetadata)
}
