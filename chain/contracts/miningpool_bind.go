// Code generated - DO NOT EDIT.
// This file is a generated binding and any manual changes will be lost.

package contracts

import (
	"context"
	"errors"
	"math/big"
	"strings"
	"time"

	ethereum "github.com/ethereum/go-ethereum"
	"github.com/ethereum/go-ethereum/accounts/abi"
	"github.com/ethereum/go-ethereum/accounts/abi/bind"
	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/core/types"
	"github.com/ethereum/go-ethereum/event"
)

// Reference imports to suppress errors if they are not otherwise used.
var (
	_ = errors.New
	_ = big.NewInt
	_ = strings.NewReader
	_ = ethereum.NotFound
	_ = bind.Bind
	_ = common.Big1
	_ = types.BloomLookup
	_ = event.NewSubscription
	_ = abi.ConvertType
	_ = time.Tick
	_ = context.Background
)

// MiningPoolMetaData contains all meta data concerning the MiningPool contract.
var MiningPoolMetaData = &bind.MetaData{
	ABI: "[{\"inputs\":[{\"internalType\":\"contractGYMToken\",\"name\":\"token_\",\"type\":\"address\"}],\"stateMutability\":\"nonpayable\",\"type\":\"constructor\"},{\"inputs\":[{\"internalType\":\"bytes32\",\"name\":\"job\",\"type\":\"bytes32\"},{\"internalType\":\"uint64\",\"name\":\"epoch\",\"type\":\"uint64\"}],\"name\":\"EpochAlreadyPaid\",\"type\":\"error\"},{\"inputs\":[{\"internalType\":\"uint256\",\"name\":\"workers\",\"type\":\"uint256\"},{\"internalType\":\"uint256\",\"name\":\"amounts\",\"type\":\"uint256\"}],\"name\":\"LengthMismatch\",\"type\":\"error\"},{\"inputs\":[{\"internalType\":\"address\",\"name\":\"caller\",\"type\":\"address\"}],\"name\":\"NotOrchestrator\",\"type\":\"error\"},{\"inputs\":[{\"internalType\":\"uint256\",\"name\":\"needed\",\"type\":\"uint256\"},{\"internalType\":\"uint256\",\"name\":\"balance\",\"type\":\"uint256\"}],\"name\":\"PoolUnderfunded\",\"type\":\"error\"},{\"inputs\":[{\"internalType\":\"address\",\"name\":\"token\",\"type\":\"address\"}],\"name\":\"SafeERC20FailedOperation\",\"type\":\"error\"},{\"inputs\":[{\"internalType\":\"uint256\",\"name\":\"index\",\"type\":\"uint256\"}],\"name\":\"ZeroAddress\",\"type\":\"error\"},{\"anonymous\":false,\"inputs\":[{\"indexed\":true,\"internalType\":\"bytes32\",\"name\":\"job\",\"type\":\"bytes32\"},{\"indexed\":true,\"internalType\":\"uint64\",\"name\":\"epoch\",\"type\":\"uint64\"},{\"indexed\":false,\"internalType\":\"uint256\",\"name\":\"workers\",\"type\":\"uint256\"},{\"indexed\":false,\"internalType\":\"uint256\",\"name\":\"total\",\"type\":\"uint256\"}],\"name\":\"EpochRewardsDistributed\",\"type\":\"event\"},{\"inputs\":[],\"name\":\"balance\",\"outputs\":[{\"internalType\":\"uint256\",\"name\":\"\",\"type\":\"uint256\"}],\"stateMutability\":\"view\",\"type\":\"function\"},{\"inputs\":[{\"internalType\":\"bytes32\",\"name\":\"job\",\"type\":\"bytes32\"},{\"internalType\":\"uint64\",\"name\":\"epoch\",\"type\":\"uint64\"},{\"internalType\":\"address[]\",\"name\":\"workers\",\"type\":\"address[]\"},{\"internalType\":\"uint256[]\",\"name\":\"amounts\",\"type\":\"uint256[]\"}],\"name\":\"distributeEpochRewards\",\"outputs\":[],\"stateMutability\":\"nonpayable\",\"type\":\"function\"},{\"inputs\":[{\"internalType\":\"bytes32\",\"name\":\"\",\"type\":\"bytes32\"},{\"internalType\":\"uint64\",\"name\":\"\",\"type\":\"uint64\"}],\"name\":\"paid\",\"outputs\":[{\"internalType\":\"bool\",\"name\":\"\",\"type\":\"bool\"}],\"stateMutability\":\"view\",\"type\":\"function\"},{\"inputs\":[],\"name\":\"token\",\"outputs\":[{\"internalType\":\"contractGYMToken\",\"name\":\"\",\"type\":\"address\"}],\"stateMutability\":\"view\",\"type\":\"function\"}]",
	Bin: "0x60a060405234801561000f575f5ffd5b5060405161083f38038061083f83398101604081905261002e9161003f565b6001600160a01b031660805261006c565b5f6020828403121561004f575f5ffd5b81516001600160a01b0381168114610065575f5ffd5b9392505050565b6080516107a061009f5f395f818160bd0152818161010e01528181610199015281816102fe01526103c901526107a05ff3fe608060405234801561000f575f5ffd5b506004361061004a575f3560e01c8063286e7f701461004e578063b69ef8a81461008d578063c61a57dd146100a3578063fc0c546a146100b8575b5f5ffd5b61007861005c3660046105d3565b5f60208181529281526040808220909352908152205460ff1681565b60405190151581526020015b60405180910390f35b6100956100f7565b604051908152602001610084565b6100b66100b1366004610645565b610184565b005b6100df7f000000000000000000000000000000000000000000000000000000000000000081565b6040516001600160a01b039091168152602001610084565b6040516370a0823160e01b81523060048201525f907f00000000000000000000000000000000000000000000000000000000000000006001600160a01b0316906370a0823190602401602060405180830381865afa15801561015b573d5f5f3e3d5ffd5b505050506040513d601f19601f8201168201806040525081019061017f91906106ce565b905090565b60405163d701dcbd60e01b81523360048201527f00000000000000000000000000000000000000000000000000000000000000006001600160a01b03169063d701dcbd90602401602060405180830381865afa1580156101e6573d5f5f3e3d5ffd5b505050506040513d601f19601f8201168201806040525081019061020a91906106e5565b61022e5760405163b9057a2960e01b81523360048201526024015b60405180910390fd5b5f8681526020818152604080832067ffffffffffffffff8916845290915290205460ff16156102835760405163423dd5cf60e11b81526004810187905267ffffffffffffffff86166024820152604401610225565b8281146102ad576040516355c5b3e360e11b81526004810184905260248101829052604401610225565b5f805b828110156102e6578383828181106102ca576102ca61070b565b90506020020135826102dc919061071f565b91506001016102b0565b506040516370a0823160e01b81523060048201525f907f00000000000000000000000000000000000000000000000000000000000000006001600160a01b0316906370a0823190602401602060405180830381865afa15801561034b573d5f5f3e3d5ffd5b505050506040513d601f19601f8201168201806040525081019061036f91906106ce565b90508082111561039c576040516366b3e1c760e11b81526004810183905260248101829052604401610225565b5f8881526020818152604080832067ffffffffffffffff8b1684529091528120805460ff191660011790557f0000000000000000000000000000000000000000000000000000000000000000905b868110156104c8575f8888838181106104055761040561070b565b905060200201602081019061041a9190610744565b6001600160a01b031603610444576040516337bc03e960e11b815260048101829052602401610225565b5f8686838181106104575761045761070b565b9050602002013511156104c0576104c08888838181106104795761047961070b565b905060200201602081019061048e9190610744565b8787848181106104a0576104a061070b565b90506020020135846001600160a01b031661051b9092919063ffffffff16565b6001016103ea565b50604080518781526020810185905267ffffffffffffffff8a16918b917fdb3549315410ee70283c1d02a1e83df6d08210684ab52a9b3b7e71bd9fdfaedd910160405180910390a3505050505050505050565b6105288383836001610555565b61055057604051635274afe760e01b81526001600160a01b0384166004820152602401610225565b505050565b60405163a9059cbb60e01b5f8181526001600160a01b038616600452602485905291602083604481808b5af1925060015f511483166105ab57838315161561059f573d5f823e3d81fd5b5f873b113d1516831692505b60405250949350505050565b803567ffffffffffffffff811681146105ce575f5ffd5b919050565b5f5f604083850312156105e4575f5ffd5b823591506105f4602084016105b7565b90509250929050565b5f5f83601f84011261060d575f5ffd5b50813567ffffffffffffffff811115610624575f5ffd5b6020830191508360208260051b850101111561063e575f5ffd5b9250929050565b5f5f5f5f5f5f6080878903121561065a575f5ffd5b8635955061066a602088016105b7565b9450604087013567ffffffffffffffff811115610685575f5ffd5b61069189828a016105fd565b909550935050606087013567ffffffffffffffff8111156106b0575f5ffd5b6106bc89828a016105fd565b979a9699509497509295939492505050565b5f602082840312156106de575f5ffd5b5051919050565b5f602082840312156106f5575f5ffd5b81518015158114610704575f5ffd5b9392505050565b634e487b7160e01b5f52603260045260245ffd5b8082018082111561073e57634e487b7160e01b5f52601160045260245ffd5b92915050565b5f60208284031215610754575f5ffd5b81356001600160a01b0381168114610704575f5ffdfea2646970667358221220e7da568c0fb506ea07db3fa6084311717b990d27210615341b08afed4d0f8ae064736f6c634300081e0033",
}

