package chain

import (
	"context"
	"crypto/ecdsa"
	"fmt"
	"math/big"
	"time"

	"github.com/ethereum/go-ethereum/accounts/abi/bind"
	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/core/types"

	"github.com/zooai/gym/chain/contracts"
)

// DeployConfig is what Deploy sets up.
type DeployConfig struct {
	// UnbondingDelay is the time between unbond and withdraw (whole seconds).
	UnbondingDelay time.Duration
	// OrchestratorStake is minted to the deployer and staked for the
	// orchestrator role, which makes it an authorised orchestrator (at least
	// 50,000 GYM in micro-GYM); 0 leaves that to the operator.
	OrchestratorStake uint64
	// PoolFunds is minted into the MiningPool (micro-GYM; 0: none).
	PoolFunds uint64
}

// Deployment is what Deploy did: the addresses and each transaction's gas.
type Deployment struct {
	Addresses Addresses
	Gas       []Step
}

// Step is one deployment transaction.
type Step struct {
	What string
	Tx   common.Hash
	Gas  uint64
}

// Deploy deploys GYMToken, MiningPool and PublicationRegistry with key as
// the token's admin, makes the pool the treasury, grants key's account the
// minter and orchestrator roles, and stakes and funds as cfg says.
func Deploy(ctx context.Context, c *Client, key *ecdsa.PrivateKey, cfg DeployConfig) (Deployment, error) {
	me := Address(key)
	var d Deployment
	d.Addresses.ChainID = c.ChainID.Uint64()
	d.Addresses.Orchestrator = me
	step := func(what string, send func(*bind.TransactOpts) (*types.Transaction, error)) (*types.Receipt, error) {
		r, err := c.Transact(ctx, key, send)
		if err != nil {
			return nil, fmt.Errorf("chain: deploy: %s: %w", what, err)
		}
		d.Gas = append(d.Gas, Step{What: what, Tx: r.TxHash, Gas: r.GasUsed})
		return r, nil
	}
	delay := uint64(cfg.UnbondingDelay / time.Second)
	r, err := step("deploy GYMToken", func(o *bind.TransactOpts) (*types.Transaction, error) {
		_, tx, _, err := contracts.DeployGYMToken(o, c.B, me, delay)
		return tx, err
	})
	if err != nil {
		return d, err
	}
	d.Addresses.GYMToken = r.ContractAddress
	d.Addresses.DeployBlock = r.BlockNumber.Uint64()
	if r, err = step("deploy MiningPool", func(o *bind.TransactOpts) (*types.Transaction, error) {
		_, tx, _, err := contracts.DeployMiningPool(o, c.B, d.Addresses.GYMToken)
		return tx, err
	}); err != nil {
		return d, err
	}
	d.Addresses.MiningPool = r.ContractAddress
	if r, err = step("deploy PublicationRegistry", func(o *bind.TransactOpts) (*types.Transaction, error) {
		_, tx, _, err := contracts.DeployPublicationRegistry(o, c.B, d.Addresses.GYMToken)
		return tx, err
	}); err != nil {
		return d, err
	}
	d.Addresses.PublicationRegistry = r.ContractAddress

	tok, err := contracts.NewGYMToken(d.Addresses.GYMToken, c.B)
	if err != nil {
		return d, err
	}
	minter, orch := JobKey("MINTER_ROLE"), JobKey("ORCHESTRATOR_ROLE") // keccak256 of the names, as the contract
	type txStep struct {
		what string
		send func(*bind.TransactOpts) (*types.Transaction, error)
	}
	steps := []txStep{
		{"setTreasury", func(o *bind.TransactOpts) (*types.Transaction, error) {
			return tok.SetTreasury(o, d.Addresses.MiningPool)
		}},
		{"grantRole MINTER_ROLE", func(o *bind.TransactOpts) (*types.Transaction, error) { return tok.GrantRole(o, minter, me) }},
		{"grantRole ORCHESTRATOR_ROLE", func(o *bind.TransactOpts) (*types.Transaction, error) { return tok.GrantRole(o, orch, me) }},
	}
	if cfg.OrchestratorStake > 0 {
		amt := new(big.Int).SetUint64(cfg.OrchestratorStake)
		steps = append(steps,
			txStep{"mint orchestrator stake", func(o *bind.TransactOpts) (*types.Transaction, error) { return tok.Mint(o, me, amt) }},
			txStep{"stake orchestrator", func(o *bind.TransactOpts) (*types.Transaction, error) { return tok.Stake(o, RoleOrchestrator, amt) }})
	}
	if cfg.PoolFunds > 0 {
		amt := new(big.Int).SetUint64(cfg.PoolFunds)
		steps = append(steps, txStep{"fund MiningPool", func(o *bind.TransactOpts) (*types.Transaction, error) {
			return tok.Mint(o, d.Addresses.MiningPool, amt)
		}})
	}
	for _, s := range steps {
		if _, err := step(s.what, s.send); err != nil {
			return d, err
		}
	}
	return d, nil
}

// The contract's staking roles (GYMToken.ROLE_*).
const (
	RoleNode         uint8 = 1
	RoleValidator    uint8 = 2
	RoleOrchestrator uint8 = 3
)
