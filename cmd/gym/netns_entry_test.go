package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/zooai/gym/protocol/ring/ringbench"
)

// TestNetnsSubmitJobNeedsKey: from another host (network namespace),
// SubmitJob without a key is refused, as is one signed by a key without a
// ledger account or claiming utility its stake does not cover; a key with
// an account submits, and the job's submitter is that key. Opt in with
// GYM_NETNS=1 (root, iproute2).
func TestNetnsSubmitJobNeedsKey(t *testing.T) {
	if os.Getenv("GYM_NETNS") != "1" {
		t.Skip("set GYM_NETNS=1 (root, iproute2) to run the network-namespace test bed")
	}
	hanzod := buildHanzod(t)
	bed := &ringbench.Bed{Prefix: "gymsj", N: 2, Rate: "1gbit"}
	if err := bed.Up(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(bed.Down)
	dir := t.TempDir()
	data := filepath.Join(dir, "hanzod")
	h := bed.Exec(0, hanzod, "--data", data, "--listen", "0.0.0.0:9550", "--metrics", "", "--artifacts", "")
	hlog, _ := os.Create(filepath.Join(dir, "hanzod.log"))
	h.Stdout, h.Stderr = hlog, hlog
	if err := h.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Process.Kill(); h.Wait(); hlog.Close() })
	cert := filepath.Join(data, "tls-cert.pem")
	local := []string{"--orchestrator", "grpcs://127.0.0.1:9550", "--tls-ca", cert}
	remote := []string{"--orchestrator", "grpcs://" + bed.Addr(0) + ":9550", "--tls-ca", cert}
	gym := func(i int, args ...string) (string, error) {
		out, err := bed.Exec(i, gymBin, args...).CombinedOutput()
		return string(out), err
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		if _, err := os.Stat(cert); err == nil {
			if _, err := gym(0, append(local, "node", "list")...); err == nil {
				break
			}
		}
		if time.Now().After(deadline) {
			b, _ := os.ReadFile(filepath.Join(dir, "hanzod.log"))
			t.Fatalf("hanzod did not come up\n%s", b)
		}
		time.Sleep(100 * time.Millisecond)
	}
	job := filepath.Join(dir, "job.yaml")
	write := func(utility string) {
		os.WriteFile(job, []byte("model: builtin\ndataset: addition\nepochs: 1\nmin_nodes: 3\nutility: "+utility+"\n"), 0o644)
	}
	write("1")
	refused := func(what, want string, args ...string) {
		t.Helper()
		out, err := gym(1, append(remote, args...)...)
		if err == nil || !strings.Contains(out, want) {
			t.Fatalf("%s: err %v, want a refusal saying %q\n%s", what, err, want, out)
		}
		t.Logf("%s: %s", what, strings.TrimSpace(out))
	}
	refused("no key", "loopback", "job", "submit", job)

	keyFile := filepath.Join(dir, "submitter.key")
	id, err := gym(1, "keygen", "--out", keyFile)
	if err != nil {
		t.Fatal(id, err)
	}
	id = strings.TrimSpace(id)
	refused("key without an account", "no ledger account", "job", "submit", "--key", keyFile, job)
	if out, err := gym(0, append(local, "ledger", "deposit", id, "3000")...); err != nil {
		t.Fatal(out, err)
	}
	if out, err := gym(0, append(local, "ledger", "bond", id, "2000")...); err != nil {
		t.Fatal(out, err)
	}
	write("4")
	refused("utility beyond the stake", "utility 4 exceeds 3", "job", "submit", "--key", keyFile, job)
	write("3")
	out, err := gym(1, append(remote, "job", "submit", "--key", keyFile, job)...)
	if err != nil {
		t.Fatal(out, err)
	}
	jobID := strings.TrimSpace(out)
	st, err := gym(1, append(remote, "job", "status", jobID, "--json")...)
	if err != nil || !strings.Contains(st, id) {
		t.Fatalf("status of %s: %v\n%s", jobID, err, st)
	}
}
