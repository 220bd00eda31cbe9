package chain

import (
	"context"
	"crypto/ecdsa"
	"crypto/ed25519"
	"encoding/binary"
	"fmt"

	"github.com/ethereum/go-ethereum/accounts/abi/bind"
	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/core/types"

	"github.com/zooai/gym/chain/contracts"
)

// nodeBindingDomain starts the message a node key signs to bind an
// Ethereum account.
const nodeBindingDomain = "zoo-gym node binding v1"

// NodeBindingMessage is what a node's Ed25519 key signs to bind account:
// the domain, the chain id (8 bytes, big-endian), the GYMToken contract
// and the account (20 bytes each). The chain id and the contract keep a
// binding from being replayed on another chain or deployment.
func NodeBindingMessage(chainID uint64, token, account common.Address) []byte {
	m := make([]byte, 0, len(nodeBindingDomain)+8+40)
	m = append(m, nodeBindingDomain...)
	m = binary.BigEndian.AppendUint64(m, chainID)
	m = append(m, token[:]...)
	return append(m, account[:]...)
}

// BindNode binds ethKey's account to node's Ed25519 key on chain: the node
// key signs NodeBindingMessage, the account sends GYMToken.bindNode with
// the signature.
func BindNode(ctx context.Context, c *Client, addrs Addresses, ethKey *ecdsa.PrivateKey, node ed25519.PrivateKey) (*types.Receipt, error) {
	tok, err := contracts.NewGYMToken(addrs.GYMToken, c.B)
	if err != nil {
		return nil, err
	}
	var pub [32]byte
	copy(pub[:], node.Public().(ed25519.PublicKey))
	sig := ed25519.Sign(node, NodeBindingMessage(c.ChainID.Uint64(), addrs.GYMToken, Address(ethKey)))
	return c.Transact(ctx, ethKey, func(o *bind.TransactOpts) (*types.Transaction, error) { return tok.BindNode(o, pub, sig) })
}

// NodeAccount finds the account bound to node's Ed25519 public key: among
// the GYMToken.NodeBound logs of the key (since the deployment), the latest
// whose signature verifies (NodeBindingMessage) and whose account still
// binds the key (nodeKeyOf). Claims with a bad signature — anyone can send
// one — are ignored. ok is false when there is no valid binding.
func NodeAccount(ctx context.Context, b Backend, addrs Addresses, node ed25519.PublicKey) (account common.Address, ok bool, err error) {
	if len(node) != ed25519.PublicKeySize {
		return common.Address{}, false, fmt.Errorf("chain: node key of %d bytes", len(node))
	}
	tok, err := contracts.NewGYMToken(addrs.GYMToken, b)
	if err != nil {
		return common.Address{}, false, err
	}
	var pub [32]byte
	copy(pub[:], node)
	it, err := tok.FilterNodeBound(&bind.FilterOpts{Start: addrs.DeployBlock, Context: ctx}, [][32]byte{pub}, nil)
	if err != nil {
		return common.Address{}, false, fmt.Errorf("chain: node bindings: %w", err)
	}
	defer it.Close()
	var valid []common.Address
	for it.Next() {
		e := it.Event
		if len(e.Signature) == ed25519.SignatureSize &&
			ed25519.Verify(node, NodeBindingMessage(addrs.ChainID, addrs.GYMToken, e.Account), e.Signature) {
			valid = append(valid, e.Account)
		}
	}
	if err := it.Error(); err != nil {
		return common.Address{}, false, fmt.Errorf("chain: node bindings: %w", err)
	}
	for i := len(valid) - 1; i >= 0; i-- {
		k, err := tok.NodeKeyOf(&bind.CallOpts{Context: ctx}, valid[i])
		if err != nil {
			return common.Address{}, false, err
		}
		if k == pub {
			return valid[i], true, nil
		}
	}
	return common.Address{}, false, nil
}
