package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"

	"github.com/ethereum/go-ethereum/ethclient"

	"github.com/zooai/gym/chain"
	"github.com/zooai/gym/orchestrator/chainsync"
	"github.com/zooai/gym/orchestrator/daemon"
	"github.com/zooai/gym/orchestrator/ledger/evm"
)

// chainIDDefault is the Hanzo compute chain (seed 002).
const chainIDDefault = chain.HanzoChainID

// chainSettings are hanzod's --ledger evm settings.
type chainSettings struct {
	Ledger, RPC    string
	ChainID        uint64
	Contracts, Key string
	Accounts       string
	Confirmations  uint64
}

func (c chainSettings) validate() error {
	switch c.Ledger {
	case "embedded":
		return nil
	case "evm":
	default:
		return fmt.Errorf("hanzod: --ledger %q: want embedded or evm", c.Ledger)
	}
	switch {
	case c.RPC == "":
		return fmt.Errorf("hanzod: --ledger evm needs --rpc URL (HANZO_RPC)")
	case c.Contracts == "":
		return fmt.Errorf("hanzod: --ledger evm needs --contracts FILE (gym chain deploy writes it)")
	case c.Key == "":
		return fmt.Errorf("hanzod: --ledger evm needs --chain-key FILE (the authorised orchestrator's key)")
	case c.ChainID == 0:
		return fmt.Errorf("hanzod: --chain-id 0")
	}
	return nil
}

// maxAccounts bounds the --chain-accounts file read.
const maxAccounts = 16 << 20

// open connects to the chain, checks the contracts and that the key is an
// authorised orchestrator, and returns the daemon's chain link.
func (c chainSettings) open(ctx context.Context, log *slog.Logger) (*daemon.ChainLink, func(), error) {
	addrs, err := chain.ReadAddresses(c.Contracts)
	if err != nil {
		return nil, nil, fmt.Errorf("hanzod: --contracts: %w", err)
	}
	key, err := chain.LoadKey(c.Key)
	if err != nil {
		return nil, nil, fmt.Errorf("hanzod: --chain-key: %w", err)
	}
	accounts := map[string]string{}
	if c.Accounts != "" {
		f, err := os.Open(c.Accounts)
		if err != nil {
			return nil, nil, fmt.Errorf("hanzod: --chain-accounts: %w", err)
		}
		b, err := io.ReadAll(io.LimitReader(f, maxAccounts+1))
		f.Close()
		if err != nil {
			return nil, nil, fmt.Errorf("hanzod: --chain-accounts: %w", err)
		}
		if accounts, err = chainsync.ParseAccounts(b); err != nil {
			return nil, nil, fmt.Errorf("hanzod: --chain-accounts: %w", err)
		}
	}
	ec, err := ethclient.DialContext(ctx, c.RPC)
	if err != nil {
		return nil, nil, fmt.Errorf("hanzod: --rpc %s: %w", c.RPC, err)
	}
	cl, err := chain.NewClient(ctx, ec, c.ChainID)
	if err != nil {
		ec.Close()
		return nil, nil, fmt.Errorf("hanzod: --rpc %s: %w", c.RPC, err)
	}
	cl.Confirmations = c.Confirmations
	l, err := evm.New(ctx, evm.Config{Client: cl, Addresses: addrs, Key: key, Accounts: &evm.Keyring{}})
	if err != nil {
		ec.Close()
		return nil, nil, fmt.Errorf("hanzod: %w", err)
	}
	if ok, err := l.IsOrchestrator(ctx); err != nil || !ok {
		ec.Close()
		return nil, nil, fmt.Errorf("hanzod: %s is not an authorised orchestrator on chain %d (granted ORCHESTRATOR_ROLE and 50,000 GYM staked as an orchestrator; gym chain deploy does both for its key): %v",
			l.Orchestrator(), c.ChainID, err)
	}
	log.Info("chain ledger", "rpc", c.RPC, "chain_id", c.ChainID, "gym_token", addrs.GYMToken, "mining_pool", addrs.MiningPool,
		"publication_registry", addrs.PublicationRegistry, "orchestrator", l.Orchestrator(), "accounts", len(accounts))
	return &daemon.ChainLink{Book: l, Staked: l.IsStaked, Accounts: accounts, Bound: l.NodeAccount}, ec.Close, nil
}
