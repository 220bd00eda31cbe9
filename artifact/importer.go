package artifact

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"unicode/utf8"

	chunker "github.com/ipfs/boxo/chunker"
	dag "github.com/ipfs/boxo/ipld/merkledag"
	"github.com/ipfs/boxo/ipld/unixfs/importer/balanced"
	"github.com/ipfs/boxo/ipld/unixfs/importer/helpers"
	uio "github.com/ipfs/boxo/ipld/unixfs/io"
	blocks "github.com/ipfs/go-block-format"
	"github.com/ipfs/go-cid"
	ipld "github.com/ipfs/go-ipld-format"
	mh "github.com/multiformats/go-multihash"
)

// kubo's defaults for `ipfs add --cid-version=1` (no Import.* config set,
// i.e. before the unixfs-v1-2025 profile): they are pinned here rather than
// read from boxo's process-wide globals, so nothing else in the process can
// change our CIDs.
const (
	ChunkSize        = 256 << 10 // chunker "size-262144"
	LinksPerBlock    = 174       // helpers.DefaultLinksPerBlock
	HAMTShardingSize = 256 << 10 // Import.UnixFSHAMTDirectorySizeThreshold
	HAMTFanout       = 256       // Import.UnixFSHAMTDirectoryMaxFanout
)

// Prefix is the CID prefix of every dag-pb node we build: CIDv1, sha2-256.
var Prefix = cid.Prefix{Version: 1, Codec: cid.DagProtobuf, MhType: mh.SHA2_256, MhLength: -1}

// File is one regular file of an artifact. Path is slash-separated and
// relative to the artifact's root; it is "" when the artifact is one file.
type File struct {
	Path string `json:"path"`
	Size uint64 `json:"size"`
}

// Imported is the result of Import.
type Imported struct {
	Root  cid.Cid
	Files []File // sorted by Path
	Size  uint64 // sum of file sizes
}

// ValidName reports whether name may be one path element of an artifact:
// not empty, not "." or "..", no '/', '\\' or NUL, valid UTF-8, at most 255
// bytes.
func ValidName(name string) error {
	switch {
	case name == "" || name == "." || name == "..":
	case len(name) > 255, !utf8.ValidString(name):
	case strings.ContainsAny(name, "/\\\x00"):
	default:
		return nil
	}
	return fmt.Errorf("%w: path element %q", ErrHostilePath, name)
}

// ValidPath reports whether p is a relative slash-separated path of valid
// names (no "..", no absolute path, no backslash, no empty element).
func ValidPath(p string) error {
	if len(p) > 4096 {
		return fmt.Errorf("%w: path of %d bytes", ErrHostilePath, len(p))
	}
	for _, el := range strings.Split(p, "/") {
		if err := ValidName(el); err != nil {
			return fmt.Errorf("%w (in %q)", err, p)
		}
	}
	return nil
}

// Import builds the UnixFS DAG of the file or directory at src, writing
// every block to dst, and returns its root. It refuses symlinks, FIFOs,
// devices and sockets anywhere under src, and names that ValidName refuses.
// Hidden files are included: the root equals `ipfs add -r --cid-version=1
// --hidden src` (the same as without --hidden when there are none).
func Import(ctx context.Context, dst Blocks, src string) (Imported, error) {
	st, err := os.Lstat(src)
	if err != nil {
		return Imported{}, err
	}
	ds := &dagService{b: dst}
	var files []File
	var root ipld.Node
	switch {
	case st.Mode().IsRegular():
		f, err := openRegular(nil, src)
		if err != nil {
			return Imported{}, err
		}
		defer f.Close()
		var size uint64
		root, size, err = importFile(ctx, ds, f)
		if err != nil {
			return Imported{}, err
		}
		files = []File{{Path: "", Size: size}}
	case st.IsDir():
		r, err := os.OpenRoot(src)
		if err != nil {
			return Imported{}, err
		}
		defer r.Close()
		root, err = importDir(ctx, ds, r, ".", &files)
		if err != nil {
			return Imported{}, err
		}
	default:
		return Imported{}, fmt.Errorf("%w: %s is %v", ErrNotRegular, src, st.Mode().Type())
	}
	if err := ds.Add(ctx, root); err != nil {
		return Imported{}, err
	}
	sort.Slice(files, func(i, j int) bool { return files[i].Path < files[j].Path })
	var total uint64
	for _, f := range files {
		total += f.Size
	}
	return Imported{Root: root.Cid(), Files: files, Size: total}, nil
}

// ImportReader builds the DAG of one file read from r.
func ImportReader(ctx context.Context, dst Blocks, r io.Reader) (cid.Cid, uint64, error) {
	ds := &dagService{b: dst}
	n, size, err := importFile(ctx, ds, r)
	if err != nil {
		return cid.Undef, 0, err
	}
	return n.Cid(), size, ds.Add(ctx, n)
}

// openRegular opens name (in r, or the OS when r is nil) without following
// a symlink and without blocking on a FIFO, and checks that it is a regular
// file.
func openRegular(r *os.Root, name string) (*os.File, error) {
	flags := os.O_RDONLY | syscall.O_NOFOLLOW | syscall.O_NONBLOCK
	var f *os.File
	var err error
	if r == nil {
		f, err = os.OpenFile(name, flags, 0)
	} else {
		f, err = r.OpenFile(name, flags, 0)
	}
	if err != nil {
		if errors.Is(err, syscall.ELOOP) {
			return nil, fmt.Errorf("%w: %s is a symlink", ErrNotRegular, name)
		}
		return nil, err
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, err
	}
	if !st.Mode().IsRegular() {
		f.Close()
		return nil, fmt.Errorf("%w: %s is %v", ErrNotRegular, name, st.Mode().Type())
	}
	return f, nil
}

