package artifact

import (
	"context"
	"fmt"
	"math/bits"
	"sort"
	"strconv"

	dag "github.com/ipfs/boxo/ipld/merkledag"
	"github.com/ipfs/boxo/ipld/unixfs"
	"github.com/ipfs/boxo/ipld/unixfs/hamt"
	pb "github.com/ipfs/boxo/ipld/unixfs/pb"
	"github.com/ipfs/go-cid"
)

// Getter is the read half of Blocks.
type Getter interface {
	Get(ctx context.Context, c cid.Cid) ([]byte, error)
}

// LeafSizer is implemented by a Getter that can vouch for raw leaves
// without reading them (a store's Session, for the blocks it verified and
// wrote itself): Walk asks it for a leaf's size instead of reading the leaf
// and hashing it again, so completing a fetched artifact reads and hashes
// only the DAG's interior nodes. Leaves carry no links, so the DAG's
// structure is still verified whole, and every leaf's size against its
// parent's. A LeafSizer reads and verifies any leaf it cannot vouch for.
type LeafSizer interface {
	LeafSize(ctx context.Context, c cid.Cid) (uint64, error)
}

// Limits bound what Walk accepts from a DAG that may be hostile.
type Limits struct {
	MaxBlocks int    // distinct blocks
	MaxVisits int    // node visits, counting a shared subtree once per path
	MaxFiles  int    // files and directories
	MaxDepth  int    // nesting of directories, shards and file nodes
	MaxSize   uint64 // total bytes of the files
}

// DefaultLimits allow a 4 TiB artifact of up to a million files.
func DefaultLimits() Limits {
	return Limits{MaxBlocks: 1 << 24, MaxVisits: 1 << 25, MaxFiles: 1 << 20, MaxDepth: 128, MaxSize: 4 << 40}
}

// Index describes a whole, verified DAG.
type Index struct {
	Root       cid.Cid
	Blocks     []cid.Cid          // every distinct block, parents before children
	BlockBytes uint64             // sum of the distinct blocks' sizes
	Files      []File             // sorted by Path
	Dirs       []string           // every directory but the root, sorted
	Size       uint64             // sum of file sizes
	FileCIDs   map[string]cid.Cid // the root of each file's DAG, by path
}

// Contains reports whether c is one of the DAG's blocks.
func (ix *Index) Contains(c cid.Cid) bool {
	for _, b := range ix.Blocks {
		if b.Equals(c) {
			return true
		}
	}
	return false
}

// Set returns the blocks as a set keyed by multihash.
func (ix *Index) Set() map[string]struct{} {
	m := make(map[string]struct{}, len(ix.Blocks))
	for _, b := range ix.Blocks {
		m[string(b.Hash())] = struct{}{}
	}
	return m
}

// Children decodes the links of block c (already verified): none for a
// raw block, the links of a dag-pb node otherwise. It refuses links to CIDs
// CheckCID refuses.
func Children(c cid.Cid, data []byte) ([]cid.Cid, error) {
	if c.Type() == cid.Raw {
		return nil, nil
	}
	pn, err := dag.DecodeProtobuf(data)
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %v", ErrBadDAG, c, err)
	}
	out := make([]cid.Cid, 0, len(pn.Links()))
	for _, l := range pn.Links() {
		if err := CheckCID(l.Cid); err != nil {
			return nil, fmt.Errorf("%w: link from %s: %v", ErrBadDAG, c, err)
		}
		out = append(out, l.Cid)
	}
	return out, nil
}

// Walk reads the DAG under root from g, verifying every block against its
// CID and the UnixFS structure (file sizes, directory names, HAMT shards),
// and returns its index. Symlinks and names that ValidName refuses are
// ErrHostilePath; a missing block is the Getter's error (ErrNotFound).
func Walk(ctx context.Context, g Getter, root cid.Cid, lim Limits) (*Index, error) {
	w := &walker{ctx: ctx, g: g, lim: lim, seen: map[string]bool{}, sizes: map[string]uint64{}, ix: &Index{Root: root, FileCIDs: map[string]cid.Cid{}}}
	if err := w.entry(root, "", 0); err != nil {
		return nil, err
	}
	sort.Slice(w.ix.Files, func(i, j int) bool { return w.ix.Files[i].Path < w.ix.Files[j].Path })
	sort.Strings(w.ix.Dirs)
	return w.ix, nil
}

type walker struct {
	ctx    context.Context
	g      Getter
	lim    Limits
	seen   map[string]bool
	sizes  map[string]uint64 // verified size of a file subtree, by CID
	visits int
	ix     *Index
}

