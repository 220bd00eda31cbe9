package localchain

import (
	"context"
	"crypto/ecdsa"
	"crypto/ed25519"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math/big"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/ethereum/go-ethereum"
	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/common/hexutil"
	"github.com/ethereum/go-ethereum/crypto"
	"github.com/ethereum/go-ethereum/ethclient"
	"github.com/ethereum/go-ethereum/params"
	"github.com/ethereum/go-ethereum/rpc"

	"github.com/zooai/gym/chain"
	"github.com/zooai/gym/chain/contracts"
	"github.com/zooai/gym/devnet/localcluster"
	"github.com/zooai/gym/orchestrator/daemon"
	"github.com/zooai/gym/orchestrator/ledger"
	"github.com/zooai/gym/orchestrator/ledger/evm"
)

// Config is what Setup does on the chain.
type Config struct {
	// RPC is the dev chain's JSON-RPC URL; its first account (eth_accounts,
	// unlocked on geth --dev) pays the gas money of the orchestrator and of
	// every node.
	RPC string
	// Dir receives orchestrator.key, contracts.json, accounts.json and
	// each node's key (nodes/<id>.key), as hanzod's flags take them.
	Dir string
	// Stake is minted to and staked by every node (at least the node
	// minimum, 10,000 GYM); PoolFunds is minted into the MiningPool.
	Stake, PoolFunds ledger.Amount
	// Map, when set, gives hanzod the node → account map (the operator's
	// --chain-accounts) instead of the nodes' own bindings on chain.
	Map bool
	// Confirmations each transaction waits for (0: 1).
	Confirmations uint64
	// Poll is the receipt polling interval (0: 50 ms).
	Poll time.Duration
}

// Chain is a deployment with staked nodes: hanzod's chain link and the
// reader of the run's record.
type Chain struct {
	cfg      Config
	ec       *ethclient.Client
	client   *chain.Client
	addrs    chain.Addresses
	l        *evm.Ledger
	accounts map[string]string // node id → 0x-address
	nodes    []string          // in worker order
	// SetupGas is the gas of each setup transaction.
	SetupGas []chain.Step
	// Latency is each node's setup transactions' time from the gas
	// estimate to the receipt with its confirmations (bind, mint, stake).
	Latency []time.Duration
}

