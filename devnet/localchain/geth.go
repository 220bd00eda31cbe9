// Package localchain puts a local cluster on a real EVM chain: it runs
// geth --dev (the build of scripts/build-geth.sh) on loopback, deploys
// GYMToken, MiningPool and PublicationRegistry, funds and stakes the
// workers' accounts as nodes, funds the MiningPool, gives hanzod its chain
// ledger (localcluster.Config.Chain) and reads the run's record back from
// the chain for the summary (localcluster.Config.ChainReport). `gym up
// --ledger evm` is built on it.
package localchain

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/debug"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/ethereum/go-ethereum/ethclient"
)

// ErrNoGeth is FindGeth's error when there is no geth to run.
var ErrNoGeth = errors.New("localchain: no geth found: run scripts/build-geth.sh (it builds the go-ethereum version go.mod pins into the user cache), or give --geth PATH")

// GethVersion is the go-ethereum version this binary was built with ("" when
// the build has no module list, as test binaries may).
func GethVersion() string {
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, d := range bi.Deps {
			if d.Path == "github.com/ethereum/go-ethereum" {
				return d.Version
			}
		}
	}
	return ""
}

// FindGeth returns explicit when set (it must exist), else
// scripts/build-geth.sh's build in the user cache
// (zoo-gym/geth-<version>/geth), else geth on PATH, else ErrNoGeth.
func FindGeth(explicit string) (string, error) {
	if explicit != "" {
		if _, err := os.Stat(explicit); err != nil {
			return "", fmt.Errorf("localchain: --geth %s: %w", explicit, err)
		}
		return explicit, nil
	}
	if dir, err := os.UserCacheDir(); err == nil {
		if v := GethVersion(); v != "" {
			p := filepath.Join(dir, "zoo-gym", "geth-"+v, "geth")
			if _, err := os.Stat(p); err == nil {
				return p, nil
			}
		} else if m, _ := filepath.Glob(filepath.Join(dir, "zoo-gym", "geth-v*", "geth")); len(m) > 0 {
			return m[len(m)-1], nil
		}
	}
	if p, err := exec.LookPath("geth"); err == nil {
		return p, nil
	}
	return "", ErrNoGeth
}

// Geth is a geth --dev process (a block as soon as a transaction arrives)
// with its JSON-RPC on a loopback port, restartable on its data directory.
type Geth struct {
	Bin, Dir string
	URL      string
	port     int

	mu   sync.Mutex
	cmd  *exec.Cmd
	done chan struct{}
}

// StartGeth starts geth --dev with its data (and geth.log) in dir, on a
// free loopback port, and waits until it answers.
func StartGeth(ctx context.Context, bin, dir string) (*Geth, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	g := &Geth{Bin: bin, Dir: dir, port: port, URL: fmt.Sprintf("http://127.0.0.1:%d", port)}
	return g, g.Start(ctx)
}

// Start (re)starts geth on its data directory and waits (up to a minute)
// for its RPC.
func (g *Geth) Start(ctx context.Context) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.cmd != nil {
		return errors.New("localchain: geth is running")
	}
	cmd := exec.Command(g.Bin, "--dev", "--datadir", g.Dir, "--http", "--http.addr", "127.0.0.1",
		"--http.port", fmt.Sprint(g.port), "--http.api", "eth,net,web3", "--port", "0", "--nodiscover", "--maxpeers", "0",
		"--authrpc.port", "0", "--ipcdisable", "--verbosity", "2")
	logf, err := os.OpenFile(filepath.Join(g.Dir, "geth.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	cmd.Stdout, cmd.Stderr = logf, logf
	err = cmd.Start()
	logf.Close()
	if err != nil {
		return fmt.Errorf("localchain: start %s: %w", g.Bin, err)
	}
	done := make(chan struct{})
	go func() { cmd.Wait(); close(done) }()
	g.cmd, g.done = cmd, done
	wctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	t := time.NewTicker(100 * time.Millisecond)
	defer t.Stop()
	for {
		c, err := ethclient.DialContext(wctx, g.URL)
		if err == nil {
			_, err = c.ChainID(wctx)
			c.Close()
			if err == nil {
				return nil
			}
		}
		select {
		case <-done:
			g.cmd = nil
			return fmt.Errorf("localchain: geth exited at start: %s", g.tail())
		case <-wctx.Done():
			return fmt.Errorf("localchain: geth did not answer on %s: %v\n%s", g.URL, err, g.tail())
		case <-t.C:
		}
	}
}

func (g *Geth) tail() string {
	b, _ := os.ReadFile(filepath.Join(g.Dir, "geth.log"))
	l := strings.Split(string(b), "\n")
	if len(l) > 30 {
		l = l[len(l)-30:]
	}
	return strings.Join(l, "\n")
}

// Stop stops geth with SIGTERM (it flushes its chain; a dev node killed
// with SIGKILL rewinds to its last flushed state on restart) and waits,
// killing it after 30 s.
func (g *Geth) Stop() {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.cmd == nil {
		return
	}
	g.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-g.done:
	case <-time.After(30 * time.Second):
		g.cmd.Process.Kill()
		<-g.done
	}
	g.cmd = nil
}
