// Package chain talks to Zoo Gym's contracts on an EVM chain (the Hanzo
// compute chain, id 36900, or any dev chain): it deploys them, reads and
// writes the addresses file, sends transactions one at a time per key and
// waits for their receipts and confirmations, and turns the contracts'
// revert errors into names. docs/chain.md describes the contracts.
package chain

import (
	"context"
	"crypto/ecdsa"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/big"
	"os"
	"strings"
	"sync"
	"time"

	ethereum "github.com/ethereum/go-ethereum"
	"github.com/ethereum/go-ethereum/accounts/abi"
	"github.com/ethereum/go-ethereum/accounts/abi/bind"
	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/core/types"
	"github.com/ethereum/go-ethereum/crypto"
	"github.com/ethereum/go-ethereum/rpc"

	"github.com/zooai/gym/chain/contracts"
)

// HanzoChainID is the Hanzo compute chain's id (seed 002, HANZO_CHAIN_ID).
const HanzoChainID = 36900

// Backend is what the package needs of a chain client: ethclient.Client
// (an RPC endpoint) or the simulated backend's client.
type Backend interface {
	bind.ContractBackend
	bind.DeployBackend
	ethereum.ChainIDReader
	ethereum.BlockNumberReader
}

// Addresses is the addresses file `gym chain deploy` writes and hanzod
// reads (--contracts).
type Addresses struct {
	ChainID             uint64         `json:"chain_id"`
	GYMToken            common.Address `json:"gym_token"`
	MiningPool          common.Address `json:"mining_pool"`
	PublicationRegistry common.Address `json:"publication_registry"`
	// Orchestrator is the account the deployment authorised (and staked).
	Orchestrator common.Address `json:"orchestrator"`
	// DeployBlock is the block of the first contract: where event scans start.
	DeployBlock uint64 `json:"deploy_block"`
}

// maxAddressesFile bounds the addresses file read.
const maxAddressesFile = 64 << 10

// ParseAddresses reads an addresses file strictly: every field present and
// non-zero, nothing else.
func ParseAddresses(b []byte) (Addresses, error) {
	if len(b) > maxAddressesFile {
		return Addresses{}, fmt.Errorf("chain: addresses file of %d bytes (at most %d)", len(b), maxAddressesFile)
	}
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(b, &raw); err != nil {
		return Addresses{}, fmt.Errorf("chain: addresses file: %w", err)
	}
	want := []string{"chain_id", "gym_token", "mining_pool", "publication_registry", "orchestrator", "deploy_block"}
	for _, k := range want {
		if _, ok := raw[k]; !ok {
			return Addresses{}, fmt.Errorf("chain: addresses file lacks %q", k)
		}
	}
	if len(raw) != len(want) {
		return Addresses{}, fmt.Errorf("chain: addresses file has fields other than %v", want)
	}
	var a Addresses
	for k, v := range raw {
		var err error
		switch k {
		case "chain_id":
			err = json.Unmarshal(v, &a.ChainID)
		case "deploy_block":
			err = json.Unmarshal(v, &a.DeployBlock)
		default:
			var s string
			if err = json.Unmarshal(v, &s); err == nil {
				var addr common.Address
				addr, err = parseAddress(s)
				switch k {
				case "gym_token":
					a.GYMToken = addr
				case "mining_pool":
					a.MiningPool = addr
				case "publication_registry":
					a.PublicationRegistry = addr
				case "orchestrator":
					a.Orchestrator = addr
				}
			}
		}
		if err != nil {
			return Addresses{}, fmt.Errorf("chain: addresses file %q: %w", k, err)
		}
	}
	if a.ChainID == 0 {
		return Addresses{}, errors.New("chain: addresses file: chain_id 0")
	}
	return a, nil
}

func parseAddress(s string) (common.Address, error) {
	h, ok := strings.CutPrefix(s, "0x")
	if !ok || len(h) != 2*common.AddressLength {
		return common.Address{}, fmt.Errorf("address %q is not 0x and 40 hex digits", s)
	}
	b, err := hex.DecodeString(h)
	if err != nil {
		return common.Address{}, fmt.Errorf("address %q: %w", s, err)
	}
	addr := common.BytesToAddress(b)
	if addr == (common.Address{}) {
		return common.Address{}, errors.New("zero address")
	}
	return addr, nil
}