// MiningPoolABI is the input ABI used to generate the binding from.
// Deprecated: Use MiningPoolMetaData.ABI instead.
var MiningPoolABI = MiningPoolMetaData.ABI

// MiningPoolBin is the compiled bytecode used for deploying new contracts.
// Deprecated: Use MiningPoolMetaData.Bin instead.
var MiningPoolBin = MiningPoolMetaData.Bin

// DeployMiningPool deploys a new Ethereum contract, binding an instance of MiningPool to it.
func DeployMiningPool(auth *bind.TransactOpts, backend bind.ContractBackend, token_ common.Address) (common.Address, *types.Transaction, *MiningPool, error) {
	parsed, err := MiningPoolMetaData.GetAbi()
	if err != nil {
		return common.Address{}, nil, nil, err
	}
	if parsed == nil {
		return common.Address{}, nil, nil, errors.New("GetABI returned nil")
	}

	address, tx, contract, err := bind.DeployContract(auth, *parsed, common.FromHex(MiningPoolBin), backend, token_)
	if err != nil {
		return common.Address{}, nil, nil, err
	}
	return address, tx, &MiningPool{MiningPoolCaller: MiningPoolCaller{contract: contract}, MiningPoolTransactor: MiningPoolTransactor{contract: contract}, MiningPoolFilterer: MiningPoolFilterer{contract: contract}}, nil
}

