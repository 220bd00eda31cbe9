package main

import (
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/zooai/gym/devnet/localchain"
)

// TestUpLedgerEVM runs gym up --ledger evm with a signflip attacker (worker
// processes, geth --dev): the summary's chain section, read back from the
// chain, shows the workers' stake, a payment per epoch, the attacker's
// slash and a publication record per checkpoint.
func TestUpLedgerEVM(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end run")
	}
	bin, err := localchain.FindGeth("")
	if errors.Is(err, localchain.ErrNoGeth) && os.Getenv("GYM_REQUIRE_GETH") != "1" {
		t.Skip(err.Error())
	}
	if err != nil {
		t.Fatal(err)
	}
	s, _, r := upRunJSON(t, "--ledger", "evm", "--geth", bin, "--byzantine", "1", "--attack", "signflip")
	if r.code != 0 || s.Status != "published" || s.Chain == nil {
		t.Fatalf("exit %d, status %q (%s), chain %v\nstderr:\n%s", r.code, s.Status, s.Reason, s.Chain, r.stderr)
	}
	c := s.Chain
	if len(c.Epochs) != 2 || len(c.Publications) != 2 || len(c.Nodes) != 4 {
		t.Fatalf("on chain: %d payments, %d publications, %d nodes", len(c.Epochs), len(c.Publications), len(c.Nodes))
	}
	for i, n := range c.Nodes {
		if n.ID != s.Nodes[i].ID {
			t.Fatalf("chain node %d is %s, want %s", i, n.ID, s.Nodes[i].ID)
		}
		if i < 3 && (len(n.Slashes) != 0 || n.Stake != 10_000 || n.Balance <= 0) {
			t.Errorf("honest %+v", n)
		}
	}
	if bad := c.Nodes[3]; len(bad.Slashes) == 0 || bad.Stake >= 10_000 || bad.Balance != 0 {
		t.Errorf("attacker on chain %+v", bad)
	}
	for i, p := range c.Publications {
		if p.CID != s.Epochs[i].CID {
			t.Errorf("epoch %d recorded %s, published %s", i+1, p.CID, s.Epochs[i].CID)
		}
	}
	if !strings.Contains(r.stderr, "chain: contracts deployed") {
		t.Errorf("no chain progress line:\n%s", r.stderr)
	}
}
