package nodeclient

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"encoding/hex"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ipfs/go-cid"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	pb "github.com/zooai/gym/api/hanzod/v1"
	"github.com/zooai/gym/artifact"
	"github.com/zooai/gym/artifact/store"
	"github.com/zooai/gym/artifact/transfer"
	"github.com/zooai/gym/model/llama"
	"github.com/zooai/gym/model/peft"
	"github.com/zooai/gym/protocol/jobconf"
)

func key(seed byte) ed25519.PrivateKey           { return ed25519.NewKeyFromSeed(bytes.Repeat([]byte{seed}, 32)) }
func pub(k ed25519.PrivateKey) ed25519.PublicKey { return k.Public().(ed25519.PublicKey) }
func id(k ed25519.PrivateKey) string             { return hex.EncodeToString(pub(k)) }

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// fakeHanzod is an in-memory gRPC connection that answers Register and
// Heartbeat with a fixed assignment.
type fakeHanzod struct{ a *pb.Assignment }

func (f *fakeHanzod) Invoke(_ context.Context, method string, _, reply any, _ ...grpc.CallOption) error {
	switch r := reply.(type) {
	case *pb.HeartbeatResponse:
		r.Assignment = f.a
		return nil
	case *pb.RegisterResponse:
		return nil
	}
	return status.Error(codes.Unimplemented, method)
}

func (f *fakeHanzod) NewStream(context.Context, *grpc.StreamDesc, string, ...grpc.CallOption) (grpc.ClientStream, error) {
	return nil, errors.New("no streams")
}

// counting counts the block requests a handler answers; after leave of
// them (if positive) it drops every connection, as a server that goes
// away does.
type counting struct {
	h      http.Handler
	n      atomic.Int64
	leave  atomic.Int64
	closed atomic.Bool
}

func (c *counting) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if strings.HasPrefix(r.URL.Path, "/ipfs/") {
		if n := c.n.Add(1); c.leave.Load() > 0 && n > c.leave.Load() {
			c.closed.Store(true)
		}
	}
	if c.closed.Load() {
		conn, _, err := http.NewResponseController(w).Hijack()
		if err == nil {
			conn.Close()
		}
		return
	}
	c.h.ServeHTTP(w, r)
}

// testModel is the shape of the checkpoints' base model.
var testModel = llama.Config{Arch: llama.Qwen2, Vocab: 64, Hidden: 256, Intermediate: 1024, Layers: 8, Heads: 4, KVHeads: 4,
	HeadDim: 64, MaxPositions: 32, NormEps: 1e-6, RopeTheta: 10000}

// checkpoint publishes a PEFT adapter of about 9 MiB (36 chunks) as
// hanzod's checkpoint of job-1, epoch 1.
func checkpoint(t *testing.T, st *store.Store, signer ed25519.PrivateKey, name string) (*llama.Adapter, cid.Cid) {
	t.Helper()
	a, err := llama.InitAdapter(testModel, 48, 16, []llama.Module{llama.QProj, llama.KProj, llama.VProj, llama.OProj, llama.GateProj, llama.UpProj, llama.DownProj}, 1)
	must(t, err)
	dir := filepath.Join(t.TempDir(), "ckpt")
	must(t, peft.Write(dir, a, peft.Card{BaseModel: "zooai/gym-base", BaseSHA3: strings.Repeat("0", 64), Job: name, Epoch: 1, WeightsCID: "bafk-test"}))
	must(t, os.WriteFile(filepath.Join(dir, jobconf.OuterFile), outerBytes(name), 0o644))
	rec, err := st.Publish(context.Background(), dir, store.Meta{Kind: artifact.KindCheckpoint, Name: name, Version: 1}, signer, time.Now())
	must(t, err)
	root, err := cid.Decode(rec.Root)
	must(t, err)
	return a, root
}

// outerBytes stands for the outer optimiser's state of checkpoint name
// (FetchCheckpoint returns the file's bytes; jobconf parses them).
func outerBytes(name string) []byte { return []byte("outer state of " + name) }