// MiningPool is an auto generated Go binding around an Ethereum contract.
type MiningPool struct {
	MiningPoolCaller     // Read-only binding to the contract
	MiningPoolTransactor // Write-only binding to the contract
	MiningPoolFilterer   // Log filterer for contract events
}

// MiningPoolCaller is an auto generated read-only Go binding around an Ethereum contract.
type MiningPoolCaller struct {
	contract *bind.BoundContract // Generic contract wrapper for the low level calls
}

// MiningPoolTransactor is an auto generated write-only Go binding around an Ethereum contract.
type MiningPoolTransactor struct {
	contract *bind.BoundContract // Generic contract wrapper for the low level calls
}

// MiningPoolFilterer is an auto generated log filtering Go binding around an Ethereum contract events.
type MiningPoolFilterer struct {
	contract *bind.BoundContract // Generic contract wrapper for the low level calls
}

// MiningPoolSession is an auto generated Go binding around an Ethereum contract,
// with pre-set call and transact options.
type MiningPoolSession struct {
	Contract     *MiningPool       // Generic contract binding to set the session for
	CallOpts     bind.CallOpts     // Call options to use throughout this session
	TransactOpts bind.TransactOpts // Transaction auth options to use throughout this session
}

// MiningPoolCallerSession is an auto generated read-only Go binding around an Ethereum contract,
// with pre-set call options.
type MiningPoolCallerSession struct {
	Contract *MiningPoolCaller // Generic contract caller binding to set the session for
	CallOpts bind.CallOpts     // Call options to use throughout this session
}

