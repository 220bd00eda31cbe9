package pin_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ipfs/go-cid"
	carv2 "github.com/ipld/go-car/v2"

	"github.com/zooai/gym/artifact"
	"github.com/zooai/gym/artifact/pin"
)

// fakeKubo is kubo's RPC as far as the queue uses it: dag/import of a CAR
// (blocks re-hashed, roots pinned) and pin/ls, with injected failures.
type fakeKubo struct {
	mu       sync.Mutex
	blocks   *artifact.MemBlocks
	pins     map[string]bool
	failNext int    // import calls to answer with 500
	lieRoot  string // report this root instead of the CAR's
	imports  int
}

func newFake() *fakeKubo { return &fakeKubo{blocks: artifact.NewMemBlocks(), pins: map[string]bool{}} }

func (f *fakeKubo) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		http.Error(w, `{"Message":"405 - Method Not Allowed","Code":0,"Type":"error"}`, 405)
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	fail := func(msg string) {
		w.WriteHeader(500)
		json.NewEncoder(w).Encode(map[string]any{"Message": msg, "Code": 0, "Type": "error"})
	}
	switch r.URL.Path {
	case "/api/v0/dag/import":
		f.imports++
		if f.failNext > 0 {
			f.failNext--
			fail("injected failure")
			return
		}
		if r.URL.Query().Get("pin-roots") != "true" {
			fail("pin-roots not set")
			return
		}
		file, _, err := r.FormFile("file")
		if err != nil {
			fail(err.Error())
			return
		}
		br, err := carv2.NewBlockReader(file)
		if err != nil {
			fail(err.Error())
			return
		}
		for {
			b, err := br.Next()
			if err == io.EOF {
				break
			}
			if err != nil {
				fail(err.Error())
				return
			}
			if err := artifact.Check(b.Cid(), b.RawData()); err != nil {
				fail(err.Error())
				return
			}
			f.blocks.Put(r.Context(), b.Cid(), b.RawData())
		}
		for _, root := range br.Roots {
			// kubo pins a root only when its whole DAG is there.
			if _, err := artifact.Walk(r.Context(), f.blocks, root, artifact.DefaultLimits()); err != nil {
				fail(err.Error())
				return
			}
			f.pins[root.String()] = true
			name := root.String()
			if f.lieRoot != "" {
				name = f.lieRoot
			}
			fmt.Fprintf(w, `{"Root":{"Cid":{"/":%q},"PinErrorMsg":""}}`+"\n", name)
		}
	case "/api/v0/pin/ls":
		arg := r.URL.Query().Get("arg")
		if !f.pins[arg] {
			fail(fmt.Sprintf("path '%s' is not pinned", arg))
			return
		}
		fmt.Fprintf(w, `{"Keys":{%q:{"Type":"recursive","Name":""}}}`+"\n", arg)
	default:
		http.Error(w, "404 page not found", 404)
	}
}

type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) Now() time.Time          { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) Advance(d time.Duration) { c.mu.Lock(); c.t = c.t.Add(d); c.mu.Unlock() }

// checkpoint imports a small directory of several chunks and files.
func checkpoint(t *testing.T) (*artifact.MemBlocks, cid.Cid) {
	t.Helper()
	dir := t.TempDir()
	big := make([]byte, 600_000)
	for i := range big {
		big[i] = byte(i*7 + i>>8)
	}
	os.WriteFile(filepath.Join(dir, "adapter_model.safetensors"), big, 0o644)
	os.WriteFile(filepath.Join(dir, "adapter_config.json"), []byte(`{"r":4}`), 0o644)
	bs := artifact.NewMemBlocks()
	im, err := artifact.Import(context.Background(), bs, dir)
	if err != nil {
		t.Fatal(err)
	}
	return bs, im.Root
}

func TestBackoff(t *testing.T) {
	for _, c := range []struct {
		n    int
		want time.Duration
	}{{1, 2 * time.Second}, {2, 4 * time.Second}, {3, 8 * time.Second}, {8, 256 * time.Second}, {9, 5 * time.Minute}, {100, 5 * time.Minute}} {
		if got := pin.Backoff(c.n, 2*time.Second, 5*time.Minute); got != c.want {
			t.Errorf("Backoff(%d) = %v, want %v", c.n, got, c.want)
		}
	}
}

