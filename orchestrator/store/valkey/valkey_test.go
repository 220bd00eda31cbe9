package valkey

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/zooai/gym/orchestrator/blob"
	"github.com/zooai/gym/orchestrator/blob/blobtest"
	"github.com/zooai/gym/orchestrator/engine"
	"github.com/zooai/gym/orchestrator/state"
	"github.com/zooai/gym/orchestrator/store"
	"github.com/zooai/gym/orchestrator/store/storetest"
)

// server is a redis-server (Debian's package; Valkey speaks the same
// protocol) in a temporary directory on a free port, with the durability
// hanzod needs: AOF with fsync on every write.
type server struct {
	bin, dir string
	port     int
	cmd      *exec.Cmd
}

func redisBinary(t testing.TB) string {
	for _, name := range []string{"valkey-server", "redis-server"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	if os.Getenv("GYM_REQUIRE_REDIS") == "1" {
		t.Fatal("GYM_REQUIRE_REDIS=1 but neither valkey-server nor redis-server is installed (apt-get install redis-server)")
	}
	t.Skip("redis-server not installed (apt-get install redis-server); set GYM_REQUIRE_REDIS=1 to make this a failure")
	return ""
}

func startServer(t testing.TB) *server {
	s := &server{bin: redisBinary(t), dir: t.TempDir()}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s.port = l.Addr().(*net.TCPAddr).Port
	l.Close()
	s.start(t)
	t.Cleanup(func() { s.kill() })
	return s
}

func (s *server) url() string { return fmt.Sprintf("redis://127.0.0.1:%d/0", s.port) }

func (s *server) start(t testing.TB) {
	s.cmd = exec.Command(s.bin, "--port", strconv.Itoa(s.port), "--bind", "127.0.0.1", "--dir", s.dir,
		"--appendonly", "yes", "--appendfsync", "always", "--save", "", "--daemonize", "no",
		"--logfile", filepath.Join(s.dir, "server.log"))
	if err := s.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// Poll until it answers (never a fixed sleep).
	deadline := time.Now().Add(10 * time.Second)
	for {
		c, err := net.DialTimeout("tcp", fmt.Sprintf("127.0.0.1:%d", s.port), 100*time.Millisecond)
		if err == nil {
			c.Write([]byte("PING\r\n"))
			buf := make([]byte, 16)
			c.SetReadDeadline(time.Now().Add(time.Second))
			n, _ := c.Read(buf)
			c.Close()
			if string(buf[:n]) == "+PONG\r\n" {
				return
			}
		}
		if time.Now().After(deadline) {
			log, _ := os.ReadFile(filepath.Join(s.dir, "server.log"))
			t.Fatalf("redis-server did not start: %s", log)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// kill sends SIGKILL: no shutdown, no final fsync.
func (s *server) kill() {
	if s.cmd != nil && s.cmd.Process != nil {
		s.cmd.Process.Signal(syscall.SIGKILL)
		s.cmd.Wait()
		s.cmd = nil
	}
}

var prefixes atomic.Int64

func open(t testing.TB, url, prefix string) *Store {
	cfg := DefaultConfig(url)
	cfg.Prefix = prefix
	s, err := Open(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func TestSuite(t *testing.T) {
	srv := startServer(t)
	// Leases outlive any step of a test on a loaded machine; Expire ends
	// them on the server instead of waiting (TestLeaseExpiry covers the
	// server's own TTL).
	const ttl = time.Minute
	storetest.Run(t, func(t *testing.T) *storetest.Env {
		prefix := fmt.Sprintf("test%d", prefixes.Add(1))
		env := &storetest.Env{TTL: ttl}
		s := open(t, srv.url(), prefix)
		env.Store = s
		env.Reopen = func(t *testing.T) store.Store {
			env.Store.Close()
			return open(t, srv.url(), prefix)
		}
		env.Other = func(t *testing.T) store.Store { return open(t, srv.url(), prefix) }
		env.Expire = func(t *testing.T) {
			// An expiry time that is not in the future deletes the key
			// at once, as the server's expiry would: there is no window
			// in which the lease is still live.
			probe := open(t, srv.url(), prefix)
			ctx := context.Background()
			if err := probe.c.PExpire(ctx, probe.kLease, 0).Err(); err != nil {
				t.Fatal(err)
			}
			if d, err := probe.LeaseTTL(ctx); err != nil || d != 0 {
				t.Fatalf("lease after PEXPIRE 0: %v left, %v", d, err)
			}
		}
		return env
	})
}

// TestLeaseExpiry: the lease lapses on the server's clock after the TTL of
// the last Acquire (a renewal shortens it too), LeaseTTL reports 0 only
// once it has, and then another holder gets it at once with a newer token.
func TestLeaseExpiry(t *testing.T) {
	srv := startServer(t)
	ctx := context.Background()
	s := open(t, srv.url(), "expiry")
	t1, err := s.Acquire(ctx, "a", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if d, err := s.LeaseTTL(ctx); err != nil || d <= 0 || d > time.Minute {
		t.Fatalf("LeaseTTL after a 1-minute Acquire = %v, %v", d, err)
	}
	const ttl = 50 * time.Millisecond
	if again, err := s.Acquire(ctx, "a", ttl); err != nil || again != t1 {
		t.Fatalf("renewal: %d, %v (token was %d)", again, err, t1)
	}
	// A real wait on the server's clock: poll LeaseTTL until it says free,
	// with an overall bound far above ttl for a loaded machine.
	deadline := time.Now().Add(10 * time.Second)
	for {
		d, err := s.LeaseTTL(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if d == 0 {
			break
		}
		if d > ttl {
			t.Fatalf("LeaseTTL %v after a renewal for %v", d, ttl)
		}
		if time.Now().After(deadline) {
			t.Fatalf("lease still live %v after a renewal for %v", 10*time.Second, ttl)
		}
		time.Sleep(d)
	}
	if t2, err := s.Acquire(ctx, "b", time.Minute); err != nil || t2 <= t1 {
		t.Fatalf("Acquire(b) once LeaseTTL reported 0: %d, %v (old token %d)", t2, err, t1)
	}
}

func TestLeaseRemaining(t *testing.T) {
	for _, tc := range []struct {
		pttl, want time.Duration
		err        bool
	}{
		{pttl: -2, want: 0},               // no key: free
		{pttl: -1, err: true},             // a lease without expiry cannot happen
		{pttl: 0, want: time.Millisecond}, // under 1 ms left: still live
		{pttl: time.Millisecond, want: time.Millisecond},
		{pttl: 1500 * time.Millisecond, want: 1500 * time.Millisecond},
	} {
		got, err := leaseRemaining(tc.pttl)
		if (err != nil) != tc.err || got != tc.want {
			t.Errorf("leaseRemaining(%v) = %v, %v; want %v, error %v", tc.pttl, got, err, tc.want, tc.err)
		}
	}
}

// TestServerKilled: every acknowledged append survives kill -9 of the
// server, and the fencing token keeps growing across the restart.
func TestServerKilled(t *testing.T) {
	srv := startServer(t)
	ctx := context.Background()
	s := open(t, srv.url(), "kill")
	tok, err := s.Acquire(ctx, "a", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	acked := uint64(0)
	for i := uint64(1); i <= 200; i++ {
		if err := s.Append(ctx, tok, []store.Record{{Index: i, Data: []byte(strconv.FormatUint(i, 10))}}); err != nil {
			t.Fatal(err)
		}
		acked = i
	}
	srv.kill()
	if err := s.Append(ctx, tok, []store.Record{{Index: acked + 1, Data: []byte("lost")}}); err == nil {
		t.Fatal("append to a dead server succeeded")
	}
	srv.start(t)
	s2 := open(t, srv.url(), "kill")
	got, err := s2.Read(ctx, 1, 1000)
	if err != nil {
		t.Fatal(err)
	}
	if uint64(len(got)) != acked {
		t.Fatalf("%d records after restart, %d were acknowledged", len(got), acked)
	}
	for i, r := range got {
		if string(r.Data) != strconv.Itoa(i+1) {
			t.Fatalf("record %d = %q", i+1, r.Data)
		}
	}
	// The lease key survives too (AOF); after it expires a new token is higher.
	if _, err := s2.Acquire(ctx, "b", time.Second); !errors.Is(err, store.ErrLeaseHeld) {
		t.Fatalf("lease lost in the restart: %v", err)
	}
	if err := s2.Release(ctx, tok); err != nil {
		t.Fatal(err)
	}
	if t2, err := s2.Acquire(ctx, "b", time.Second); err != nil || t2 <= tok {
		t.Fatalf("token after restart %d (%v), before %d", t2, err, tok)
	}
}

func BenchmarkAppend(b *testing.B) {
	srv := startServer(b)
	for _, batch := range []int{1, 64} {
		b.Run(fmt.Sprintf("batch%d", batch), func(b *testing.B) {
			s := open(b, srv.url(), fmt.Sprintf("bench%d", batch))
			storetest.Bench(b, s, batch)
		})
	}
}

// TestEngineFailover: a leader and two standbys on one Valkey. The leader
// stops renewing (killed); a standby takes over within the lease TTL plus
// one campaign interval, and the old leader, when it returns, cannot write.
func TestEngineFailover(t *testing.T) {
	srv := startServer(t)
	ctx := context.Background()
	const ttl, poll = time.Second, 100 * time.Millisecond
	replica := func(name string) *engine.Engine {
		cfg := engine.DefaultConfig(name)
		cfg.LeaseTTL = ttl
		e, err := engine.Open(ctx, cfg, open(t, srv.url(), "failover"), time.Now)
		if err != nil {
			t.Fatal(err)
		}
		return e
	}
	a, b, c := replica("a"), replica("b"), replica("c")
	if ok, err := a.Campaign(ctx); !ok || err != nil {
		t.Fatalf("a: %v %v", ok, err)
	}
	for i := range 20 {
		if _, err := a.Do(ctx, state.Deposit{Account: fmt.Sprint("acct", i), Amount: 1}); err != nil {
			t.Fatal(err)
		}
	}
	lastRenew := time.Now()
	if ok, err := a.Campaign(ctx); !ok || err != nil {
		t.Fatalf("a renew: %v %v", ok, err)
	}
	// a is "killed": it no longer renews. The standbys campaign every poll.
	var winner *engine.Engine
	for winner == nil {
		for _, e := range []*engine.Engine{b, c} {
			ok, err := e.Campaign(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if ok {
				winner = e
				break
			}
		}
		if time.Since(lastRenew) > 10*time.Second {
			t.Fatal("no standby took over within 10 s")
		}
		if winner == nil {
			time.Sleep(poll)
		}
	}
	took := time.Since(lastRenew)
	t.Logf("takeover %v after the leader's last renewal (lease %v, campaign every %v)", took, ttl, poll)
	// Never before the lease lapsed: it was renewed after lastRenew and
	// lives ttl on the server from then. A loaded machine only delays the
	// takeover, so this bound holds exactly, up to a millisecond for our
	// monotonic clock against the server's wall clock.
	if took < ttl-time.Millisecond {
		t.Fatalf("a standby took over %v after the leader's last renewal, before the %v lease lapsed", took, ttl)
	}
	// At most the lease, a campaign period and slack for a loaded machine
	// (the suite runs packages in parallel on two cores, maybe under a CPU
	// hog). The figure itself is logged above.
	if took > ttl+2*poll+5*time.Second {
		t.Fatalf("takeover took %v", took)
	}
	if _, err := winner.Do(ctx, state.Tick{}); err != nil {
		t.Fatal(err)
	}
	// The old leader returns; its own view of the lease lapsed, so it
	// refuses locally; campaigning, it learns it is a follower.
	if _, err := a.Do(ctx, state.Tick{}); !errors.Is(err, engine.ErrNotLeader) {
		t.Fatalf("returned leader: %v", err)
	}
	if ok, err := a.Campaign(ctx); ok || err != nil {
		t.Fatalf("returned leader campaign: %v %v", ok, err)
	}
	var wa, ww []byte
	a.View(func(m *state.Machine) { wa = m.Marshal() })
	winner.View(func(m *state.Machine) { ww = m.Marshal() })
	if !bytes.Equal(wa, ww) {
		t.Fatal("the old leader did not converge on the new leader's log")
	}
}

// TestEngineSurvivesServerRestart: Valkey is killed (SIGKILL) under a
// leading engine. Commands fail with an error while it is down and change
// nothing; after it restarts the engine continues, and a fresh replica
// rebuilds exactly its state.
func TestEngineSurvivesServerRestart(t *testing.T) {
	srv := startServer(t)
	ctx := context.Background()
	cfg := engine.DefaultConfig("a")
	cfg.LeaseTTL = time.Minute
	e, err := engine.Open(ctx, cfg, open(t, srv.url(), "restart"), time.Now)
	if err != nil {
		t.Fatal(err)
	}
	if ok, err := e.Campaign(ctx); !ok || err != nil {
		t.Fatalf("campaign: %v %v", ok, err)
	}
	deposit := func(i int) error {
		_, err := e.Do(ctx, state.Deposit{Account: fmt.Sprint("acct", i%7), Amount: 1})
		return err
	}
	for i := range 50 {
		if err := deposit(i); err != nil {
			t.Fatal(err)
		}
	}
	var before []byte
	e.View(func(m *state.Machine) { before = m.Marshal() })
	srv.kill()
	short, cancel := context.WithTimeout(ctx, 2*time.Second)
	if _, err := e.Do(short, state.Deposit{Account: "x", Amount: 1}); err == nil {
		t.Fatal("a command succeeded with the server down")
	}
	cancel()
	srv.start(t)
	// The first command after the restart rebuilds from the store, then runs.
	var err2 error
	for i := range 50 {
		if err2 = deposit(100 + i); err2 != nil {
			break
		}
	}
	if err2 != nil {
		t.Fatal(err2)
	}
	var after []byte
	e.View(func(m *state.Machine) { after = m.Marshal() })
	if bytes.Equal(before, after) {
		t.Fatal("no progress after the restart")
	}
	cfg.Holder = "b"
	f, err := engine.Open(ctx, cfg, open(t, srv.url(), "restart"), time.Now)
	if err != nil {
		t.Fatal(err)
	}
	var fresh []byte
	f.View(func(m *state.Machine) { fresh = m.Marshal() })
	if !bytes.Equal(fresh, after) {
		t.Fatal("a fresh replica's state differs from the leader's")
	}
	var deposits int
	f.View(func(m *state.Machine) {
		for i := range 7 {
			deposits += int(m.Account(fmt.Sprint("acct", i)).Free)
		}
		if m.Account("x").Free != 0 {
			t.Error("the command refused while the server was down was applied")
		}
	})
	if deposits != 100 {
		t.Fatalf("%d deposits in the log, 100 were acknowledged", deposits)
	}
}

func TestBlobSuite(t *testing.T) {
	srv := startServer(t)
	blobtest.Run(t, func(t *testing.T) *blobtest.Env {
		prefix := fmt.Sprintf("blob%d", prefixes.Add(1))
		s := open(t, srv.url(), prefix)
		return &blobtest.Env{Store: s.Blobs(), Other: func(t *testing.T) blob.Store { return open(t, srv.url(), prefix).Blobs() }}
	})
}

// TestBlobSurvivesServerKill: a blob whose Put returned is on disk (AOF,
// fsync always) when the server is killed with SIGKILL.
func TestBlobSurvivesServerKill(t *testing.T) {
	srv := startServer(t)
	s := open(t, srv.url(), "blobkill")
	ctx := context.Background()
	data := bytes.Repeat([]byte("delta"), 100_000)
	if err := s.Blobs().Put(ctx, "deltas/j/d", data); err != nil {
		t.Fatal(err)
	}
	srv.kill()
	srv.start(t)
	got, err := open(t, srv.url(), "blobkill").Blobs().Get(ctx, "deltas/j/d")
	if err != nil || !bytes.Equal(got, data) {
		t.Fatalf("after SIGKILL: %d bytes, %v", len(got), err)
	}
}

// BenchmarkBlobPut is the extra time a delta's acknowledgement takes with
// replicas: the accepted file written to Valkey (AOF, fsync always)
// before its verdict is appended.
func BenchmarkBlobPut(b *testing.B) {
	srv := startServer(b)
	s := open(b, srv.url(), "blobbench")
	ctx := context.Background()
	for _, size := range []int{64 << 10, 1 << 20, 8 << 20} {
		b.Run(fmt.Sprintf("%dKiB", size>>10), func(b *testing.B) {
			data := make([]byte, size)
			b.SetBytes(int64(size))
			for i := 0; b.Loop(); i++ {
				data[0], data[1], data[2] = byte(i), byte(i>>8), byte(i>>16)
				if err := s.Blobs().Put(ctx, fmt.Sprintf("deltas/j/%d-%d", size, i), data); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
