package chaintest_test

import (
	"crypto/ed25519"
	"testing"

	"github.com/ethereum/go-ethereum/accounts/abi/bind"
	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/core/types"

	"github.com/zooai/gym/chain"
)

// A node key binds an account only with its own signature of that account
// on this chain and contract: a squatter's claim with a bad or replayed
// signature is ignored, and rebinding the account lapses the binding.
func TestNodeBinding(t *testing.T) {
	e := newEnv(t, 3)
	a := e.Deployment.Addresses
	node := ed25519.NewKeyFromSeed(make([]byte, 32))
	pub := node.Public().(ed25519.PublicKey)
	var key [32]byte
	copy(key[:], pub)
	lookup := func() (common.Address, bool) {
		t.Helper()
		acct, ok, err := chain.NodeAccount(ctx, e.Client.B, a, pub)
		must(t, err)
		return acct, ok
	}
	if _, ok := lookup(); ok {
		t.Fatal("bound before any binding")
	}
	bindWith := func(sig []byte) func(*bind.TransactOpts) (*types.Transaction, error) {
		return func(o *bind.TransactOpts) (*types.Transaction, error) { return e.tok.BindNode(o, key, sig) }
	}
	// A squatter claims the key with a signature it cannot make.
	e.tx(t, e.Keys[2], bindWith(make([]byte, 64)))
	if _, ok := lookup(); ok {
		t.Fatal("a claim with a bad signature was trusted")
	}
	e.reverts(t, "BadNodeBinding", e.Keys[2], bindWith(make([]byte, 63)))
	e.reverts(t, "BadNodeBinding", e.Keys[2], func(o *bind.TransactOpts) (*types.Transaction, error) {
		return e.tok.BindNode(o, [32]byte{}, make([]byte, 64))
	})
	// The node binds Keys[1].
	r, err := chain.BindNode(ctx, e.Client, a, e.Keys[1], node)
	must(t, err)
	t.Logf("bindNode: %d gas", r.GasUsed)
	if acct, ok := lookup(); !ok || acct != chain.Address(e.Keys[1]) {
		t.Fatalf("bound to %s %v, want %s", acct, ok, chain.Address(e.Keys[1]))
	}
	// The squatter replays that signature for its own account: it signs
	// Keys[1]'s address, not the squatter's.
	sig := ed25519.Sign(node, chain.NodeBindingMessage(a.ChainID, a.GYMToken, chain.Address(e.Keys[1])))
	e.tx(t, e.Keys[2], bindWith(sig))
	if acct, _ := lookup(); acct != chain.Address(e.Keys[1]) {
		t.Fatalf("a replayed signature moved the binding to %s", acct)
	}
	// A signature for another chain or contract does not verify.
	other := ed25519.Sign(node, chain.NodeBindingMessage(a.ChainID+1, a.GYMToken, chain.Address(e.Keys[2])))
	e.tx(t, e.Keys[2], bindWith(other))
	if acct, _ := lookup(); acct != chain.Address(e.Keys[1]) {
		t.Fatalf("another chain's signature moved the binding to %s", acct)
	}
	// Keys[1] binds another node key: the first binding lapses.
	_, err = chain.BindNode(ctx, e.Client, a, e.Keys[1], ed25519.NewKeyFromSeed(append(make([]byte, 31), 1)))
	must(t, err)
	if acct, ok := lookup(); ok {
		t.Fatalf("still bound to %s after the account rebound", acct)
	}
	if k, err := e.tok.NodeKeyOf(nil, chain.Address(e.Keys[1])); err != nil || k == key {
		t.Fatalf("nodeKeyOf %x %v", k, err)
	}
}
