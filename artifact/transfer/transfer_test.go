package transfer

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"errors"
	"io/fs"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ipfs/go-cid"
	"github.com/zooai/gym/artifact"
	"github.com/zooai/gym/artifact/store"
)

var now = time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)

func clock() time.Time { return now }

func key(seed byte) ed25519.PrivateKey {
	return ed25519.NewKeyFromSeed(bytes.Repeat([]byte{seed}, 32))
}

func pub(k ed25519.PrivateKey) ed25519.PublicKey { return k.Public().(ed25519.PublicKey) }

var (
	publisherKey = key(1)
	fetcherKey   = key(9)
	strangerKey  = key(7)
)

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func randBytes(seed uint64, n int) []byte {
	r := rand.New(rand.NewPCG(seed, 2))
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

// source writes a checkpoint of about 3 MiB: 13 blocks of file data.
func checkpointDir(t *testing.T) string {
	dir := t.TempDir()
	must(t, os.WriteFile(filepath.Join(dir, "config.json"), []byte(`{"d":64}`), 0o644))
	must(t, os.Mkdir(filepath.Join(dir, "w"), 0o755))
	must(t, os.WriteFile(filepath.Join(dir, "w", "a.bin"), randBytes(1, 2<<20+5), 0o644))
	must(t, os.WriteFile(filepath.Join(dir, "w", "b.bin"), randBytes(2, 1<<20), 0o644))
	return dir
}

type node struct {
	key   ed25519.PrivateKey
	store *store.Store
	srv   *httptest.Server
	peer  Peer
	hits  atomic.Int64
	api   *Server
}

func newNode(t testing.TB, dir string, k ed25519.PrivateKey, quota int64, wrap func(http.Handler) http.Handler) *node {
	t.Helper()
	cfg := store.DefaultConfig(dir)
	cfg.Quota = quota
	st, err := store.Open(cfg)
	must(t, err)
	t.Cleanup(func() { st.Close() })
	n := &node{key: k, store: st}
	s, err := NewServer(ServerConfig{Key: k, Store: st, Allow: AllowKeys(pub(fetcherKey), pub(publisherKey)), Now: clock})
	must(t, err)
	n.api = s
	var h http.Handler = s
	if wrap != nil {
		h = wrap(h)
	}
	n.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n.hits.Add(1)
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(n.srv.Close)
	n.peer = Peer{URL: n.srv.URL, Key: pub(k)}
	return n
}

func client(k ed25519.PrivateKey) *Client { return &Client{Key: k, Now: clock} }

// seed publishes the source on a, copies it to the others over HTTP, and
// returns the root.
func seed(t *testing.T, src string, a *node, others ...*node) cid.Cid {
	t.Helper()
	rec, err := a.store.Publish(context.Background(), src, store.Meta{Kind: artifact.KindCheckpoint, Name: "zoo/ckpt"}, publisherKey, now)
	must(t, err)
	root, _ := cid.Decode(rec.Root)
	for _, o := range others {
		_, _, err := GetArtifact(context.Background(), root, Get{Client: client(fetcherKey), Peers: []Peer{a.peer}, Store: o.store, Now: clock})
		must(t, err)
	}
	return root
}

func blockFiles(t *testing.T, dir string) int {
	n := 0
	filepath.WalkDir(filepath.Join(dir, "blocks"), func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			n++
		}
		return nil
	})
	return n
}

func sameFiles(t *testing.T, src, out string) {
	t.Helper()
	for _, p := range []string{"config.json", "w/a.bin", "w/b.bin"} {
		a, err := os.ReadFile(filepath.Join(src, p))
		must(t, err)
		b, err := os.ReadFile(filepath.Join(out, p))
		must(t, err)
		if !bytes.Equal(a, b) {
			t.Fatalf("%s differs after transfer", p)
		}
	}
}

