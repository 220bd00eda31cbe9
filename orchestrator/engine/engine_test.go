package engine

import (
	"bufio"
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/sha256"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/zooai/gym/orchestrator/ledger"
	"github.com/zooai/gym/orchestrator/state"
	"github.com/zooai/gym/orchestrator/store"
	"github.com/zooai/gym/orchestrator/store/bolt"
	"github.com/zooai/gym/protocol/jobspec"
)

type clock struct {
	mu  sync.Mutex
	now time.Time
}

func newClock() *clock { return &clock{now: time.Unix(1_767_225_600, 0)} }

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *clock) Advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

func key(i int) ed25519.PrivateKey {
	seed := sha256.Sum256([]byte(fmt.Sprint("engine-node-", i)))
	return ed25519.NewKeyFromSeed(seed[:])
}

// workload issues a mix of commands: registrations, heartbeats, stake,
// jobs and ticks, at one command per simulated 100 ms.
type workload struct {
	clk  *clock
	seqs map[int]uint64
	step int
}

func (w *workload) next() state.Command {
	w.step++
	w.clk.Advance(100 * time.Millisecond)
	now := w.clk.Now().UnixMilli()
	i := w.step % 12
	if w.seqs == nil {
		w.seqs = map[int]uint64{}
	}
	w.seqs[i]++
	auth := state.Auth{Seq: w.seqs[i], Timestamp: now}
	switch {
	case w.step <= 12:
		r := state.Register{Auth: auth, Address: fmt.Sprintf("10.0.0.%d:9560", i), Region: "eu", GPUModel: "L4", VRAMMiB: 24576}
		state.SignRegister(key(i), &r)
		return r
	case w.step%10 == 0:
		return state.Tick{}
	case w.step%97 == 0:
		return state.SubmitJob{Spec: jobspec.Spec{Model: "m", Dataset: "d", Epochs: 1, MinNodes: 3}}
	case w.step%31 == 0:
		r := state.Register{}
		state.SignRegister(key(i), &r) // only for the id
		return state.Deposit{Account: r.Node, Amount: 20_000 * ledger.GYM}
	case w.step%37 == 0:
		r := state.Register{}
		state.SignRegister(key(i), &r)
		return state.Bond{Account: r.Node, Amount: 10_000 * ledger.GYM}
	default:
		h := state.Heartbeat{Auth: auth}
		state.SignHeartbeat(key(i), &h)
		return h
	}
}