// ParseAddress reads a 0x-prefixed hex address (not the zero address).
func ParseAddress(s string) (common.Address, error) { return parseAddress(s) }

// ReadAddresses reads an addresses file.
func ReadAddresses(path string) (Addresses, error) {
	f, err := os.Open(path)
	if err != nil {
		return Addresses{}, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxAddressesFile+1))
	if err != nil {
		return Addresses{}, err
	}
	return ParseAddresses(b)
}

// WriteAddresses writes an addresses file (mode 0644).
func WriteAddresses(path string, a Addresses) error {
	b, err := json.MarshalIndent(a, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(b, '\n'), 0o644)
}

// LoadKey reads a secp256k1 private key file: 64 hex digits (go-ethereum's
// key file format, as `geth account` exports and crypto.SaveECDSA writes).
func LoadKey(path string) (*ecdsa.PrivateKey, error) {
	k, err := crypto.LoadECDSA(path)
	if err != nil {
		return nil, fmt.Errorf("chain: key file %s: %w", path, err)
	}
	return k, nil
}

// Address is the Ethereum address of a key.
func Address(k *ecdsa.PrivateKey) common.Address { return crypto.PubkeyToAddress(k.PublicKey) }

// JobKey is the contracts' key of a hanzod job id: keccak256 of its bytes.
func JobKey(job string) [32]byte { return crypto.Keccak256Hash([]byte(job)) }

// Client sends transactions for keys on one chain: one transaction at a
// time per key (the nonce comes from the chain's pending state, so it is
// right after a restart or a change of sender), each waited for until it
// has the configured confirmations.
type Client struct {
	B             Backend
	ChainID       *big.Int
	Confirmations uint64        // blocks including the receipt's; 0 means 1
	Poll          time.Duration // receipt polling; 0 means 500 ms
	// GasMargin is added to the estimate in percent (0: 20%).
	GasMargin uint64
	// WaitTimeout bounds how long Wait retries the endpoint's errors
	// (0: 30 s); a transaction not mined yet is waited for as long as the
	// context allows.
	WaitTimeout time.Duration

	mu    sync.Mutex
	locks map[common.Address]*sync.Mutex
}

// NewClient checks the backend's chain id against want (0: accept any).
func NewClient(ctx context.Context, b Backend, want uint64) (*Client, error) {
	id, err := b.ChainID(ctx)
	if err != nil {
		return nil, fmt.Errorf("chain: chain id: %w", err)
	}
	if want != 0 && id.Uint64() != want {
		return nil, fmt.Errorf("chain: endpoint is chain %d, want %d", id, want)
	}
	return &Client{B: b, ChainID: id}, nil
}

func (c *Client) keyLock(a common.Address) *sync.Mutex {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.locks == nil {
		c.locks = map[common.Address]*sync.Mutex{}
	}
	m := c.locks[a]
	if m == nil {
		m = &sync.Mutex{}
		c.locks[a] = m
	}
	return m
}

// Transact builds a transaction with send (a binding's method, given the
// options for key) and waits for its receipt. A transaction the chain would
// revert is not sent: the error is a *Revert when the contract said why.
func (c *Client) Transact(ctx context.Context, key *ecdsa.PrivateKey, send func(*bind.TransactOpts) (*types.Transaction, error)) (*types.Receipt, error) {
	from := Address(key)
	l := c.keyLock(from)
	l.Lock()
	defer l.Unlock()
	opts, err := bind.NewKeyedTransactorWithChainID(key, c.ChainID)
	if err != nil {
		return nil, err
	}
	opts.Context = ctx
	// Estimate first, so a revert is reported with its reason, then add
	// the margin.
	opts.NoSend = true
	tx, err := send(opts)
	if err != nil {
		return nil, DecodeError(err)
	}
	margin := c.GasMargin
	if margin == 0 {
		margin = 20
	}
	opts.NoSend = false
	opts.Nonce = new(big.Int).SetUint64(tx.Nonce())
	opts.GasLimit = tx.Gas() + tx.Gas()*margin/100
	if opts.GasLimit > MaxTxGas && tx.Gas() <= MaxTxGas {
		opts.GasLimit = MaxTxGas
	}
	tx, err = send(opts)
	if err != nil {
		return nil, DecodeError(err)
	}
	return c.Wait(ctx, tx)
}