func TestFetchFromThreeSources(t *testing.T) {
	src := checkpointDir(t)
	a := newNode(t, t.TempDir(), key(1), 0, nil)
	b := newNode(t, t.TempDir(), key(2), 0, nil)
	c := newNode(t, t.TempDir(), key(3), 0, nil)
	root := seed(t, src, a, b, c)
	dstDir := t.TempDir()
	d := newNode(t, dstDir, key(4), 0, nil)
	rec, st, err := GetArtifact(context.Background(), root, Get{
		Client: client(fetcherKey), Peers: []Peer{a.peer, b.peer, c.peer}, Store: d.store, Now: clock,
		Trust: func(k ed25519.PublicKey) bool { return k.Equal(pub(publisherKey)) },
	})
	must(t, err)
	if len(st.PerSource) < 2 {
		t.Errorf("blocks came from %d source(s): %v", len(st.PerSource), st.PerSource)
	}
	if st.Fetched != len(rec.Blocks) || st.Resumed != 0 {
		t.Errorf("fetched %d, resumed %d, artifact has %d blocks", st.Fetched, st.Resumed, len(rec.Blocks))
	}
	out := t.TempDir()
	must(t, d.store.Export(context.Background(), root, out, ""))
	sameFiles(t, src, out)

	// Untrusted creator: refused before a block is fetched.
	e := newNode(t, t.TempDir(), key(5), 0, nil)
	_, _, err = GetArtifact(context.Background(), root, Get{
		Client: client(fetcherKey), Peers: []Peer{a.peer}, Store: e.store, Now: clock,
		Trust: func(k ed25519.PublicKey) bool { return false },
	})
	if !errors.Is(err, ErrUntrusted) || e.store.Used() != 0 {
		t.Fatalf("untrusted: %v, %d bytes stored", err, e.store.Used())
	}
}

// killAfter aborts every request after the first n and closes the server.
func killAfter(n int64, srv **httptest.Server) func(http.Handler) http.Handler {
	var count atomic.Int64
	return func(h http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if count.Add(1) > n {
				if count.Load() == n+1 {
					go (*srv).Close()
				}
				panic(http.ErrAbortHandler)
			}
			h.ServeHTTP(w, r)
		})
	}
}

func TestSourceKilledThenResumeAfterRestart(t *testing.T) {
	ctx := context.Background()
	src := checkpointDir(t)
	a := newNode(t, t.TempDir(), key(1), 0, nil)
	b := newNode(t, t.TempDir(), key(2), 0, nil)
	root := seed(t, src, a, b)

	// A third source that dies after the manifest and 5 blocks.
	var dying *httptest.Server
	k := newNode(t, t.TempDir(), key(3), 0, killAfter(6, &dying))
	dying = k.srv
	// (k serves what a has: copy it over with k's kill switch not yet counting.)
	_, _, err := GetArtifact(ctx, root, Get{Client: client(fetcherKey), Peers: []Peer{a.peer}, Store: k.store, Now: clock})
	must(t, err)

	// Alone, the dying source leaves a partial fetch behind.
	dstDir := t.TempDir()
	d := newNode(t, dstDir, key(4), 0, nil)
	_, st1, err := GetArtifact(ctx, root, Get{Client: client(fetcherKey), Peers: []Peer{k.peer}, Store: d.store, Now: clock, Fetch: FetchConfig{Workers: 1}})
	if !errors.Is(err, ErrExhausted) {
		t.Fatalf("fetch from a dead source: %v", err)
	}
	if st1.Fetched == 0 {
		t.Fatal("nothing was fetched before the source died")
	}
	if len(d.store.List()) != 0 {
		t.Fatal("a partial artifact is visible")
	}
	held := blockFiles(t, dstDir)

	// Restart the fetching node; resume from b: nothing fetched twice.
	d.store.Close()
	d2 := newNode(t, dstDir, key(4), 0, nil)
	rec, st2, err := GetArtifact(ctx, root, Get{Client: client(fetcherKey), Peers: []Peer{k.peer, b.peer}, Store: d2.store, Now: clock})
	must(t, err)
	if st2.Fetched+held != len(rec.Blocks) || st2.Resumed != held {
		t.Fatalf("resume fetched %d and reused %d of %d blocks (%d were held)", st2.Fetched, st2.Resumed, len(rec.Blocks), held)
	}
	out := t.TempDir()
	must(t, d2.store.Export(ctx, root, out, ""))
	sameFiles(t, src, out)
}

