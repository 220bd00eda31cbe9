package main

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/ethereum/go-ethereum/crypto"
	"github.com/ethereum/go-ethereum/ethclient"
	"github.com/spf13/cobra"

	"github.com/zooai/gym/chain"
	"github.com/zooai/gym/keys/nodekey"
	"github.com/zooai/gym/orchestrator/ledger"
	"github.com/zooai/gym/orchestrator/ledger/evm"
)

func newChain() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "chain",
		Short: "Deploy and read Zoo Gym's contracts on an EVM chain (GYMToken, MiningPool, PublicationRegistry)",
		Long: `chain deploys the stake, reward and publication contracts to an EVM chain and
reads them back; hanzod --ledger evm uses them (docs/chain.md).`,
	}
	cmd.AddCommand(newChainKeygen(), newChainDeploy(), newChainBalance(), newChainBind(), newChainPublication())
	return cmd
}

type chainFlags struct {
	rpc       string
	chainID   uint64
	contracts string
	timeout   time.Duration
}

func (f *chainFlags) register(cmd *cobra.Command, contracts bool) {
	cmd.Flags().StringVar(&f.rpc, "rpc", os.Getenv("HANZO_RPC"), "chain RPC URL [HANZO_RPC]")
	id := uint64(chain.HanzoChainID)
	if v, err := strconv.ParseUint(os.Getenv("HANZO_CHAIN_ID"), 10, 64); err == nil {
		id = v
	}
	cmd.Flags().Uint64Var(&f.chainID, "chain-id", id, "chain id the endpoint must serve [HANZO_CHAIN_ID]")
	cmd.Flags().DurationVar(&f.timeout, "timeout", 5*time.Minute, "give up after this long")
	if contracts {
		cmd.Flags().StringVar(&f.contracts, "contracts", "contracts.json", "addresses file (gym chain deploy --out)")
	}
}

func (f *chainFlags) dial(ctx context.Context) (*chain.Client, func(), error) {
	if f.rpc == "" {
		return nil, nil, usageError{fmt.Errorf("--rpc URL (or HANZO_RPC) is required")}
	}
	ec, err := ethclient.DialContext(ctx, f.rpc)
	if err != nil {
		return nil, nil, err
	}
	c, err := chain.NewClient(ctx, ec, f.chainID)
	if err != nil {
		ec.Close()
		return nil, nil, err
	}
	return c, ec.Close, nil
}

func newChainKeygen() *cobra.Command {
	var out string
	cmd := &cobra.Command{
		Use:   "keygen --out FILE",
		Short: "Make a secp256k1 key file (64 hex digits, mode 0600) and print its address",
		Args:  exactArgs(0),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if out == "" {
				return usageError{fmt.Errorf("--out FILE is required")}
			}
			if _, err := os.Stat(out); err == nil {
				return fmt.Errorf("%s exists; not overwriting a key", out)
			}
			k, err := crypto.GenerateKey()
			if err != nil {
				return err
			}
			if err := crypto.SaveECDSA(out, k); err != nil {
				return err
			}
			fmt.Fprintln(cmd.OutOrStdout(), chain.Address(k).Hex())
			return nil
		},
	}
	cmd.Flags().StringVar(&out, "out", "", "key file to write")
	return cmd
}