// visit counts a node visit against the walk's limits and checks c.
func (w *walker) visit(c cid.Cid, depth int) error {
	if err := w.ctx.Err(); err != nil {
		return err
	}
	if depth > w.lim.MaxDepth {
		return fmt.Errorf("%w: deeper than %d", ErrBadDAG, w.lim.MaxDepth)
	}
	w.visits++
	if w.visits > w.lim.MaxVisits {
		return fmt.Errorf("%w: more than %d node visits", ErrTooLarge, w.lim.MaxVisits)
	}
	return CheckCID(c)
}

func (w *walker) get(c cid.Cid, depth int) ([]byte, error) {
	if err := w.visit(c, depth); err != nil {
		return nil, err
	}
	data, err := w.g.Get(w.ctx, c)
	if err != nil {
		return nil, err
	}
	if err := Check(c, data); err != nil {
		return nil, err
	}
	return data, w.add(c, uint64(len(data)))
}

// add records a distinct block in the index.
func (w *walker) add(c cid.Cid, size uint64) error {
	k := string(c.Hash()) // CIDv0 and v1 of one block are one block
	if !w.seen[k] {
		w.seen[k] = true
		if len(w.ix.Blocks) >= w.lim.MaxBlocks {
			return fmt.Errorf("%w: more than %d blocks", ErrTooLarge, w.lim.MaxBlocks)
		}
		w.ix.Blocks = append(w.ix.Blocks, c)
		w.ix.BlockBytes += size
	}
	return nil
}

// leafSize returns a raw leaf's size: from a LeafSizer without reading
// the leaf, else by reading and verifying it.
func (w *walker) leafSize(c cid.Cid, depth int) (uint64, error) {
	ls, ok := w.g.(LeafSizer)
	if !ok {
		data, err := w.get(c, depth)
		return uint64(len(data)), err
	}
	if err := w.visit(c, depth); err != nil {
		return 0, err
	}
	size, err := ls.LeafSize(w.ctx, c)
	if err != nil {
		return 0, err
	}
	if size > MaxBlockSize {
		return 0, fmt.Errorf("%w: block %s is %d bytes", ErrTooLarge, c, size)
	}
	return size, w.add(c, size)
}

func join(dir, name string) string {
	if dir == "" {
		return name
	}
	return dir + "/" + name
}

func (w *walker) addPath(p string, c cid.Cid, isDir bool, size uint64) error {
	if len(w.ix.Files)+len(w.ix.Dirs) >= w.lim.MaxFiles {
		return fmt.Errorf("%w: more than %d files", ErrTooLarge, w.lim.MaxFiles)
	}
	if isDir {
		if p != "" {
			w.ix.Dirs = append(w.ix.Dirs, p)
		}
		return nil
	}
	w.ix.Size += size
	if w.ix.Size > w.lim.MaxSize || w.ix.Size < size {
		return fmt.Errorf("%w: files larger than %d bytes", ErrTooLarge, w.lim.MaxSize)
	}
	w.ix.Files = append(w.ix.Files, File{Path: p, Size: size})
	w.ix.FileCIDs[p] = c
	return nil
}

func decodeUnixFS(c cid.Cid, data []byte) (*dag.ProtoNode, *unixfs.FSNode, error) {
	pn, err := dag.DecodeProtobuf(data)
	if err != nil {
		return nil, nil, fmt.Errorf("%w: %s: %v", ErrBadDAG, c, err)
	}
	fsn, err := unixfs.FSNodeFromBytes(pn.Data())
	if err != nil {
		return nil, nil, fmt.Errorf("%w: %s: %v", ErrBadDAG, c, err)
	}
	return pn, fsn, nil
}

// entry walks the file or directory c found at path p.
func (w *walker) entry(c cid.Cid, p string, depth int) error {
	if c.Type() == cid.Raw {
		size, err := w.leafSize(c, depth)
		if err != nil {
			return err
		}
		return w.addPath(p, c, false, size)
	}
	data, err := w.get(c, depth)
	if err != nil {
		return err
	}
	pn, fsn, err := decodeUnixFS(c, data)
	if err != nil {
		return err
	}
	switch fsn.Type() {
	case pb.Data_File, pb.Data_Raw:
		size, err := w.fileSize(c, pn, fsn, depth)
		if err != nil {
			return err
		}
		return w.addPath(p, c, false, size)
	case pb.Data_Directory:
		if err := w.addPath(p, c, true, 0); err != nil {
			return err
		}
		names := map[string]bool{}
		for _, l := range pn.Links() {
			if err := w.child(l.Name, l.Cid, p, names, depth); err != nil {
				return err
			}
		}
		return nil
	case pb.Data_HAMTShard:
		if err := w.addPath(p, c, true, 0); err != nil {
			return err
		}
		return w.shard(c, pn, fsn, p, map[string]bool{}, depth)
	case pb.Data_Symlink:
		return fmt.Errorf("%w: %q is a symlink", ErrHostilePath, p)
	}
	return fmt.Errorf("%w: %s has UnixFS type %v", ErrBadDAG, c, fsn.Type())
}

