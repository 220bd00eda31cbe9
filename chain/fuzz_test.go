package chain_test

import (
	"bytes"
	"reflect"
	"testing"

	"github.com/ethereum/go-ethereum/accounts/abi/bind"
	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/core/types"

	"github.com/zooai/gym/chain"
	"github.com/zooai/gym/chain/contracts"
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

// Logs of every event of the contracts (zero-valued fields) decode;
// arbitrary bytes never panic, and what decodes names a known event.
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

// seedLogs packs a log of every event of the three contracts.
func seedLogs(f *testing.F) [][]byte {
	var out [][]byte
	for c, md := range []*bind.MetaData{contracts.GYMTokenMetaData, contracts.MiningPoolMetaData, contracts.PublicationRegistryMetaData} {
		a, err := md.GetAbi()
		if err != nil {
			f.Fatal(err)
		}
		for _, e := range a.Events {
			lg := types.Log{Address: common.Address{1 + byte(c)}, Topics: []common.Hash{e.ID}}
			var vals []any
			for _, in := range e.Inputs {
				if in.Indexed {
					lg.Topics = append(lg.Topics, common.Hash{31: 7})
				} else {
					typ := in.Type.GetType()
					v := reflect.New(typ).Elem()
					if typ.Kind() == reflect.Pointer { // *big.Int
						v = reflect.New(typ.Elem())
					}
					vals = append(vals, v.Interface())
				}
			}
			if lg.Data, err = e.Inputs.NonIndexed().Pack(vals...); err != nil {
				f.Fatalf("%s: %v", e.Name, err)
			}
			if _, err := chain.DecodeLog(fuzzAddrs, lg); err != nil {
				f.Fatalf("%s: %v", e.Name, err)
			}
			out = append(out, joinLog(lg, byte(c)))
		}
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