func importFile(ctx context.Context, ds ipld.DAGService, r io.Reader) (ipld.Node, uint64, error) {
	cr := &countingReader{r: r, ctx: ctx}
	params := helpers.DagBuilderParams{
		Dagserv:    ds,
		RawLeaves:  true,
		Maxlinks:   LinksPerBlock,
		CidBuilder: Prefix,
	}
	db, err := params.New(chunker.NewSizeSplitter(cr, ChunkSize))
	if err != nil {
		return nil, 0, err
	}
	n, err := balanced.Layout(db)
	if err != nil {
		return nil, 0, err
	}
	return n, cr.n, nil
}

type countingReader struct {
	r   io.Reader
	n   uint64
	ctx context.Context
}

func (c *countingReader) Read(p []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	n, err := c.r.Read(p)
	c.n += uint64(n)
	return n, err
}

func importDir(ctx context.Context, ds ipld.DAGService, r *os.Root, dir string, files *[]File) (ipld.Node, error) {
	d, err := uio.NewDirectory(ds,
		uio.WithCidBuilder(Prefix),
		uio.WithMaxHAMTFanout(HAMTFanout),
		uio.WithSizeEstimationMode(uio.SizeEstimationLinks))
	if err != nil {
		return nil, err
	}
	d.SetHAMTShardingSize(HAMTShardingSize)
	entries, err := fs.ReadDir(r.FS(), dir)
	if err != nil {
		return nil, err
	}
	for _, e := range entries {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		name := e.Name()
		rel := path.Join(dir, name)
		if err := ValidName(name); err != nil {
			return nil, fmt.Errorf("%w (in %q)", err, rel)
		}
		var child ipld.Node
		switch t := e.Type(); {
		case t.IsDir():
			child, err = importDir(ctx, ds, r, rel, files)
		case t.IsRegular():
			var f *os.File
			f, err = openRegular(r, filepath.FromSlash(rel))
			if err != nil {
				return nil, err
			}
			var size uint64
			child, size, err = importFile(ctx, ds, f)
			f.Close()
			*files = append(*files, File{Path: rel, Size: size})
		default:
			return nil, fmt.Errorf("%w: %s is %v", ErrNotRegular, rel, t)
		}
		if err != nil {
			return nil, err
		}
		if err := ds.Add(ctx, child); err != nil {
			return nil, err
		}
		if err := d.AddChild(ctx, name, child); err != nil {
			return nil, err
		}
	}
	return d.GetNode()
}

// dagService adapts Blocks to boxo's ipld.DAGService. Remove is a no-op:
// blocks are content-addressed and shared, and unreferenced ones are the
// store's business.
type dagService struct{ b Blocks }

func (s *dagService) Add(ctx context.Context, n ipld.Node) error {
	return s.b.Put(ctx, n.Cid(), n.RawData())
}

func (s *dagService) AddMany(ctx context.Context, ns []ipld.Node) error {
	for _, n := range ns {
		if err := s.Add(ctx, n); err != nil {
			return err
		}
	}
	return nil
}

func (s *dagService) Get(ctx context.Context, c cid.Cid) (ipld.Node, error) {
	data, err := s.b.Get(ctx, c)
	if err != nil {
		if errors.Is(err, ErrNotFound) {
			return nil, ipld.ErrNotFound{Cid: c}
		}
		return nil, err
	}
	if err := Check(c, data); err != nil {
		return nil, err
	}
	blk, err := blocks.NewBlockWithCid(data, c)
	if err != nil {
		return nil, err
	}
	switch c.Type() {
	case cid.Raw:
		return dag.DecodeRawBlock(blk)
	case cid.DagProtobuf:
		return dag.DecodeProtobufBlock(blk)
	}
	return nil, fmt.Errorf("%w: %s", ErrUnsupportedCID, c)
}

func (s *dagService) GetMany(ctx context.Context, cs []cid.Cid) <-chan *ipld.NodeOption {
	out := make(chan *ipld.NodeOption, len(cs))
	for _, c := range cs {
		n, err := s.Get(ctx, c)
		out <- &ipld.NodeOption{Node: n, Err: err}
	}
	close(out)
	return out
}

func (s *dagService) Remove(context.Context, cid.Cid) error       { return nil }
func (s *dagService) RemoveMany(context.Context, []cid.Cid) error { return nil }

// FileReader returns a reader of the bytes of the UnixFS file c, reading
// (and verifying) its blocks from g as it goes.
func FileReader(ctx context.Context, g Getter, c cid.Cid) (io.Reader, error) {
	ds := &dagService{b: getterBlocks{g}}
	n, err := ds.Get(ctx, c)
	if err != nil {
		return nil, err
	}
	return uio.NewDagReader(ctx, n, ds)
}

// getterBlocks is a read-only Blocks.
type getterBlocks struct{ Getter }

func (g getterBlocks) Has(ctx context.Context, c cid.Cid) (bool, error) {
	_, err := g.Get(ctx, c)
	if errors.Is(err, ErrNotFound) {
		return false, nil
	}
	return err == nil, err
}

func (g getterBlocks) Put(context.Context, cid.Cid, []byte) error {
	return errors.New("artifact: read-only block source")
}