// Setup deploys the contracts with a fresh orchestrator key, funds the
// MiningPool, and for every node makes an Ethereum key, sends it gas
// money, mints it cfg.Stake, stakes it as a node and binds the node's
// Ed25519 key to it (GYMToken.bindNode, signed by both keys), each with
// the node's own keys, as a node operator would. nodeKeys are the nodes'
// Ed25519 keys (hanzod's node ids are their public halves).
func Setup(ctx context.Context, cfg Config, nodeKeys []ed25519.PrivateKey) (*Chain, error) {
	nodes := make([]string, len(nodeKeys))
	for i, k := range nodeKeys {
		nodes[i] = hex.EncodeToString(k.Public().(ed25519.PublicKey))
	}
	if cfg.Stake < 10_000*ledger.GYM {
		return nil, fmt.Errorf("localchain: stake %d µGYM is below the node minimum of 10,000 GYM", cfg.Stake)
	}
	if cfg.Poll == 0 {
		cfg.Poll = 50 * time.Millisecond
	}
	if err := os.MkdirAll(filepath.Join(cfg.Dir, "nodes"), 0o700); err != nil {
		return nil, err
	}
	rc, err := rpc.DialContext(ctx, cfg.RPC)
	if err != nil {
		return nil, err
	}
	ec := ethclient.NewClient(rc)
	c := &Chain{cfg: cfg, ec: ec, accounts: map[string]string{}, nodes: append([]string(nil), nodes...)}
	ok := false
	defer func() {
		if !ok {
			ec.Close()
		}
	}()
	if c.client, err = chain.NewClient(ctx, ec, 0); err != nil {
		return nil, err
	}
	c.client.Confirmations, c.client.Poll = cfg.Confirmations, cfg.Poll
	var dev []common.Address
	if err := rc.CallContext(ctx, &dev, "eth_accounts"); err != nil || len(dev) == 0 {
		return nil, fmt.Errorf("localchain: %s has no unlocked account to fund from (want geth --dev): %v", cfg.RPC, err)
	}
	orch, err := crypto.GenerateKey()
	if err != nil {
		return nil, err
	}
	if err := crypto.SaveECDSA(filepath.Join(cfg.Dir, "orchestrator.key"), orch); err != nil {
		return nil, err
	}
	keys := make([]*ecdsa.PrivateKey, len(nodes))
	fund := []common.Address{chain.Address(orch)}
	for i, id := range nodes {
		if keys[i], err = crypto.GenerateKey(); err != nil {
			return nil, err
		}
		if err := crypto.SaveECDSA(filepath.Join(cfg.Dir, "nodes", id[:16]+".key"), keys[i]); err != nil {
			return nil, err
		}
		fund = append(fund, chain.Address(keys[i]))
	}
	if err := c.fundGas(ctx, rc, dev[0], fund); err != nil {
		return nil, err
	}
	d, err := chain.Deploy(ctx, c.client, orch, chain.DeployConfig{UnbondingDelay: 14 * 24 * time.Hour,
		OrchestratorStake: uint64(50_000 * ledger.GYM), PoolFunds: uint64(cfg.PoolFunds)})
	if err != nil {
		return nil, err
	}
	c.addrs, c.SetupGas = d.Addresses, d.Gas
	if err := chain.WriteAddresses(filepath.Join(cfg.Dir, "contracts.json"), c.addrs); err != nil {
		return nil, err
	}
	kr := &evm.Keyring{}
	for i, id := range nodes {
		kr.Add(id, keys[i])
		c.accounts[id] = chain.Address(keys[i]).Hex()
	}
	if c.l, err = evm.New(ctx, evm.Config{Client: c.client, Addresses: c.addrs, Key: orch, Accounts: kr}); err != nil {
		return nil, err
	}
	for i, id := range nodes {
		t0 := time.Now()
		r, err := chain.BindNode(ctx, c.client, c.addrs, keys[i], nodeKeys[i])
		c.Latency = append(c.Latency, time.Since(t0))
		if err != nil {
			return nil, fmt.Errorf("localchain: bind %s: %w", id, err)
		}
		c.SetupGas = append(c.SetupGas, chain.Step{What: "bindNode " + id[:12], Tx: r.TxHash, Gas: r.GasUsed})
		t0 = time.Now()
		if err := c.l.Deposit(ctx, id, cfg.Stake); err != nil {
			return nil, fmt.Errorf("localchain: mint the stake of %s: %w", id, err)
		}
		t1 := time.Now()
		if err := c.l.Stake(ctx, id, ledger.RoleNode, cfg.Stake); err != nil {
			return nil, fmt.Errorf("localchain: stake %s: %w", id, err)
		}
		c.Latency = append(c.Latency, t1.Sub(t0), time.Since(t1))
	}
	// hanzod finds a binding through the chain's log index, which a node
	// may update after the receipt: wait until every binding is found.
	for _, id := range nodes {
		wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		var lerr error
		err := localcluster.Poll(wctx, cfg.Poll, func() bool {
			a, ok, err := c.l.NodeAccount(wctx, id)
			lerr = err
			return ok && a == c.accounts[id]
		})
		cancel()
		if err != nil {
			return nil, fmt.Errorf("localchain: the binding of %s is not found on chain: %v %v", id, err, lerr)
		}
	}
	b, _ := json.MarshalIndent(c.accounts, "", "  ")
	if err := os.WriteFile(filepath.Join(cfg.Dir, "accounts.json"), b, 0o644); err != nil {
		return nil, err
	}
	ok = true
	return c, nil
}

// fundGas sends 100 ETH from the dev account to each address and waits
// for them all.
func (c *Chain) fundGas(ctx context.Context, rc *rpc.Client, from common.Address, to []common.Address) error {
	v := new(big.Int).Mul(big.NewInt(100), big.NewInt(params.Ether))
	wctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	var hs []common.Hash
	for _, a := range to {
		// geth picks the nonce; on a loaded machine it can pick one a
		// transaction still in its pool holds ("replacement transaction
		// underpriced"): send again once the pool has moved on.
		var h common.Hash
		var serr error
		err := localcluster.Poll(wctx, c.cfg.Poll, func() bool {
			serr = rc.CallContext(wctx, &h, "eth_sendTransaction", map[string]any{"from": from, "to": a, "value": (*hexutil.Big)(v)})
			return serr == nil || !nonceRace(serr)
		})
		if err != nil { // the minute ran out while geth kept giving held nonces
			return fmt.Errorf("localchain: fund %s with gas money: %w (last send: %v)", a, err, serr)
		}
		if serr != nil {
			return fmt.Errorf("localchain: fund %s with gas money: %w", a, serr)
		}
		hs = append(hs, h)
	}
	for _, h := range hs {
		if err := localcluster.Poll(wctx, c.cfg.Poll, func() bool {
			r, err := c.ec.TransactionReceipt(wctx, h)
			return err == nil && r.Status == 1
		}); err != nil {
			return fmt.Errorf("localchain: gas money transaction %s not mined: %w", h, err)
		}
	}
	return nil
}

// nonceRace reports whether a send failed because geth gave it a nonce a
// pending transaction held: sending again picks the next one.
func nonceRace(err error) bool {
	m := err.Error()
	return strings.Contains(m, "replacement transaction underpriced") || strings.Contains(m, "nonce too low") || strings.Contains(m, "already known")
}

