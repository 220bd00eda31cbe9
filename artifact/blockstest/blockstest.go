// Package blockstest is the behaviour every artifact.Blocks implementation
// must have, as one test suite that each implementation runs (the in-memory
// artifact.MemBlocks and the on-disk store.Store).
package blockstest

import (
	"bytes"
	"context"
	"errors"
	"sync"
	"testing"

	"github.com/ipfs/go-cid"
	mh "github.com/multiformats/go-multihash"
	"github.com/zooai/gym/artifact"
)

// Run runs the suite against fresh, empty stores made by open.
func Run(t *testing.T, open func(t *testing.T) artifact.Blocks) {
	ctx := context.Background()
	raw := func(b []byte) cid.Cid {
		c, _ := cid.V1Builder{Codec: cid.Raw, MhType: mh.SHA2_256}.Sum(b)
		return c
	}
	t.Run("round trip", func(t *testing.T) {
		bs := open(t)
		data := []byte("a block")
		c := raw(data)
		if ok, err := bs.Has(ctx, c); ok || err != nil {
			t.Fatalf("empty store has it: %v %v", ok, err)
		}
		if _, err := bs.Get(ctx, c); !errors.Is(err, artifact.ErrNotFound) {
			t.Fatalf("get absent: %v", err)
		}
		in := bytes.Clone(data)
		if err := bs.Put(ctx, c, in); err != nil {
			t.Fatal(err)
		}
		in[0] ^= 1 // the store must have copied
		got, err := bs.Get(ctx, c)
		if err != nil || !bytes.Equal(got, data) {
			t.Fatalf("get: %q %v", got, err)
		}
		got[0] ^= 1 // and must hand out copies
		if again, _ := bs.Get(ctx, c); !bytes.Equal(again, data) {
			t.Fatal("a caller changed the stored block")
		}
		if err := bs.Put(ctx, c, data); err != nil {
			t.Fatalf("second put: %v", err)
		}
	})
	t.Run("refuses", func(t *testing.T) {
		bs := open(t)
		c := raw([]byte("right"))
		if err := bs.Put(ctx, c, []byte("wrong")); !errors.Is(err, artifact.ErrHashMismatch) {
			t.Fatalf("wrong bytes: %v", err)
		}
		if ok, _ := bs.Has(ctx, c); ok {
			t.Fatal("refused block is held")
		}
		id, _ := cid.V1Builder{Codec: cid.Raw, MhType: mh.IDENTITY}.Sum([]byte("x"))
		if err := bs.Put(ctx, id, []byte("x")); !errors.Is(err, artifact.ErrUnsupportedCID) {
			t.Fatalf("identity CID: %v", err)
		}
		sha1, _ := cid.V1Builder{Codec: cid.Raw, MhType: mh.SHA1}.Sum([]byte("x"))
		if err := bs.Put(ctx, sha1, []byte("x")); !errors.Is(err, artifact.ErrUnsupportedCID) {
			t.Fatalf("sha1 CID: %v", err)
		}
		big := make([]byte, artifact.MaxBlockSize+1)
		if err := bs.Put(ctx, raw(big), big); !errors.Is(err, artifact.ErrTooLarge) {
			t.Fatalf("oversized block: %v", err)
		}
	})
	t.Run("CIDv0 and v1 share a block", func(t *testing.T) {
		bs := open(t)
		node := []byte{0x0a, 0x02, 0x08, 0x01} // the empty UnixFS directory
		v1, _ := cid.V1Builder{Codec: cid.DagProtobuf, MhType: mh.SHA2_256}.Sum(node)
		v0 := cid.NewCidV0(v1.Hash())
		if err := bs.Put(ctx, v1, node); err != nil {
			t.Fatal(err)
		}
		if got, err := bs.Get(ctx, v0); err != nil || !bytes.Equal(got, node) {
			t.Fatalf("v0 get: %v", err)
		}
	})
	t.Run("concurrent", func(t *testing.T) {
		bs := open(t)
		var wg sync.WaitGroup
		errs := make(chan error, 64)
		for i := range 64 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				d := []byte{byte(i % 8)}
				if err := bs.Put(ctx, raw(d), d); err != nil {
					errs <- err
				}
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatal(err)
		}
		for i := range 8 {
			if ok, _ := bs.Has(ctx, raw([]byte{byte(i)})); !ok {
				t.Fatalf("block %d missing", i)
			}
		}
	})
}
