package main

import (
	"bufio"
	"context"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"math"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/ipfs/go-cid"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"gopkg.in/yaml.v3"

	pb "github.com/zooai/gym/api/hanzod/v1"
	"github.com/zooai/gym/artifact"
	"github.com/zooai/gym/artifact/store"
	"github.com/zooai/gym/artifact/transfer"
	"github.com/zooai/gym/internal/promdoc"
	"github.com/zooai/gym/internal/tinyllama"
	"github.com/zooai/gym/keys/nodekey"
	"github.com/zooai/gym/model/llama"
	"github.com/zooai/gym/model/peft"
	"github.com/zooai/gym/orchestrator/state"
	"github.com/zooai/gym/protocol/jobspec"
)

// These tests run the gym binary against a real hanzod process: the client
// side of issue 3's CLI contract.

const exampleJob = "../../examples/job.yaml"

var (
	hanzodOnce sync.Once
	hanzodBin  string
	hanzodErr  error
)

// buildHanzod builds cmd/hanzod next to the gym binary (TestMain removes
// that directory).
func buildHanzod(t *testing.T) string {
	t.Helper()
	hanzodOnce.Do(func() {
		hanzodBin = filepath.Join(filepath.Dir(gymBin), "hanzod")
		if out, err := exec.Command("go", "build", "-o", hanzodBin, "../hanzod").CombinedOutput(); err != nil {
			hanzodErr = fmt.Errorf("building hanzod: %v\n%s", err, out)
		}
	})
	if hanzodErr != nil {
		t.Fatal(hanzodErr)
	}
	return hanzodBin
}

type daemon struct {
	addr string // 127.0.0.1:PORT
	data string
	log  *syncBuffer
}

type syncBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// startHanzod runs hanzod on listen (port 0), learns its address from the
// "serving" log line and polls its health service until it leads. creds
// builds the credentials to poll with, once the data directory is known.
func startHanzod(t *testing.T, listen string, creds func(data string) credentials.TransportCredentials, args ...string) *daemon {
	t.Helper()
	bin := buildHanzod(t)
	d := &daemon{data: t.TempDir(), log: &syncBuffer{}}
	cmd := exec.Command(bin, append([]string{"--data", d.data, "--listen", listen, "--artifacts", "127.0.0.1:0"}, args...)...)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	serving := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			line := sc.Text()
			d.log.Write([]byte(line + "\n"))
			var rec struct {
				Msg  string `json:"msg"`
				GRPC string `json:"grpc"`
			}
			if json.Unmarshal([]byte(line), &rec) == nil && rec.Msg == "serving" {
				select {
				case serving <- rec.GRPC:
				default:
				}
			}
		}
		io.Copy(io.Discard, stderr)
		cmd.Wait()
		close(exited)
	}()
	t.Cleanup(func() {
		cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(15 * time.Second):
			cmd.Process.Kill()
			<-exited
		}
		if t.Failed() {
			t.Logf("hanzod log:\n%s", d.log.String())
		}
	})
	select {
	case a := <-serving:
		_, port, err := net.SplitHostPort(a)
		if err != nil {
			t.Fatalf("hanzod reported address %q", a)
		}
		d.addr = net.JoinHostPort("127.0.0.1", port)
	case <-exited:
		t.Fatalf("hanzod exited before serving:\n%s", d.log.String())
	case <-time.After(30 * time.Second):
		t.Fatalf("hanzod did not report its address:\n%s", d.log.String())
	}
	conn, err := grpc.NewClient(d.addr, grpc.WithTransportCredentials(creds(d.data)))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	h := healthpb.NewHealthClient(conn)
	deadline := time.Now().Add(20 * time.Second)
	for {
		r, err := h.Check(context.Background(), &healthpb.HealthCheckRequest{})
		if err == nil && r.Status == healthpb.HealthCheckResponse_SERVING {
			return d
		}
		if time.Now().After(deadline) {
			t.Fatalf("hanzod at %s not serving: %v %v\n%s", d.addr, r, err, d.log.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func plaintext(string) credentials.TransportCredentials { return insecure.NewCredentials() }

// pinnedTLS trusts the self-signed certificate hanzod made in its data
// directory, by the name it carries.
func pinnedTLS(t *testing.T) func(string) credentials.TransportCredentials {
	return func(data string) credentials.TransportCredentials {
		pemBytes, err := os.ReadFile(filepath.Join(data, "tls-cert.pem"))
		if err != nil {
			t.Fatal(err)
		}
		pool := x509.NewCertPool()
		pool.AppendCertsFromPEM(pemBytes)
		return credentials.NewTLS(&tls.Config{RootCAs: pool, ServerName: "localhost", MinVersion: tls.VersionTLS13})
	}
}

func dialPlain(t *testing.T, addr string) *grpc.ClientConn {
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}

// testNode is a worker as hanzod sees it: a key and its sequence numbers.
type testNode struct {
	key    ed25519.PrivateKey
	id     string
	seq    uint64
	hanzod ed25519.PublicKey // the audience, learnt from hanzod's first refusal (as nodeclient learns it)
}

func newTestNode(i int) *testNode {
	seed := sha256.Sum256([]byte(fmt.Sprint("gym-job-test-node-", i)))
	k := ed25519.NewKeyFromSeed(seed[:])
	return &testNode{key: k, id: fmt.Sprintf("%x", k.Public().(ed25519.PublicKey))}
}

func (n *testNode) auth(a state.Auth) *pb.Auth {
	return &pb.Auth{Node: a.Node, Seq: a.Seq, TimestampMs: a.Timestamp, Signature: a.Sig}
}

func (n *testNode) register(t *testing.T, nc pb.NodeServiceClient, vram uint64) {
	t.Helper()
	for attempt := 0; ; attempt++ {
		n.seq++
		r := state.Register{Auth: state.Auth{Seq: n.seq, Timestamp: time.Now().UnixMilli(), Audience: n.hanzod}, Address: "10.0.0.1:9560", Region: "eu-west", GPUModel: "L4", VRAMMiB: vram}
		state.SignRegister(n.key, &r)
		var tr metadata.MD
		_, err := nc.Register(context.Background(), &pb.RegisterRequest{Auth: n.auth(r.Auth), Address: r.Address, Region: r.Region, GpuModel: r.GPUModel, VramMib: r.VRAMMiB}, grpc.Trailer(&tr))
		if k := tr.Get("hanzod-key"); err != nil && attempt == 0 && len(k) == 1 {
			raw, _ := hex.DecodeString(k[0])
			n.hanzod = ed25519.PublicKey(raw)
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		return
	}
}

func (n *testNode) reportBandwidth(t *testing.T, nc pb.NodeServiceClient, job string, peers []string) {
	t.Helper()
	n.seq++
	b := state.ReportBandwidth{Auth: state.Auth{Seq: n.seq, Timestamp: time.Now().UnixMilli(), Audience: n.hanzod}, Job: job}
	req := &pb.ReportBandwidthRequest{Job: job}
	for _, p := range peers {
		if p != n.id {
			b.Links = append(b.Links, state.Link{Peer: p, Kbps: 1_000_000})
			req.Links = append(req.Links, &pb.Link{Peer: p, Kbps: 1_000_000})
		}
	}
	state.SignBandwidth(n.key, &b)
	req.Auth = n.auth(b.Auth)
	if _, err := nc.ReportBandwidth(context.Background(), req); err != nil {
		t.Fatal(err)
	}
}

func decodeJSON[T any](t *testing.T, out string) T {
	t.Helper()
	var v T
	dec := json.NewDecoder(strings.NewReader(out))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&v); err != nil {
		t.Fatalf("%v in %s", err, out)
	}
	return v
}

// exampleSpec reads examples/job.yaml independently of the code under test.
func exampleSpec(t *testing.T) map[string]any {
	t.Helper()
	b, err := os.ReadFile(exampleJob)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := yaml.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	return m
}

var jobID = regexp.MustCompile(`^job-[0-9]{8}\n$`)

// gspoKeys reads spec.gspo of 'gym job status --json' output as plain JSON
// (numbers as float64), independently of the types under test; it fails
// unless the object has exactly the twelve keys of the job file.
func gspoKeys(t *testing.T, out string) map[string]any {
	t.Helper()
	var v struct {
		Spec struct {
			GSPO map[string]any `json:"gspo"`
		} `json:"spec"`
	}
	if err := json.Unmarshal([]byte(out), &v); err != nil {
		t.Fatalf("%v in %s", err, out)
	}
	keys := []string{"aggregate_interval", "beta", "gradient_accumulation_steps", "group_size", "importance_sampling_level", "learning_rate",
		"lora_alpha", "lora_rank", "max_seq_len", "use_4bit", "warmup_steps", "weight_decay"}
	got := make([]string, 0, len(v.Spec.GSPO))
	for k := range v.Spec.GSPO {
		got = append(got, k)
	}
	sort.Strings(got)
	if !slices.Equal(got, keys) {
		t.Fatalf("spec.gspo has keys %v, want %v, in %s", got, keys, out)
	}
	return v.Spec.GSPO
}

// TestJobGSPO submits job files with and without a gspo section to a real
// hanzod and reads the settings back, also after hanzod restarts (so they
// survive its log and snapshot); a section the file leaves out comes back
// as the seed's defaults, the same in gym and in hanzod.
func TestJobGSPO(t *testing.T) {
	data := t.TempDir()
	dir := t.TempDir()
	const base = "model: m\ndataset: d\nepochs: 1\nmin_nodes: 3\n"
	custom := filepath.Join(dir, "custom.yaml")
	os.WriteFile(custom, []byte(base+`gspo:
  importance_sampling_level: token
  beta: 0
  group_size: 3
  aggregate_interval: 7
  use_4bit: false
  lora_rank: 5
  lora_alpha: 0.30000000000000004
  max_seq_len: 1000
  gradient_accumulation_steps: 2
  learning_rate: 1.25e-7
  warmup_steps: 0
  weight_decay: 0.3
`), 0o644)
	partial := filepath.Join(dir, "partial.yaml")
	os.WriteFile(partial, []byte(base+"gspo:\n  group_size: 16\n"), 0o644)
	none := filepath.Join(dir, "none.yaml")
	os.WriteFile(none, []byte(base), 0o644)
	wantCustom := jobspec.GSPO{ImportanceSamplingLevel: "token", Beta: 0, GroupSize: 3, AggregateInterval: 7, Use4Bit: false, LoRARank: 5,
		LoRAAlpha: 0.30000000000000004, MaxSeqLen: 1000, GradientAccumulationSteps: 2, LearningRate: 1.25e-7, WarmupSteps: 0, WeightDecay: 0.3}
	wantPartial := jobspec.DefaultGSPO()
	wantPartial.GroupSize = 16
	want := map[string]jobspec.GSPO{}
	check := func(t *testing.T, addr string) {
		for id, w := range want {
			j := decodeJSON[jobJSON](t, mustGym(t, "--orchestrator", addr, "job", "status", "--json", id))
			if j.Spec.GSPO == nil || *j.Spec.GSPO != w {
				t.Errorf("%s: gspo %+v, want %+v", id, j.Spec.GSPO, w)
			}
		}
		list := decodeJSON[struct {
			Jobs []jobJSON `json:"jobs"`
		}](t, mustGym(t, "--orchestrator", addr, "job", "list", "--json"))
		for _, j := range list.Jobs {
			if j.Spec.GSPO == nil || *j.Spec.GSPO != want[j.ID] {
				t.Errorf("job list: %s: gspo %+v, want %+v", j.ID, j.Spec.GSPO, want[j.ID])
			}
		}
		if len(list.Jobs) != len(want) {
			t.Errorf("job list has %d jobs, want %d", len(list.Jobs), len(want))
		}
	}
	t.Run("submit", func(t *testing.T) {
		d := startHanzod(t, "127.0.0.1:0", plaintext, "--metrics", "", "--data", data)
		// In this order: job-00000001 is the custom file, checked below.
		for _, c := range []struct {
			file string
			w    jobspec.GSPO
		}{{custom, wantCustom}, {partial, wantPartial}, {none, jobspec.DefaultGSPO()}} {
			file, w := c.file, c.w
			r := gym(t, "--orchestrator", d.addr, "job", "submit", file)
			if r.code != 0 || !jobID.MatchString(r.stdout) || r.stderr != "" {
				t.Fatalf("submit %s: exit %d, stdout %q, stderr %q", file, r.code, r.stdout, r.stderr)
			}
			want[strings.TrimSpace(r.stdout)] = w
		}
		check(t, d.addr)
		if g := gspoKeys(t, mustGym(t, "--orchestrator", d.addr, "job", "status", "--json", "job-00000001")); g["lora_alpha"] != 0.30000000000000004 || g["use_4bit"] != false {
			t.Errorf("status --json gspo: %v", g)
		}
	})
	if t.Failed() {
		return
	}
	t.Run("restart", func(t *testing.T) {
		d := startHanzod(t, "127.0.0.1:0", plaintext, "--metrics", "", "--data", data)
		check(t, d.addr)
	})
}

// TestJobLifecycle submits examples/job.yaml to a real hanzod with three
// staked nodes, follows it to Running, and reads it, the nodes and their
// balances back, as JSON and as text.
func TestJobLifecycle(t *testing.T) {
	d := startHanzod(t, "127.0.0.1:0", plaintext, "--metrics", "")
	conn := dialPlain(t, d.addr)
	nc, oc := pb.NewNodeServiceClient(conn), pb.NewOrchestratorServiceClient(conn)
	var nodes []*testNode
	var ids []string
	for i := range 3 {
		n := newTestNode(i)
		n.register(t, nc, 24576)
		// 12,345.5 GYM deposited, 10,000 bonded (the eligibility minimum).
		if _, err := oc.Deposit(context.Background(), &pb.LedgerRequest{Account: n.id, Amount: 12_345_500_000}); err != nil {
			t.Fatal(err)
		}
		if _, err := oc.Bond(context.Background(), &pb.LedgerRequest{Account: n.id, Amount: 10_000_000_000}); err != nil {
			t.Fatal(err)
		}
		nodes = append(nodes, n)
		ids = append(ids, n.id)
	}
	sort.Strings(ids)

	r := gym(t, "--orchestrator", d.addr, "job", "submit", exampleJob)
	if r.code != 0 || !jobID.MatchString(r.stdout) {
		t.Fatalf("submit: exit %d, stdout %q, stderr %s", r.code, r.stdout, r.stderr)
	}
	if r.stderr != "" {
		t.Errorf("submit wrote to stderr: %q", r.stderr)
	}
	id := strings.TrimSpace(r.stdout)
	submitted := time.Now()

	// From here on the address comes from the environment.
	t.Setenv("ORCHESTRATOR_URL", d.addr)
	j := decodeJSON[jobJSON](t, mustGym(t, "job", "status", id, "--json"))
	if j.ID != id || j.State != "provisioning" || j.Ring != nil || !slices.Equal(sorted(j.Members), ids) {
		t.Fatalf("after submit: %+v, want provisioning with members %v", j, ids)
	}
	for _, n := range nodes {
		n.reportBandwidth(t, nc, id, ids)
	}

	j = decodeJSON[jobJSON](t, mustGym(t, "job", "status", "--json", id))
	want := exampleSpec(t)
	switch {
	case j.State != "running" || j.Epoch != 1 || j.Paused || j.Reason != "" || len(j.CIDs) != 0:
		t.Fatalf("after bandwidth reports: %+v", j)
	case j.Ring == nil || !slices.Equal(sorted(j.Ring.Members), ids) || j.Ring.Generation < 1 || len(j.Ring.ConfigID) != 32 || j.Ring.BottleneckKbps != 1_000_000:
		t.Fatalf("ring: %+v", j.Ring)
	case j.Spec.Model != want["model"] || j.Spec.Dataset != want["dataset"] || int(j.Spec.Epochs) != want["epochs"] ||
		int(j.Spec.MinNodes) != want["min_nodes"] || int(j.Spec.MaxNodes) != want["max_nodes"] ||
		int(j.Spec.MinVRAMMiB) != want["min_vram_mib"] || j.Spec.Aggregation != want["aggregation"] || j.Spec.Utility != 1:
		t.Fatalf("spec %+v differs from %s %v", j.Spec, exampleJob, want)
	case j.Spec.Deadline == nil:
		t.Fatal("the example's deadline was not sent")
	}
	// The gspo section, key by key as the example writes it (its
	// max_seq_len, 4096, is not the default).
	wantG, gotG := want["gspo"].(map[string]any), gspoKeys(t, mustGym(t, "job", "status", "--json", id))
	if len(wantG) != 12 || wantG["max_seq_len"] != 4096 {
		t.Fatalf("%s gspo section: %v", exampleJob, wantG)
	}
	for k, v := range wantG {
		if fmt.Sprint(gotG[k]) != fmt.Sprint(v) {
			t.Errorf("gspo.%s: hanzod has %v, %s says %v", k, gotG[k], exampleJob, v)
		}
	}
	dl, err := time.Parse(time.RFC3339Nano, *j.Spec.Deadline)
	if err != nil || dl.Sub(submitted) > 7*24*time.Hour || dl.Sub(submitted) < 7*24*time.Hour-time.Minute {
		t.Fatalf("deadline %s, want 7 days after %s (%v)", *j.Spec.Deadline, submitted, err)
	}
	text := mustGym(t, "job", "status", id)
	for _, s := range []string{id, "running", "epoch        1 of 3", "trimmed-mean", j.Ring.ConfigID, ids[0],
		"gspo         sequence, beta 0.1, group 8, sync every 50 steps, learning rate 2e-05", "max 4096 tokens"} {
		if !strings.Contains(text, s) {
			t.Errorf("job status lacks %q:\n%s", s, text)
		}
	}

	list := decodeJSON[struct {
		Jobs []jobJSON `json:"jobs"`
	}](t, mustGym(t, "job", "list", "--json"))
	if len(list.Jobs) != 1 || list.Jobs[0].ID != id || list.Jobs[0].State != "running" {
		t.Fatalf("job list: %+v", list)
	}
	if text := mustGym(t, "job", "list"); !regexp.MustCompile(`(?m)^` + id + ` +running +1/3 +3 of 3-8 +Qwen/Qwen3-0.6B +openai/gsm8k$`).MatchString(text) {
		t.Errorf("job list:\n%s", text)
	}

	ns := decodeJSON[struct {
		Nodes []nodeJSON `json:"nodes"`
	}](t, mustGym(t, "node", "list", "--json"))
	if len(ns.Nodes) != 3 {
		t.Fatalf("node list: %+v", ns)
	}
	for i, n := range ns.Nodes {
		if n.ID != ids[i] || n.Status != "active" || n.GPUModel != "L4" || n.VRAMMiB != 24576 || n.Region != "eu-west" ||
			n.Attestation != "unverified" || n.Job != id || n.UptimeBP != 10000 || !n.Eligible || n.Ineligible != "" {
			t.Errorf("node %d: %+v", i, n)
		}
	}
	if text := mustGym(t, "node", "list"); !strings.Contains(text, ids[0]) || !strings.Contains(text, "100.00%") || !strings.Contains(text, id) {
		t.Errorf("node list:\n%s", text)
	}

	a := decodeJSON[accountJSON](t, mustGym(t, "ledger", "balance", ids[1], "--json"))
	if a.Account != ids[1] || a.Free != 2_345_500_000 || a.Bonded != 10_000_000_000 || a.Unbonding != 0 || a.Banned || a.Slashes == nil || len(a.Slashes) != 0 {
		t.Fatalf("balance: %+v", a)
	}
	if text := mustGym(t, "ledger", "balance", ids[1]); !strings.Contains(text, "free       2345.500000 GYM") || !strings.Contains(text, "bonded     10000.000000 GYM") {
		t.Errorf("balance:\n%s", text)
	}
	if a := decodeJSON[accountJSON](t, mustGym(t, "ledger", "balance", "--json", "nobody")); a.Account != "nobody" || a.Free != 0 || a.Bonded != 0 {
		t.Errorf("unknown account: %+v", a)
	}

	// A slash shows with its evidence (5% of the bonded stake on a first offence).
	if _, err := oc.Slash(context.Background(), &pb.SlashRequest{Node: ids[2], Reason: "bad delta", Evidence: []byte{0xde, 0xad}}); err != nil {
		t.Fatal(err)
	}
	a = decodeJSON[accountJSON](t, mustGym(t, "ledger", "balance", ids[2], "--json"))
	if len(a.Slashes) != 1 || a.Bonded != 9_500_000_000 {
		t.Fatalf("after a slash: %+v", a)
	}
	if s := a.Slashes[0]; s.Offence != 1 || s.Amount != 500_000_000 || s.Reason != "bad delta" || s.Evidence != "dead" || !strings.HasSuffix(s.At, "Z") {
		t.Fatalf("slash: %+v", s)
	}
	if text := mustGym(t, "ledger", "balance", ids[2]); !strings.Contains(text, "offence 1") || !strings.Contains(text, "500.000000 GYM  bad delta") {
		t.Errorf("balance after a slash:\n%s", text)
	}

	// Errors from the daemon: a clear message and exit status 1.
	if r := gym(t, "job", "status", "job-99999999"); r.code != 1 || !strings.Contains(r.stderr, `job "job-99999999" not found`) || !strings.Contains(r.stderr, "gym job list") {
		t.Errorf("unknown job: %+v", r)
	}
	if r := gym(t, "--orchestrator", "grpcs://"+d.addr, "job", "list"); r.code != 1 || !strings.Contains(r.stderr, "serves plaintext") || !strings.Contains(r.stderr, "grpc://"+d.addr) {
		t.Errorf("TLS to a plaintext hanzod: %+v", r)
	}
	// Usage errors: exit status 2, before anything is sent.
	for _, args := range [][]string{
		{"job", "status"},
		{"job", "status", "a", "b"},
		{"job", "list", "extra"},
		{"job", "submit"},
		{"node", "list", "extra"},
		{"ledger", "balance"},
		{"ledger", "balance", " "},
		{"job", "list", "--timeout", "0s"},
		{"job", "list", "--timeout", "soon"},
		{"--orchestrator", "ftp://" + d.addr, "job", "list"},
		{"--orchestrator", "", "job", "list"},
		{"--orchestrator", "localhost:notaport", "job", "list"},
		{"--orchestrator", "grpc://" + d.addr, "--tls-ca", exampleJob, "job", "list"},
	} {
		if r := gym(t, args...); r.code != 2 {
			t.Errorf("gym %q: exit %d, want 2 (%s)", args, r.code, r.stderr)
		}
	}
	// Nothing above changed the job count.
	if list := decodeJSON[struct {
		Jobs []jobJSON `json:"jobs"`
	}](t, mustGym(t, "job", "list", "--json")); len(list.Jobs) != 1 {
		t.Fatalf("jobs: %+v", list)
	}
}

func sorted(s []string) []string {
	s = slices.Clone(s)
	sort.Strings(s)
	return s
}

// TestJobFileRefused: an invalid job file is refused before anything is
// sent (nothing listens at the address), with the line of the problem and
// what to do, exit status 1.
func TestJobFileRefused(t *testing.T) {
	dir := t.TempDir()
	valid := "model: Qwen/Qwen3-0.6B\ndataset: openai/gsm8k\nepochs: 2\nmin_nodes: 3\n"
	for _, tc := range []struct {
		name, file string
		want       []string
	}{
		{"syntax", "model: a\n  dataset: b\n", []string{".yaml:2: not valid YAML"}},
		{"tab", "model: a\n\tdataset: b\n", []string{".yaml:2: not valid YAML"}},
		{"unknown key", valid + "epoch: 3\n", []string{`.yaml:5: unknown key "epoch" (did you mean "epochs"?)`, "known keys: model, dataset"}},
		{"unknown gspo key", valid + "gspo:\n  beta: 0.2\n  lr: 1e-5\n", []string{`.yaml:7: unknown key "gspo.lr"`, "learning_rate"}},
		{"quoted number", strings.Replace(valid, "epochs: 2", `epochs: "2"`, 1), []string{`.yaml:3: epochs: want a whole number, got "2" (remove the quotes)`}},
		{"too few nodes", strings.Replace(valid, "min_nodes: 3", "min_nodes: 2", 1), []string{".yaml:4: min_nodes: 2 is outside 3..4096"}},
		{"missing", "model: a\n", []string{"3 problems", "dataset is missing", "epochs is missing", "min_nodes is missing"}},
		{"aggregation", valid + "aggregation: average\n", []string{`.yaml:5: aggregation: "average" is not one of mean, median, trimmed-mean`}},
		{"past deadline", valid + "deadline: 2001-01-01T00:00:00Z\n", []string{".yaml:5: deadline: 2001-01-01T00:00:00Z is already past"}},
		{"gspo", valid + "gspo:\n  importance_sampling_level: tokens\n  learning_rate: .nan\n", []string{`.yaml:6: gspo.importance_sampling_level: "tokens" is not one of sequence, token`, ".yaml:7: gspo.learning_rate: want a finite number"}},
		{"duplicate", valid + "model: other\n", []string{".yaml:5: model is given twice (first on line 1)"}},
		{"list", "- model: a\n", []string{".yaml:1: a job file is a mapping"}},
		{"empty", "# nothing\n", []string{"empty"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(dir, strings.ReplaceAll(tc.name, " ", "-")+".yaml")
			os.WriteFile(path, []byte(tc.file), 0o644)
			r := gym(t, "--orchestrator", "127.0.0.1:1", "job", "submit", path)
			if r.code != 1 || r.stdout != "" {
				t.Fatalf("exit %d, stdout %q, want 1 and nothing", r.code, r.stdout)
			}
			for _, w := range tc.want {
				if !strings.Contains(r.stderr, w) {
					t.Errorf("stderr lacks %q:\n%s", w, r.stderr)
				}
			}
			if strings.Contains(r.stderr, "nothing listens") {
				t.Errorf("tried to send an invalid job:\n%s", r.stderr)
			}
		})
	}
	// The example is valid: --dry-run prints it with defaults filled in.
	j := decodeJSON[map[string]any](t, mustGym(t, "job", "submit", "--dry-run", exampleJob))
	if j["model"] != "Qwen/Qwen3-0.6B" || j["utility"] != 1.0 || j["deadline"] == nil || j["gspo"].(map[string]any)["importance_sampling_level"] != "sequence" {
		t.Fatalf("dry run: %v", j)
	}
	if r := gym(t, "job", "submit", filepath.Join(dir, "absent.yaml")); r.code != 1 || !strings.Contains(r.stderr, "no such file") {
		t.Fatalf("missing file: %+v", r)
	}
}

// freeAddr returns a loopback address nothing listens on.
func freeAddr(t *testing.T) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return addr
}

// TestDaemonDown: every command says that nothing listens and what to do,
// exit status 1.
func TestDaemonDown(t *testing.T) {
	addr := freeAddr(t)
	t.Setenv("ORCHESTRATOR_URL", addr)
	for _, args := range [][]string{
		{"job", "submit", exampleJob},
		{"job", "list", "--json"},
		{"job", "status", "job-00000001", "--json"},
		{"node", "list", "--json"},
		{"ledger", "balance", "n", "--json"},
		{"ledger", "deposit", "n", "1"},
		{"job", "checkpoint", "job-00000001", "--out", filepath.Join(t.TempDir(), "ck")},
	} {
		r := gym(t, args...)
		if r.code != 1 || r.stdout != "" || !strings.Contains(r.stderr, "nothing listens at "+addr) || !strings.Contains(r.stderr, "is hanzod running?") {
			t.Errorf("gym %q: exit %d, stdout %q, stderr %q", args, r.code, r.stdout, r.stderr)
		}
	}
}

// selfSignedPEM makes a certificate like hanzod's, for another server.
func selfSignedPEM(t *testing.T) []byte {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(7), Subject: pkix.Name{CommonName: "hanzod"}, DNSNames: []string{"localhost"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
}

// TestTLS: off loopback hanzod serves TLS 1.3 with a self-signed
// certificate; gym pins it with --tls-ca and explains every mismatch.
func TestTLS(t *testing.T) {
	d := startHanzod(t, "0.0.0.0:0", pinnedTLS(t), "--metrics", "")
	_, port, _ := net.SplitHostPort(d.addr)
	cert := filepath.Join(d.data, "tls-cert.pem")
	other := filepath.Join(t.TempDir(), "other.pem")
	os.WriteFile(other, selfSignedPEM(t), 0o644)
	ok := func(args ...string) {
		t.Helper()
		ns := decodeJSON[struct {
			Nodes []nodeJSON `json:"nodes"`
		}](t, mustGym(t, append(args, "node", "list", "--json")...))
		if ns.Nodes == nil {
			t.Fatalf("gym %q: nodes null", args)
		}
	}
	refused := func(want string, args ...string) {
		t.Helper()
		r := gym(t, append(args, "node", "list", "--json")...)
		if r.code != 1 || !strings.Contains(r.stderr, want) {
			t.Fatalf("gym %q: exit %d, want 1 and %q in %q", args, r.code, want, r.stderr)
		}
	}
	// Pinned: accepted at an address the certificate does not name.
	ok("--orchestrator", "127.0.0.1:"+port, "--tls-ca", cert)
	// Verified by name.
	ok("--orchestrator", "grpcs://localhost:"+port, "--tls-ca", cert)
	t.Setenv("ORCHESTRATOR_TLS_CA", cert)
	ok("--orchestrator", "127.0.0.1:"+port)
	t.Setenv("ORCHESTRATOR_TLS_CA", "")

	refused("not trusted", "--orchestrator", "grpcs://localhost:"+port)
	refused("--tls-ca FILE", "--orchestrator", "grpcs://127.0.0.1:"+port)
	refused("not trusted", "--orchestrator", "grpcs://localhost:"+port, "--tls-ca", other)
	refused("probably requires TLS", "--orchestrator", "127.0.0.1:"+port)
	refused("probably requires TLS", "--orchestrator", "grpc://localhost:"+port)
}

// TestMetricsDoc: docs/metrics.md lists exactly the metrics hanzod exports.
func TestMetricsDoc(t *testing.T) {
	maddr := freeAddr(t)
	startHanzod(t, "127.0.0.1:0", plaintext, "--metrics", maddr)
	resp, err := http.Get("http://" + maddr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	doc, err := os.ReadFile("../../docs/metrics.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range promdoc.Compare(body, doc, "gym_hanzod_") {
		t.Error("hanzod:", d)
	}
}

func TestJobHelp(t *testing.T) {
	for _, args := range [][]string{{"job"}, {"job", "submit"}, {"job", "list"}, {"job", "status"}, {"node", "list"}, {"ledger", "balance"},
		{"job", "checkpoint"}, {"ledger", "deposit"}, {"ledger", "bond"}, {"ledger", "unbond"}, {"ledger", "withdraw"}} {
		out := mustGym(t, append(args, "--help")...)
		for _, want := range []string{"Usage:", "--orchestrator", "--tls-ca", "--timeout"} {
			if !strings.Contains(out, want) {
				t.Errorf("gym %v --help lacks %q:\n%s", args, want, out)
			}
		}
	}
}

const builtinJob = "../../examples/builtin-job.yaml"

// TestJobBuiltin stakes three nodes with 'gym ledger', drives a one-epoch
// job on the built-in model to publication against a real hanzod (the
// nodes form the ring; the operator ends the epoch, so hanzod merges it
// without deltas and publishes the initial adapter), fetches the
// checkpoint with 'gym job checkpoint' and evaluates it; then submits
// examples/builtin-job.yaml, which needs four nodes and stays pending.
func TestJobBuiltin(t *testing.T) {
	d := startHanzod(t, "127.0.0.1:0", plaintext, "--metrics", "")
	t.Setenv("ORCHESTRATOR_URL", d.addr)
	t.Setenv("ORCHESTRATOR_ADMIN_TOKEN", "")
	conn := dialPlain(t, d.addr)
	nc, oc := pb.NewNodeServiceClient(conn), pb.NewOrchestratorServiceClient(conn)
	// hanzod merges and settles only with its signing key's account
	// staked as an orchestrator's (docs/orchestrator.md).
	hk, err := nodekey.Load(filepath.Join(d.data, "hanzod.key"))
	if err != nil {
		t.Fatal(err)
	}
	mustGym(t, "ledger", "deposit", nodekey.PublicHex(hk), "50000")
	mustGym(t, "ledger", "bond", nodekey.PublicHex(hk), "50000")
	var nodes []*testNode
	var ids []string
	for i := range 3 {
		n := newTestNode(10 + i)
		n.register(t, nc, 24576) // the built-in job's estimate is a few MiB: a node reports what it has
		mustGym(t, "ledger", "deposit", n.id, "10000")
		mustGym(t, "ledger", "bond", n.id, "10000")
		nodes, ids = append(nodes, n), append(ids, n.id)
	}
	sort.Strings(ids)
	ns := decodeJSON[struct {
		Nodes []nodeJSON `json:"nodes"`
	}](t, mustGym(t, "node", "list", "--json"))
	for _, n := range ns.Nodes {
		if !n.Eligible {
			t.Fatalf("node %s is not eligible after deposit and bond: %s", n.ID, n.Ineligible)
		}
	}

	file := filepath.Join(t.TempDir(), "one.yaml")
	os.WriteFile(file, []byte(`model: builtin
dataset: sort
epochs: 1
min_nodes: 3
steps_per_epoch: 10
prompts_per_step: 2
seed: 18446744073709551615
byzantine: 0
spot_check_bp: 0
gspo:
  aggregate_interval: 5
  use_4bit: false
  lora_rank: 4
  lora_alpha: 8
  max_seq_len: 12
  gradient_accumulation_steps: 1
`), 0o644)
	id := strings.TrimSpace(mustGym(t, "job", "submit", file))
	out := t.TempDir()
	if r := gym(t, "job", "checkpoint", id, "--out", filepath.Join(out, "early")); r.code != 1 || r.stdout != "" ||
		!strings.Contains(r.stderr, "job "+id+" has no checkpoint yet: it is provisioning") {
		t.Fatalf("checkpoint while provisioning: %+v", r)
	}
	for _, n := range nodes {
		n.reportBandwidth(t, nc, id, ids)
	}
	j := decodeJSON[jobJSON](t, mustGym(t, "job", "status", "--json", id))
	if s := j.Spec; j.State != "running" || s.StepsPerEpoch != 10 || s.PromptsPerStep != 2 || s.Seed != math.MaxUint64 || s.SpotCheckBP != 0 || s.Byzantine != 0 {
		t.Fatalf("running: %+v", j)
	}
	if r := gym(t, "job", "checkpoint", id, "--out", filepath.Join(out, "early")); r.code != 1 ||
		!strings.Contains(r.stderr, "has no checkpoint yet: it is running in epoch 1 of 1") {
		t.Fatalf("checkpoint while running: %+v", r)
	}
	if _, err := oc.EndEpoch(context.Background(), &pb.EndEpochRequest{Job: id, Epoch: 1}); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(60 * time.Second)
	for j.State != "published" || !j.Settled {
		if time.Now().After(deadline) || j.State == "failed" {
			t.Fatalf("not published and settled: %+v", j)
		}
		time.Sleep(100 * time.Millisecond)
		j = decodeJSON[jobJSON](t, mustGym(t, "job", "status", "--json", id))
	}
	key, addr, _ := strings.Cut(j.Artifacts, "@")
	if len(j.CIDs) != 1 || len(j.Checkpoints) != 1 || j.Checkpoints[0] != (checkpointJSON{Epoch: 1, CID: j.CIDs[0]}) ||
		len(key) != 64 || !strings.HasPrefix(addr, "127.0.0.1:") {
		t.Fatalf("published: %+v", j)
	}
	text := mustGym(t, "job", "status", id)
	for _, s := range []string{"  epoch 1  " + j.CIDs[0], "artifacts    " + j.Artifacts, "settled      yes", "gym job checkpoint " + id + " --out DIR",
		"run          10 steps per epoch, 2 prompts per step, seed 18446744073709551615", "tolerates 0 Byzantine worker(s); replays none of the deltas"} {
		if !strings.Contains(text, s) {
			t.Errorf("status lacks %q:\n%s", s, text)
		}
	}

	// Fetch with a throwaway key; the files are the PEFT layout and
	// their tree has the CID hanzod published.
	dir := filepath.Join(out, "ck")
	r := gym(t, "job", "checkpoint", id, "--out", dir)
	if r.code != 0 || r.stdout != j.CIDs[0]+"\n" || !strings.Contains(r.stderr, "throwaway key") || !strings.Contains(r.stderr, "signed by the artifact server "+key) {
		t.Fatalf("checkpoint: %+v", r)
	}
	for _, f := range []string{"adapter_model.safetensors", "adapter_config.json", "README.md"} {
		if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
			t.Error(err)
		}
	}
	if v := mustGym(t, "artifact", "verify", "--cid", j.CIDs[0], dir); !strings.Contains(v, "root "+j.CIDs[0]) {
		t.Errorf("artifact verify: %s", v)
	}
	if ev := mustGym(t, "eval", "--checkpoint", dir, "--n", "8", "--json"); !strings.Contains(ev, `"task":"sort"`) {
		t.Errorf("eval: %s", ev)
	}
	// With a node key, by epoch, into a kept store.
	keyFile := filepath.Join(out, "node.key")
	mustGym(t, "keygen", "--out", keyFile)
	if r := gym(t, "job", "checkpoint", id, "--epoch", "1", "--key", keyFile, "--store", filepath.Join(out, "store"), "--out", filepath.Join(out, "ck1")); r.code != 0 ||
		r.stdout != j.CIDs[0]+"\n" || strings.Contains(r.stderr, "throwaway") {
		t.Fatalf("checkpoint --epoch 1 --key: %+v", r)
	}
	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"--epoch", "2", "--out", filepath.Join(out, "ck2")}, 1, "has not published epoch 2: epoch 1 is published"},
		{[]string{"--out", dir}, 1, "is not empty"},
		{[]string{"--out", filepath.Join(out, "x"), "--from", "nohostport"}, 2, "--from"},
		{[]string{"--epoch", "-1", "--out", filepath.Join(out, "x")}, 2, "--epoch -1"},
		{[]string{}, 2, "--out DIR is required"},
	} {
		r := gym(t, append([]string{"job", "checkpoint", id}, tc.args...)...)
		if r.code != tc.code || !strings.Contains(r.stderr, tc.want) {
			t.Errorf("checkpoint %q: exit %d, want %d and %q: %s", tc.args, r.code, tc.code, tc.want, r.stderr)
		}
	}
	if r := gym(t, "job", "checkpoint", "job-99999999", "--out", filepath.Join(out, "x")); r.code != 1 || !strings.Contains(r.stderr, `job "job-99999999" not found`) {
		t.Errorf("unknown job: %+v", r)
	}

	// The example: accepted as written; four nodes are needed, so it waits.
	r = gym(t, "job", "submit", builtinJob)
	if r.code != 0 || !jobID.MatchString(r.stdout) {
		t.Fatalf("submit %s: %+v", builtinJob, r)
	}
	ex := strings.TrimSpace(r.stdout)
	j = decodeJSON[jobJSON](t, mustGym(t, "job", "status", "--json", ex))
	want := decodeJSON[jobspec.File](t, mustGym(t, "job", "submit", "--dry-run", builtinJob))
	if s := j.Spec; j.State != "pending" || s.Model != "builtin" || s.Dataset != "addition" || s.Epochs != 3 || s.MinNodes != 4 || s.MaxNodes != 4 ||
		int(s.StepsPerEpoch) != want.StepsPerEpoch || int(s.PromptsPerStep) != want.PromptsPerStep || s.Seed != want.Seed ||
		int(s.Byzantine) != want.Byzantine || s.SpotCheckBP != want.SpotCheckBP || s.GSPO == nil || *s.GSPO != want.GSPO ||
		j.Artifacts == "" || j.Settled || len(j.Checkpoints) != 0 {
		t.Fatalf("%s: %+v, want %+v", builtinJob, j, want)
	}
	if r := gym(t, "job", "checkpoint", ex, "--out", filepath.Join(out, "x")); r.code != 1 ||
		!strings.Contains(r.stderr, "has no checkpoint yet: it is pending, waiting for 4 idle eligible nodes") {
		t.Errorf("checkpoint of a pending job: %+v", r)
	}
}

