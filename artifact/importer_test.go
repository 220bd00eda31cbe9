package artifact

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base32"
	"encoding/binary"
	"errors"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"testing"

	dag "github.com/ipfs/boxo/ipld/merkledag"
	"github.com/ipfs/boxo/ipld/unixfs"
	pb "github.com/ipfs/boxo/ipld/unixfs/pb"
	"github.com/ipfs/go-cid"
)

// An oracle written from the dag-pb and UnixFS specs, independent of boxo:
// protobuf by hand, CIDs by hand (multibase 'b' + base32 of version, codec,
// multihash). Import must agree with it byte for byte.

func uvarint(b []byte, v uint64) []byte { return binary.AppendUvarint(b, v) }

func field(b []byte, num int, data []byte) []byte {
	b = uvarint(b, uint64(num<<3|2))
	b = uvarint(b, uint64(len(data)))
	return append(b, data...)
}

type olink struct {
	cid   []byte // binary CID
	name  string
	tsize uint64
}

func pbNode(links []olink, data []byte) []byte {
	var b []byte
	for _, l := range links {
		var lb []byte
		lb = field(lb, 1, l.cid)
		lb = field(lb, 2, []byte(l.name))
		lb = uvarint(append(lb, 3<<3), l.tsize)
		b = field(b, 2, lb)
	}
	if data != nil {
		b = field(b, 1, data)
	}
	return b
}

func unixfsData(typ uint64, filesize *uint64, blocksizes []uint64) []byte {
	b := uvarint([]byte{1 << 3}, typ)
	if filesize != nil {
		b = uvarint(append(b, 3<<3), *filesize)
	}
	for _, s := range blocksizes {
		b = uvarint(append(b, 4<<3), s)
	}
	return b
}

func ocid(codec byte, data []byte) []byte {
	sum := sha256.Sum256(data)
	return append([]byte{0x01, codec, 0x12, 0x20}, sum[:]...)
}

func ocidString(bin []byte) string {
	return "b" + strings.ToLower(base32.StdEncoding.WithPadding(base32.NoPadding).EncodeToString(bin))
}

type onode struct {
	cid   []byte
	tsize uint64 // cumulative
	size  uint64 // file bytes
}

// oracleFile builds a balanced file DAG of 256 KiB raw leaves, 174 links a node.
func oracleFile(data []byte) onode {
	var leaves []onode
	for off := 0; off < len(data) || off == 0; off += ChunkSize {
		end := min(off+ChunkSize, len(data))
		c := data[off:end]
		leaves = append(leaves, onode{ocid(0x55, c), uint64(len(c)), uint64(len(c))})
		if end == len(data) {
			break
		}
	}
	if len(leaves) == 1 {
		return leaves[0]
	}
	depth, cap := 1, LinksPerBlock
	for cap < len(leaves) {
		depth++
		cap *= LinksPerBlock
	}
	var build func(ls []onode, depth int) onode
	build = func(ls []onode, depth int) onode {
		var kids []onode
		if depth == 1 {
			kids = ls
		} else {
			per := 1
			for i := 1; i < depth; i++ {
				per *= LinksPerBlock
			}
			for i := 0; i < len(ls); i += per {
				kids = append(kids, build(ls[i:min(i+per, len(ls))], depth-1))
			}
		}
		var links []olink
		var sizes []uint64
		var total, tsum uint64
		for _, k := range kids {
			links = append(links, olink{k.cid, "", k.tsize})
			sizes = append(sizes, k.size)
			total += k.size
			tsum += k.tsize
		}
		enc := pbNode(links, unixfsData(2, &total, sizes))
		return onode{ocid(0x70, enc), uint64(len(enc)) + tsum, total}
	}
	return build(leaves, depth)
}

type oentry struct {
	name string
	file []byte
	dir  []oentry
}

func oracleDir(entries []oentry) onode {
	sort.Slice(entries, func(i, j int) bool { return entries[i].name < entries[j].name })
	var links []olink
	var tsum uint64
	for _, e := range entries {
		var n onode
		if e.dir != nil {
			n = oracleDir(e.dir)
		} else {
			n = oracleFile(e.file)
		}
		links = append(links, olink{n.cid, e.name, n.tsize})
		tsum += n.tsize
	}
	enc := pbNode(links, unixfsData(1, nil, nil))
	return onode{ocid(0x70, enc), uint64(len(enc)) + tsum, 0}
}

