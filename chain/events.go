package chain

import (
	"fmt"
	"sync"

	"github.com/ethereum/go-ethereum/accounts/abi"
	"github.com/ethereum/go-ethereum/accounts/abi/bind"
	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/core/types"

	"github.com/zooai/gym/chain/contracts"
)

// Event is one decoded log of the contracts.
type Event struct {
	Contract string // GYMToken, MiningPool or PublicationRegistry
	Name     string
	Fields   map[string]any
	Block    uint64
	Tx       common.Hash
}

// maxLogData bounds the data of a log DecodeLog decodes (a publication
// record is well under 2 KiB).
const maxLogData = 16 << 10

type eventABI struct {
	contract string
	a        *abi.ABI
	ev       abi.Event
}

var (
	eventsOnce sync.Once
	eventsByID map[common.Hash][]eventABI
)

func knownEvents() map[common.Hash][]eventABI {
	eventsOnce.Do(func() {
		eventsByID = map[common.Hash][]eventABI{}
		for name, md := range map[string]*bind.MetaData{"GYMToken": contracts.GYMTokenMetaData, "MiningPool": contracts.MiningPoolMetaData,
			"PublicationRegistry": contracts.PublicationRegistryMetaData} {
			a, err := md.GetAbi()
			if err != nil {
				panic(err)
			}
			for _, e := range a.Events {
				eventsByID[e.ID] = append(eventsByID[e.ID], eventABI{name, a, e})
			}
		}
	})
	return eventsByID
}

// DecodeLog decodes a log of one of the contracts at addrs (its address
// tells which); logs of other addresses and unknown events are errors.
func DecodeLog(addrs Addresses, lg types.Log) (Event, error) {
	var contract string
	switch lg.Address {
	case addrs.GYMToken:
		contract = "GYMToken"
	case addrs.MiningPool:
		contract = "MiningPool"
	case addrs.PublicationRegistry:
		contract = "PublicationRegistry"
	default:
		return Event{}, fmt.Errorf("chain: log of %s, not one of the contracts", lg.Address)
	}
	if len(lg.Topics) == 0 || len(lg.Topics) > 4 {
		return Event{}, fmt.Errorf("chain: log with %d topics", len(lg.Topics))
	}
	if len(lg.Data) > maxLogData {
		return Event{}, fmt.Errorf("chain: log data of %d bytes (at most %d)", len(lg.Data), maxLogData)
	}
	for _, e := range knownEvents()[lg.Topics[0]] {
		if e.contract != contract {
			continue
		}
		var indexed abi.Arguments
		for _, in := range e.ev.Inputs {
			if in.Indexed {
				indexed = append(indexed, in)
			}
		}
		if len(lg.Topics) != 1+len(indexed) {
			return Event{}, fmt.Errorf("chain: %s.%s with %d topics, want %d", contract, e.ev.Name, len(lg.Topics), 1+len(indexed))
		}
		fields := map[string]any{}
		if len(lg.Data) > 0 || len(e.ev.Inputs.NonIndexed()) > 0 {
			if err := e.a.UnpackIntoMap(fields, e.ev.Name, lg.Data); err != nil {
				return Event{}, fmt.Errorf("chain: %s.%s: %w", contract, e.ev.Name, err)
			}
		}
		if err := abi.ParseTopicsIntoMap(fields, indexed, lg.Topics[1:]); err != nil {
			return Event{}, fmt.Errorf("chain: %s.%s topics: %w", contract, e.ev.Name, err)
		}
		return Event{Contract: contract, Name: e.ev.Name, Fields: fields, Block: lg.BlockNumber, Tx: lg.TxHash}, nil
	}
	return Event{}, fmt.Errorf("chain: unknown event %s of %s", lg.Topics[0], contract)
}
