package main

import (
	"bufio"
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/tls"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	pb "github.com/zooai/gym/api/hanzod/v1"
	"github.com/zooai/gym/keys/nodekey"
	"github.com/zooai/gym/node/nodeclient"
	"github.com/zooai/gym/protocol/checkpkg"
	"github.com/zooai/gym/protocol/delta"
	"github.com/zooai/gym/protocol/nodeauth"
)

// hostileHanzod runs hanzod as its own process (this test binary with
// HANZOD_TEST_MAIN) and returns its address and process id once it serves.
func hostileHanzod(t *testing.T) (string, int) {
	t.Helper()
	dir := t.TempDir()
	addr := freePort(t)
	cmd := exec.Command(os.Args[0], "--data", dir, "--listen", addr, "--metrics", "", "--artifacts", "")
	cmd.Env = append(os.Environ(), "HANZOD_TEST_MAIN=1")
	logf, err := os.Create(filepath.Join(dir, "hanzod.log"))
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait(); logf.Close() })
	conn := dial(t, addr)
	hc := healthpb.NewHealthClient(conn)
	for deadline := time.Now().Add(time.Minute); ; {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		r, err := hc.Check(ctx, &healthpb.HealthCheckRequest{})
		cancel()
		if err == nil && r.Status == healthpb.HealthCheckResponse_SERVING {
			return addr, cmd.Process.Pid
		}
		if time.Now().After(deadline) {
			t.Fatalf("hanzod does not serve within a minute: %v", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func dial(t *testing.T, addr string) *grpc.ClientConn {
	t.Helper()
	c, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// peakRSS is a process's peak resident set (VmHWM), in bytes.
func peakRSS(t *testing.T, pid int) int64 {
	t.Helper()
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Skipf("no /proc: %v", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "VmHWM:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			return kb << 10
		}
	}
	t.Skip("no VmHWM in /proc/PID/status")
	return 0
}

// zeros reads zero bytes for ever.
type zeros struct{}

func (zeros) Read(p []byte) (int, error) {
	clear(p)
	return len(p), nil
}

// oversized sends one gRPC request to method whose message claims n bytes
// and streams them (zeros) as fast as hanzod takes them, as a raw HTTP/2
// client on its own connection from source address from: the client
// holds none of it. It returns the call's grpc-status.
func oversized(ctx context.Context, from net.IP, addr, method string, n uint32) (codes.Code, error) {
	var conn net.Conn
	tr := &http2.Transport{AllowHTTP: true, DialTLSContext: func(ctx context.Context, network, a string, _ *tls.Config) (net.Conn, error) {
		c, err := (&net.Dialer{LocalAddr: &net.TCPAddr{IP: from}}).DialContext(ctx, network, a)
		conn = c
		return c, err
	}}
	defer func() {
		if conn != nil {
			conn.Close()
		}
	}()
	var prefix [5]byte
	binary.BigEndian.PutUint32(prefix[1:], n)
	body := io.MultiReader(bytes.NewReader(prefix[:]), io.LimitReader(zeros{}, int64(n)))
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+addr+method, body)
	if err != nil {
		return 0, err
	}
	req.Header.Set("content-type", "application/grpc")
	req.Header.Set("te", "trailers")
	resp, err := tr.RoundTrip(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	io.Copy(io.Discard, resp.Body)
	s := resp.Trailer.Get("grpc-status")
	if s == "" {
		s = resp.Header.Get("grpc-status")
	}
	c, err := strconv.Atoi(s)
	return codes.Code(c), err
}

// dialFrom is a client connection to addr from source address from (any
// 127.0.0.0/8 address is this host's: one machine plays many hosts).
func dialFrom(t *testing.T, from net.IP, addr string) *grpc.ClientConn {
	t.Helper()
	c, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithContextDialer(func(ctx context.Context, a string) (net.Conn, error) {
			return (&net.Dialer{LocalAddr: &net.TCPAddr{IP: from}}).DialContext(ctx, "tcp", a)
		}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// latency is an honest node's median heartbeat and delta submission
// times.
type latency struct{ heartbeat, submit time.Duration }

func (l latency) String() string {
	return fmt.Sprintf("heartbeat p50 %v, submission p50 %v", l.heartbeat, l.submit)
}

// within reports whether l is within a small multiple of base (10×, plus
// 250 ms for a loaded machine whose cores the flood's clients share).
func (l latency) within(base latency) bool {
	return l.heartbeat <= 10*base.heartbeat+250*time.Millisecond && l.submit <= 10*base.submit+250*time.Millisecond
}

// honest measures an honest node: n heartbeats and n delta submissions
// (a small file of a job hanzod does not have, answered from its head),
// paced at hanzod's bound of one heartbeat a second per node.
func honest(t *testing.T, c *nodeclient.Client, key ed25519.PrivateKey, n int) latency {
	t.Helper()
	file := traceBait(t, key)
	var hs, ss []time.Duration
	for range n {
		time.Sleep(1050 * time.Millisecond) // pacing, not synchronisation
		t0 := time.Now()
		if _, err := c.Heartbeat(context.Background()); err != nil {
			t.Fatalf("honest heartbeat: %v", err)
		}
		t1 := time.Now()
		v, err := c.SubmitDelta(context.Background(), file, nil)
		if err != nil || v.Reason != "metadata" {
			t.Fatalf("honest submission: %+v %v", v, err)
		}
		hs, ss = append(hs, t1.Sub(t0)), append(ss, time.Since(t1))
	}
	slices.Sort(hs)
	slices.Sort(ss)
	return latency{hs[len(hs)/2], ss[len(ss)/2]}
}

// TestHostileClients attacks a running hanzod as a stranger would
// (docs/threat-model.md, "Limits"): 24 concurrent unauthenticated
// requests each claiming 90 MiB (unary calls and delta uploads), header
// lists of megabytes, malformed messages, and a flood of upload
// announcements naming a registered node's key without its signature.
// hanzod's peak memory stays under 256 MiB, it keeps serving, and an
// honest node's heartbeat latency under the floods stays within a small
// multiple of the unloaded figure (bounded generously: the floods' own
// clients share this machine's cores).
func TestHostileClients(t *testing.T) {
	if testing.Short() {
		t.Skip("sends gigabytes over loopback")
	}
	addr, pid := hostileHanzod(t)
	conn := dial(t, addr)
	key, err := nodekey.Generate(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	nc, err := nodeclient.New(nodeclient.Config{Key: key, Conn: conn, Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	if err := nc.Register(context.Background(), "10.0.0.1:9560", ""); err != nil {
		t.Fatal(err)
	}
	base := honest(t, nc, key, 6)
	rss0 := peakRSS(t, pid)
	t.Logf("unloaded: %v, hanzod peak RSS %d MiB", base, rss0>>20)

	// Flood 1: 24 concurrent 90 MiB requests from 24 hosts, each on its
	// own connection, sent again as each is refused, while the honest node
	// measures.
	const n, size = 24, 90 << 20
	methods := []string{pb.NodeService_Heartbeat_FullMethodName, pb.OrchestratorService_GetJob_FullMethodName, pb.NodeService_UploadDelta_FullMethodName}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	var mu sync.Mutex
	statuses := map[codes.Code]int{}
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				c, err := oversized(ctx, net.IPv4(127, 0, 1, byte(i+1)), addr, methods[i%len(methods)], size)
				if err != nil {
					continue // the connection closed on us: a bound
				}
				mu.Lock()
				statuses[c]++
				mu.Unlock()
			}
		}()
	}
	during := honest(t, nc, key, 6)
	cancel()
	wg.Wait()
	// hanzod refuses from the length prefix (ResourceExhausted), or before
	// reading anything when the flood's own connections or calls reach
	// their bounds.
	if len(statuses) != 1 || statuses[codes.ResourceExhausted] == 0 {
		t.Errorf("answers to the 90 MiB requests: %v, want only ResourceExhausted", statuses)
	}
	rss1 := peakRSS(t, pid)
	t.Logf("24 × 90 MiB (%d refused): %v, hanzod peak RSS %d MiB", statuses[codes.ResourceExhausted], during, rss1>>20)
	if rss1 > 256<<20 {
		t.Errorf("hanzod peaked at %d MiB under the 90 MiB flood (bound 256 MiB)", rss1>>20)
	}
	if !during.within(base) {
		t.Errorf("honest node under the 90 MiB flood: %v; unloaded %v", during, base)
	}

	// Flood 2: header lists of megabytes, refused.
	oc := pb.NewOrchestratorServiceClient(conn)
	big := metadata.AppendToOutgoingContext(context.Background(), "authorization", strings.Repeat("x", 15<<20))
	if _, err := oc.ListJobs(big, &pb.ListJobsRequest{}); err == nil {
		t.Error("a 15 MB header list was served")
	}
	// Malformed messages: the client's fault.
	var out []byte
	err = conn.Invoke(context.Background(), pb.NodeService_Heartbeat_FullMethodName, []byte{0xff, 0xff, 0xff}, &out, grpc.ForceCodec(rawCodec{}))
	if status.Code(err) != codes.InvalidArgument {
		t.Errorf("malformed heartbeat: %v, want InvalidArgument", err)
	}

	// Flood 3: upload announcements naming the honest node's key with
	// junk signatures, from 8 clients of one host at once, while the node
	// measures.
	pub := key.Public().(ed25519.PublicKey)
	fctx, fcancel := context.WithCancel(context.Background())
	defer fcancel()
	var flooded sync.WaitGroup
	statuses3 := map[codes.Code]int{}
	var sent sync.Map
	for i := range 8 {
		flooded.Add(1)
		fc := pb.NewNodeServiceClient(dialFrom(t, net.IPv4(127, 0, 2, 1), addr))
		go func() {
			defer flooded.Done()
			count := 0
			for fctx.Err() == nil {
				st, err := fc.UploadDelta(fctx)
				if err != nil {
					mu.Lock()
					statuses3[status.Code(err)]++
					mu.Unlock()
					continue
				}
				st.Send(&pb.DeltaChunk{Part: &pb.DeltaChunk_Header{Header: &pb.DeltaUpload{
					Auth:   &pb.Auth{Node: fmt.Sprintf("%x", []byte(pub)), TimestampMs: time.Now().UnixMilli(), Signature: make([]byte, 64)},
					Digest: strings.Repeat("ab", 32), DeltaBytes: 60 << 20}}})
				_, err = st.CloseAndRecv()
				mu.Lock()
				statuses3[status.Code(err)]++
				mu.Unlock()
				count++
			}
			sent.Store(i, count)
		}()
	}
	underForgery := honest(t, nc, key, 6)
	t.Logf("forged: %v", statuses3)
	fcancel()
	flooded.Wait()
	total := 0
	sent.Range(func(_, v any) bool { total += v.(int); return true })
	rss2 := peakRSS(t, pid)
	t.Logf("%d forged announcements: %v, hanzod peak RSS %d MiB", total, underForgery, rss2>>20)
	if !underForgery.within(base) {
		t.Errorf("honest node under the forged-announcement flood: %v; unloaded %v", underForgery, base)
	}
	// Flood 4: registrations of fresh keys from one host (each its own
	// nodeclient, so each signs for hanzod's key as it learns it).
	from := net.IPv4(127, 0, 3, 1)
	rc := dialFrom(t, from, addr)
	var regs []*nodeclient.Client
	for range 64 {
		k, err := nodekey.Generate(rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		c, err := nodeclient.New(nodeclient.Config{Key: k, Conn: rc, Dir: t.TempDir()})
		if err != nil {
			t.Fatal(err)
		}
		regs = append(regs, c)
	}
	rctx, rcancel := context.WithCancel(context.Background())
	var registered, refused int
	var rwg sync.WaitGroup
	rwg.Add(1)
	go func() {
		defer rwg.Done()
		for i := 0; rctx.Err() == nil; i++ {
			err := regs[i%len(regs)].Register(rctx, fmt.Sprintf("10.9.%d.%d:9560", i/250, i%250), "")
			mu.Lock()
			if err == nil {
				registered++
			} else if status.Code(err) == codes.ResourceExhausted {
				refused++
			}
			mu.Unlock()
		}
	}()
	underRegistration := honest(t, nc, key, 6)
	rcancel()
	rwg.Wait()
	t.Logf("registration flood from one host: %d registered, %d refused; %v", registered, refused, underRegistration)
	if registered > 64 || refused == 0 {
		t.Errorf("registration flood: %d registered, %d refused; want at most the burst registered, the rest refused", registered, refused)
	}
	if !underRegistration.within(base) {
		t.Errorf("honest node under the registration flood: %v; unloaded %v", underRegistration, base)
	}

	// Flood 5: registered keys announcing uploads with 60 MiB of traces
	// for a job that does not exist: refused from the head, the traces
	// never read.
	var attackers []*nodeclient.Client
	var akeys []ed25519.PrivateKey
	var aconns []pb.NodeServiceClient
	for i := range 4 {
		k, err := nodekey.Generate(rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		conn := dialFrom(t, net.IPv4(127, 0, 4, byte(i+1)), addr)
		c, err := nodeclient.New(nodeclient.Config{Key: k, Conn: conn, Dir: t.TempDir()})
		if err != nil {
			t.Fatal(err)
		}
		aconns = append(aconns, pb.NewNodeServiceClient(conn))
		if err := c.Register(context.Background(), fmt.Sprintf("10.8.0.%d:9560", i+1), ""); err != nil {
			t.Fatal(err)
		}
		attackers, akeys = append(attackers, c), append(akeys, k)
	}
	tctx, tcancel := context.WithCancel(context.Background())
	traceAnswers := map[string]int{}
	var twg sync.WaitGroup
	for i, c := range attackers {
		twg.Add(1)
		file := traceBait(t, akeys[i])
		go func() {
			defer twg.Done()
			for tctx.Err() == nil {
				r, err := announceTraces(tctx, aconns[i], akeys[i], c.Hanzod(), file, 60<<20)
				mu.Lock()
				if err != nil {
					traceAnswers[status.Code(err).String()]++
				} else {
					traceAnswers[r.Reason]++
				}
				mu.Unlock()
			}
		}()
	}
	underTraces := honest(t, nc, key, 6)
	tcancel()
	twg.Wait()
	rss3 := peakRSS(t, pid)
	t.Logf("trace flood: %v; %v, hanzod peak RSS %d MiB", traceAnswers, underTraces, rss3>>20)
	if traceAnswers["metadata"] == 0 {
		t.Errorf("trace flood answers %v, want metadata refusals (no such job)", traceAnswers)
	}
	if !underTraces.within(base) {
		t.Errorf("honest node under the trace flood: %v; unloaded %v", underTraces, base)
	}
	if rss3 > 256<<20 {
		t.Errorf("hanzod peaked at %d MiB (bound 256 MiB)", rss3>>20)
	}

	// Still serving, and the honest node's allowance untouched.
	honest(t, nc, key, 1)
	if statuses3[codes.Unauthenticated] == 0 {
		t.Errorf("forged announcements: %v, want Unauthenticated (and ResourceExhausted past the address's rate)", statuses3)
	}
}

// rawCodec sends bytes as they are, under the proto codec's name.
type rawCodec struct{}

func (rawCodec) Marshal(v any) ([]byte, error)      { return v.([]byte), nil }
func (rawCodec) Unmarshal(data []byte, v any) error { *(v.(*[]byte)) = data; return nil }
func (rawCodec) Name() string                       { return "proto" }

// traceBait is a small delta file of key's for a job that does not exist.
func traceBait(t *testing.T, key ed25519.PrivateKey) []byte {
	t.Helper()
	meta := delta.NewMetadata(delta.MetadataFields{Job: "job-99999999", Epoch: 1, Step: 1, Node: nodekey.PublicHex(key), Sequence: 1})
	var b bytes.Buffer
	ts := []delta.Tensor{{Name: "lora.A", DType: delta.FP32, Shape: []uint64{2}, Data: make([]byte, 8)}}
	if _, err := delta.Write(context.Background(), &b, key, ts, delta.WriteOptions{Compression: delta.Zstd, Metadata: meta}); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// announceTraces announces file with traces of n bytes and sends the file
// only: a client betting that hanzod reads (and decompresses) traces
// before it refuses the upload on cheaper grounds.
func announceTraces(ctx context.Context, node pb.NodeServiceClient, key ed25519.PrivateKey, hanzod ed25519.PublicKey, file []byte, n uint64) (*pb.SubmitDeltaResponse, error) {
	u := nodeauth.UploadDelta{Auth: nodeauth.Auth{Timestamp: time.Now().UnixMilli(), Audience: hanzod}, Job: "job-99999999",
		Digest: checkpkg.FileDigest(file), DeltaBytes: uint64(len(file)), TracesBytes: n}
	nodeauth.SignUpload(key, &u)
	st, err := node.UploadDelta(ctx)
	if err != nil {
		return nil, err
	}
	a := &pb.Auth{Node: u.Node, TimestampMs: u.Timestamp, Signature: u.Sig}
	st.Send(&pb.DeltaChunk{Part: &pb.DeltaChunk_Header{Header: &pb.DeltaUpload{Auth: a, Job: u.Job, Digest: u.Digest, DeltaBytes: u.DeltaBytes, TracesBytes: n}}})
	st.Send(&pb.DeltaChunk{Part: &pb.DeltaChunk_Delta{Delta: file}})
	return st.CloseAndRecv()
}