// MiningPoolTransactorSession is an auto generated write-only Go binding around an Ethereum contract,
// with pre-set transact options.
type MiningPoolTransactorSession struct {
	Contract     *MiningPoolTransactor // Generic contract transactor binding to set the session for
	TransactOpts bind.TransactOpts     // Transaction auth options to use throughout this session
}

// MiningPoolRaw is an auto generated low-level Go binding around an Ethereum contract.
type MiningPoolRaw struct {
	Contract *MiningPool // Generic contract binding to access the raw methods on
}

// MiningPoolCallerRaw is an auto generated low-level read-only Go binding around an Ethereum contract.
type MiningPoolCallerRaw struct {
	Contract *MiningPoolCaller // Generic read-only contract binding to access the raw methods on
}

// MiningPoolTransactorRaw is an auto generated low-level write-only Go binding around an Ethereum contract.
type MiningPoolTransactorRaw struct {
	Contract *MiningPoolTransactor // Generic write-only contract binding to access the raw methods on
}

// NewMiningPool creates a new instance of MiningPool, bound to a specific deployed contract.
func NewMiningPool(address common.Address, backend bind.ContractBackend) (*MiningPool, error) {
	contract, err := bindMiningPool(address, backend, backend, backend)
	if err != nil {
		return nil, err
	}
	return &MiningPool{MiningPoolCaller: MiningPoolCaller{contract: contract}, MiningPoolTransactor: MiningPoolTransactor{contract: contract}, MiningPoolFilterer: MiningPoolFilterer{contract: contract}}, nil
}

// NewMiningPoolCaller creates a new read-only instance of MiningPool, bound to a specific deployed contract.
func NewMiningPoolCaller(address common.Address, caller bind.ContractCaller) (*MiningPoolCaller, error) {
	contract, err := bindMiningPool(address, caller, nil, nil)
	if err != nil {
		return nil, err
	}
	return &MiningPoolCaller{contract: contract}, nil
}

// NewMiningPoolTransactor creates a new write-only instance of MiningPool, bound to a specific deployed contract.
func NewMiningPoolTransactor(address common.Address, transactor bind.ContractTransactor) (*MiningPoolTransactor, error) {
	contract, err := bindMiningPool(address, nil, transactor, nil)
	if err != nil {
		return nil, err
	}
	return &MiningPoolTransactor{contract: contract}, nil
}

// NewMiningPoolFilterer creates a new log filterer instance of MiningPool, bound to a specific deployed contract.
func NewMiningPoolFilterer(address common.Address, filterer bind.ContractFilterer) (*MiningPoolFilterer, error) {
	contract, err := bindMiningPool(address, nil, nil, filterer)
	if err != nil {
		return nil, err
	}
	return &MiningPoolFilterer{contract: contract}, nil
}

// bindMiningPool binds a generic wrapper to an already deployed contract.
func bindMiningPool(address common.Address, caller bind.ContractCaller, transactor bind.ContractTransactor, filterer bind.ContractFilterer) (*bind.BoundContract, error) {
	parsed, err := MiningPoolMetaData.GetAbi()
	if err != nil {
		return nil, err
	}
	return bind.NewBoundContract(address, *parsed, caller, transactor, filterer), nil
}

// Call invokes the (constant) contract method with params as input values and
// sets the output to result. The result type might be a single field for simple
// returns, a slice of interfaces for anonymous returns and a struct for named
// returns.
func (_MiningPool *MiningPoolRaw) Call(opts *bind.CallOpts, result *[]interface{}, method string, params ...interface{}) error {
	return _MiningPool.Contract.MiningPoolCaller.contract.Call(opts, result, method, params...)
}

// Transfer initiates a plain transaction to move funds to the contract, calling
// its default method if one is available.
func (_MiningPool *MiningPoolRaw) Transfer(opts *bind.TransactOpts) (*types.Transaction, error) {
	return _MiningPool.Contract.MiningPoolTransactor.contract.Transfer(opts)
}

// Transact invokes the (paid) contract method with params as input values.
func (_MiningPool *MiningPoolRaw) Transact(opts *bind.TransactOpts, method string, params ...interface{}) (*types.Transaction, error) {
	return _MiningPool.Contract.MiningPoolTransactor.contract.Transact(opts, method, params...)
}

