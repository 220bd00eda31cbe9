package main

import (
	"bufio"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/zooai/gym/internal/valkeyserver"
	"github.com/zooai/gym/keys/nodekey"
	gymworker "github.com/zooai/gym/node/worker"
	"github.com/zooai/gym/orchestrator/state"
	"github.com/zooai/gym/protocol/jobspec"
	"github.com/zooai/gym/protocol/ring/ringbench"
)

// TestNetnsFailoverCutLeader runs hanzod's replicas across hosts: Valkey
// in one network namespace, three hanzod processes in three others (one
// signing key, one TLS certificate), four workers in four more given
// every replica, all on one bridge. While the first epoch's deltas
// arrive, the leading replica's host is cut off the network (its link
// down: no RST, the process keeps running and believes it leads until
// its lease runs out on its own clock); a standby takes over and merges
// the epoch. Then the link comes back: the old leader must not write (its
// token is fenced) and follows the log as a standby. Checked: the job
// publishes and settles, every delta acknowledged to a worker has exactly
// one accepted verdict in the log, each epoch is paid once, nobody is
// slashed, the old leader ends as a standby at the leader's log index.
// The same checkpoint bytes and CID as an undisturbed run are checked
// with fixed inputs in judge.TestTakeover (here the workers train on
// timing-dependent rings). Opt in with GYM_NETNS=1 (root, iproute2).
func TestNetnsFailoverCutLeader(t *testing.T) {
	if os.Getenv("GYM_NETNS") != "1" {
		t.Skip("set GYM_NETNS=1 (root, iproute2) to run the network-namespace test bed")
	}
	redisBin, err := valkeyserver.Binary()
	if errors.Is(err, valkeyserver.ErrNotInstalled) && os.Getenv("GYM_REQUIRE_REDIS") != "1" {
		t.Skip(err)
	} else if err != nil {
		t.Fatal(err)
	}
	hanzod := buildHanzod(t)
	const (
		vk      = 0 // Valkey's host
		workers = 4
		lease   = 2 * time.Second
	)
	replica := []int{1, 2, 3} // hanzod hosts; workers on 4..7
	bed := &ringbench.Bed{Prefix: "gymfo", N: 4 + workers, Rate: "1gbit"}
	if err := bed.Up(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(bed.Down)
	dir := t.TempDir()
	logs := func() string {
		var b strings.Builder
		for _, f := range []string{"r1.log", "r2.log", "r3.log", "w0.log", "w1.log", "w2.log", "w3.log"} {
			data, _ := os.ReadFile(filepath.Join(dir, f))
			if len(data) > 4000 {
				data = data[len(data)-4000:]
			}
			fmt.Fprintf(&b, "--- %s (tail)\n%s\n", f, data)
		}
		return b.String()
	}
	start := func(i int, logName string, name string, args ...string) *exec.Cmd {
		t.Helper()
		cmd := bed.Exec(i, name, args...)
		f, err := os.Create(filepath.Join(dir, logName))
		if err != nil {
			t.Fatal(err)
		}
		cmd.Stdout, cmd.Stderr = f, f
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		done := make(chan struct{})
		go func() { cmd.Wait(); f.Close(); close(done) }()
		t.Cleanup(func() { cmd.Process.Kill(); <-done })
		return cmd
	}
	// poll calls f every interval until it is true or the deadline passes.
	poll := func(what string, limit time.Duration, interval time.Duration, f func() bool) {
		t.Helper()
		deadline := time.Now().Add(limit)
		for !f() {
			if time.Now().After(deadline) {
				t.Fatalf("%s: not after %v\n%s", what, limit, logs())
			}
			time.Sleep(interval)
		}
	}

	// Valkey on host 0, as valkeyserver starts it (AOF, fsync always), on
	// the bridge address.
	vdir := filepath.Join(dir, "valkey")
	os.MkdirAll(vdir, 0o700)
	start(vk, "valkey.log", redisBin, valkeyserver.Args(6379, "0.0.0.0", vdir)...)
	// The test reaches Valkey and the replicas' metrics from inside their
	// namespaces, through this test binary (netnsHelperMain): no
	// redis-cli or curl needed.
	helper := func(i int, mode string, args ...string) (string, error) {
		self, err := os.Executable()
		if err != nil {
			return "", err
		}
		cmd := bed.Exec(i, self)
		b, _ := json.Marshal(args)
		cmd.Env = append(os.Environ(), "GYM_TEST_NETNS_HELPER="+mode, "GYM_TEST_NETNS_ARGS="+string(b))
		out, err := cmd.Output()
		return string(out), err
	}
	redis := func(args ...string) (string, error) {
		return helper(vk, "redis", append([]string{"127.0.0.1:6379"}, args...)...)
	}
	poll("valkey answers", 20*time.Second, 100*time.Millisecond, func() bool {
		out, err := redis("PING")
		return err == nil && strings.TrimSpace(out) == "PONG"
	})
	valkeyURL := "redis://" + bed.Addr(vk) + ":6379/0"

	// hanzod's key, shared by the replicas (the operator's secret).
	key, err := nodekey.Generate(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	keyFile := filepath.Join(dir, "hanzod.key")
	if err := nodekey.Save(keyFile, key, false); err != nil {
		t.Fatal(err)
	}
	account := hex.EncodeToString(key.Public().(ed25519.PublicKey))
	// Replica 1 makes the self-signed certificate the others serve too.
	cert, tlsKey := filepath.Join(dir, "r1", "tls-cert.pem"), filepath.Join(dir, "r1", "tls-key.pem")
	hz := make(map[int]*exec.Cmd)
	for n, i := range replica {
		args := []string{"--data", filepath.Join(dir, fmt.Sprintf("r%d", n+1)), "--listen", "0.0.0.0:9550", "--metrics", "127.0.0.1:9551",
			"--artifacts", "0.0.0.0:9552", "--artifacts-advertise", bed.Addr(i) + ":9552", "--epoch-grace", "30s",
			"--store", "valkey", "--valkey", valkeyURL, "--lease", lease.String(), "--key", keyFile, "--blob-retention", "2s",
			"--min-epoch-samples", "32"} // the job below: 4 steps × 2 prompts × 4 completions
		if n > 0 {
			args = append(args, "--tls-cert", cert, "--tls-key", tlsKey)
		}
		hz[i] = start(i, fmt.Sprintf("r%d.log", n+1), hanzod, args...)
		if n == 0 {
			poll("replica 1's certificate", 30*time.Second, 100*time.Millisecond, func() bool {
				_, e1 := os.Stat(cert)
				_, e2 := os.Stat(tlsKey)
				return e1 == nil && e2 == nil
			})
		}
	}
	// serving reports whether the replica on host i says SERVING to a
	// probe from its own host (its loopback works while its link is cut).
	serving := func(i int) bool {
		return bed.Exec(i, hanzod, "health", "--leader", "--addr", "127.0.0.1:9550", "--timeout", "3s").Run() == nil
	}
	leaders := func(skip int) []int {
		var out []int
		for _, i := range replica {
			if i != skip && serving(i) {
				out = append(out, i)
			}
		}
		return out
	}
	first := -1
	poll("one replica leads", 60*time.Second, 200*time.Millisecond, func() bool {
		if l := leaders(-1); len(l) == 1 {
			first = l[0]
			return true
		}
		return false
	})
	local := []string{"--orchestrator", "grpcs://127.0.0.1:9550", "--tls-ca", cert}
	run := func(i int, args ...string) string {
		t.Helper()
		out, err := bed.Exec(i, gymBin, args...).CombinedOutput()
		if err != nil {
			t.Fatalf("gym %v in %s: %v\n%s\n%s", args, bed.NS(i), err, out, logs())
		}
		return string(out)
	}
	// The operator's calls go to the leader's loopback.
	op := func(leader int, args ...string) string { return run(leader, append(local, args...)...) }
	op(first, "ledger", "deposit", account, "50000")
	op(first, "ledger", "bond", account, "50000")
	op(first, "ledger", "deposit", "treasury", "1000") // the epochs' rewards

	var addrs []string
	for _, i := range replica {
		addrs = append(addrs, bed.Addr(i)+":9550")
	}
	remote := []string{"--orchestrator", "grpcs://" + strings.Join(addrs, ","), "--tls-ca", cert}
	var mu sync.Mutex
	acked := map[jobspec.Slot]bool{}
	ids := map[int]string{}
	for w := range workers {
		i := 4 + w
		wdir := filepath.Join(dir, fmt.Sprintf("w%d", w))
		os.MkdirAll(wdir, 0o755)
		id := strings.TrimSpace(run(i, "keygen", "--out", filepath.Join(wdir, "node.key")))
		ids[i] = id
		op(first, "ledger", "deposit", id, "20000")
		op(first, "ledger", "bond", id, "10000")
		cmd := bed.Exec(i, gymBin, append(remote, "worker", "--key", filepath.Join(wdir, "node.key"), "--data", wdir,
			"--listen", bed.Addr(i)+":9600", "--probe-listen", bed.Addr(i)+":9601", "--threads", "1", "--json",
			"--exit-when-done", "--ring-timeout", "10s")...)
		stdout, _ := cmd.StdoutPipe()
		wlog, _ := os.Create(filepath.Join(dir, fmt.Sprintf("w%d.log", w)))
		cmd.Stderr = wlog
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		done := make(chan struct{})
		go func() {
			defer close(done)
			sc := bufio.NewScanner(stdout)
			for sc.Scan() {
				fmt.Fprintf(wlog, "%s\n", sc.Bytes())
				var ev gymworker.Event
				if json.Unmarshal(sc.Bytes(), &ev) == nil && ev.Kind == gymworker.EventDeltaSubmitted {
					mu.Lock()
					acked[jobspec.Slot{Epoch: ev.Epoch, Step: uint64(ev.Step), Node: id}] = true
					mu.Unlock()
				}
			}
			cmd.Wait()
			wlog.Close()
		}()
		t.Cleanup(func() { cmd.Process.Kill(); <-done })
	}

	job := filepath.Join(dir, "job.yaml")
	os.WriteFile(job, []byte(`model: builtin
dataset: addition
epochs: 2
min_nodes: 4
max_nodes: 4
aggregation: median
byzantine: 1
steps_per_epoch: 4
prompts_per_step: 2
gspo:
  importance_sampling_level: sequence
  beta: 0.1
  group_size: 4
  aggregate_interval: 2
  use_4bit: false
  lora_rank: 4
  lora_alpha: 8
  max_seq_len: 12
  gradient_accumulation_steps: 1
  learning_rate: 0.002
  warmup_steps: 0
  weight_decay: 0
`), 0o644)
	jobID := strings.TrimSpace(op(first, "job", "submit", job))

	type status struct {
		State   string   `json:"state"`
		Reason  string   `json:"reason"`
		CIDs    []string `json:"cids"`
		Settled bool     `json:"settled"`
	}
	jobStatus := func(leader int) (status, bool) {
		var st status
		out, err := bed.Exec(leader, gymBin, append(local, "job", "status", jobID, "--json")...).Output()
		return st, err == nil && json.Unmarshal(out, &st) == nil
	}

	// Cut the leader's host off once the first delta of epoch 1 was
	// acknowledged: the rest of the epoch's deltas go to the new leader.
	poll("a delta of epoch 1 acknowledged", 6*time.Minute, 200*time.Millisecond, func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(acked) > 0
	})
	mu.Lock()
	before := len(acked)
	mu.Unlock()
	if st, ok := jobStatus(first); !ok || st.State != "running" || len(st.CIDs) != 0 {
		t.Fatalf("job %s before the cut: %+v (ok %v), want running in epoch 1", jobID, st, ok)
	}
	if err := bed.Cut(first, true); err != nil {
		t.Fatal(err)
	}
	cut := time.Now()
	second := -1
	var takeover, stepDown time.Duration
	poll("another replica leads", 60*time.Second, 50*time.Millisecond, func() bool {
		if stepDown == 0 && !serving(first) {
			stepDown = time.Since(cut)
		}
		if l := leaders(first); len(l) == 1 {
			second, takeover = l[0], time.Since(cut)
			return true
		}
		return false
	})
	poll("the cut-off replica stops saying it leads", 60*time.Second, 100*time.Millisecond, func() bool {
		if stepDown == 0 && !serving(first) {
			stepDown = time.Since(cut)
		}
		return stepDown != 0
	})
	t.Logf("host of replica %d cut off after %d acknowledged deltas; replica %d leads %v later; the cut-off one stopped saying SERVING after %v (lease %v)",
		first, before, second, takeover.Round(time.Millisecond), stepDown.Round(time.Millisecond), lease)

	// The new leader finishes epoch 1 while the old one is still cut off.
	var st status
	poll("epoch 1 published by the new leader", 6*time.Minute, time.Second, func() bool {
		s, ok := jobStatus(second)
		if ok {
			st = s
		}
		return ok && (len(s.CIDs) >= 1 || s.State == "failed")
	})
	if st.State == "failed" {
		t.Fatalf("job failed: %s\n%s", st.Reason, logs())
	}
	if err := bed.Cut(first, false); err != nil {
		t.Fatal(err)
	}
	restored := time.Now()
	t.Logf("epoch 1 published %v after the cut; link restored", restored.Sub(cut).Round(time.Millisecond))

	poll("job published and settled", 8*time.Minute, time.Second, func() bool {
		s, ok := jobStatus(second)
		if ok {
			st = s
		}
		return ok && (s.Settled || s.State == "failed")
	})
	if st.State != "published" || len(st.CIDs) != 2 {
		t.Fatalf("job %s: %s (%s), %d checkpoints\n%s", jobID, st.State, st.Reason, len(st.CIDs), logs())
	}
	if l := leaders(-1); len(l) != 1 || l[0] != second {
		t.Errorf("after the link came back the leaders are %v, want replica %d alone", l, second)
	}

	// Settled: after the retention (2 s here) the leader deletes the
	// job's deltas from Valkey; the checkpoints of record stay.
	keys := func(pattern string) int {
		out, err := redis("SCAN*", pattern)
		if err != nil {
			t.Fatal(out, err)
		}
		return len(strings.Fields(out))
	}
	poll("the settled job's deltas deleted", 60*time.Second, 200*time.Millisecond, func() bool {
		return keys("{gym}:blob:deltas/"+jobID+"/*") == 0
	})
	if n := keys("{gym}:blob:checkpoints/*"); n != 2*3 { // two epochs × three files
		t.Errorf("%d checkpoint files in the blob store after the deletion, want 6", n)
	}
	metric := func(i int, name string) (uint64, bool) {
		out, err := helper(i, "get", "http://127.0.0.1:9551/metrics")
		if err != nil {
			return 0, false
		}
		for _, l := range strings.Split(out, "\n") {
			if v, ok := strings.CutPrefix(l, name+" "); ok {
				n, err := strconv.ParseUint(strings.TrimSpace(v), 10, 64)
				return n, err == nil
			}
		}
		return 0, false
	}
	freed, _ := metric(second, "gym_hanzod_blob_bytes_reclaimed_total")
	deleted, _ := metric(second, "gym_hanzod_blobs_deleted_total")
	// Each accepted delta is two blobs: the file and its sync's trace
	// bundle.
	if deleted != uint64(2*2*2*workers) || freed == 0 {
		t.Errorf("the leader deleted %d blobs (%d bytes), want the %d accepted deltas and their %d trace bundles", deleted, freed, 2*2*workers, 2*2*workers)
	}

	// The old leader follows the log as a standby: its applied index
	// reaches the leader's.
	applied := func(i int) uint64 {
		n, _ := metric(i, "gym_hanzod_log_applied_index")
		return n
	}
	poll("the old leader catches up as a standby", 60*time.Second, 200*time.Millisecond, func() bool {
		a, b := applied(first), applied(second)
		return a > 0 && a >= b
	})

	// It refuses to write: an operator's deposit on its loopback is
	// answered as by a standby.
	if out, err := bed.Exec(first, gymBin, append(local, "ledger", "deposit", "treasury", "1")...).CombinedOutput(); err == nil ||
		!strings.Contains(string(out), "standby") {
		t.Errorf("a deposit on the old leader after the link came back: %v\n%s", err, out)
	}

	// The log, read from Valkey.
	out, err := redis("LRANGE", "{gym}:log", "0", "-1")
	if err != nil {
		t.Fatal(out, err)
	}
	logged := map[jobspec.Slot]int{}
	paid := map[int]int{}
	slashed, settled, events := 0, 0, 0
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		ev, err := state.DecodeEvent([]byte(line))
		if err != nil {
			t.Fatalf("event %d: %v: %s", events+1, err, line)
		}
		events++
		if ev.Index != uint64(events) {
			t.Fatalf("event %d has index %d", events, ev.Index)
		}
		switch b := ev.Body.(type) {
		case state.DeltaJudged:
			if b.Accepted && b.Job == jobID {
				logged[jobspec.Slot{Epoch: b.Epoch, Step: b.Step, Node: b.Node}]++
			}
		case state.RewardsPaid:
			if b.Job == jobID {
				paid[b.Epoch]++
			}
		case state.Slashed:
			slashed++
		case state.JobSettled:
			settled++
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if len(acked) != 2*2*workers { // 2 epochs × 2 syncs × 4 workers
		t.Errorf("%d deltas acknowledged, want %d", len(acked), 2*2*workers)
	}
	for sl := range acked {
		if logged[sl] != 1 {
			t.Errorf("delta of slot %s acknowledged to the worker, %d accepted verdicts in the log", sl, logged[sl])
		}
	}
	if paid[1] != 1 || paid[2] != 1 || slashed != 0 || settled != 1 {
		t.Errorf("epochs paid %v, %d slashes, %d settlements: want each epoch once, none, one", paid, slashed, settled)
	}
	// The cut-off replica's own account: it stopped leading, never led
	// again, and neither published nor settled anything after the cut (a
	// write it tried was refused by the store's token: "fenced").
	r := map[int]string{1: "r1.log", 2: "r2.log", 3: "r3.log"}[first]
	b, _ := os.ReadFile(filepath.Join(dir, r))
	lost, fenced := false, 0
	for _, line := range strings.Split(string(b), "\n") {
		var l struct {
			Time   time.Time `json:"time"`
			Msg    string    `json:"msg"`
			Leader *bool     `json:"leader"`
		}
		if json.Unmarshal([]byte(line), &l) != nil || l.Time.Before(cut) {
			continue
		}
		switch {
		case l.Msg == "leadership changed" && l.Leader != nil && !*l.Leader:
			lost = true
		case l.Msg == "leadership changed":
			t.Errorf("the cut-off replica led again: %s", line)
		case l.Msg == "checkpoint published" || l.Msg == "job settled" || l.Msg == "blobs of a settled job deleted":
			t.Errorf("the cut-off replica acted as the leader after the cut: %s", line)
		}
		if strings.Contains(line, "fenced") {
			fenced++
		}
	}
	if !lost {
		t.Errorf("the cut-off replica never logged losing the lead\n%s", logs())
	}
	// What the store refused: writes that reached Valkey with a token older
	// than the newest issued (the cut-off leader's, sent before the cut and
	// delivered after the link came back) are error replies FENCED.
	stats, _ := redis("INFO", "errorstats")
	token, _ := redis("GET", "{gym}:token")
	refused := 0
	for _, l := range strings.Fields(stats) {
		if v, ok := strings.CutPrefix(l, "errorstat_FENCED:count="); ok {
			refused, _ = strconv.Atoi(v)
		}
	}
	t.Logf("Valkey refused %d writes as fenced; tokens issued: %s", refused, strings.TrimSpace(token))
	t.Logf("job %s published (CID %s) across %d namespaces, %d events; takeover %v after the cut, cut-off leader stepped down after %v (%d fenced writes logged), rejoined as a standby; %d blobs, %d bytes of the settled job deleted",
		jobID, st.CIDs[len(st.CIDs)-1], bed.N+1, events, takeover.Round(time.Millisecond), stepDown.Round(time.Millisecond), fenced, deleted, freed)
}

// netnsHelperMain runs this test binary as a helper inside a network
// namespace when GYM_TEST_NETNS_HELPER is set: "get" prints the body of
// an HTTP GET of args[0]; "redis" sends one command (args[1:]) to the
// Valkey at args[0] and prints the reply, one element a line ("SCAN*
// PATTERN" prints every key matching PATTERN).
func netnsHelperMain() bool {
	mode := os.Getenv("GYM_TEST_NETNS_HELPER")
	if mode == "" {
		return false
	}
	var args []string
	if err := json.Unmarshal([]byte(os.Getenv("GYM_TEST_NETNS_ARGS")), &args); err != nil || len(args) == 0 {
		fmt.Fprintln(os.Stderr, "GYM_TEST_NETNS_ARGS: want a JSON list")
		os.Exit(2)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	fail := func(err error) {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	switch mode {
	case "get":
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, args[0], nil)
		if err != nil {
			fail(err)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			fail(err)
		}
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			fail(fmt.Errorf("GET %s: %s", args[0], resp.Status))
		}
		io.Copy(os.Stdout, resp.Body)
	case "redis":
		c := goredis.NewClient(&goredis.Options{Addr: args[0]})
		defer c.Close()
		if len(args) == 3 && args[1] == "SCAN*" {
			it := c.Scan(ctx, 0, args[2], 1000).Iterator()
			for it.Next(ctx) {
				fmt.Println(it.Val())
			}
			if err := it.Err(); err != nil {
				fail(err)
			}
			break
		}
		cmd := make([]any, len(args)-1)
		for i, a := range args[1:] {
			cmd[i] = a
		}
		v, err := c.Do(ctx, cmd...).Result()
		if err != nil && !errors.Is(err, goredis.Nil) {
			fail(err)
		}
		switch v := v.(type) {
		case []any:
			for _, e := range v {
				fmt.Println(e)
			}
		case nil:
		default:
			fmt.Println(v)
		}
	default:
		fail(fmt.Errorf("GYM_TEST_NETNS_HELPER=%q: want get or redis", mode))
	}
	os.Exit(0)
	return true
}