type bed struct {
	hanzodKey ed25519.PrivateKey
	hanzod    *counting
	hanzodURL string
	root      cid.Cid
	adapter   *llama.Adapter
	assign    *pb.Assignment
	store     *store.Store // hanzod's
}

func newBed(t *testing.T, members ...ed25519.PrivateKey) *bed {
	b := &bed{hanzodKey: key(100)}
	st, err := store.Open(store.DefaultConfig(t.TempDir()))
	must(t, err)
	t.Cleanup(func() { st.Close() })
	b.adapter, b.root = checkpoint(t, st, b.hanzodKey, "job-1")
	b.store = st
	var keys []ed25519.PublicKey
	ids := []string{}
	for _, m := range members {
		keys = append(keys, pub(m))
		ids = append(ids, id(m))
	}
	srv, err := transfer.NewServer(transfer.ServerConfig{Key: b.hanzodKey, Store: st, Allow: transfer.AllowKeys(keys...)})
	must(t, err)
	b.hanzod = &counting{h: srv}
	hs := httptest.NewServer(b.hanzod)
	t.Cleanup(hs.Close)
	b.assign = &pb.Assignment{Job: "job-1", JobState: "running", Epoch: 2, Checkpoint: b.root.String(),
		Artifacts: id(b.hanzodKey) + "@" + strings.TrimPrefix(hs.URL, "http://"), Ring: &pb.RingConfig{Members: ids}}
	return b
}

func (b *bed) node(t *testing.T, k ed25519.PrivateKey, extra ...transfer.Peer) *Client {
	t.Helper()
	c, err := New(Config{Key: k, Conn: &fakeHanzod{a: b.assign}, Dir: t.TempDir(), ExtraSources: extra})
	must(t, err)
	t.Cleanup(func() { c.Close() })
	_, err = c.Heartbeat(context.Background())
	must(t, err)
	return c
}

// serve runs c's artifact server and returns it as a peer.
func serve(t *testing.T, c *Client, cfg ServeConfig) (transfer.Peer, *counting) {
	t.Helper()
	srv, err := c.ArtifactServer(cfg)
	must(t, err)
	t.Cleanup(func() { srv.Close() })
	h := &counting{h: srv}
	hs := httptest.NewServer(h)
	t.Cleanup(hs.Close)
	return transfer.Peer{URL: hs.URL, Key: pub(c.cfg.Key)}, h
}

func sameAdapter(t *testing.T, got, want *llama.Adapter) {
	t.Helper()
	if llama.Digest(got.Views()) != llama.Digest(want.Views()) {
		t.Fatal("the fetched checkpoint differs from the published one")
	}
}

// A checkpoint is fetched from hanzod and a peer worker at once; hanzod
// goes away mid-fetch and the fetch completes from the peer.
func TestFetchCheckpointFromPeers(t *testing.T) {
	ctx := context.Background()
	a, bk := key(1), key(2)
	b := newBed(t, a, bk)
	na := b.node(t, a)
	got, outer, err := na.FetchCheckpoint(ctx, b.root.String(), testModel)
	must(t, err)
	sameAdapter(t, got, b.adapter)
	if !bytes.Equal(outer, outerBytes("job-1")) {
		t.Fatalf("outer state %q, want the checkpoint's", outer)
	}
	fromHanzod := b.hanzod.n.Load()
	peerA, servedA := serve(t, na, ServeConfig{})

	nb := b.node(t, bk, peerA)
	b.hanzod.leave.Store(fromHanzod + 8) // hanzod leaves after 8 more blocks
	got, _, err = nb.FetchCheckpoint(ctx, b.root.String(), testModel)
	must(t, err)
	sameAdapter(t, got, b.adapter)
	if !b.hanzod.closed.Load() {
		t.Fatal("hanzod never left: the fetch did not need the peer")
	}
	h, p := b.hanzod.n.Load()-fromHanzod, servedA.n.Load()
	if h < 1 || p < 1 || p < fromHanzod-8 {
		t.Fatalf("blocks asked of hanzod %d, of the peer %d; the checkpoint has %d", h, p, fromHanzod)
	}
	t.Logf("%d blocks: %d requests to hanzod (left after 8), %d to the peer", fromHanzod, h, p)

	// Another fetch of what B holds asks nobody.
	before := servedA.n.Load()
	_, _, err = nb.FetchCheckpoint(ctx, b.root.String(), testModel)
	must(t, err)
	if servedA.n.Load() != before {
		t.Fatal("a held checkpoint was fetched again")
	}
}