// Call invokes the (constant) contract method with params as input values and
// sets the output to result. The result type might be a single field for simple
// returns, a slice of interfaces for anonymous returns and a struct for named
// returns.
func (_MiningPool *MiningPoolCallerRaw) Call(opts *bind.CallOpts, result *[]interface{}, method string, params ...interface{}) error {
	return _MiningPool.Contract.contract.Call(opts, result, method, params...)
}

// Transfer initiates a plain transaction to move funds to the contract, calling
// its default method if one is available.
func (_MiningPool *MiningPoolTransactorRaw) Transfer(opts *bind.TransactOpts) (*types.Transaction, error) {
	return _MiningPool.Contract.contract.Transfer(opts)
}

// Transact invokes the (paid) contract method with params as input values.
func (_MiningPool *MiningPoolTransactorRaw) Transact(opts *bind.TransactOpts, method string, params ...interface{}) (*types.Transaction, error) {
	return _MiningPool.Contract.contract.Transact(opts, method, params...)
}

// Balance is a free data retrieval call binding the contract method 0xb69ef8a8.
//
// Solidity: function balance() view returns(uint256)
func (_MiningPool *MiningPoolCaller) Balance(opts *bind.CallOpts) (*big.Int, error) {
	var out []interface{}
	err := _MiningPool.contract.Call(opts, &out, "balance")

	if err != nil {
		return *new(*big.Int), err
	}

	out0 := *abi.ConvertType(out[0], new(*big.Int)).(**big.Int)

	return out0, err

}

// Balance is a free data retrieval call binding the contract method 0xb69ef8a8.
//
// Solidity: function balance() view returns(uint256)
func (_MiningPool *MiningPoolSession) Balance() (*big.Int, error) {
	return _MiningPool.Contract.Balance(&_MiningPool.CallOpts)
}

// Balance is a free data retrieval call binding the contract method 0xb69ef8a8.
//
// Solidity: function balance() view returns(uint256)
func (_MiningPool *MiningPoolCallerSession) Balance() (*big.Int, error) {
	return _MiningPool.Contract.Balance(&_MiningPool.CallOpts)
}

// Paid is a free data retrieval call binding the contract method 0x286e7f70.
//
// Solidity: function paid(bytes32 , uint64 ) view returns(bool)
func (_MiningPool *MiningPoolCaller) Paid(opts *bind.CallOpts, arg0 [32]byte, arg1 uint64) (bool, error) {
	var out []interface{}
	err := _MiningPool.contract.Call(opts, &out, "paid", arg0, arg1)

	if err != nil {
		return *new(bool), err
	}

	out0 := *abi.ConvertType(out[0], new(bool)).(*bool)

	return out0, err

}

// Paid is a free data retrieval call binding the contract method 0x286e7f70.
//
// Solidity: function paid(bytes32 , uint64 ) view returns(bool)
func (_MiningPool *MiningPoolSession) Paid(arg0 [32]byte, arg1 uint64) (bool, error) {
	return _MiningPool.Contract.Paid(&_MiningPool.CallOpts, arg0, arg1)
}

// Paid is a free data retrieval call binding the contract method 0x286e7f70.
//
// Solidity: function paid(bytes32 , uint64 ) view returns(bool)
func (_MiningPool *MiningPoolCallerSession) Paid(arg0 [32]byte, arg1 uint64) (bool, error) {
	return _MiningPool.Contract.Paid(&_MiningPool.CallOpts, arg0, arg1)
}

// Token is a free data retrieval call binding the contract method 0xfc0c546a.
//
// Solidity: function token() view returns(address)
func (_MiningPool *MiningPoolCaller) Token(opts *bind.CallOpts) (common.Address, error) {
	var out []interface{}
	err := _MiningPool.contract.Call(opts, &out, "token")

	if err != nil {
		return *new(common.Address), err
	}

	out0 := *abi.ConvertType(out[0], new(common.Address)).(*common.Address)

	return out0, err

}

