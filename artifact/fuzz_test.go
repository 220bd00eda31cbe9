package artifact

import (
	"bytes"
	"context"
	"testing"

	"github.com/ipfs/go-cid"
)

// FuzzReadCAR feeds arbitrary CARs to ReadCAR: it must never panic, and
// whatever it accepts must be a whole DAG that Walk re-verifies from dst.
func FuzzReadCAR(f *testing.F) {
	ctx := context.Background()
	src := NewMemBlocks()
	root, _, err := ImportReader(ctx, src, bytes.NewReader(pattern(3*ChunkSize/2, 1)))
	if err != nil {
		f.Fatal(err)
	}
	var car bytes.Buffer
	if err := WriteCAR(ctx, &car, src, root); err != nil {
		f.Fatal(err)
	}
	small := NewMemBlocks()
	sroot, _, _ := ImportReader(ctx, small, bytes.NewReader([]byte("tiny")))
	var scar bytes.Buffer
	WriteCAR(ctx, &scar, small, sroot)
	f.Add(car.Bytes(), root.Bytes())
	f.Add(scar.Bytes(), sroot.Bytes())
	f.Add([]byte{}, sroot.Bytes())
	f.Fuzz(func(t *testing.T, data, rootBytes []byte) {
		r, err := cid.Cast(rootBytes)
		if err != nil {
			return
		}
		dst := NewMemBlocks()
		ix, err := ReadCAR(ctx, bytes.NewReader(data), dst, r, 8<<20)
		if err != nil {
			if dst.Len() != 0 {
				t.Fatal("a refused CAR left blocks")
			}
			return
		}
		ix2, err := Walk(ctx, dst, r, DefaultLimits())
		if err != nil || len(ix2.Blocks) != len(ix.Blocks) || dst.Len() != len(ix.Blocks) {
			t.Fatalf("accepted CAR is not a whole DAG: %v", err)
		}
	})
}

// FuzzWalkBlock decodes an arbitrary block as the root of a DAG.
func FuzzWalkBlock(f *testing.F) {
	ctx := context.Background()
	bs := NewMemBlocks()
	root, _, _ := ImportReader(ctx, bs, bytes.NewReader(pattern(2*ChunkSize+1, 1)))
	d, _ := bs.Get(ctx, root)
	f.Add(d)
	f.Add([]byte{0x0a, 0x02, 0x08, 0x01}) // empty directory
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := Prefix.Sum(data)
		if err != nil {
			return
		}
		m := NewMemBlocks()
		m.Put(ctx, c, data)
		// Children of the fuzzed node resolve in bs (the real file's leaves).
		g := multiGetter{m, bs}
		if _, err := Children(c, data); err != nil {
			return
		}
		Walk(ctx, g, c, Limits{MaxBlocks: 1000, MaxVisits: 10000, MaxFiles: 1000, MaxDepth: 16, MaxSize: 1 << 30})
	})
}

type multiGetter []Getter

func (g multiGetter) Get(ctx context.Context, c cid.Cid) ([]byte, error) {
	var err error
	for _, x := range g {
		var d []byte
		if d, err = x.Get(ctx, c); err == nil {
			return d, nil
		}
	}
	return nil, err
}