func TestNewClient(t *testing.T) {
	for _, c := range []struct {
		url string
		ok  bool
	}{
		{"http://127.0.0.1:5001", true}, {"http://ipfs:5001/", true}, {"https://user:pw@ipfs.example:443", true},
		{"127.0.0.1:5001", false}, {"ftp://x:1", false}, {"http://", false}, {"http://x:5001?a=b", false}, {"/ip4/127.0.0.1/tcp/5001", false},
	} {
		_, err := pin.NewClient(c.url, nil)
		if (err == nil) != c.ok || (err != nil && !errors.Is(err, pin.ErrURL)) {
			t.Errorf("NewClient(%q): %v", c.url, err)
		}
	}
}

// TestRetry: the node fails twice; the queue retries after 2 s and 4 s
// (never before), then the node holds the whole DAG pinned under our CID,
// the file says so, and the metrics count the attempts.
func TestRetry(t *testing.T) {
	bs, root := checkpoint(t)
	fk := newFake()
	fk.failNext = 2
	srv := httptest.NewServer(fk)
	defer srv.Close()
	c, err := pin.NewClient(srv.URL, nil)
	if err != nil {
		t.Fatal(err)
	}
	clk := &clock{t: time.Unix(1_800_000_000, 0)}
	cfg := pin.DefaultConfig(filepath.Join(t.TempDir(), "pins.json"))
	cfg.Now = clk.Now
	q, err := pin.Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if added, err := q.Add(root, "checkpoint", "job-1", 1); !added || err != nil {
		t.Fatal(added, err)
	}
	if added, _ := q.Add(root, "checkpoint", "job-1", 1); added {
		t.Fatal("added twice")
	}
	step := func(wantTried int) pin.Entry {
		t.Helper()
		n, err := q.Step(ctx, c, bs)
		if err != nil || n != wantTried {
			t.Fatalf("Step tried %d (%v), want %d", n, err, wantTried)
		}
		e, _ := q.Get(root.String())
		return e
	}
	e := step(1)
	if e.State != pin.Pending || e.Failures != 1 || !strings.Contains(e.LastError, "injected failure") || e.Next != clk.Now().Add(2*time.Second) {
		t.Fatalf("after one failure: %+v", e)
	}
	clk.Advance(1999 * time.Millisecond)
	step(0) // not due yet
	clk.Advance(time.Millisecond)
	if e = step(1); e.Failures != 2 || e.Next != clk.Now().Add(4*time.Second) {
		t.Fatalf("after two failures: %+v", e)
	}
	if next, ok := q.NextDue(); !ok || next != e.Next {
		t.Fatalf("NextDue %v %v", next, ok)
	}
	clk.Advance(4 * time.Second)
	var car strings.Builder
	artifact.WriteCAR(ctx, &car, bs, root)
	if e = step(1); e.State != pin.Pinned || e.Attempts != 3 || e.Failures != 0 || e.LastError != "" || e.Bytes != int64(car.Len()) {
		t.Fatalf("after success: %+v", e)
	}
	if _, ok := q.NextDue(); ok {
		t.Fatal("something still due")
	}
	// The node has every block of the DAG, and its root pinned.
	if _, err := artifact.Walk(ctx, fk.blocks, root, artifact.DefaultLimits()); err != nil || !fk.pins[root.String()] {
		t.Fatalf("node: walk %v, pinned %v", err, fk.pins[root.String()])
	}
	var m strings.Builder
	q.WriteMetrics(&m)
	for _, want := range []string{`gym_hanzod_ipfs_pins{state="pinned"} 1`, `gym_hanzod_ipfs_pins{state="pending"} 0`,
		`gym_hanzod_ipfs_pin_attempts_total{result="ok"} 1`, `gym_hanzod_ipfs_pin_attempts_total{result="error"} 2`} {
		if !strings.Contains(m.String(), want+"\n") {
			t.Errorf("metrics lack %s:\n%s", want, m.String())
		}
	}
	// Reopened, the queue remembers the pin and does not import again.
	q2, err := pin.Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if e2, _ := q2.Get(root.String()); e2.State != pin.Pinned || e2.Attempts != 3 {
		t.Fatalf("reopened: %+v", e2)
	}
	if n, _ := q2.Step(ctx, c, bs); n != 0 || fk.imports != 3 {
		t.Fatalf("reopened queue tried %d, imports %d", n, fk.imports)
	}
}