func writeTree(t *testing.T, dir string, entries []oentry) {
	t.Helper()
	for _, e := range entries {
		p := filepath.Join(dir, e.name)
		if e.dir != nil {
			if err := os.Mkdir(p, 0o755); err != nil {
				t.Fatal(err)
			}
			writeTree(t, p, e.dir)
			continue
		}
		if err := os.WriteFile(p, e.file, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func randBytes(seed uint64, n int) []byte {
	r := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

func importBytes(t *testing.T, data []byte) (cid.Cid, *MemBlocks) {
	t.Helper()
	bs := NewMemBlocks()
	c, size, err := ImportReader(context.Background(), bs, bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	if size != uint64(len(data)) {
		t.Fatalf("size %d, want %d", size, len(data))
	}
	return c, bs
}

// CIDs that IPFS users know by heart.
func TestWellKnownCIDs(t *testing.T) {
	c, _ := importBytes(t, nil)
	if got := c.String(); got != "bafkreihdwdcefgh4dqkjv67uzcmw7ojee6xedzdetojuzjevtenxquvyku" {
		t.Errorf("empty file: %s", got)
	}
	c, _ = importBytes(t, []byte("hello world"))
	if got := c.String(); got != "bafkreifzjut3te2nhyekklss27nh3k72ysco7y32koao5eei66wof36n5e" {
		t.Errorf("hello world: %s", got)
	}
	dir := t.TempDir()
	res, err := Import(context.Background(), NewMemBlocks(), dir)
	if err != nil {
		t.Fatal(err)
	}
	if got := res.Root.String(); got != "bafybeiczsscdsbs7ffqz55asqdf3smv6klcw3gofszvwlyarci47bgf354" {
		t.Errorf("empty directory: %s", got)
	}
}

// Files of every shape agree with the oracle: a raw leaf alone, one chunk
// exactly, one byte more, several chunks, and 175 chunks (two levels).
func TestFileCIDsMatchOracle(t *testing.T) {
	sizes := []int{1, 1000, ChunkSize - 1, ChunkSize, ChunkSize + 1, 3*ChunkSize + 17}
	if !testing.Short() {
		sizes = append(sizes, (LinksPerBlock+1)*ChunkSize+5)
	}
	for i, n := range sizes {
		data := randBytes(uint64(i), n)
		got, bs := importBytes(t, data)
		want := ocidString(oracleFile(data).cid)
		if got.String() != want {
			t.Errorf("%d bytes: %s, oracle %s", n, got, want)
			continue
		}
		ix, err := Walk(context.Background(), bs, got, DefaultLimits())
		if err != nil {
			t.Fatalf("%d bytes: walk: %v", n, err)
		}
		if len(ix.Files) != 1 || ix.Files[0].Size != uint64(n) || ix.Size != uint64(n) {
			t.Errorf("%d bytes: walk files %+v", n, ix.Files)
		}
		if bs.Len() != len(ix.Blocks) {
			t.Errorf("%d bytes: %d blocks stored, %d in the DAG", n, bs.Len(), len(ix.Blocks))
		}
	}
}

func TestDirectoryMatchesOracle(t *testing.T) {
	tree := []oentry{
		{name: "model.safetensors", file: randBytes(7, 2*ChunkSize+3)},
		{name: "config.json", file: []byte(`{"layers":2}`)},
		{name: ".hidden", file: []byte("dot")},
		{name: "empty", file: []byte{}},
		{name: "sub", dir: []oentry{
			{name: "b", file: []byte("bee")},
			{name: "a", file: []byte("ay")},
			{name: "deeper", dir: []oentry{}},
		}},
		{name: "Zcase", file: []byte("upper sorts first")},
	}
	dir := t.TempDir()
	writeTree(t, dir, tree)
	bs := NewMemBlocks()
	res, err := Import(context.Background(), bs, dir)
	if err != nil {
		t.Fatal(err)
	}
	if want := ocidString(oracleDir(tree).cid); res.Root.String() != want {
		t.Fatalf("root %s, oracle %s", res.Root, want)
	}
	wantFiles := []File{
		{".hidden", 3}, {"Zcase", 17}, {"config.json", 12}, {"empty", 0},
		{"model.safetensors", 2*ChunkSize + 3}, {"sub/a", 2}, {"sub/b", 3},
	}
	if len(res.Files) != len(wantFiles) {
		t.Fatalf("files %+v", res.Files)
	}
	for i := range wantFiles {
		if res.Files[i] != wantFiles[i] {
			t.Errorf("file %d: %+v, want %+v", i, res.Files[i], wantFiles[i])
		}
	}
	ix, err := Walk(context.Background(), bs, res.Root, DefaultLimits())
	if err != nil {
		t.Fatal(err)
	}
	if len(ix.Files) != len(wantFiles) || ix.Size != res.Size {
		t.Fatalf("walk files %+v", ix.Files)
	}
	if strings.Join(ix.Dirs, ",") != "sub,sub/deeper" {
		t.Errorf("dirs %v", ix.Dirs)
	}
	if bs.Len() != len(ix.Blocks) {
		t.Errorf("%d blocks stored, %d reachable: import left strays", bs.Len(), len(ix.Blocks))
	}
}

// kubo keeps a directory basic while the sum of its link names and CIDs is
// at most 256 KiB, and shards it past that.
func TestHAMTThreshold(t *testing.T) {
	emptyCIDLen := 36 // raw CIDv1 of sha2-256
	nameLen := 60
	perEntry := nameLen + emptyCIDLen
	for _, tc := range []struct {
		n     int
		shard bool
	}{
		{HAMTShardingSize / perEntry, false},
		{HAMTShardingSize/perEntry + 1, true},
	} {
		dir := t.TempDir()
		for i := range tc.n {
			name := strings.Repeat("x", nameLen-8) + string(rune('a'+i%26)) + strings.Repeat("0", 7-len(itoa(i))) + itoa(i)
			if err := os.WriteFile(filepath.Join(dir, name), nil, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		bs := NewMemBlocks()
		res, err := Import(context.Background(), bs, dir)
		if err != nil {
			t.Fatal(err)
		}
		data, _ := bs.Get(context.Background(), res.Root)
		pn, err := dag.DecodeProtobuf(data)
		if err != nil {
			t.Fatal(err)
		}
		fsn, err := unixfs.FSNodeFromBytes(pn.Data())
		if err != nil {
			t.Fatal(err)
		}
		if got := fsn.Type() == pb.Data_HAMTShard; got != tc.shard {
			t.Errorf("%d entries: sharded=%v, want %v", tc.n, got, tc.shard)
		}
		ix, err := Walk(context.Background(), bs, res.Root, DefaultLimits())
		if err != nil {
			t.Fatal(err)
		}
		if len(ix.Files) != tc.n {
			t.Errorf("%d entries: walk found %d", tc.n, len(ix.Files))
		}
	}
}

func itoa(i int) string {
	if i == 0 {
		return "0"
	}
	var b []byte
	for ; i > 0; i /= 10 {
		b = append([]byte{byte('0' + i%10)}, b...)
	}
	return string(b)
}

func TestImportRefusesSpecialFiles(t *testing.T) {
	for _, tc := range []struct {
		name string
		make func(dir string) error
		want error
	}{
		{"symlink", func(d string) error { return os.Symlink("/etc/passwd", filepath.Join(d, "link")) }, ErrNotRegular},
		{"symlink inside", func(d string) error {
			os.WriteFile(filepath.Join(d, "real"), []byte("x"), 0o644)
			return os.Symlink("real", filepath.Join(d, "link"))
		}, ErrNotRegular},
		{"dir symlink", func(d string) error { return os.Symlink("/", filepath.Join(d, "root")) }, ErrNotRegular},
		{"fifo", func(d string) error { return syscall.Mkfifo(filepath.Join(d, "pipe"), 0o644) }, ErrNotRegular},
		{"backslash", func(d string) error { return os.WriteFile(filepath.Join(d, `a\b`), nil, 0o644) }, ErrHostilePath},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			if err := tc.make(dir); err != nil {
				t.Fatal(err)
			}
			_, err := Import(context.Background(), NewMemBlocks(), dir)
			if !errors.Is(err, tc.want) {
				t.Fatalf("got %v, want %v", err, tc.want)
			}
		})
	}
	// The source itself a symlink or a FIFO.
	dir := t.TempDir()
	os.Symlink("/etc/hostname", filepath.Join(dir, "l"))
	if _, err := Import(context.Background(), NewMemBlocks(), filepath.Join(dir, "l")); !errors.Is(err, ErrNotRegular) {
		t.Errorf("symlink source: %v", err)
	}
	syscall.Mkfifo(filepath.Join(dir, "p"), 0o644)
	if _, err := Import(context.Background(), NewMemBlocks(), filepath.Join(dir, "p")); !errors.Is(err, ErrNotRegular) {
		t.Errorf("fifo source: %v", err)
	}
}

func TestValidPath(t *testing.T) {
	for _, p := range []string{"a", "a/b", ".hidden", "a..b", "ü"} {
		if err := ValidPath(p); err != nil {
			t.Errorf("%q refused: %v", p, err)
		}
	}
	for _, p := range []string{"", "..", "../x", "a/../b", "/abs", "a//b", "a/", `a\b`, "a\x00b", ".", "a/./b", "\xff"} {
		if err := ValidPath(p); !errors.Is(err, ErrHostilePath) {
			t.Errorf("%q accepted", p)
		}
	}
}

func TestBlocksVerify(t *testing.T) {
	bs := NewMemBlocks()
	good := []byte("payload")
	c, _ := importBytes(t, good)
	ctx := context.Background()
	if err := bs.Put(ctx, c, []byte("other")); !errors.Is(err, ErrHashMismatch) {
		t.Fatalf("wrong bytes accepted: %v", err)
	}
	if ok, _ := bs.Has(ctx, c); ok {
		t.Fatal("refused block is held")
	}
	if _, err := bs.Get(ctx, c); !errors.Is(err, ErrNotFound) {
		t.Fatalf("get absent: %v", err)
	}
	id, _ := cid.V1Builder{Codec: cid.Raw, MhType: 0x00}.Sum(good) // identity hash
	if err := bs.Put(ctx, id, good); !errors.Is(err, ErrUnsupportedCID) {
		t.Fatalf("identity CID accepted: %v", err)
	}
}
