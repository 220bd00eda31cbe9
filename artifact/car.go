package artifact

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/ipfs/go-cid"
	carv2 "github.com/ipld/go-car/v2"
	"github.com/ipld/go-car/v2/storage"
)

// ErrForeignBlock is a block offered as part of an artifact that is not in
// the artifact's DAG (a mix-and-match attempt).
var ErrForeignBlock = errors.New("artifact: block not in the artifact's DAG")

// WriteCAR streams the DAG under root as a CARv1 with root as its only root
// and the blocks in depth-first order, each once: the response of a
// trustless gateway to /ipfs/{root}?format=car (dag-scope=all). It walks the
// DAG first, so a missing or corrupt block fails before a byte is written.
func WriteCAR(ctx context.Context, w io.Writer, g Getter, root cid.Cid) error {
	ix, err := Walk(ctx, g, root, DefaultLimits())
	if err != nil {
		return err
	}
	car, err := storage.NewWritable(w, []cid.Cid{root}, carv2.WriteAsCarV1(true))
	if err != nil {
		return err
	}
	for _, c := range ix.Blocks {
		data, err := g.Get(ctx, c)
		if err != nil {
			return err
		}
		if err := Check(c, data); err != nil {
			return err
		}
		if err := car.Put(ctx, c.KeyString(), data); err != nil {
			return err
		}
	}
	return nil
}

// ReadCAR reads a CAR (v1 or v2) that must hold exactly the DAG under root,
// verifies it, and then puts its blocks into dst. A CAR without root among
// its roots, with a block that does not hash to its CID, with a block not in
// root's DAG, or with more than maxBytes of blocks is refused and nothing is
// put into dst.
func ReadCAR(ctx context.Context, r io.Reader, dst Blocks, root cid.Cid, maxBytes int64) (*Index, error) {
	br, err := carv2.NewBlockReader(r, carv2.MaxAllowedSectionSize(MaxBlockSize+128), carv2.MaxAllowedHeaderSize(1<<20))
	if err != nil {
		return nil, fmt.Errorf("%w: CAR header: %v", ErrBadDAG, err)
	}
	found := false
	for _, c := range br.Roots {
		found = found || c.Equals(root)
	}
	if !found {
		return nil, fmt.Errorf("%w: CAR does not name %s as a root", ErrBadDAG, root)
	}
	staged := NewMemBlocks()
	var total int64
	for {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		b, err := br.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("%w: CAR block: %v", ErrBadDAG, err)
		}
		total += int64(len(b.RawData()))
		if total > maxBytes {
			return nil, fmt.Errorf("%w: CAR holds more than %d bytes", ErrTooLarge, maxBytes)
		}
		if err := staged.Put(ctx, b.Cid(), b.RawData()); err != nil {
			return nil, err
		}
	}
	ix, err := Walk(ctx, staged, root, DefaultLimits())
	if err != nil {
		return nil, err
	}
	if len(ix.Blocks) != staged.Len() {
		return nil, fmt.Errorf("%w: the CAR holds %d blocks, the DAG of %s %d", ErrForeignBlock, staged.Len(), root, len(ix.Blocks))
	}
	for _, c := range ix.Blocks {
		data, err := staged.Get(ctx, c)
		if err != nil {
			return nil, err
		}
		if err := dst.Put(ctx, c, data); err != nil {
			return nil, err
		}
	}
	return ix, nil
}