// TestDurable: an entry whose node is down survives a restart of the
// queue, pending, and is pinned once the node is back; an entry the node
// already holds is confirmed without importing.
func TestDurable(t *testing.T) {
	bs, root := checkpoint(t)
	fk := newFake()
	srv := httptest.NewServer(fk)
	url := srv.URL
	srv.Close() // the node is down
	c, _ := pin.NewClient(url, nil)
	clk := &clock{t: time.Unix(1_800_000_000, 0)}
	cfg := pin.DefaultConfig(filepath.Join(t.TempDir(), "pins.json"))
	cfg.Now = clk.Now
	q, _ := pin.Open(cfg)
	ctx := context.Background()
	q.Add(root, "checkpoint", "job-1", 1)
	q.Step(ctx, c, bs)
	if e, _ := q.Get(root.String()); e.State != pin.Pending || e.Failures != 1 || e.LastError == "" {
		t.Fatalf("node down: %+v", e)
	}
	q, err := pin.Open(cfg) // hanzod restarts
	if err != nil {
		t.Fatal(err)
	}
	if e, _ := q.Get(root.String()); e.State != pin.Pending || e.Failures != 1 {
		t.Fatalf("after restart: %+v", e)
	}
	srv = httptest.NewServer(fk) // the node is back, elsewhere
	defer srv.Close()
	c, _ = pin.NewClient(srv.URL, nil)
	clk.Advance(2 * time.Second)
	if n, err := q.Step(ctx, c, bs); n != 1 || err != nil {
		t.Fatal(n, err)
	}
	if e, _ := q.Get(root.String()); e.State != pin.Pinned {
		t.Fatalf("node back: %+v", e)
	}
	// Pinned already (another replica's import): confirmed, not imported.
	q3, _ := pin.Open(pin.Config{Path: filepath.Join(t.TempDir(), "p.json"), MinBackoff: time.Second, MaxBackoff: time.Second, Now: clk.Now})
	q3.Add(root, "", "", 0)
	before := fk.imports
	q3.Step(ctx, c, artifact.NewMemBlocks()) // no blocks here: an import would fail
	if e, _ := q3.Get(root.String()); e.State != pin.Pinned || fk.imports != before {
		t.Fatalf("already pinned: %+v, imports %d → %d", e, before, fk.imports)
	}
}

// TestClientRefuses: a reply that names another root, a pin error, and a
// DAG missing blocks locally are failures, never a pin.
func TestClientRefuses(t *testing.T) {
	bs, root := checkpoint(t)
	fk := newFake()
	fk.lieRoot = "bafkreihdwdcefgh4dqkjv67uzcmw7ojee6xedzdetojuzjevtenxquvyku"
	srv := httptest.NewServer(fk)
	defer srv.Close()
	c, _ := pin.NewClient(srv.URL, nil)
	ctx := context.Background()
	if ok, err := c.Pinned(ctx, root); ok || err != nil {
		t.Errorf("Pinned before import: %v %v", ok, err)
	}
	if _, err := c.Import(ctx, bs, root); !errors.Is(err, pin.ErrReply) {
		t.Errorf("wrong root: %v", err)
	}
	fk.lieRoot = ""
	partial := artifact.NewMemBlocks()
	data, _ := bs.Get(ctx, root)
	partial.Put(ctx, root, data)
	if _, err := c.Import(ctx, partial, root); err == nil {
		t.Error("import of an incomplete DAG succeeded")
	}
	pinErr := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, `{"Root":{"Cid":{"/":%q},"PinErrorMsg":"pinning failed"}}`+"\n", root)
	}))
	defer pinErr.Close()
	c2, _ := pin.NewClient(pinErr.URL, nil)
	if _, err := c2.Import(ctx, bs, root); !errors.Is(err, pin.ErrRPC) || !strings.Contains(err.Error(), "pinning failed") {
		t.Errorf("pin error: %v", err)
	}
}
