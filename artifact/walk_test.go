package artifact

import (
	"bytes"
	"context"
	"errors"
	"io"
	"testing"

	dag "github.com/ipfs/boxo/ipld/merkledag"
	"github.com/ipfs/boxo/ipld/unixfs"
	"github.com/ipfs/go-cid"
	ipld "github.com/ipfs/go-ipld-format"
	carv2 "github.com/ipld/go-car/v2"
)

func putNode(t *testing.T, bs Blocks, n *dag.ProtoNode) cid.Cid {
	t.Helper()
	if err := n.SetCidBuilder(Prefix); err != nil {
		t.Fatal(err)
	}
	if err := bs.Put(context.Background(), n.Cid(), n.RawData()); err != nil {
		t.Fatal(err)
	}
	return n.Cid()
}

func dirWith(t *testing.T, bs Blocks, name string, child cid.Cid) cid.Cid {
	d := unixfs.EmptyDirNode()
	d.AddRawLink(name, &ipld.Link{Cid: child})
	return putNode(t, bs, d)
}

func TestWalkRefusesHostileDAGs(t *testing.T) {
	ctx := context.Background()
	bs := NewMemBlocks()
	leaf, _, err := ImportReader(ctx, bs, bytes.NewReader([]byte("x")))
	if err != nil {
		t.Fatal(err)
	}
	sym, _ := unixfs.SymlinkData("/etc/passwd")
	symlink := putNode(t, bs, dag.NodeWithData(sym))
	lying := dag.NodeWithData(unixfs.FilePBData(nil, 5)) // says 5 bytes, has 1
	lying.AddRawLink("", &ipld.Link{Cid: leaf})
	lyingFile := putNode(t, bs, lying)

	for _, tc := range []struct {
		name string
		root cid.Cid
		want error
	}{
		{"dotdot", dirWith(t, bs, "..", leaf), ErrHostilePath},
		{"slash", dirWith(t, bs, "a/b", leaf), ErrHostilePath},
		{"absolute", dirWith(t, bs, "/etc", leaf), ErrHostilePath},
		{"backslash", dirWith(t, bs, `..\x`, leaf), ErrHostilePath},
		{"symlink", dirWith(t, bs, "s", symlink), ErrHostilePath},
		{"lying size", lyingFile, ErrBadDAG},
		{"missing block", dirWith(t, bs, "gone", mustRawCID([]byte("not stored"))), ErrNotFound},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Walk(ctx, bs, tc.root, DefaultLimits())
			if !errors.Is(err, tc.want) {
				t.Fatalf("got %v, want %v", err, tc.want)
			}
		})
	}
	// A duplicated name.
	d := unixfs.EmptyDirNode()
	d.AddRawLink("a", &ipld.Link{Cid: leaf})
	d.AddRawLink("a", &ipld.Link{Cid: leaf})
	if _, err := Walk(ctx, bs, putNode(t, bs, d), DefaultLimits()); !errors.Is(err, ErrBadDAG) {
		t.Errorf("duplicate name: %v", err)
	}
	// A DAG that doubles at every level stops at the visit limit.
	c := leaf
	for range 40 {
		d := unixfs.EmptyDirNode()
		d.AddRawLink("a", &ipld.Link{Cid: c})
		d.AddRawLink("b", &ipld.Link{Cid: c})
		c = putNode(t, bs, d)
	}
	lim := DefaultLimits()
	lim.MaxFiles = 1 << 30
	lim.MaxVisits = 1 << 16
	if _, err := Walk(ctx, bs, c, lim); !errors.Is(err, ErrTooLarge) {
		t.Errorf("exponential DAG: %v", err)
	}
}

func mustRawCID(b []byte) cid.Cid {
	c, err := cid.V1Builder{Codec: cid.Raw, MhType: 0x12}.Sum(b)
	if err != nil {
		panic(err)
	}
	return c
}

// A Getter that lies about one block is caught by Walk.
type lyingGetter struct {
	Getter
	bad cid.Cid
}

func (g lyingGetter) Get(ctx context.Context, c cid.Cid) ([]byte, error) {
	d, err := g.Getter.Get(ctx, c)
	if err == nil && c.Equals(g.bad) {
		d[0] ^= 1
	}
	return d, err
}

