package chain_test

import (
	"bytes"
	"testing"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/core/types"

	"github.com/zooai/gym/chain"
	"github.com/zooai/gym/chain/chaintest"
)

var fuzzAddrs = chain.Addresses{ChainID: 1, GYMToken: common.Address{1}, MiningPool: common.Address{2}, PublicationRegistry: common.Address{3}}

// splitLog turns fuzz bytes into a log: the first byte picks the contract
// and the number of topics, then 32-byte topics, then the data.
func splitLog(b []byte) types.Log {
	if len(b) == 0 {
		return types.Log{}
	}
	lg := types.Log{Address: common.Address{1 + b[0]%3}}
	n := int(b[0]/3) % 6
	b = b[1:]
	for i := 0; i < n && len(b) >= 32; i++ {
		lg.Topics = append(lg.Topics, common.BytesToHash(b[:32]))
		b = b[32:]
	}
	lg.Data = b
	return lg
}

func joinLog(lg types.Log, contract byte) []byte {
	out := []byte{contract + 3*byte(len(lg.Topics))}
	for _, t := range lg.Topics {
		out = append(out, t[:]...)
	}
	return append(out, lg.Data...)
}

// Real logs of every event (from a simulated run) decode; arbitrary bytes
// never panic, and what decodes names a known event of the right contract.
func FuzzDecodeLog(f *testing.F) {
	f.Add([]byte{0})
	for _, s := range seedLogs(f) {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		lg := splitLog(b)
		ev, err := chain.DecodeLog(fuzzAddrs, lg)
		if err != nil {
			return
		}
		if ev.Name == "" || ev.Fields == nil {
			t.Fatalf("decoded %+v", ev)
		}
	})
}

// seedLogs are logs of a short simulated run re-addressed to fuzzAddrs.
func seedLogs(f *testing.F) [][]byte {
	sim := chaintest.New(f, 2, delay)
	var out [][]byte
	a := sim.Deployment.Addresses
	for _, s := range sim.Deployment.Gas {
		r, err := sim.Client.B.TransactionReceipt(ctx, s.Tx)
		if err != nil {
			f.Fatal(err)
		}
		for _, lg := range r.Logs {
			if _, err := chain.DecodeLog(a, *lg); err != nil {
				f.Fatalf("%s: %v", s.What, err)
			}
			c := byte(0)
			switch lg.Address {
			case a.MiningPool:
				c = 1
			case a.PublicationRegistry:
				c = 2
			}
			out = append(out, joinLog(*lg, c))
		}
	}
	if len(out) == 0 {
		f.Fatal("the deployment logged nothing")
	}
	return out
}

func FuzzDecodeRevertData(f *testing.F) {
	f.Add([]byte{})
	f.Add(common.FromHex("0x2c5211c600000000000000000000000000000000000000000000000000000000000000010000000000000000000000000000000000000000000000000000000000000002"))
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := chain.DecodeRevertData(b)
		if err == nil && r.Name == "" {
			t.Fatal("decoded an error without a name")
		}
	})
}

func FuzzParseAddresses(f *testing.F) {
	var buf bytes.Buffer
	buf.WriteString(`{"chain_id":36900,"gym_token":"0x0000000000000000000000000000000000000001","mining_pool":"0x0000000000000000000000000000000000000002","publication_registry":"0x0000000000000000000000000000000000000003","orchestrator":"0x0000000000000000000000000000000000000004","deploy_block":7}`)
	f.Add(buf.Bytes())
	f.Fuzz(func(t *testing.T, b []byte) {
		a, err := chain.ParseAddresses(b)
		if err != nil {
			return
		}
		if a.ChainID == 0 || a.GYMToken == (common.Address{}) {
			t.Fatalf("accepted %+v", a)
		}
	})
}