func newChainDeploy() *cobra.Command {
	var f chainFlags
	var key, out string
	var unbonding time.Duration
	var stake, funds string
	var confirmations uint64
	cmd := &cobra.Command{
		Use:   "deploy --rpc URL --key FILE [--out contracts.json]",
		Short: "Deploy GYMToken, MiningPool and PublicationRegistry and write the addresses file",
		Long: `deploy sends the three contracts from the account of --key, which becomes the
token's admin, minter and authorised orchestrator: it mints itself
--orchestrator-stake GYM and stakes them as an orchestrator (at least 50,000),
makes the MiningPool the treasury, and mints --pool-funds GYM into the pool.
It prints each transaction's gas and writes the addresses file hanzod reads
(--contracts).`,
		Args: exactArgs(0),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if key == "" {
				return usageError{fmt.Errorf("--key FILE is required (gym chain keygen makes one)")}
			}
			st, err := parseGYMOrZero(stake)
			if err != nil {
				return usageError{fmt.Errorf("--orchestrator-stake: %w", err)}
			}
			fu, err := parseGYMOrZero(funds)
			if err != nil {
				return usageError{fmt.Errorf("--pool-funds: %w", err)}
			}
			k, err := chain.LoadKey(key)
			if err != nil {
				return err
			}
			ctx, cancel := context.WithTimeout(cmd.Context(), f.timeout)
			defer cancel()
			c, closeC, err := f.dial(ctx)
			if err != nil {
				return err
			}
			defer closeC()
			c.Confirmations = confirmations
			d, err := chain.Deploy(ctx, c, k, chain.DeployConfig{UnbondingDelay: unbonding, OrchestratorStake: st, PoolFunds: fu})
			for _, s := range d.Gas {
				fmt.Fprintf(cmd.ErrOrStderr(), "%-30s %s gas %d\n", s.What, s.Tx.Hex(), s.Gas)
			}
			if err != nil {
				return err
			}
			if err := chain.WriteAddresses(out, d.Addresses); err != nil {
				return err
			}
			b, _ := json.MarshalIndent(d.Addresses, "", "  ")
			fmt.Fprintln(cmd.OutOrStdout(), string(b))
			return nil
		},
	}
	f.register(cmd, false)
	cmd.Flags().StringVar(&key, "key", "", "deployer's key file (becomes the authorised orchestrator)")
	cmd.Flags().StringVar(&out, "out", "contracts.json", "addresses file to write")
	cmd.Flags().DurationVar(&unbonding, "unbonding", 14*24*time.Hour, "unbonding delay")
	cmd.Flags().StringVar(&stake, "orchestrator-stake", "50000", "GYM minted to the deployer and staked as an orchestrator (0: none)")
	cmd.Flags().StringVar(&funds, "pool-funds", "0", "GYM minted into the MiningPool")
	cmd.Flags().Uint64Var(&confirmations, "confirmations", 1, "blocks each transaction waits for, its own included")
	return cmd
}

func openReadOnly(ctx context.Context, f *chainFlags) (*evm.Ledger, func(), error) {
	addrs, err := chain.ReadAddresses(f.contracts)
	if err != nil {
		return nil, nil, err
	}
	c, closeC, err := f.dial(ctx)
	if err != nil {
		return nil, nil, err
	}
	l, err := evm.New(ctx, evm.Config{Client: c, Addresses: addrs, Accounts: &evm.Keyring{}})
	if err != nil {
		closeC()
		return nil, nil, err
	}
	return l, closeC, nil
}

func newChainBalance() *cobra.Command {
	var f chainFlags
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "balance [--json] ADDRESS|NODE|treasury",
		Short: "Show an address's GYM balance, stake, unbonding, locks and slashes on chain",
		Long: `balance reads an account on chain: a 0x-address, a node id (64 hex
characters: the account the node bound to its key with 'gym chain bind',
whose signature is checked here), or "treasury" (the MiningPool).`,
		Args: exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return chainBalance(cmd, &f, args[0], asJSON)
		},
	}
	f.register(cmd, true)
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON (amounts in micro-GYM)")
	return cmd
}

// chainBalance prints what the chain holds of account: a 0x-address, a
// node id (resolved through the node's binding) or the treasury.
func chainBalance(cmd *cobra.Command, f *chainFlags, account string, asJSON bool) error {
	ctx, cancel := context.WithTimeout(cmd.Context(), f.timeout)
	defer cancel()
	l, closeC, err := openReadOnly(ctx, f)
	if err != nil {
		return err
	}
	defer closeC()
	w := cmd.OutOrStdout()
	if account == ledger.Treasury {
		t, err := l.Treasury(ctx)
		if err != nil {
			return err
		}
		if asJSON {
			return json.NewEncoder(w).Encode(map[string]uint64{"treasury": uint64(t)})
		}
		fmt.Fprintf(w, "treasury (MiningPool)  %s\n", gymAmount(uint64(t)))
		return nil
	}
	addr := account
	if !strings.HasPrefix(account, "0x") {
		a, ok, err := l.NodeAccount(ctx, account)
		if err != nil {
			return err
		}
		if !ok {
			return fmt.Errorf("node %s has bound no account on chain (gym chain bind), or is not a node id; give its 0x-address", account)
		}
		addr = a
	}
	p, err := l.Position(ctx, addr)
	if err != nil {
		return err
	}
	if asJSON {
		return json.NewEncoder(w).Encode(struct {
			Account string `json:"account"`
			ledger.Position
		}{addr, p})
	}
	if addr != account {
		fmt.Fprintf(w, "node       %s\n", account)
	}
	fmt.Fprintf(w, "account    %s\nfree       %s\nstaked     %s as %v\nunbonding  %s in %d entries\nlocked by  %d unsettled jobs\nbanned     %v\n",
		addr, gymAmount(uint64(p.Free)), gymAmount(uint64(p.Bonded)), p.Role, gymAmount(uint64(p.Unbonded())), len(p.Unbonding), p.Locks, p.Banned)
	for _, s := range p.Slashes {
		fmt.Fprintf(w, "slash %d    %d%%, %s, evidence keccak256 %s\n", s.Offence, s.Pct, gymAmount(uint64(s.Amount)), hex.EncodeToString(s.EvidenceHash[:]))
	}
	return nil
}