func TestSourceDiesMidTransferOthersContinue(t *testing.T) {
	ctx := context.Background()
	src := checkpointDir(t)
	a := newNode(t, t.TempDir(), key(1), 0, nil)
	root := seed(t, src, a)
	var dying *httptest.Server
	k := newNode(t, t.TempDir(), key(3), 0, killAfter(4, &dying))
	dying = k.srv
	_, _, err := GetArtifact(ctx, root, Get{Client: client(fetcherKey), Peers: []Peer{a.peer}, Store: k.store, Now: clock})
	must(t, err)
	d := newNode(t, t.TempDir(), key(4), 0, nil)
	rec, st, err := GetArtifact(ctx, root, Get{Client: client(fetcherKey), Peers: []Peer{k.peer, a.peer}, Store: d.store, Now: clock})
	must(t, err)
	if st.PerSource[k.peer.URL] == 0 || st.PerSource[a.peer.URL] == 0 || st.Fetched != len(rec.Blocks) {
		t.Fatalf("per source %v, fetched %d of %d", st.PerSource, st.Fetched, len(rec.Blocks))
	}
}

// corrupting flips a byte of every raw block it serves.
func corrupting(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, r)
		body := rec.Body.Bytes()
		if r.URL.Query().Get("format") == "raw" && len(body) > 0 {
			body[len(body)/2] ^= 0x40
		}
		for k, v := range rec.Header() {
			w.Header()[k] = v
		}
		w.WriteHeader(rec.Code)
		w.Write(body)
	})
}

func TestCorruptingSource(t *testing.T) {
	ctx := context.Background()
	src := checkpointDir(t)
	a := newNode(t, t.TempDir(), key(1), 0, nil)
	root := seed(t, src, a)
	bad := newNode(t, t.TempDir(), key(2), 0, corrupting)
	_, _, err := GetArtifact(ctx, root, Get{Client: client(fetcherKey), Peers: []Peer{a.peer}, Store: bad.store, Now: clock})
	must(t, err)

	// With only the corrupting source: an error, and no bad block kept.
	dDir := t.TempDir()
	d := newNode(t, dDir, key(4), 0, nil)
	_, st, err := GetArtifact(ctx, root, Get{Client: client(fetcherKey), Peers: []Peer{bad.peer}, Store: d.store, Now: clock})
	if !errors.Is(err, ErrExhausted) || st.Corrupt == 0 || st.Fetched != 0 {
		t.Fatalf("corrupt-only fetch: %v, %+v", err, st.Progress)
	}
	if blockFiles(t, dDir) != 0 {
		t.Fatal("a corrupt block was stored")
	}
	// With an honest source too: every corrupt block is re-fetched from it.
	rec, st, err := GetArtifact(ctx, root, Get{Client: client(fetcherKey), Peers: []Peer{bad.peer, a.peer}, Store: d.store, Now: clock})
	must(t, err)
	if st.Corrupt == 0 || st.PerSource[bad.peer.URL] != 0 || st.PerSource[a.peer.URL] != len(rec.Blocks) {
		t.Fatalf("corrupt %d, per source %v", st.Corrupt, st.PerSource)
	}
	if errs := d.store.Verify(ctx); len(errs) != 0 {
		t.Fatal(errs)
	}
}

