package chaintest

import (
	"context"
	"crypto/ecdsa"
	"fmt"
	"math/big"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/debug"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/common/hexutil"
	"github.com/ethereum/go-ethereum/crypto"
	"github.com/ethereum/go-ethereum/ethclient"
	"github.com/ethereum/go-ethereum/params"
	"github.com/ethereum/go-ethereum/rpc"
)

// gethVersion is the go-ethereum version this module builds with.
func gethVersion() string {
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, d := range bi.Deps {
			if d.Path == "github.com/ethereum/go-ethereum" {
				return d.Version
			}
		}
	}
	return ""
}

// GethBinary finds geth: scripts/build-geth.sh's build in the user cache
// (zoo-gym/geth-<version>/geth), else geth on PATH. Without one the test is
// skipped, or fails under GYM_REQUIRE_GETH=1 (scripts/test.sh).
func GethBinary(t testing.TB) string {
	t.Helper()
	if dir, err := os.UserCacheDir(); err == nil {
		// The version go.mod pins (test binaries may lack the module
		// list: then any build of the script).
		p := filepath.Join(dir, "zoo-gym", "geth-"+gethVersion(), "geth")
		if gethVersion() == "" {
			m, _ := filepath.Glob(filepath.Join(dir, "zoo-gym", "geth-v*", "geth"))
			if len(m) > 0 {
				p = m[len(m)-1]
			}
		}
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	if p, err := exec.LookPath("geth"); err == nil {
		return p
	}
	msg := "no geth (scripts/build-geth.sh builds it)"
	if os.Getenv("GYM_REQUIRE_GETH") == "1" {
		t.Fatal("GYM_REQUIRE_GETH=1 but " + msg)
	}
	t.Skip(msg + "; set GYM_REQUIRE_GETH=1 to make this a failure")
	return ""
}

// Geth is a geth --dev process on loopback, restartable on its data
// directory.
type Geth struct {
	bin, dir string
	port     int
	cmd      *exec.Cmd
	URL      string
}

// StartGeth starts geth --dev (a block whenever a transaction arrives) with
// its JSON-RPC on a free loopback port and funds keys from the dev account.
func StartGeth(t testing.TB, keys ...*ecdsa.PrivateKey) *Geth {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	g := &Geth{bin: GethBinary(t), dir: t.TempDir(), port: port, URL: fmt.Sprintf("http://127.0.0.1:%d", port)}
	g.Start(t)
	t.Cleanup(g.Stop)
	c, err := rpc.Dial(g.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	var accounts []common.Address
	if err := c.Call(&accounts, "eth_accounts"); err != nil || len(accounts) == 0 {
		t.Fatalf("geth dev account: %v %v", accounts, err)
	}
	ec := ethclient.NewClient(c)
	for _, k := range keys {
		to := crypto.PubkeyToAddress(k.PublicKey)
		var h common.Hash
		v := new(big.Int).Mul(big.NewInt(100), big.NewInt(params.Ether))
		if err := c.Call(&h, "eth_sendTransaction", map[string]any{"from": accounts[0], "to": to, "value": (*hexutil.Big)(v)}); err != nil {
			t.Fatal(err)
		}
		deadline := time.Now().Add(30 * time.Second)
		for {
			if r, err := ec.TransactionReceipt(context.Background(), h); err == nil && r.Status == 1 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatal("funding transaction not mined")
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	return g
}

// Start (re)starts geth on its data directory and waits for its RPC.
func (g *Geth) Start(t testing.TB) {
	t.Helper()
	g.cmd = exec.Command(g.bin, "--dev", "--datadir", g.dir, "--http", "--http.addr", "127.0.0.1",
		"--http.port", fmt.Sprint(g.port), "--http.api", "eth,net,web3", "--port", "0", "--nodiscover", "--maxpeers", "0",
		"--authrpc.port", "0", "--ipcdisable", "--verbosity", "2")
	logf, err := os.OpenFile(filepath.Join(g.dir, "geth.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	g.cmd.Stdout, g.cmd.Stderr = logf, logf
	if err := g.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	logf.Close()
	deadline := time.Now().Add(60 * time.Second)
	for {
		c, err := ethclient.Dial(g.URL)
		if err == nil {
			_, err = c.ChainID(context.Background())
			c.Close()
			if err == nil {
				return
			}
		}
		if time.Now().After(deadline) {
			b, _ := os.ReadFile(filepath.Join(g.dir, "geth.log"))
			t.Fatalf("geth did not answer on %s: %v\n%s", g.URL, err, lastLines(string(b), 30))
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// Stop stops geth with SIGTERM (it flushes its chain, which a dev node
// would otherwise rewind on restart) and waits, killing it after 30 s.
func (g *Geth) Stop() {
	if g.cmd == nil || g.cmd.Process == nil {
		return
	}
	g.cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan struct{})
	go func() { g.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		g.cmd.Process.Kill()
		<-done
	}
	g.cmd = nil
}

func lastLines(s string, n int) string {
	l := strings.Split(s, "\n")
	if len(l) > n {
		l = l[len(l)-n:]
	}
	return strings.Join(l, "\n")
}