func (w *walker) child(name string, c cid.Cid, dir string, names map[string]bool, depth int) error {
	if err := ValidName(name); err != nil {
		return fmt.Errorf("%w (in %q)", err, dir)
	}
	if names[name] {
		return fmt.Errorf("%w: %q appears twice in %q", ErrBadDAG, name, dir)
	}
	names[name] = true
	return w.entry(c, join(dir, name), depth+1)
}

// shard walks one HAMT shard node: a link whose name is only the bucket
// prefix is a sub-shard, any other link is an entry named after the prefix.
func (w *walker) shard(c cid.Cid, pn *dag.ProtoNode, fsn *unixfs.FSNode, dir string, names map[string]bool, depth int) error {
	fanout := fsn.Fanout()
	if fsn.HashType() != hamt.HashMurmur3 || fanout < 2 || fanout > 1<<16 || bits.OnesCount64(fanout) != 1 {
		return fmt.Errorf("%w: %s: HAMT shard with fanout %d, hash 0x%x", ErrBadDAG, c, fanout, fsn.HashType())
	}
	pad := len(strconv.FormatUint(fanout-1, 16))
	for _, l := range pn.Links() {
		if len(l.Name) < pad {
			return fmt.Errorf("%w: %s: shard link %q", ErrBadDAG, c, l.Name)
		}
		if len(l.Name) > pad {
			if err := w.child(l.Name[pad:], l.Cid, dir, names, depth); err != nil {
				return err
			}
			continue
		}
		data, err := w.get(l.Cid, depth+1)
		if err != nil {
			return err
		}
		if l.Cid.Type() != cid.DagProtobuf {
			return fmt.Errorf("%w: %s: sub-shard %s is raw", ErrBadDAG, c, l.Cid)
		}
		spn, sfsn, err := decodeUnixFS(l.Cid, data)
		if err != nil {
			return err
		}
		if sfsn.Type() != pb.Data_HAMTShard {
			return fmt.Errorf("%w: %s: sub-shard %s is %v", ErrBadDAG, c, l.Cid, sfsn.Type())
		}
		if err := w.shard(l.Cid, spn, sfsn, dir, names, depth+1); err != nil {
			return err
		}
	}
	return nil
}

// fileSize verifies a UnixFS file node and its subtree and returns its
// size: the node's own data plus its children, each child of the size the
// node declares for it, adding up to the declared file size.
func (w *walker) fileSize(c cid.Cid, pn *dag.ProtoNode, fsn *unixfs.FSNode, depth int) (uint64, error) {
	if s, ok := w.sizes[c.KeyString()]; ok {
		return s, nil
	}
	links := pn.Links()
	if len(links) != fsn.NumChildren() {
		return 0, fmt.Errorf("%w: %s: %d links, %d block sizes", ErrBadDAG, c, len(links), fsn.NumChildren())
	}
	total := uint64(len(fsn.Data()))
	for i, l := range links {
		var s uint64
		if l.Cid.Type() == cid.Raw {
			var err error
			if s, err = w.leafSize(l.Cid, depth+1); err != nil {
				return 0, err
			}
		} else {
			data, err := w.get(l.Cid, depth+1)
			if err != nil {
				return 0, err
			}
			cpn, cfsn, err := decodeUnixFS(l.Cid, data)
			if err != nil {
				return 0, err
			}
			if t := cfsn.Type(); t != pb.Data_File && t != pb.Data_Raw {
				return 0, fmt.Errorf("%w: %s: file child %s is %v", ErrBadDAG, c, l.Cid, t)
			}
			if s, err = w.fileSize(l.Cid, cpn, cfsn, depth+1); err != nil {
				return 0, err
			}
		}
		if s != fsn.BlockSize(i) {
			return 0, fmt.Errorf("%w: %s: child %d is %d bytes, declared %d", ErrBadDAG, c, i, s, fsn.BlockSize(i))
		}
		total += s
		if total > w.lim.MaxSize {
			return 0, fmt.Errorf("%w: file larger than %d bytes", ErrTooLarge, w.lim.MaxSize)
		}
	}
	if total != fsn.FileSize() {
		return 0, fmt.Errorf("%w: %s: %d bytes, declared %d", ErrBadDAG, c, total, fsn.FileSize())
	}
	w.sizes[c.KeyString()] = total
	return total, nil
}