func openBolt(t *testing.T, dir string, clk *clock) *bolt.Store {
	cfg := bolt.DefaultConfig(dir)
	cfg.Now = clk.Now
	s, err := bolt.Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func testConfig(holder string) Config {
	cfg := DefaultConfig(holder)
	cfg.SnapshotEvery = 100
	return cfg
}

func leader(t *testing.T, e *Engine) {
	t.Helper()
	ok, err := e.Campaign(context.Background())
	if err != nil || !ok {
		t.Fatalf("campaign: %v %v", ok, err)
	}
}

// run drives n commands through e (refused ones are part of the workload)
// and returns how many events were persisted.
func run(t *testing.T, e *Engine, w *workload, n int) int {
	t.Helper()
	events := 0
	for i := range n {
		if i%20 == 0 && e.Leading() {
			leader(t, e) // renew the lease, as the daemon does every second
		}
		evs, err := e.Do(context.Background(), w.next())
		if err != nil && (errors.Is(err, ErrNotLeader) || !isRefusal(err)) {
			t.Fatal(err)
		}
		events += len(evs)
	}
	return events
}

func isRefusal(err error) bool {
	for _, s := range []error{state.ErrInvalid, state.ErrUnauthenticated, state.ErrPermission, state.ErrPrecondition, state.ErrExhausted, state.ErrNotFound} {
		if errors.Is(err, s) {
			return true
		}
	}
	return false
}

func marshal(e *Engine) []byte {
	var b []byte
	e.View(func(m *state.Machine) { b = m.Marshal() })
	return b
}

// TestRestartFromSnapshot: the state after a restart is byte-identical and
// only the tail after the last snapshot is replayed.
func TestRestartFromSnapshot(t *testing.T) {
	dir, clk := t.TempDir(), newClock()
	st := openBolt(t, dir, clk)
	e, err := Open(context.Background(), testConfig("a"), st, clk.Now)
	if err != nil {
		t.Fatal(err)
	}
	leader(t, e)
	w := &workload{clk: clk}
	if n := run(t, e, w, 1000); n < 900 {
		t.Fatalf("only %d events from 1000 commands", n)
	}
	want := marshal(e)
	st.Close()

	st = openBolt(t, dir, clk)
	defer st.Close()
	e2, err := Open(context.Background(), testConfig("a"), st, clk.Now)
	if err != nil {
		t.Fatal(err)
	}
	if got := marshal(e2); !bytes.Equal(got, want) {
		t.Fatal("state after restart differs")
	}
	if r := e2.Replayed(); r >= 100+8 { // at most one snapshot interval (+ one command's events)
		t.Fatalf("replayed %d events: the snapshot was not used", r)
	}
	// The restarted replica leads again and continues the same log.
	clk.Advance(time.Minute)
	leader(t, e2)
	run(t, e2, w, 50)
}

// failing wraps a store and fails appends on demand.
type failing struct {
	store.Store
	fail bool
}

func (f *failing) Append(ctx context.Context, token uint64, recs []store.Record) error {
	if f.fail {
		return errors.New("disk on fire")
	}
	return f.Store.Append(ctx, token, recs)
}

func TestFailedAppendChangesNothing(t *testing.T) {
	clk := newClock()
	st := &failing{Store: openBolt(t, t.TempDir(), clk)}
	defer st.Close()
	e, err := Open(context.Background(), testConfig("a"), st, clk.Now)
	if err != nil {
		t.Fatal(err)
	}
	leader(t, e)
	w := &workload{clk: clk}
	run(t, e, w, 30)
	before := marshal(e)
	st.fail = true
	if _, err := e.Do(context.Background(), w.next()); err == nil {
		t.Fatal("Do succeeded although the append failed")
	}
	if !bytes.Equal(before, marshal(e)) {
		t.Fatal("a command whose events were not persisted changed the state")
	}
	st.fail = false
	run(t, e, w, 30)
}

// TestFailover: two replicas on one store. The leader stops renewing; the
// standby takes over once the lease expires; the old leader's writes are
// fenced even though its own clock says its lease is live.
func TestFailover(t *testing.T) {
	clk := newClock()
	st := openBolt(t, t.TempDir(), clk)
	defer st.Close()
	ctx := context.Background()
	cfg := testConfig("a")
	a, err := Open(ctx, cfg, st, clk.Now)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Holder = "b"
	b, err := Open(ctx, cfg, st, clk.Now)
	if err != nil {
		t.Fatal(err)
	}
	leader(t, a)
	if ok, err := b.Campaign(ctx); ok || err != nil {
		t.Fatalf("standby became leader while the lease is live: %v %v", ok, err)
	}
	w := &workload{clk: clk}
	run(t, a, w, 200)
	if err := b.Follow(ctx); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(marshal(a), marshal(b)) {
		t.Fatal("the standby does not follow the leader's state")
	}
	// a pauses (a GC stall, a VM freeze): its clock stands still while
	// the world's moves on past the lease.
	frozen := clk.Now()
	a.now = func() time.Time { return frozen }
	clk.Advance(cfg.LeaseTTL + time.Millisecond)
	if ok, err := b.Campaign(ctx); !ok || err != nil {
		t.Fatalf("standby did not take over an expired lease: %v %v", ok, err)
	}
	run(t, b, w, 20)
	last, _ := st.Last(ctx)
	if _, err := a.Do(ctx, state.Tick{}); !errors.Is(err, store.ErrFenced) {
		t.Fatalf("the deposed leader's write: %v, want fenced", err)
	}
	if l2, _ := st.Last(ctx); l2 != last {
		t.Fatal("the deposed leader's write reached the log")
	}
	if a.Leading() {
		t.Fatal("the deposed leader still believes it leads")
	}
	a.now = clk.Now
	if err := a.Follow(ctx); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(marshal(a), marshal(b)) {
		t.Fatal("the deposed leader did not converge on the new leader's state")
	}
}

// TestKill9 runs a replica in a child process under load, kills it with
// SIGKILL, and checks that every acknowledged event is in the log and that
// replaying the log reproduces the state the child reported.
func TestKill9(t *testing.T) {
	if os.Getenv("GYM_ENGINE_CHILD") != "" {
		return
	}
	dir := t.TempDir()
	cmd := exec.Command(os.Args[0], "-test.run=^TestKill9Child$")
	cmd.Env = append(os.Environ(), "GYM_ENGINE_CHILD="+dir)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	acked := map[uint64]string{}
	var lastAck uint64
	sc := bufio.NewScanner(out)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) != 3 || f[0] != "ack" {
			continue
		}
		idx, _ := strconv.ParseUint(f[1], 10, 64)
		acked[idx], lastAck = f[2], idx
		if len(acked) == 400 {
			cmd.Process.Signal(syscall.SIGKILL)
			break
		}
	}
	cmd.Wait()
	if len(acked) < 400 {
		t.Fatalf("child acknowledged only %d commands", len(acked))
	}
	clk := newClock()
	st := openBolt(t, dir, clk)
	defer st.Close()
	ctx := context.Background()
	last, _ := st.Last(ctx)
	if last < lastAck {
		t.Fatalf("log ends at %d, but %d was acknowledged", last, lastAck)
	}
	// Replay record by record and compare with what the child reported.
	m, _ := state.New(testConfig("x").State)
	recs, err := st.Read(ctx, 1, int(last))
	if err != nil {
		t.Fatal(err)
	}
	checked := 0
	for _, r := range recs {
		ev, err := state.DecodeEvent(r.Data)
		if err != nil {
			t.Fatal(err)
		}
		if err := m.Apply(ev); err != nil {
			t.Fatal(err)
		}
		if want, ok := acked[r.Index]; ok {
			if got := fmt.Sprintf("%x", sha256.Sum256(m.Marshal())); got != want {
				t.Fatalf("state after event %d: %s, the child had %s", r.Index, got, want)
			}
			checked++
		}
	}
	if checked != len(acked) {
		t.Fatalf("checked %d of %d acknowledged states", checked, len(acked))
	}
	// And a replica opened on the directory rebuilds the same state.
	e, err := Open(ctx, testConfig("y"), st, clk.Now)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(marshal(e), m.Marshal()) {
		t.Fatal("engine rebuild differs from the plain replay")
	}
}

