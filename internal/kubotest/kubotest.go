// Package kubotest finds a kubo (ipfs) binary for tests and runs a
// throw-away kubo node on loopback: its own repository (initialised with
// the test profile), offline, its RPC API on a port of its choosing that
// survives Stop and Start, so a test can take the node away and bring it
// back at the same URL.
//
// The binary is $GYM_KUBO, else the one scripts/build-kubo.sh builds into
// the user cache directory (zoo-gym/kubo-v0.43.1/ipfs), else `ipfs` on
// PATH. Without one the test is skipped — or, with GYM_REQUIRE_KUBO=1
// (scripts/test.sh sets it unless GYM_SKIP_KUBO is set), it fails.
package kubotest

import (
	"bytes"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// Version is the kubo release the project tests against.
const Version = "v0.43.1"

// CachedBinary is where scripts/build-kubo.sh puts the binary.
func CachedBinary() string {
	dir, err := os.UserCacheDir()
	if err != nil {
		return ""
	}
	return filepath.Join(dir, "zoo-gym", "kubo-"+Version, "ipfs")
}

// Binary returns the path of a kubo binary, or skips (fails under
// GYM_REQUIRE_KUBO=1) the test.
func Binary(t testing.TB) string {
	t.Helper()
	if p := os.Getenv("GYM_KUBO"); p != "" {
		if _, err := os.Stat(p); err != nil {
			t.Fatalf("GYM_KUBO=%s: %v", p, err)
		}
		return p
	}
	if p := CachedBinary(); p != "" {
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	if p, err := exec.LookPath("ipfs"); err == nil {
		return p
	}
	msg := "no kubo binary: run scripts/build-kubo.sh (builds kubo " + Version + " into " + CachedBinary() + "), set GYM_KUBO, or put ipfs on PATH"
	if os.Getenv("GYM_REQUIRE_KUBO") == "1" {
		t.Fatal("GYM_REQUIRE_KUBO=1 but " + msg)
	}
	t.Skip(msg + "; set GYM_REQUIRE_KUBO=1 to make this a failure")
	return ""
}

// Node is a kubo daemon run by a test.
type Node struct {
	t    testing.TB
	bin  string
	Repo string // IPFS_PATH
	port int
	cmd  *exec.Cmd
	log  *bytes.Buffer
	done chan error
}

// Start initialises a repository with the test profile and starts the
// daemon, offline; Stop is registered with t.Cleanup.
func Start(t testing.TB) *Node {
	t.Helper()
	n := &Node{t: t, bin: Binary(t), Repo: t.TempDir()}
	n.run("init", "--profile", "test")
	// The test profile puts the API on a random port; pin it to a free
	// one now so the URL stays the same across Stop and Start.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	n.port = l.Addr().(*net.TCPAddr).Port
	l.Close()
	n.run("config", "Addresses.API", fmt.Sprintf("/ip4/127.0.0.1/tcp/%d", n.port))
	n.run("config", "Addresses.Gateway", "/ip4/127.0.0.1/tcp/0")
	n.Start()
	t.Cleanup(n.Stop)
	return n
}

func (n *Node) env() []string { return append(os.Environ(), "IPFS_PATH="+n.Repo) }

func (n *Node) run(args ...string) []byte {
	n.t.Helper()
	cmd := exec.Command(n.bin, args...)
	cmd.Env = n.env()
	out, err := cmd.CombinedOutput()
	if err != nil {
		n.t.Fatalf("ipfs %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return out
}

// Run runs an ipfs command against the repository (the daemon when it
// runs) and returns its standard output.
func (n *Node) Run(args ...string) ([]byte, error) {
	cmd := exec.Command(n.bin, args...)
	cmd.Env = n.env()
	var errb bytes.Buffer
	cmd.Stderr = &errb
	out, err := cmd.Output()
	if err != nil {
		return out, fmt.Errorf("ipfs %s: %w: %s", strings.Join(args, " "), err, errb.Bytes())
	}
	return out, nil
}

// URL is the RPC API's base URL (IPFS_URL).
func (n *Node) URL() string { return fmt.Sprintf("http://127.0.0.1:%d", n.port) }

// Start starts the daemon (offline) and waits until its API answers.
func (n *Node) Start() {
	n.t.Helper()
	if n.cmd != nil {
		return
	}
	n.log = &bytes.Buffer{}
	n.cmd = exec.Command(n.bin, "daemon", "--offline")
	n.cmd.Env = n.env()
	n.cmd.Stdout, n.cmd.Stderr = n.log, n.log
	if err := n.cmd.Start(); err != nil {
		n.t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- n.cmd.Wait() }()
	deadline := time.Now().Add(60 * time.Second)
	for {
		select {
		case err := <-done:
			n.cmd = nil
			n.t.Fatalf("ipfs daemon exited: %v\n%s", err, n.log)
		default:
		}
		if c, err := net.DialTimeout("tcp", fmt.Sprintf("127.0.0.1:%d", n.port), time.Second); err == nil {
			c.Close()
			n.done = done
			return
		}
		if time.Now().After(deadline) {
			n.t.Fatalf("ipfs daemon: API not up after 60 s\n%s", n.log)
		}
		time.Sleep(50 * time.Millisecond) // polling a child process's port
	}
}

// Stop stops the daemon (SIGINT, then SIGKILL after 10 s).
func (n *Node) Stop() {
	if n.cmd == nil {
		return
	}
	n.cmd.Process.Signal(os.Interrupt)
	select {
	case <-n.done:
	case <-time.After(10 * time.Second):
		n.cmd.Process.Kill()
		<-n.done
	}
	n.cmd = nil
}
