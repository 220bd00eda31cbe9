package main

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ethereum/go-ethereum/crypto"

	"github.com/zooai/gym/chain"
	"github.com/zooai/gym/chain/chaintest"
	"github.com/zooai/gym/keys/nodekey"
	"github.com/zooai/gym/orchestrator/ledger"
)

// gym chain deploy against a dev chain over JSON-RPC, then reading the
// contracts back.
func TestChainDeploy(t *testing.T) {
	dir := t.TempDir()
	keyFile := filepath.Join(dir, "deployer.key")
	k, err := crypto.GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	if err := crypto.SaveECDSA(keyFile, k); err != nil {
		t.Fatal(err)
	}
	url := chaintest.NewRPC(t, k)
	out := filepath.Join(dir, "contracts.json")
	r := gym(t, "chain", "deploy", "--rpc", url, "--chain-id", "36900", "--key", keyFile, "--out", out)
	if r.code == 0 || !strings.Contains(r.stderr, "1337") {
		t.Fatalf("deploy to the wrong chain id: exit %d\n%s", r.code, r.stderr)
	}
	r = gym(t, "chain", "deploy", "--rpc", url, "--chain-id", "1337", "--key", keyFile, "--out", out, "--pool-funds", "1000", "--unbonding", "1h")
	if r.code != 0 {
		t.Fatalf("deploy: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	for _, step := range []string{"deploy GYMToken", "stake orchestrator", "fund MiningPool"} {
		if !strings.Contains(r.stderr, step) {
			t.Fatalf("deploy did not report %q:\n%s", step, r.stderr)
		}
	}
	a, err := chain.ReadAddresses(out)
	if err != nil {
		t.Fatal(err)
	}
	if a.ChainID != 1337 || a.Orchestrator != chain.Address(k) {
		t.Fatalf("addresses %+v", a)
	}
	bal := mustGym(t, "chain", "balance", "--rpc", url, "--chain-id", "1337", "--contracts", out, "--json", a.Orchestrator.Hex())
	var p ledger.Position
	if err := json.Unmarshal([]byte(bal), &p); err != nil {
		t.Fatal(err)
	}
	if p.Bonded != 50_000*ledger.GYM || p.Role != ledger.RoleOrchestrator {
		t.Fatalf("orchestrator position %+v", p)
	}
	if tr := mustGym(t, "chain", "balance", "--rpc", url, "--chain-id", "1337", "--contracts", out, "treasury"); !strings.Contains(tr, "1000.000000 GYM\n") {
		t.Fatalf("treasury: %s", tr)
	}
	if r := gym(t, "chain", "publication", "--rpc", url, "--chain-id", "1337", "--contracts", out, "job-1", "1"); r.code == 0 {
		t.Fatal("a publication that was never recorded was found")
	}

	// A node binds the account; its id then reads the account's position,
	// through gym chain balance and gym ledger balance --chain.
	nk, err := nodekey.Generate(nil)
	if err != nil {
		t.Fatal(err)
	}
	nkFile := filepath.Join(dir, "node.key")
	if err := nodekey.Save(nkFile, nk, false); err != nil {
		t.Fatal(err)
	}
	id := nodekey.PublicHex(nk)
	if r := gym(t, "chain", "balance", "--rpc", url, "--chain-id", "1337", "--contracts", out, id); r.code == 0 || !strings.Contains(r.stderr, "gym chain bind") {
		t.Fatalf("balance of an unbound node: exit %d\n%s", r.code, r.stderr)
	}
	if b := mustGym(t, "chain", "bind", "--rpc", url, "--chain-id", "1337", "--contracts", out, "--node-key", nkFile, "--key", keyFile); !strings.Contains(b, "bound to "+a.Orchestrator.Hex()) {
		t.Fatalf("bind: %s", b)
	}
	var bound struct {
		Account string `json:"account"`
		ledger.Position
	}
	if err := json.Unmarshal([]byte(mustGym(t, "chain", "balance", "--rpc", url, "--chain-id", "1337", "--contracts", out, "--json", id)), &bound); err != nil {
		t.Fatal(err)
	}
	if bound.Account != a.Orchestrator.Hex() || bound.Bonded != 50_000*ledger.GYM {
		t.Fatalf("node's position on chain %+v", bound)
	}
	if lb := mustGym(t, "ledger", "balance", "--chain", "--rpc", url, "--chain-id", "1337", "--contracts", out, id); !strings.Contains(lb, "50000.000000 GYM as orchestrator") || !strings.Contains(lb, a.Orchestrator.Hex()) {
		t.Fatalf("gym ledger balance --chain:\n%s", lb)
	}
}