func TestRefusedRequests(t *testing.T) {
	ctx := context.Background()
	a := newNode(t, t.TempDir(), key(1), 0, nil)
	root := seed(t, checkpointDir(t), a)
	other := seed(t, func() string {
		d := t.TempDir()
		os.WriteFile(filepath.Join(d, "x"), []byte("another artifact"), 0o644)
		return d
	}(), a)
	rec, _ := a.store.Artifact(other)
	otherBlock, _ := cid.Decode(rec.Blocks[len(rec.Blocks)-1])
	rec, _ = a.store.Artifact(root)
	leaf, _ := cid.Decode(rec.Blocks[len(rec.Blocks)-1])

	do := func(path, auth, art string) int {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, a.srv.URL+path, nil)
		if auth != "" {
			req.Header.Set("Authorization", auth)
		}
		if art != "" {
			req.Header.Set("X-Gym-Artifact", art)
		}
		resp, err := http.DefaultClient.Do(req)
		must(t, err)
		resp.Body.Close()
		return resp.StatusCode
	}
	sign := func(k ed25519.PrivateKey, aud ed25519.PublicKey, r cid.Cid, at time.Time, ttl time.Duration) string {
		h, err := NewAuthorization(k, aud, r, at, ttl)
		must(t, err)
		return h
	}
	good := func() string { return sign(fetcherKey, pub(a.key), root, now, time.Minute) }
	rawPath := "/ipfs/" + leaf.String() + "?format=raw"

	tampered := []byte(good())
	tampered[len(AuthScheme)+5] ^= 1
	for _, tc := range []struct {
		name       string
		path, auth string
		art        string
		want       int
	}{
		{"unsigned", rawPath, "", root.String(), 401},
		{"garbage", rawPath, "Gym-Artifact bm90aGluZw.AAAA", root.String(), 401},
		{"other scheme", rawPath, "Bearer x", root.String(), 401},
		{"tampered", rawPath, string(tampered), root.String(), 401},
		{"expired", rawPath, sign(fetcherKey, pub(a.key), root, now.Add(-2*time.Minute), time.Minute), root.String(), 401},
		{"too long-lived", rawPath, sign(fetcherKey, pub(a.key), root, now, time.Hour), root.String(), 401},
		{"wrong audience", rawPath, sign(fetcherKey, pub(key(2)), root, now, time.Minute), root.String(), 403},
		{"stranger", rawPath, sign(strangerKey, pub(a.key), root, now, time.Minute), root.String(), 403},
		{"other artifact's authorization", rawPath, sign(fetcherKey, pub(a.key), other, now, time.Minute), root.String(), 403},
		{"block of another artifact", "/ipfs/" + otherBlock.String() + "?format=raw", good(), root.String(), 404},
		{"no format", "/ipfs/" + leaf.String(), good(), root.String(), 406},
		{"manifest unsigned", ManifestPath + root.String(), "", "", 401},
	} {
		before := a.store.Used()
		spent := 0
		if tc.want != 404 {
			spent = a.srvGuardSpent(t)
		}
		if got := do(tc.path, tc.auth, tc.art); got != tc.want {
			t.Errorf("%s: status %d, want %d", tc.name, got, tc.want)
		}
		if tc.want == 401 || tc.want == 403 || tc.want == 406 {
			if a.srvGuardSpent(t) != spent {
				t.Errorf("%s: a refused request spent a nonce", tc.name)
			}
		}
		if a.store.Used() != before {
			t.Errorf("%s: the store changed", tc.name)
		}
	}
	// Replay: the same authorization works once.
	h := good()
	if got := do(rawPath, h, root.String()); got != 200 {
		t.Fatalf("first use: %d", got)
	}
	spent := a.srvGuardSpent(t)
	if got := do(rawPath, h, root.String()); got != 403 {
		t.Fatalf("replay: %d", got)
	}
	if a.srvGuardSpent(t) != spent {
		t.Fatal("a replay changed the nonce set")
	}
}

func (n *node) srvGuardSpent(t *testing.T) int { return n.api.Guard().Spent() }

func TestQuotaFailureLeavesNothing(t *testing.T) {
	ctx := context.Background()
	a := newNode(t, t.TempDir(), key(1), 0, nil)
	root := seed(t, checkpointDir(t), a)
	rec, _ := a.store.Artifact(root)
	size := int64(rec.Manifest.Manifest.Size)

	// The manifest alone shows it cannot fit.
	dir := t.TempDir()
	d := newNode(t, dir, key(4), size/2, nil)
	_, st, err := GetArtifact(ctx, root, Get{Client: client(fetcherKey), Peers: []Peer{a.peer}, Store: d.store, Now: clock})
	if !errors.Is(err, store.ErrQuota) || st.Fetched != 0 {
		t.Fatalf("early quota: %v, fetched %d", err, st.Fetched)
	}
	// The files fit but the DAG's own nodes do not: stopped at the limit,
	// and the blocks it had fetched are removed.
	dir = t.TempDir()
	d = newNode(t, dir, key(5), size+1, nil)
	_, st, err = GetArtifact(ctx, root, Get{Client: client(fetcherKey), Peers: []Peer{a.peer}, Store: d.store, Now: clock})
	if !errors.Is(err, store.ErrQuota) || st.Fetched == 0 {
		t.Fatalf("quota mid-transfer: %v, fetched %d", err, st.Fetched)
	}
	if d.store.Used() != 0 || blockFiles(t, dir) != 0 || len(d.store.List()) != 0 {
		t.Fatalf("left %d bytes, %d blocks", d.store.Used(), blockFiles(t, dir))
	}
}