// Wait polls for tx's receipt until it has the confirmations; a receipt
// with failed status is an error. Errors of the endpoint (a restart, a node
// still indexing its transactions) are retried for WaitTimeout.
func (c *Client) Wait(ctx context.Context, tx *types.Transaction) (*types.Receipt, error) {
	poll := c.Poll
	if poll == 0 {
		poll = 500 * time.Millisecond
	}
	limit := c.WaitTimeout
	if limit == 0 {
		limit = 30 * time.Second
	}
	conf := max(c.Confirmations, 1)
	start := time.Now()
	for {
		r, err := c.B.TransactionReceipt(ctx, tx.Hash())
		if err == nil {
			head, herr := c.B.BlockNumber(ctx)
			if herr == nil && head+1 >= r.BlockNumber.Uint64()+conf {
				if r.Status != types.ReceiptStatusSuccessful {
					return r, fmt.Errorf("chain: transaction %s failed in block %d", tx.Hash(), r.BlockNumber)
				}
				return r, nil
			}
			err = herr
		}
		if err != nil && !errors.Is(err, ethereum.NotFound) && time.Since(start) > limit {
			return nil, fmt.Errorf("chain: receipt of %s: %w", tx.Hash(), err)
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(poll):
		}
	}
}

// MaxTxGas is the per-transaction gas cap since Osaka (EIP-7825): the
// margin never takes a transaction above it.
const MaxTxGas = 1 << 24

// Revert is a contract's custom error.
type Revert struct {
	Name string
	Args []any
	Err  error // the error the client returned
}

func (r *Revert) Error() string {
	var b strings.Builder
	b.WriteString("chain: reverted: ")
	b.WriteString(r.Name)
	b.WriteString("(")
	for i, a := range r.Args {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprint(&b, a)
	}
	b.WriteString(")")
	return b.String()
}

func (r *Revert) Unwrap() error { return r.Err }

var (
	errorsOnce sync.Once
	errorsByID map[[4]byte]abi.Error
)

func knownErrors() map[[4]byte]abi.Error {
	errorsOnce.Do(func() {
		errorsByID = map[[4]byte]abi.Error{}
		for _, md := range []*bind.MetaData{contracts.GYMTokenMetaData, contracts.MiningPoolMetaData, contracts.PublicationRegistryMetaData} {
			a, err := md.GetAbi()
			if err != nil {
				panic(err) // the committed ABI is valid JSON: TestDecodeRevert
			}
			for _, e := range a.Errors {
				var id [4]byte
				copy(id[:], e.ID[:4])
				errorsByID[id] = e
			}
		}
	})
	return errorsByID
}

// maxRevertData bounds the revert data decoded.
const maxRevertData = 4 << 10

// DecodeRevertData names a contract's custom error from its revert data
// (selector and ABI-encoded arguments).
func DecodeRevertData(data []byte) (*Revert, error) {
	if len(data) < 4 {
		return nil, fmt.Errorf("chain: revert data of %d bytes", len(data))
	}
	if len(data) > maxRevertData {
		return nil, fmt.Errorf("chain: revert data of %d bytes (at most %d)", len(data), maxRevertData)
	}
	var id [4]byte
	copy(id[:], data)
	e, ok := knownErrors()[id]
	if !ok {
		return nil, fmt.Errorf("chain: unknown revert selector %x", id)
	}
	args, err := e.Inputs.Unpack(data[4:])
	if err != nil {
		return nil, fmt.Errorf("chain: revert %s: %w", e.Name, err)
	}
	return &Revert{Name: e.Name, Args: args}, nil
}

// DecodeError returns err as a *Revert when it carries a known contract
// error's data, and err otherwise.
func DecodeError(err error) error {
	var de rpc.DataError
	if !errors.As(err, &de) {
		return err
	}
	s, ok := de.ErrorData().(string)
	if !ok {
		return err
	}
	h, ok := strings.CutPrefix(s, "0x")
	if !ok || len(h) > 2*maxRevertData {
		return err
	}
	data, derr := hex.DecodeString(h)
	if derr != nil {
		return err
	}
	r, derr := DecodeRevertData(data)
	if derr != nil {
		return err
	}
	r.Err = err
	return r
}