// A peer that is down, or that does not hold the checkpoint, does not stop
// a fetch from hanzod.
func TestFetchCheckpointDeadPeers(t *testing.T) {
	a, bk := key(1), key(2)
	b := newBed(t, a, bk)
	na := b.node(t, a) // holds nothing
	empty, _ := serve(t, na, ServeConfig{})
	dead := httptest.NewServer(http.NotFoundHandler())
	dead.Close()
	nb := b.node(t, bk, empty, transfer.Peer{URL: dead.URL}) // keyless: resolving fails, skipped
	got, _, err := nb.FetchCheckpoint(context.Background(), b.root.String(), testModel)
	must(t, err)
	sameAdapter(t, got, b.adapter)
}

// Who may read from a worker's artifact server.
func TestArtifactServerPolicy(t *testing.T) {
	ctx := context.Background()
	a, named, stranger, allowed := key(1), key(2), key(3), key(4)
	b := newBed(t, a, named)
	na := b.node(t, a)
	_, _, err := na.FetchCheckpoint(ctx, b.root.String(), testModel)
	must(t, err)
	// Something in A's store that hanzod did not sign.
	_, foreign := checkpoint(t, na.Store(), key(50), "private")

	get := func(p transfer.Peer, k ed25519.PrivateKey, root cid.Cid) error {
		st, err := store.Open(store.DefaultConfig(t.TempDir()))
		must(t, err)
		defer st.Close()
		_, _, err = transfer.GetArtifact(ctx, root, transfer.Get{Client: &transfer.Client{Key: k}, Peers: []transfer.Peer{p}, Store: st})
		return err
	}
	def, _ := serve(t, na, ServeConfig{Allow: []ed25519.PublicKey{pub(allowed)}})
	anyKey, _ := serve(t, na, ServeConfig{AllowAny: true})
	for _, tc := range []struct {
		name   string
		peer   transfer.Peer
		k      ed25519.PrivateKey
		root   cid.Cid
		refuse bool
	}{
		{"named node, hanzod's checkpoint", def, named, b.root, false},
		{"unnamed node", def, stranger, b.root, true},
		{"named node, checkpoint not signed by hanzod", def, named, foreign, true},
		{"allow-listed key, hanzod's checkpoint", def, allowed, b.root, false},
		{"allow-listed key, any artifact", def, allowed, foreign, false},
		{"allow-any: unnamed node, hanzod's checkpoint", anyKey, stranger, b.root, false},
		{"allow-any: unnamed node, checkpoint not signed by hanzod", anyKey, stranger, foreign, true},
	} {
		err := get(tc.peer, tc.k, tc.root)
		if refused := errors.Is(err, transfer.ErrRefused); refused != tc.refuse || (!tc.refuse && err != nil) {
			t.Errorf("%s: %v", tc.name, err)
		}
	}
}