// TestJobCheckpointFetch runs the fetch path against an in-process artifact
// server: a manifest signed by the server's key (as hanzod reports it) is
// fetched and exported; one signed by any other key is refused.
func TestJobCheckpointFetch(t *testing.T) {
	dir := t.TempDir()
	serverKey, otherKey := newTestNode(20).key, newTestNode(21).key
	st, err := store.Open(store.DefaultConfig(filepath.Join(dir, "server")))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	publish := func(name string, signer ed25519.PrivateKey) string {
		a, err := llama.InitAdapter(tinyllama.Config(), 2, 4, []llama.Module{llama.QProj, llama.VProj}, 1)
		if err != nil {
			t.Fatal(err)
		}
		src := filepath.Join(dir, name)
		if err := peft.Write(src, a, peft.Card{BaseModel: "zoo-gym/builtin", BaseSHA3: strings.Repeat("0", 64), Job: name, Epoch: 1, WeightsCID: "bafk-test"}); err != nil {
			t.Fatal(err)
		}
		rec, err := st.Publish(context.Background(), src, store.Meta{Kind: artifact.KindCheckpoint, Name: name, Version: 1}, signer, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		return rec.Root
	}
	good, forged := publish("job-1", serverKey), publish("job-2", otherKey)
	h, err := transfer.NewServer(transfer.ServerConfig{Key: serverKey, Store: st, Allow: func(ed25519.PublicKey, cid.Cid) bool { return true }})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	defer srv.Close()
	arts := fmt.Sprintf("%x@%s", serverKey.Public(), strings.TrimPrefix(srv.URL, "http://"))
	job := func(id, root string) jobJSON {
		return jobJSON{ID: id, State: "published", Epoch: 1, Checkpoints: []checkpointJSON{{Epoch: 1, CID: root}}, Artifacts: arts, Spec: specJSON{Epochs: 1}}
	}

	var log strings.Builder
	out := filepath.Join(dir, "out", "ck")
	c := &checkpointFetch{out: out, stderr: &log}
	root, err := c.run(context.Background(), job("job-1", good))
	if err != nil || root != good {
		t.Fatalf("fetch: %q %v\n%s", root, err, log.String())
	}
	if _, _, err := peft.Read(out, tinyllama.Config()); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(log.String(), "throwaway key") || !strings.Contains(log.String(), "verified: 3 files") {
		t.Errorf("progress:\n%s", log.String())
	}
	if leftovers, _ := filepath.Glob(filepath.Join(dir, "out", ".ck.partial-*")); len(leftovers) != 0 {
		t.Errorf("left behind: %v", leftovers)
	}

	c = &checkpointFetch{out: filepath.Join(dir, "out", "forged"), stderr: io.Discard}
	if _, err := c.run(context.Background(), job("job-2", forged)); err == nil || !strings.Contains(err.Error(), "not signed by the artifact server's key") {
		t.Fatalf("forged manifest: %v", err)
	}
	if _, err := os.Stat(c.out); !os.IsNotExist(err) {
		t.Fatalf("a refused checkpoint was written: %v", err)
	}
	if leftovers, _ := filepath.Glob(filepath.Join(dir, "out", ".forged.partial-*")); len(leftovers) != 0 {
		t.Errorf("left behind: %v", leftovers)
	}
}

// TestJobCheckpointServer: where the checkpoint is fetched from.
func TestJobCheckpointServer(t *testing.T) {
	k, _ := nodekey.Generate(nil)
	key := nodekey.PublicHex(k)
	for _, tc := range []struct {
		arts, orch, from string
		want, bad        string
	}{
		{arts: key + "@10.0.0.5:9552", orch: "10.0.0.5", want: "http://10.0.0.5:9552"},
		// hanzod advertises loopback when not told its address: use the
		// host it was reached at.
		{arts: key + "@127.0.0.1:9552", orch: "hanzod.example.org", want: "http://hanzod.example.org:9552"},
		{arts: key + "@127.0.0.1:9552", orch: "localhost", want: "http://127.0.0.1:9552"},
		{arts: key + "@127.0.0.1:9552", orch: "hanzod.example.org", from: "203.0.113.7:19552", want: "http://203.0.113.7:19552"},
		{arts: key + "@127.0.0.1:9552", from: "nohostport", bad: "--from"},
		{arts: "", bad: "names no artifact server"},
		{arts: "127.0.0.1:9552", bad: "not KEYHEX@host:port"},
		{arts: "abcd@127.0.0.1:9552", bad: "not KEYHEX@host:port"},
	} {
		c := &checkpointFetch{from: tc.from, orchestratorHost: tc.orch, stderr: io.Discard}
		p, err := c.server(jobJSON{ID: "job-1", Artifacts: tc.arts})
		if tc.bad != "" {
			if err == nil || !strings.Contains(err.Error(), tc.bad) {
				t.Errorf("%+v: %v, want %q", tc, err, tc.bad)
			}
			continue
		}
		if err != nil || p.URL != tc.want || fmt.Sprintf("%x", p.Key) != key {
			t.Errorf("%+v: %+v %v, want %s", tc, p, err, tc.want)
		}
	}
}
