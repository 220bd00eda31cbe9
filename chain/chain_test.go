package chain_test

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/crypto"

	"github.com/zooai/gym/chain"
	"github.com/zooai/gym/chain/contracts"
)

// Every custom error of the committed ABIs decodes by name with its
// arguments; unknown selectors and short data are errors.
func TestDecodeRevert(t *testing.T) {
	a, err := contracts.MiningPoolMetaData.GetAbi()
	if err != nil {
		t.Fatal(err)
	}
	e := a.Errors["EpochAlreadyPaid"]
	job := chain.JobKey("job-1")
	args, err := e.Inputs.Pack(job, uint64(7))
	if err != nil {
		t.Fatal(err)
	}
	r, err := chain.DecodeRevertData(append(e.ID[:4:4], args...))
	if err != nil || r.Name != "EpochAlreadyPaid" || r.Args[0].([32]byte) != job || r.Args[1].(uint64) != 7 {
		t.Fatalf("decoded %+v, %v", r, err)
	}
	if !strings.Contains(r.Error(), "EpochAlreadyPaid(") {
		t.Fatal(r.Error())
	}
	for _, bad := range [][]byte{nil, {1, 2, 3}, {0xde, 0xad, 0xbe, 0xef}, e.ID[:4]} {
		if _, err := chain.DecodeRevertData(bad); err == nil {
			t.Fatalf("decoded %x", bad)
		}
	}
}

func TestAddressesFile(t *testing.T) {
	a := chain.Addresses{ChainID: 36900, GYMToken: common.Address{1}, MiningPool: common.Address{2},
		PublicationRegistry: common.Address{3}, Orchestrator: common.Address{4}, DeployBlock: 9}
	p := filepath.Join(t.TempDir(), "contracts.json")
	if err := chain.WriteAddresses(p, a); err != nil {
		t.Fatal(err)
	}
	got, err := chain.ReadAddresses(p)
	if err != nil || got != a {
		t.Fatalf("read back %+v, %v", got, err)
	}
	for _, bad := range []string{
		`{}`,
		`{"chain_id":1,"gym_token":"0x01","mining_pool":"0x0000000000000000000000000000000000000002","publication_registry":"0x0000000000000000000000000000000000000003","orchestrator":"0x0000000000000000000000000000000000000004","deploy_block":1}`,
		`{"chain_id":0,"gym_token":"0x0000000000000000000000000000000000000001","mining_pool":"0x0000000000000000000000000000000000000002","publication_registry":"0x0000000000000000000000000000000000000003","orchestrator":"0x0000000000000000000000000000000000000004","deploy_block":1}`,
		`{"chain_id":1,"gym_token":"0x0000000000000000000000000000000000000001","mining_pool":"0x0000000000000000000000000000000000000002","publication_registry":"0x0000000000000000000000000000000000000003","orchestrator":"0x0000000000000000000000000000000000000004","deploy_block":1,"extra":1}`,
	} {
		if _, err := chain.ParseAddresses([]byte(bad)); err == nil {
			t.Fatalf("accepted %s", bad)
		}
	}
	if chain.JobKey("x") != crypto.Keccak256Hash([]byte("x")) {
		t.Fatal("JobKey is not keccak256")
	}
}