// TestKill9Child is the child of TestKill9: it acknowledges each command
// on stdout after Do returned, with the state's hash, until killed.
func TestKill9Child(t *testing.T) {
	dir := os.Getenv("GYM_ENGINE_CHILD")
	if dir == "" {
		t.Skip("child process of TestKill9")
	}
	clk := newClock()
	st := openBolt(t, dir, clk)
	// The parent replays every event from the first: keep the whole log.
	cfg := testConfig("child")
	cfg.NoCompaction = true
	e, err := Open(context.Background(), cfg, st, clk.Now)
	if err != nil {
		t.Fatal(err)
	}
	leader(t, e)
	w := &workload{clk: clk}
	for i := 0; i < 1_000_000; i++ {
		evs, err := e.Do(context.Background(), w.next())
		if err != nil && !isRefusal(err) {
			t.Fatal(err)
		}
		if len(evs) > 0 {
			fmt.Printf("ack %d %x\n", evs[len(evs)-1].Index, sha256.Sum256(marshal(e)))
		}
		if i%50 == 0 {
			leader(t, e) // renew
		}
	}
}

// counting wraps a store, counts appends and fails the ones listed.
type counting struct {
	store.Store
	mu      sync.Mutex
	appends int
	failAt  map[int]bool
}

func (c *counting) Append(ctx context.Context, token uint64, recs []store.Record) error {
	c.mu.Lock()
	c.appends++
	fail := c.failAt[c.appends]
	c.mu.Unlock()
	if fail {
		return errors.New("injected append failure")
	}
	return c.Store.Append(ctx, token, recs)
}

// TestGroupCommit: concurrent commands share appends; every acknowledged
// command is in the log exactly once, refused ones are not, and a replica
// rebuilt from the store has the leader's state.
func TestGroupCommit(t *testing.T) {
	for _, failures := range []map[int]bool{nil, {5: true, 9: true, 10: true}} {
		clk := newClock()
		dir := t.TempDir()
		st := &counting{Store: openBolt(t, dir, clk), failAt: failures}
		cfg := testConfig("a")
		cfg.LeaseTTL = time.Hour
		e, err := Open(context.Background(), cfg, st, clk.Now)
		if err != nil {
			t.Fatal(err)
		}
		leader(t, e)
		const workers, each = 16, 40
		var wg sync.WaitGroup
		var mu sync.Mutex
		acked := map[string]ledger.Amount{}
		refused := 0
		for w := range workers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := range each {
					acct := fmt.Sprintf("w%02d", w)
					_, err := e.Do(context.Background(), state.Deposit{Account: acct, Amount: ledger.Amount(i + 1)})
					mu.Lock()
					if err == nil {
						acked[acct] += ledger.Amount(i + 1)
					} else {
						refused++
					}
					mu.Unlock()
				}
			}()
		}
		wg.Wait()
		if failures == nil && refused > 0 {
			t.Fatalf("%d commands failed without injected failures", refused)
		}
		if failures != nil && refused == 0 {
			t.Fatal("injected failures failed no command")
		}
		st.mu.Lock()
		appends := st.appends
		st.mu.Unlock()
		t.Logf("failures %v: %d commands in %d appends, %d refused", failures, workers*each, appends, refused)
		if appends >= workers*each {
			t.Fatalf("no grouping: %d appends for %d commands", appends, workers*each)
		}
		want := marshal(e)
		st.Store.Close()
		st2 := openBolt(t, dir, clk)
		e2, err := Open(context.Background(), cfg, st2, clk.Now)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(marshal(e2), want) {
			t.Fatal("rebuilt state differs from the leader's")
		}
		e2.View(func(m *state.Machine) {
			for acct, amt := range acked {
				if got := m.Account(acct).Free; got != amt {
					t.Errorf("%s: %d in the log, %d acknowledged", acct, got, amt)
				}
			}
		})
		st2.Close()
	}
}