// Close closes the RPC connection.
func (c *Chain) Close() { c.ec.Close() }

// Addresses are the contracts.
func (c *Chain) Addresses() chain.Addresses { return c.addrs }

// Ledger is the chain ledger hanzod uses.
func (c *Chain) Ledger() *evm.Ledger { return c.l }

// Accounts maps the node ids to their addresses (accounts.json).
func (c *Chain) Accounts() map[string]string { return c.accounts }

// Link is hanzod's chain link: the ledger, the stake check and the nodes'
// bindings on chain (or, with Config.Map, the accounts map).
func (c *Chain) Link() *daemon.ChainLink {
	l := &daemon.ChainLink{Book: c.l, Staked: c.l.IsStaked, StakeMaxAge: time.Minute}
	if c.cfg.Map {
		l.Accounts = c.accounts
	} else {
		l.Bound = c.l.NodeAccount
	}
	return l
}

func gym(a *big.Int) float64 {
	f, _ := new(big.Float).Quo(new(big.Float).SetInt(a), big.NewFloat(float64(ledger.GYM))).Float64()
	return f
}

// Report reads job's record from the chain: every node's stake, balance
// and slashes, each EpochRewardsDistributed of the job with the
// transaction's Transfers and gas, and each publication record.
func (c *Chain) Report(ctx context.Context, job string) (*localcluster.ChainSummary, error) {
	s := &localcluster.ChainSummary{ChainID: c.addrs.ChainID, RPC: c.cfg.RPC, GYMToken: c.addrs.GYMToken.Hex(),
		MiningPool: c.addrs.MiningPool.Hex(), Registry: c.addrs.PublicationRegistry.Hex()}
	byAddr := map[common.Address]string{}
	for id, a := range c.accounts {
		byAddr[common.HexToAddress(a)] = id
	}
	for _, id := range c.nodes {
		p, err := c.l.Position(ctx, c.accounts[id])
		if err != nil {
			return nil, err
		}
		n := localcluster.ChainNode{ID: id, Address: c.accounts[id], Stake: float64(p.Bonded) / float64(ledger.GYM),
			Balance: float64(p.Free) / float64(ledger.GYM), Banned: p.Banned}
		for _, sl := range p.Slashes {
			n.Slashes = append(n.Slashes, localcluster.ChainSlash{Offence: sl.Offence, Pct: sl.Pct, Amount: float64(sl.Amount) / float64(ledger.GYM),
				EvidenceHash: hexutil.Encode(sl.EvidenceHash[:])})
		}
		s.Nodes = append(s.Nodes, n)
	}
	t, err := c.l.Treasury(ctx)
	if err != nil {
		return nil, err
	}
	s.Treasury = float64(t) / float64(ledger.GYM)
	key := chain.JobKey(job)
	pool, err := contracts.MiningPoolMetaData.GetAbi()
	if err != nil {
		return nil, err
	}
	evID := pool.Events["EpochRewardsDistributed"].ID
	logs, err := c.ec.FilterLogs(ctx, ethereum.FilterQuery{FromBlock: new(big.Int).SetUint64(c.addrs.DeployBlock),
		Addresses: []common.Address{c.addrs.MiningPool}, Topics: [][]common.Hash{{evID}, {key}}})
	if err != nil {
		return nil, err
	}
	for _, lg := range logs {
		ev, err := chain.DecodeLog(c.addrs, lg)
		if err != nil {
			return nil, err
		}
		e := localcluster.ChainEpoch{Epoch: ev.Fields["epoch"].(uint64), Workers: int(ev.Fields["workers"].(*big.Int).Int64()),
			Total: gym(ev.Fields["total"].(*big.Int)), Tx: lg.TxHash.Hex(), Block: lg.BlockNumber, Paid: map[string]float64{}}
		r, err := c.ec.TransactionReceipt(ctx, lg.TxHash)
		if err != nil {
			return nil, err
		}
		e.Gas = r.GasUsed
		for _, tl := range r.Logs {
			tev, err := chain.DecodeLog(c.addrs, *tl)
			if err != nil || tev.Name != "Transfer" || tev.Fields["from"].(common.Address) != c.addrs.MiningPool {
				continue
			}
			to := tev.Fields["to"].(common.Address)
			name := byAddr[to]
			if name == "" {
				name = to.Hex()
			}
			e.Paid[name] += gym(tev.Fields["value"].(*big.Int))
		}
		s.Epochs = append(s.Epochs, e)
	}
	for e := uint64(1); e < 1<<16; e++ {
		p, ok, err := c.l.Publication(ctx, job, e)
		if err != nil {
			return nil, err
		}
		if !ok {
			break
		}
		s.Publications = append(s.Publications, localcluster.ChainPublication{Epoch: e, CID: p.CID, Signer: fmt.Sprintf("%x", []byte(p.Signer))})
	}
	return s, nil
}
