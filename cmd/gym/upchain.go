package main

import (
	"context"
	"crypto/ed25519"
	"fmt"
	"io"
	"path/filepath"
	"strings"

	"github.com/zooai/gym/devnet/localchain"
	"github.com/zooai/gym/devnet/localcluster"
	hanzod "github.com/zooai/gym/orchestrator/daemon"
	"github.com/zooai/gym/orchestrator/ledger"
)

// upChain starts geth --dev under --out DIR/chain and sets cfg up to deploy
// the contracts and stake the workers on it, run hanzod on the chain
// ledger and read the run's record back; stop stops geth.
func upChain(ctx context.Context, o upOptions, cfg *localcluster.Config, v *upView) (stop func(), err error) {
	bin, err := localchain.FindGeth(o.geth)
	if err != nil {
		return nil, fmt.Errorf("gym up --ledger evm: %w", err)
	}
	dir := filepath.Join(o.out, "chain")
	g, err := localchain.StartGeth(ctx, bin, filepath.Join(dir, "geth"))
	if err != nil {
		return nil, fmt.Errorf("gym up --ledger evm: %w", err)
	}
	v.say("chain: geth --dev at %s (%s)", g.URL, bin)
	var ch *localchain.Chain
	cfg.Chain = func(ctx context.Context, nodes []ed25519.PrivateKey) (*hanzod.ChainLink, error) {
		var err error
		ch, err = localchain.Setup(ctx, localchain.Config{RPC: g.URL, Dir: dir, Stake: cfg.Stake, PoolFunds: cfg.Treasury,
			Confirmations: o.confirmations}, nodes)
		if err != nil {
			return nil, err
		}
		var gas uint64
		for _, s := range ch.SetupGas {
			gas += s.Gas
		}
		a := ch.Addresses()
		v.say("chain: contracts deployed (GYMToken %s, MiningPool %s, PublicationRegistry %s; %d gas in all), %d workers bound to their own accounts and staked %.0f GYM each as nodes, pool funded with %.0f GYM",
			a.GYMToken.Hex(), a.MiningPool.Hex(), a.PublicationRegistry.Hex(), gas, len(nodes), float64(cfg.Stake)/float64(ledger.GYM), float64(cfg.Treasury)/float64(ledger.GYM))
		return ch.Link(), nil
	}
	cfg.ChainReport = func(ctx context.Context, job string) (*localcluster.ChainSummary, error) { return ch.Report(ctx, job) }
	return func() {
		if ch != nil {
			ch.Close()
		}
		g.Stop()
	}, nil
}

// printChain prints what the chain holds of the run.
func printChain(w io.Writer, s *localcluster.Summary, c *localcluster.ChainSummary) {
	names := map[string]string{}
	for _, n := range s.Nodes {
		names[n.ID] = n.Name
	}
	fmt.Fprintf(w, "  on chain %d (%s), read back from it: GYMToken %s, MiningPool %s (%.2f GYM left), PublicationRegistry %s\n",
		c.ChainID, c.RPC, c.GYMToken, c.MiningPool, c.Treasury, c.Registry)
	fmt.Fprintf(w, "    %-4s %-42s %10s %10s  %s\n", "node", "address", "stake", "balance", "slashes")
	for _, n := range c.Nodes {
		var sl []string
		for _, x := range n.Slashes {
			sl = append(sl, fmt.Sprintf("#%d %d%% %.0f GYM evidence %s…", x.Offence, x.Pct, x.Amount, x.EvidenceHash[:18]))
		}
		if n.Banned {
			sl = append(sl, "banned")
		}
		if len(sl) == 0 {
			sl = []string{"-"}
		}
		fmt.Fprintf(w, "    %-4s %-42s %10.2f %10.2f  %s\n", names[n.ID], n.Address, n.Stake, n.Balance, strings.Join(sl, "; "))
	}
	for _, e := range c.Epochs {
		fmt.Fprintf(w, "    epoch %d paid: %.2f GYM to %d workers, gas %d, tx %s\n", e.Epoch, e.Total, e.Workers, e.Gas, e.Tx)
	}
	for _, p := range c.Publications {
		fmt.Fprintf(w, "    epoch %d recorded: %s signed by %s…\n", p.Epoch, p.CID, p.Signer[:16])
	}
	if c.MirrorFailures > 0 {
		fmt.Fprintf(w, "    hanzod's chain mirror: %d failed attempts (queued, then sent)\n", c.MirrorFailures)
	}
}