// A base model a job names by CID, published by anyone into hanzod's
// store, is fetched from hanzod (FetchBase: whoever signed the manifest,
// the CID is the anchor), served to the nodes hanzod named (not to
// others), and a block it lost is fetched again.
func TestFetchBase(t *testing.T) {
	ctx := context.Background()
	a, named, stranger := key(1), key(2), key(3)
	b := newBed(t, a, named)
	// The "base": a directory of a few MiB, signed by a user's key.
	dir := filepath.Join(t.TempDir(), "base")
	w, err := llama.InitAdapter(testModel, 16, 16, []llama.Module{llama.QProj}, 2)
	must(t, err)
	must(t, peft.Write(dir, w, peft.Card{BaseModel: "m", BaseSHA3: strings.Repeat("0", 64), Job: "j", Epoch: 1, WeightsCID: "bafk-test"}))
	rec, err := b.store.Publish(ctx, dir, store.Meta{Kind: artifact.KindBaseModel, Name: "Qwen/tiny"}, key(60), time.Now())
	must(t, err)
	root, err := cid.Decode(rec.Root)
	must(t, err)

	na := b.node(t, a)
	must(t, na.FetchBase(ctx, root))
	if _, err := na.Store().Artifact(root); err != nil {
		t.Fatal(err)
	}
	peerA, servedA := serve(t, na, ServeConfig{})
	get := func(k ed25519.PrivateKey) error {
		st, err := store.Open(store.DefaultConfig(t.TempDir()))
		must(t, err)
		defer st.Close()
		_, _, err = transfer.GetArtifact(ctx, root, transfer.Get{Client: &transfer.Client{Key: k}, Peers: []transfer.Peer{peerA}, Store: st})
		return err
	}
	if err := get(named); err != nil {
		t.Errorf("a named node fetching the base from a peer: %v", err)
	}
	if err := get(stranger); !errors.Is(err, transfer.ErrRefused) {
		t.Errorf("an unnamed node fetching the base from a peer: %v", err)
	}
	if servedA.n.Load() == 0 {
		t.Fatal("the peer served nothing")
	}

	// A block of A's copy rots (the largest file, a chunk of the weights):
	// verifying the store drops it, and FetchBase puts it back from hanzod.
	var biggest string
	var size int64
	filepath.WalkDir(filepath.Join(na.Store().Dir(), "blocks"), func(p string, d os.DirEntry, err error) error {
		if fi, err := d.Info(); err == nil && fi.Mode().IsRegular() && fi.Size() > size {
			biggest, size = p, fi.Size()
		}
		return nil
	})
	data, err := os.ReadFile(biggest)
	must(t, err)
	data[len(data)/2] ^= 1
	must(t, os.WriteFile(biggest, data, 0o644))
	if errs := na.Store().Verify(ctx); len(errs) == 0 {
		t.Fatal("the rotted block went unnoticed")
	}
	before := b.hanzod.n.Load()
	must(t, na.FetchBase(ctx, root))
	if errs := na.Store().Verify(ctx); len(errs) != 0 {
		t.Fatalf("after FetchBase: %v", errs)
	}
	if got := b.hanzod.n.Load() - before; got != 1 {
		t.Errorf("%d blocks fetched to repair one", got)
	}
}

// A node hanzod named stays allowed for PeerTTL after the last assignment
// naming it; before any assignment nothing but the allow-list is.
func TestNamedPeersExpire(t *testing.T) {
	var mu sync.Mutex
	now := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	a, named := key(1), key(2)
	b := newBed(t, a, named)
	c, err := New(Config{Key: a, Conn: &fakeHanzod{a: b.assign}, Dir: t.TempDir(), Now: clock})
	must(t, err)
	defer c.Close()
	cfg := ServeConfig{PeerTTL: time.Hour}
	if c.mayRead(pub(named), b.root, cfg) {
		t.Fatal("allowed before any assignment")
	}
	_, err = c.Heartbeat(context.Background())
	must(t, err)
	if !c.mayRead(pub(named), b.root, cfg) || c.mayRead(pub(key(9)), b.root, cfg) {
		t.Fatal("after the assignment: the named node refused or another allowed")
	}
	mu.Lock()
	now = now.Add(61 * time.Minute)
	mu.Unlock()
	if c.mayRead(pub(named), b.root, cfg) {
		t.Fatal("still allowed after PeerTTL")
	}
}