func TestCAROverHTTP(t *testing.T) {
	ctx := context.Background()
	a := newNode(t, t.TempDir(), key(1), 0, nil)
	src := checkpointDir(t)
	root := seed(t, src, a)
	h, err := NewAuthorization(fetcherKey, pub(a.key), root, now, time.Minute)
	must(t, err)
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, a.srv.URL+"/ipfs/"+root.String()+"?format=car", nil)
	req.Header.Set("Authorization", h)
	resp, err := http.DefaultClient.Do(req)
	must(t, err)
	defer resp.Body.Close()
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type")[:len(TypeCAR)] != TypeCAR {
		t.Fatalf("%d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	mem := artifact.NewMemBlocks()
	ix, err := artifact.ReadCAR(ctx, resp.Body, mem, root, 64<<20)
	must(t, err)
	want, _ := artifact.Import(ctx, artifact.NewMemBlocks(), src)
	if ix.Size != want.Size || len(ix.Files) != 3 {
		t.Fatalf("CAR holds %d bytes in %d files", ix.Size, len(ix.Files))
	}
}

func TestResolveKey(t *testing.T) {
	a := newNode(t, t.TempDir(), key(1), 0, nil)
	p, err := ParsePeer(a.srv.Listener.Addr().String())
	must(t, err)
	p, err = client(fetcherKey).Resolve(context.Background(), p)
	must(t, err)
	if !p.Key.Equal(pub(a.key)) {
		t.Fatal("resolved the wrong key")
	}
	if _, err := ParsePeer("zz@host:1"); err == nil {
		t.Fatal("bad pinned key accepted")
	}
}

// A source that stops answering (but keeps its connections open) is given
// up after BlockTimeout and its blocks come from the other source.
func TestHangingSource(t *testing.T) {
	ctx := context.Background()
	a := newNode(t, t.TempDir(), key(1), 0, nil)
	root := seed(t, checkpointDir(t), a)
	hang := func(h http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Query().Get("format") == "raw" {
				<-r.Context().Done() // never answers
				return
			}
			h.ServeHTTP(w, r)
		})
	}
	hung := newNode(t, t.TempDir(), key(2), 0, hang)
	_, _, err := GetArtifact(ctx, root, Get{Client: client(fetcherKey), Peers: []Peer{a.peer}, Store: hung.store, Now: clock})
	must(t, err)
	d := newNode(t, t.TempDir(), key(4), 0, nil)
	rec, st, err := GetArtifact(ctx, root, Get{Client: client(fetcherKey), Peers: []Peer{hung.peer, a.peer}, Store: d.store, Now: clock,
		Fetch: FetchConfig{BlockTimeout: 200 * time.Millisecond}})
	must(t, err)
	if st.PerSource[a.peer.URL] != len(rec.Blocks) || st.SourcesLeft != 1 {
		t.Fatalf("per source %v, %d sources left", st.PerSource, st.SourcesLeft)
	}
}

func TestFetchBlockLimit(t *testing.T) {
	a := newNode(t, t.TempDir(), key(1), 0, nil)
	root := seed(t, checkpointDir(t), a)
	_, err := Fetch(context.Background(), root, artifact.NewMemBlocks(), FetchConfig{
		Sources: []Source{client(fetcherKey).Source(a.peer)}, MaxBlocks: 5})
	if !errors.Is(err, artifact.ErrTooLarge) {
		t.Fatalf("block limit: %v", err)
	}
}