func TestWalkVerifiesHashes(t *testing.T) {
	data := randBytes(3, 2*ChunkSize)
	root, bs := importBytes(t, data)
	ix, err := Walk(context.Background(), bs, root, DefaultLimits())
	if err != nil {
		t.Fatal(err)
	}
	_, err = Walk(context.Background(), lyingGetter{bs, ix.Blocks[2]}, root, DefaultLimits())
	if !errors.Is(err, ErrHashMismatch) {
		t.Fatalf("corrupt block: %v", err)
	}
}

func TestCARRoundTrip(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	writeTree(t, dir, []oentry{
		{name: "w.bin", file: randBytes(9, 3*ChunkSize+1)},
		{name: "d", dir: []oentry{{name: "x", file: []byte("x")}, {name: "same", file: []byte("x")}}},
	})
	src := NewMemBlocks()
	res, err := Import(ctx, src, dir)
	if err != nil {
		t.Fatal(err)
	}
	var car bytes.Buffer
	if err := WriteCAR(ctx, &car, src, res.Root); err != nil {
		t.Fatal(err)
	}
	// go-car reads it as a CARv1 with our root and every block once.
	br, err := carv2.NewBlockReader(bytes.NewReader(car.Bytes()))
	if err != nil {
		t.Fatal(err)
	}
	if br.Version != 1 || len(br.Roots) != 1 || !br.Roots[0].Equals(res.Root) {
		t.Fatalf("CAR v%d roots %v", br.Version, br.Roots)
	}
	n := 0
	for {
		b, err := br.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if n == 0 && !b.Cid().Equals(res.Root) {
			t.Fatalf("first block %s is not the root", b.Cid())
		}
		n++
	}
	if n != src.Len() {
		t.Fatalf("CAR has %d blocks, DAG %d", n, src.Len())
	}
	dst := NewMemBlocks()
	ix, err := ReadCAR(ctx, bytes.NewReader(car.Bytes()), dst, res.Root, 64<<20)
	if err != nil {
		t.Fatal(err)
	}
	if dst.Len() != src.Len() || ix.Size != res.Size {
		t.Fatalf("imported %d blocks (want %d), %d bytes", dst.Len(), src.Len(), ix.Size)
	}

	// Mix and match: a CAR with one foreign block is refused whole.
	other, _, _ := ImportReader(ctx, src, bytes.NewReader([]byte("foreign")))
	var mixed bytes.Buffer
	mixed.Write(car.Bytes())
	od, _ := src.Get(ctx, other)
	mixed.Write(carSection(other, od))
	empty := NewMemBlocks()
	if _, err := ReadCAR(ctx, bytes.NewReader(mixed.Bytes()), empty, res.Root, 64<<20); !errors.Is(err, ErrForeignBlock) {
		t.Fatalf("foreign block: %v", err)
	}
	if empty.Len() != 0 {
		t.Fatal("a refused CAR left blocks behind")
	}
	// Wrong root, over the size limit, truncated, corrupted.
	if _, err := ReadCAR(ctx, bytes.NewReader(car.Bytes()), empty, other, 64<<20); !errors.Is(err, ErrBadDAG) {
		t.Errorf("wrong root: %v", err)
	}
	if _, err := ReadCAR(ctx, bytes.NewReader(car.Bytes()), empty, res.Root, 1000); !errors.Is(err, ErrTooLarge) {
		t.Errorf("size limit: %v", err)
	}
	if _, err := ReadCAR(ctx, bytes.NewReader(car.Bytes()[:car.Len()-10]), empty, res.Root, 64<<20); err == nil {
		t.Error("truncated CAR accepted")
	}
	bad := bytes.Clone(car.Bytes())
	bad[len(bad)-1] ^= 1
	if _, err := ReadCAR(ctx, bytes.NewReader(bad), empty, res.Root, 64<<20); err == nil {
		t.Error("corrupted CAR accepted")
	}
	if empty.Len() != 0 {
		t.Fatal("a refused CAR left blocks behind")
	}
}

func carSection(c cid.Cid, data []byte) []byte {
	b := uvarint(nil, uint64(len(c.Bytes())+len(data)))
	b = append(b, c.Bytes()...)
	return append(b, data...)
}