// Token is a free data retrieval call binding the contract method 0xfc0c546a.
//
// Solidity: function token() view returns(address)
func (_MiningPool *MiningPoolSession) Token() (common.Address, error) {
	return _MiningPool.Contract.Token(&_MiningPool.CallOpts)
}

// Token is a free data retrieval call binding the contract method 0xfc0c546a.
//
// Solidity: function token() view returns(address)
func (_MiningPool *MiningPoolCallerSession) Token() (common.Address, error) {
	return _MiningPool.Contract.Token(&_MiningPool.CallOpts)
}

// DistributeEpochRewards is a paid mutator transaction binding the contract method 0xc61a57dd.
//
// Solidity: function distributeEpochRewards(bytes32 job, uint64 epoch, address[] workers, uint256[] amounts) returns()
func (_MiningPool *MiningPoolTransactor) DistributeEpochRewards(opts *bind.TransactOpts, job [32]byte, epoch uint64, workers []common.Address, amounts []*big.Int) (*types.Transaction, error) {
	return _MiningPool.contract.Transact(opts, "distributeEpochRewards", job, epoch, workers, amounts)
}

// DistributeEpochRewards is a paid mutator transaction binding the contract method 0xc61a57dd.
//
// Solidity: function distributeEpochRewards(bytes32 job, uint64 epoch, address[] workers, uint256[] amounts) returns()
func (_MiningPool *MiningPoolSession) DistributeEpochRewards(job [32]byte, epoch uint64, workers []common.Address, amounts []*big.Int) (*types.Transaction, error) {
	return _MiningPool.Contract.DistributeEpochRewards(&_MiningPool.TransactOpts, job, epoch, workers, amounts)
}

// DistributeEpochRewards is a paid mutator transaction binding the contract method 0xc61a57dd.
//
// Solidity: function distributeEpochRewards(bytes32 job, uint64 epoch, address[] workers, uint256[] amounts) returns()
func (_MiningPool *MiningPoolTransactorSession) DistributeEpochRewards(job [32]byte, epoch uint64, workers []common.Address, amounts []*big.Int) (*types.Transaction, error) {
	return _MiningPool.Contract.DistributeEpochRewards(&_MiningPool.TransactOpts, job, epoch, workers, amounts)
}

// MiningPoolEpochRewardsDistributedIterator is returned from FilterEpochRewardsDistributed and is used to iterate over the raw logs and unpacked data for EpochRewardsDistributed events raised by the MiningPool contract.
type MiningPoolEpochRewardsDistributedIterator struct {
	Event *MiningPoolEpochRewardsDistributed // Event containing the contract specifics and raw log

	contract *bind.BoundContract // Generic contract to use for unpacking event data
	event    string              // Event name to use for unpacking event data

	logs chan types.Log        // Log channel receiving the found contract events
	sub  ethereum.Subscription // Subscription for errors, completion and termination
	done bool                  // Whether the subscription completed delivering logs
	fail error                 // Occurred error to stop iteration
}

// Next advances the iterator to the subsequent event, returning whether there
// are any more events found. In case of a retrieval or parsing error, false is
// returned and Error() can be queried for the exact failure.
func (it *MiningPoolEpochRewardsDistributedIterator) Next() bool {
	// If the iterator failed, stop iterating
	if it.fail != nil {
		return false
	}
	// If the iterator completed, deliver directly whatever's available
	if it.done {
		select {
		case log := <-it.logs:
			it.Event = new(MiningPoolEpochRewardsDistributed)
			if err := it.contract.UnpackLog(it.Event, it.event, log); err != nil {
				it.fail = err
				return false
			}
			it.Event.Raw = log
			return true

		default:
			return false
		}
	}
	// Iterator still in progress, wait for either a data or an error event
	select {
	case log := <-it.logs:
		it.Event = new(MiningPoolEpochRewardsDistributed)
		if err := it.contract.UnpackLog(it.Event, it.event, log); err != nil {
			it.fail = err
			return false
		}
		it.Event.Raw = log
		return true

	case err := <-it.sub.Err():
		it.done = true
		it.fail = err
		return it.Next()
	}
}

// Error returns any retrieval or parsing error occurred during filtering.
func (it *MiningPoolEpochRewardsDistributedIterator) Error() error {
	return it.fail
}

