package chaintest_test

import (
	"crypto/ed25519"
	"fmt"
	"math/big"
	"strings"
	"testing"

	"github.com/ethereum/go-ethereum/accounts/abi/bind"
	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/core/types"
	"github.com/ethereum/go-ethereum/crypto"

	"github.com/zooai/gym/chain"
	"github.com/zooai/gym/chain/chaintest"
)

// TestGas measures the gas of every call on the simulated backend (the
// figures in docs/chain.md: go test -run TestGas -v ./chain) and checks
// that an epoch's payment stays linear in the workers and far below a
// block.
func TestGas(t *testing.T) {
	for _, fork := range chaintest.Forks {
		name := fork
		if name == "" {
			name = "dev"
		}
		t.Run(name, func(t *testing.T) { gas(t, fork) })
	}
}

func gas(t *testing.T, fork string) {
	e := newEnvFork(t, 2+128, fork)
	var rows []string
	row := func(what string, gas uint64) { rows = append(rows, fmt.Sprintf("| %s | %d |", what, gas)) }
	for _, s := range e.Deployment.Gas {
		row(s.What, s.Gas)
	}
	k := e.Keys[1]
	a := chain.Address(k)
	e.mint(t, a, 100_000*gym)
	row("mint (to an empty account)", e.tx(t, e.Keys[0], func(o *bind.TransactOpts) (*types.Transaction, error) {
		return e.tok.Mint(o, a, big.NewInt(gym))
	}).GasUsed)
	row("stake (first)", e.tx(t, k, e.stake(chain.RoleNode, 20_000*gym)).GasUsed)
	row("stake (top-up)", e.tx(t, k, e.stake(chain.RoleNode, 20_000*gym)).GasUsed)
	row("unbond", e.tx(t, k, e.unbond(10_000*gym)).GasUsed)
	e.Advance(t, delay)
	row("withdraw (one entry)", e.tx(t, k, e.withdraw).GasUsed)
	ev := make([]byte, 200) // a slash's evidence: job, epoch, slot, hashes
	for i, pct := range []uint8{5, 25, 100} {
		row(fmt.Sprintf("slash (offence %d, %d%%, 200-byte evidence)", i+1, pct), e.tx(t, e.Keys[0], func(o *bind.TransactOpts) (*types.Transaction, error) {
			return e.tok.Slash(o, a, pct, chain.Address(e.Keys[0]), ev)
		}).GasUsed)
	}
	pub, priv, _ := ed25519.GenerateKey(nil)
	row("recordPublication (CIDv1 ×2, Hub repo, signature)", e.tx(t, e.Keys[0], func(o *bind.TransactOpts) (*types.Transaction, error) {
		return e.reg.RecordPublication(o, chain.JobKey("job-1"), 1, "bafybeigdyrzt5sfp7udm7hu76uh7y26nf3efuylqabf3oclgtqy55fbzdi",
			"bafkreihdwdcefgh4dqkjv67uzcmw7ojee6xedzdetojuzjevtenxquvyku", "zooai/gym-qwen3-2507-gspo", [32]byte(pub), ed25519.Sign(priv, []byte("r")))
	}).GasUsed)

	e.mint(t, e.Deployment.Addresses.MiningPool, 1_000_000*gym)
	// Ring members are staked nodes: lock them.
	var staked []common.Address
	for _, k := range e.Keys[2:] {
		ka := chain.Address(k)
		e.mint(t, ka, 10_000*gym)
		e.tx(t, k, e.stake(chain.RoleNode, 10_000*gym))
		staked = append(staked, ka)
	}
	perWorker := map[int]uint64{}
	for _, n := range []int{4, 32, 128} {
		workers := make([]common.Address, n)
		amounts := make([]*big.Int, n)
		for i := range workers {
			workers[i] = crypto.CreateAddress(common.Address{byte(n)}, uint64(i)) // fresh accounts
			amounts[i] = big.NewInt(int64(100*gym/n + i))
		}
		members := staked[:n]
		if fork == "" && n == 128 {
			// Bogota's price of new storage puts 128 lock slots above the
			// per-transaction cap (2^24 gas): lock in batches of at most 32
			// on such a chain.
			row("lock (128 members): over the cap, not sent", 0)
		} else {
			lock := e.tx(t, e.Keys[0], func(o *bind.TransactOpts) (*types.Transaction, error) {
				return e.tok.Lock(o, chain.JobKey(fmt.Sprint("job-", n)), members)
			}).GasUsed
			row(fmt.Sprintf("lock (%d staked members)", n), lock)
			row(fmt.Sprintf("unlock (%d staked members)", n), e.tx(t, e.Keys[0], func(o *bind.TransactOpts) (*types.Transaction, error) {
				return e.tok.Unlock(o, chain.JobKey(fmt.Sprint("job-", n)), members)
			}).GasUsed)
		}
		for epoch := uint64(1); epoch <= 2; epoch++ {
			g := e.tx(t, e.Keys[0], func(o *bind.TransactOpts) (*types.Transaction, error) {
				return e.pool.DistributeEpochRewards(o, chain.JobKey(fmt.Sprint("job-", n)), epoch, workers, amounts)
			}).GasUsed
			what := "first payment of each worker"
			if epoch == 2 {
				what = "workers paid before"
				perWorker[n] = g / uint64(n)
			}
			row(fmt.Sprintf("distributeEpochRewards (%d workers, %s)", n, what), g)
			if g > 1<<24 {
				t.Errorf("%d workers: %d gas, over the 2^24 per-transaction cap", n, g)
			}
		}
	}
	if perWorker[128] > perWorker[4] {
		t.Errorf("gas per worker grows with the ring: %v", perWorker)
	}
	t.Logf("gas used (simulated backend, go-ethereum %s, %s rules):\n| call | gas |\n|---|---|\n%s", "v1.17.10", t.Name(), strings.Join(rows, "\n"))
}