func newChainBind() *cobra.Command {
	var f chainFlags
	var nodeKey, key string
	cmd := &cobra.Command{
		Use:   "bind --node-key FILE --key FILE",
		Short: "Bind a node's Ed25519 key to an Ethereum account on chain (signed by both keys)",
		Long: `bind makes the account of --key (a secp256k1 key file, 'gym chain keygen') the
node's chain account: the node key (--node-key, 'gym keygen') signs the chain
id, the GYMToken contract and the account, and the account sends
GYMToken.bindNode with that signature. hanzod --ledger evm checks the
signature off chain and then reads the node's stake from that account and
pays its rewards there; a binding replaces the operator's --chain-accounts
entry for the node. Binding the account again, to another node key, ends
this binding. Stake with the same account (GYMToken.stake(1, amount)).`,
		Args: exactArgs(0),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if nodeKey == "" || key == "" {
				return usageError{fmt.Errorf("--node-key FILE and --key FILE are required")}
			}
			nk, err := nodekey.Load(nodeKey)
			if err != nil {
				return err
			}
			k, err := chain.LoadKey(key)
			if err != nil {
				return err
			}
			addrs, err := chain.ReadAddresses(f.contracts)
			if err != nil {
				return err
			}
			ctx, cancel := context.WithTimeout(cmd.Context(), f.timeout)
			defer cancel()
			c, closeC, err := f.dial(ctx)
			if err != nil {
				return err
			}
			defer closeC()
			r, err := chain.BindNode(ctx, c, addrs, k, nk)
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "node %s bound to %s (tx %s, %d gas)\n", nodekey.PublicHex(nk), chain.Address(k).Hex(), r.TxHash.Hex(), r.GasUsed)
			return nil
		},
	}
	f.register(cmd, true)
	cmd.Flags().StringVar(&nodeKey, "node-key", "", "the node's key file (gym keygen)")
	cmd.Flags().StringVar(&key, "key", "", "the account's secp256k1 key file (gym chain keygen)")
	return cmd
}

func newChainPublication() *cobra.Command {
	var f chainFlags
	cmd := &cobra.Command{
		Use:   "publication JOB EPOCH",
		Short: "Print the on-chain publication record of a job's epoch (CID, weights CID, Hub repo, hanzod's signature)",
		Args:  exactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			epoch, err := strconv.ParseUint(args[1], 10, 64)
			if err != nil {
				return usageError{fmt.Errorf("EPOCH %q: %w", args[1], err)}
			}
			ctx, cancel := context.WithTimeout(cmd.Context(), f.timeout)
			defer cancel()
			l, closeC, err := openReadOnly(ctx, &f)
			if err != nil {
				return err
			}
			defer closeC()
			p, ok, err := l.Publication(ctx, args[0], epoch)
			if err != nil {
				return err
			}
			if !ok {
				return fmt.Errorf("no publication of %s epoch %d on chain", args[0], epoch)
			}
			return json.NewEncoder(cmd.OutOrStdout()).Encode(map[string]any{"job": p.Job, "epoch": p.Epoch, "cid": p.CID,
				"weights_cid": p.WeightsCID, "hub_repo": p.HubRepo, "signer": hex.EncodeToString(p.Signer), "signature": hex.EncodeToString(p.Signature)})
		},
	}
	f.register(cmd, true)
	return cmd
}

// parseGYMOrZero is parseGYM that also takes 0.
func parseGYMOrZero(s string) (uint64, error) {
	if s == "0" {
		return 0, nil
	}
	return parseGYM(s)
}