// Close terminates the iteration process, releasing any pending underlying
// resources.
func (it *MiningPoolEpochRewardsDistributedIterator) Close() error {
	it.sub.Unsubscribe()
	return nil
}

// MiningPoolEpochRewardsDistributed represents a EpochRewardsDistributed event raised by the MiningPool contract.
type MiningPoolEpochRewardsDistributed struct {
	Job     [32]byte
	Epoch   uint64
	Workers *big.Int
	Total   *big.Int
	Raw     types.Log // Blockchain specific contextual infos
}

// FilterEpochRewardsDistributed is a free log retrieval operation binding the contract event 0xdb3549315410ee70283c1d02a1e83df6d08210684ab52a9b3b7e71bd9fdfaedd.
//
// Solidity: event EpochRewardsDistributed(bytes32 indexed job, uint64 indexed epoch, uint256 workers, uint256 total)
func (_MiningPool *MiningPoolFilterer) FilterEpochRewardsDistributed(opts *bind.FilterOpts, job [][32]byte, epoch []uint64) (*MiningPoolEpochRewardsDistributedIterator, error) {

	var jobRule []interface{}
	for _, jobItem := range job {
		jobRule = append(jobRule, jobItem)
	}
	var epochRule []interface{}
	for _, epochItem := range epoch {
		epochRule = append(epochRule, epochItem)
	}

	logs, sub, err := _MiningPool.contract.FilterLogs(opts, "EpochRewardsDistributed", jobRule, epochRule)
	if err != nil {
		return nil, err
	}
	return &MiningPoolEpochRewardsDistributedIterator{contract: _MiningPool.contract, event: "EpochRewardsDistributed", logs: logs, sub: sub}, nil
}

// WatchEpochRewardsDistributed is a free log subscription operation binding the contract event 0xdb3549315410ee70283c1d02a1e83df6d08210684ab52a9b3b7e71bd9fdfaedd.
//
// Solidity: event EpochRewardsDistributed(bytes32 indexed job, uint64 indexed epoch, uint256 workers, uint256 total)
func (_MiningPool *MiningPoolFilterer) WatchEpochRewardsDistributed(opts *bind.WatchOpts, sink chan<- *MiningPoolEpochRewardsDistributed, job [][32]byte, epoch []uint64) (event.Subscription, error) {

	var jobRule []interface{}
	for _, jobItem := range job {
		jobRule = append(jobRule, jobItem)
	}
	var epochRule []interface{}
	for _, epochItem := range epoch {
		epochRule = append(epochRule, epochItem)
	}

	logs, sub, err := _MiningPool.contract.WatchLogs(opts, "EpochRewardsDistributed", jobRule, epochRule)
	if err != nil {
		return nil, err
	}
	return event.NewSubscription(func(quit <-chan struct{}) error {
		defer sub.Unsubscribe()
		for {
			select {
			case log := <-logs:
				// New log arrived, parse the event and forward to the user
				event := new(MiningPoolEpochRewardsDistributed)
				if err := _MiningPool.contract.UnpackLog(event, "EpochRewardsDistributed", log); err != nil {
					// If the signature doesn't match, skip this log.
					if errors.Is(err, bind.ErrEventSignatureMismatch) {
						continue
					}
					return err
				}
				event.Raw = log

				select {
				case sink <- event:
				case err := <-sub.Err():
					return err
				case <-quit:
					return nil
				}
			case err := <-sub.Err():
				return err
			case <-quit:
				return nil
			}
		}
	}), nil
}

// ParseEpochRewardsDistributed is a log parse operation binding the contract event 0xdb3549315410ee70283c1d02a1e83df6d08210684ab52a9b3b7e71bd9fdfaedd.
//
// Solidity: event EpochRewardsDistributed(bytes32 indexed job, uint64 indexed epoch, uint256 workers, uint256 total)
func (_MiningPool *MiningPoolFilterer) ParseEpochRewardsDistributed(log types.Log) (*MiningPoolEpochRewardsDistributed, error) {
	event := new(MiningPoolEpochRewardsDistributed)
	if err := _MiningPool.contract.UnpackLog(event, "EpochRewardsDistributed", log); err != nil {
		return nil, err
	}
	event.Raw = log
	return event, nil
}
