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

// PublicationRegistryPublication is an auto generated low-level Go binding around an user-defined struct.
type PublicationRegistryPublication struct {
	Cid        string
	WeightsCid string
	HubRepo    string
	Signer     [32]byte
	Signature  []byte
	Recorder   common.Address
	RecordedAt uint64
}

// PublicationRegistryMetaData contains all meta data concerning the PublicationRegistry contract.
var PublicationRegistryMetaData = &bind.MetaData{
	ABI: "[{\"inputs\":[{\"internalType\":\"contractGYMToken\",\"name\":\"token_\",\"type\":\"address\"}],\"stateMutability\":\"nonpayable\",\"type\":\"constructor\"},{\"inputs\":[{\"internalType\":\"bytes32\",\"name\":\"job\",\"type\":\"bytes32\"},{\"internalType\":\"uint64\",\"name\":\"epoch\",\"type\":\"uint64\"}],\"name\":\"AlreadyPublished\",\"type\":\"error\"},{\"inputs\":[{\"internalType\":\"uint256\",\"name\":\"length\",\"type\":\"uint256\"}],\"name\":\"BadSignatureLength\",\"type\":\"error\"},{\"inputs\":[],\"name\":\"EmptyCID\",\"type\":\"error\"},{\"inputs\":[{\"internalType\":\"address\",\"name\":\"caller\",\"type\":\"address\"}],\"name\":\"NotOrchestrator\",\"type\":\"error\"},{\"anonymous\":false,\"inputs\":[{\"indexed\":true,\"internalType\":\"bytes32\",\"name\":\"job\",\"type\":\"bytes32\"},{\"indexed\":true,\"internalType\":\"uint64\",\"name\":\"epoch\",\"type\":\"uint64\"},{\"indexed\":false,\"internalType\":\"string\",\"name\":\"cid\",\"type\":\"string\"},{\"indexed\":false,\"internalType\":\"string\",\"name\":\"weightsCid\",\"type\":\"string\"},{\"indexed\":false,\"internalType\":\"string\",\"name\":\"hubRepo\",\"type\":\"string\"},{\"indexed\":false,\"internalType\":\"bytes32\",\"name\":\"signer\",\"type\":\"bytes32\"},{\"indexed\":false,\"internalType\":\"bytes\",\"name\":\"signature\",\"type\":\"bytes\"}],\"name\":\"PublicationRecorded\",\"type\":\"event\"},{\"inputs\":[{\"internalType\":\"bytes32\",\"name\":\"job\",\"type\":\"bytes32\"},{\"internalType\":\"uint64\",\"name\":\"epoch\",\"type\":\"uint64\"}],\"name\":\"publication\",\"outputs\":[{\"components\":[{\"internalType\":\"string\",\"name\":\"cid\",\"type\":\"string\"},{\"internalType\":\"string\",\"name\":\"weightsCid\",\"type\":\"string\"},{\"internalType\":\"string\",\"name\":\"hubRepo\",\"type\":\"string\"},{\"internalType\":\"bytes32\",\"name\":\"signer\",\"type\":\"bytes32\"},{\"internalType\":\"bytes\",\"name\":\"signature\",\"type\":\"bytes\"},{\"internalType\":\"address\",\"name\":\"recorder\",\"type\":\"address\"},{\"internalType\":\"uint64\",\"name\":\"recordedAt\",\"type\":\"uint64\"}],\"internalType\":\"structPublicationRegistry.Publication\",\"name\":\"\",\"type\":\"tuple\"}],\"stateMutability\":\"view\",\"type\":\"function\"},{\"inputs\":[{\"internalType\":\"bytes32\",\"name\":\"job\",\"type\":\"bytes32\"},{\"internalType\":\"uint64\",\"name\":\"epoch\",\"type\":\"uint64\"},{\"internalType\":\"string\",\"name\":\"cid\",\"type\":\"string\"},{\"internalType\":\"string\",\"name\":\"weightsCid\",\"type\":\"string\"},{\"internalType\":\"string\",\"name\":\"hubRepo\",\"type\":\"string\"},{\"internalType\":\"bytes32\",\"name\":\"signer\",\"type\":\"bytes32\"},{\"internalType\":\"bytes\",\"name\":\"signature\",\"type\":\"bytes\"}],\"name\":\"recordPublication\",\"outputs\":[],\"stateMutability\":\"nonpayable\",\"type\":\"function\"},{\"inputs\":[],\"name\":\"token\",\"outputs\":[{\"internalType\":\"contractGYMToken\",\"name\":\"\",\"type\":\"address\"}],\"stateMutability\":\"view\",\"type\":\"function\"}]",
	Bin: "0x60a0604052348015600e575f5ffd5b50604051610af7380380610af7833981016040819052602b91603b565b6001600160a01b03166080526066565b5f60208284031215604a575f5ffd5b81516001600160a01b0381168114605f575f5ffd5b9392505050565b608051610a746100835f395f81816086015260d50152610a745ff3fe608060405234801561000f575f5ffd5b506004361061003f575f3560e01c80631e62240414610043578063f1c2938e14610058578063fc0c546a14610081575b5f5ffd5b61005661005136600461063c565b6100c0565b005b61006b61006636600461072b565b6102e9565b6040516100789190610783565b60405180910390f35b6100a87f000000000000000000000000000000000000000000000000000000000000000081565b6040516001600160a01b039091168152602001610078565b60405163d701dcbd60e01b81523360048201527f00000000000000000000000000000000000000000000000000000000000000006001600160a01b03169063d701dcbd90602401602060405180830381865afa158015610122573d5f5f3e3d5ffd5b505050506040513d601f19601f820116820180604052508101906101469190610839565b61016a5760405163b9057a2960e01b81523360048201526024015b60405180910390fd5b5f88900361018b5760405163063ee91d60e41b815260040160405180910390fd5b604081146101af57604051633e89287f60e11b815260048101829052602401610161565b5f8b8152602081815260408083206001600160401b038e1684529091529020805481906101db9061085f565b15905061020d57604051632bc05a2560e01b8152600481018d90526001600160401b038c166024820152604401610161565b806102198a8c836108f7565b5060018101610229888a836108f7565b50600281016102398688836108f7565b5060038101849055600481016102508385836108f7565b506005810180546001600160e01b0319163367ffffffffffffffff60a01b191617600160a01b426001600160401b039081169190910291909117909155604051908c16908d907f0581f7e64d7246ba38c2f98d22adcfb1767c6628e54514790b35770a09f560c2906102d3908e908e908e908e908e908e908e908e908e906109d8565b60405180910390a3505050505050505050505050565b6103386040518060e001604052806060815260200160608152602001606081526020015f8152602001606081526020015f6001600160a01b031681526020015f6001600160401b031681525090565b5f838152602081815260408083206001600160401b038616845290915290819020815160e081019092528054829082906103719061085f565b80601f016020809104026020016040519081016040528092919081815260200182805461039d9061085f565b80156103e85780601f106103bf576101008083540402835291602001916103e8565b820191905f5260205f20905b8154815290600101906020018083116103cb57829003601f168201915b505050505081526020016001820180546104019061085f565b80601f016020809104026020016040519081016040528092919081815260200182805461042d9061085f565b80156104785780601f1061044f57610100808354040283529160200191610478565b820191905f5260205f20905b81548152906001019060200180831161045b57829003601f168201915b505050505081526020016002820180546104919061085f565b80601f01602080910402602001604051908101604052809291908181526020018280546104bd9061085f565b80156105085780601f106104df57610100808354040283529160200191610508565b820191905f5260205f20905b8154815290600101906020018083116104eb57829003601f168201915b505050505081526020016003820154815260200160048201805461052b9061085f565b80601f01602080910402602001604051908101604052809291908181526020018280546105579061085f565b80156105a25780601f10610579576101008083540402835291602001916105a2565b820191905f5260205f20905b81548152906001019060200180831161058557829003601f168201915b5050509183525050600591909101546001600160a01b0381166020830152600160a01b90046001600160401b03166040909101529392505050565b80356001600160401b03811681146105f3575f5ffd5b919050565b5f5f83601f840112610608575f5ffd5b5081356001600160401b0381111561061e575f5ffd5b602083019150836020828501011115610635575f5ffd5b9250929050565b5f5f5f5f5f5f5f5f5f5f5f60e08c8e031215610656575f5ffd5b8b359a5061066660208d016105dd565b995060408c01356001600160401b03811115610680575f5ffd5b61068c8e828f016105f8565b909a5098505060608c01356001600160401b038111156106aa575f5ffd5b6106b68e828f016105f8565b90985096505060808c01356001600160401b038111156106d4575f5ffd5b6106e08e828f016105f8565b90965094505060a08c0135925060c08c01356001600160401b03811115610705575f5ffd5b6107118e828f016105f8565b915080935050809150509295989b509295989b9093969950565b5f5f6040838503121561073c575f5ffd5b8235915061074c602084016105dd565b90509250929050565b5f81518084528060208401602086015e5f602082860101526020601f19601f83011685010191505092915050565b602081525f825160e0602084015261079f610100840182610755565b90506020840151601f198483030160408501526107bc8282610755565b9150506040840151601f198483030160608501526107da8282610755565b915050606084015160808401526080840151601f198483030160a08501526108028282610755565b91505060018060a01b0360a08501511660c084015260c084015161083160e08501826001600160401b03169052565b509392505050565b5f60208284031215610849575f5ffd5b81518015158114610858575f5ffd5b9392505050565b600181811c9082168061087357607f821691505b60208210810361089157634e487b7160e01b5f52602260045260245ffd5b50919050565b634e487b7160e01b5f52604160045260245ffd5b601f8211156108f257805f5260205f20601f840160051c810160208510156108d05750805b601f840160051c820191505b818110156108ef575f81556001016108dc565b50505b505050565b6001600160401b0383111561090e5761090e610897565b6109228361091c835461085f565b836108ab565b5f601f841160018114610953575f851561093c5750838201355b5f19600387901b1c1916600186901b1783556108ef565b5f83815260208120601f198716915b828110156109825786850135825560209485019460019092019101610962565b508682101561099e575f1960f88860031b161c19848701351681555b505060018560011b0183555050505050565b81835281816020850137505f828201602090810191909152601f909101601f19169091010190565b60a081525f6109eb60a083018b8d6109b0565b82810360208401526109fe818a8c6109b0565b90508281036040840152610a1381888a6109b0565b90508560608401528281036080840152610a2e8185876109b0565b9c9b50505050505050505050505056fea2646970667358221220b6b79741d36693ea223f559615f6b7d924af6817e6ce6eec9a88b71c8c8683e464736f6c634300081e0033",
}

// PublicationRegistryABI is the input ABI used to generate the binding from.
// Deprecated: Use PublicationRegistryMetaData.ABI instead.
var PublicationRegistryABI = PublicationRegistryMetaData.ABI

// PublicationRegistryBin is the compiled bytecode used for deploying new contracts.
// Deprecated: Use PublicationRegistryMetaData.Bin instead.
var PublicationRegistryBin = PublicationRegistryMetaData.Bin

// DeployPublicationRegistry deploys a new Ethereum contract, binding an instance of PublicationRegistry to it.
func DeployPublicationRegistry(auth *bind.TransactOpts, backend bind.ContractBackend, token_ common.Address) (common.Address, *types.Transaction, *PublicationRegistry, error) {
	parsed, err := PublicationRegistryMetaData.GetAbi()
	if err != nil {
		return common.Address{}, nil, nil, err
	}
	if parsed == nil {
		return common.Address{}, nil, nil, errors.New("GetABI returned nil")
	}

	address, tx, contract, err := bind.DeployContract(auth, *parsed, common.FromHex(PublicationRegistryBin), backend, token_)
	if err != nil {
		return common.Address{}, nil, nil, err
	}
	return address, tx, &PublicationRegistry{PublicationRegistryCaller: PublicationRegistryCaller{contract: contract}, PublicationRegistryTransactor: PublicationRegistryTransactor{contract: contract}, PublicationRegistryFilterer: PublicationRegistryFilterer{contract: contract}}, nil
}

// PublicationRegistry is an auto generated Go binding around an Ethereum contract.
type PublicationRegistry struct {
	PublicationRegistryCaller     // Read-only binding to the contract
	PublicationRegistryTransactor // Write-only binding to the contract
	PublicationRegistryFilterer   // Log filterer for contract events
}

// PublicationRegistryCaller is an auto generated read-only Go binding around an Ethereum contract.
type PublicationRegistryCaller struct {
	contract *bind.BoundContract // Generic contract wrapper for the low level calls
}

// PublicationRegistryTransactor is an auto generated write-only Go binding around an Ethereum contract.
type PublicationRegistryTransactor struct {
	contract *bind.BoundContract // Generic contract wrapper for the low level calls
}

// PublicationRegistryFilterer is an auto generated log filtering Go binding around an Ethereum contract events.
type PublicationRegistryFilterer struct {
	contract *bind.BoundContract // Generic contract wrapper for the low level calls
}

// PublicationRegistrySession is an auto generated Go binding around an Ethereum contract,
// with pre-set call and transact options.
type PublicationRegistrySession struct {
	Contract     *PublicationRegistry // Generic contract binding to set the session for
	CallOpts     bind.CallOpts        // Call options to use throughout this session
	TransactOpts bind.TransactOpts    // Transaction auth options to use throughout this session
}

// PublicationRegistryCallerSession is an auto generated read-only Go binding around an Ethereum contract,
// with pre-set call options.
type PublicationRegistryCallerSession struct {
	Contract *PublicationRegistryCaller // Generic contract caller binding to set the session for
	CallOpts bind.CallOpts              // Call options to use throughout this session
}

// PublicationRegistryTransactorSession is an auto generated write-only Go binding around an Ethereum contract,
// with pre-set transact options.
type PublicationRegistryTransactorSession struct {
	Contract     *PublicationRegistryTransactor // Generic contract transactor binding to set the session for
	TransactOpts bind.TransactOpts              // Transaction auth options to use throughout this session
}

// PublicationRegistryRaw is an auto generated low-level Go binding around an Ethereum contract.
type PublicationRegistryRaw struct {
	Contract *PublicationRegistry // Generic contract binding to access the raw methods on
}

// PublicationRegistryCallerRaw is an auto generated low-level read-only Go binding around an Ethereum contract.
type PublicationRegistryCallerRaw struct {
	Contract *PublicationRegistryCaller // Generic read-only contract binding to access the raw methods on
}

// PublicationRegistryTransactorRaw is an auto generated low-level write-only Go binding around an Ethereum contract.
type PublicationRegistryTransactorRaw struct {
	Contract *PublicationRegistryTransactor // Generic write-only contract binding to access the raw methods on
}

// NewPublicationRegistry creates a new instance of PublicationRegistry, bound to a specific deployed contract.
func NewPublicationRegistry(address common.Address, backend bind.ContractBackend) (*PublicationRegistry, error) {
	contract, err := bindPublicationRegistry(address, backend, backend, backend)
	if err != nil {
		return nil, err
	}
	return &PublicationRegistry{PublicationRegistryCaller: PublicationRegistryCaller{contract: contract}, PublicationRegistryTransactor: PublicationRegistryTransactor{contract: contract}, PublicationRegistryFilterer: PublicationRegistryFilterer{contract: contract}}, nil
}

// NewPublicationRegistryCaller creates a new read-only instance of PublicationRegistry, bound to a specific deployed contract.
func NewPublicationRegistryCaller(address common.Address, caller bind.ContractCaller) (*PublicationRegistryCaller, error) {
	contract, err := bindPublicationRegistry(address, caller, nil, nil)
	if err != nil {
		return nil, err
	}
	return &PublicationRegistryCaller{contract: contract}, nil
}

// NewPublicationRegistryTransactor creates a new write-only instance of PublicationRegistry, bound to a specific deployed contract.
func NewPublicationRegistryTransactor(address common.Address, transactor bind.ContractTransactor) (*PublicationRegistryTransactor, error) {
	contract, err := bindPublicationRegistry(address, nil, transactor, nil)
	if err != nil {
		return nil, err
	}
	return &PublicationRegistryTransactor{contract: contract}, nil
}

// NewPublicationRegistryFilterer creates a new log filterer instance of PublicationRegistry, bound to a specific deployed contract.
func NewPublicationRegistryFilterer(address common.Address, filterer bind.ContractFilterer) (*PublicationRegistryFilterer, error) {
	contract, err := bindPublicationRegistry(address, nil, nil, filterer)
	if err != nil {
		return nil, err
	}
	return &PublicationRegistryFilterer{contract: contract}, nil
}

// bindPublicationRegistry binds a generic wrapper to an already deployed contract.
func bindPublicationRegistry(address common.Address, caller bind.ContractCaller, transactor bind.ContractTransactor, filterer bind.ContractFilterer) (*bind.BoundContract, error) {
	parsed, err := PublicationRegistryMetaData.GetAbi()
	if err != nil {
		return nil, err
	}
	return bind.NewBoundContract(address, *parsed, caller, transactor, filterer), nil
}

// Call invokes the (constant) contract method with params as input values and
// sets the output to result. The result type might be a single field for simple
// returns, a slice of interfaces for anonymous returns and a struct for named
// returns.
func (_PublicationRegistry *PublicationRegistryRaw) Call(opts *bind.CallOpts, result *[]interface{}, method string, params ...interface{}) error {
	return _PublicationRegistry.Contract.PublicationRegistryCaller.contract.Call(opts, result, method, params...)
}

// Transfer initiates a plain transaction to move funds to the contract, calling
// its default method if one is available.
func (_PublicationRegistry *PublicationRegistryRaw) Transfer(opts *bind.TransactOpts) (*types.Transaction, error) {
	return _PublicationRegistry.Contract.PublicationRegistryTransactor.contract.Transfer(opts)
}

// Transact invokes the (paid) contract method with params as input values.
func (_PublicationRegistry *PublicationRegistryRaw) Transact(opts *bind.TransactOpts, method string, params ...interface{}) (*types.Transaction, error) {
	return _PublicationRegistry.Contract.PublicationRegistryTransactor.contract.Transact(opts, method, params...)
}

// Call invokes the (constant) contract method with params as input values and
// sets the output to result. The result type might be a single field for simple
// returns, a slice of interfaces for anonymous returns and a struct for named
// returns.
func (_PublicationRegistry *PublicationRegistryCallerRaw) Call(opts *bind.CallOpts, result *[]interface{}, method string, params ...interface{}) error {
	return _PublicationRegistry.Contract.contract.Call(opts, result, method, params...)
}

// Transfer initiates a plain transaction to move funds to the contract, calling
// its default method if one is available.
func (_PublicationRegistry *PublicationRegistryTransactorRaw) Transfer(opts *bind.TransactOpts) (*types.Transaction, error) {
	return _PublicationRegistry.Contract.contract.Transfer(opts)
}

// Transact invokes the (paid) contract method with params as input values.
func (_PublicationRegistry *PublicationRegistryTransactorRaw) Transact(opts *bind.TransactOpts, method string, params ...interface{}) (*types.Transaction, error) {
	return _PublicationRegistry.Contract.contract.Transact(opts, method, params...)
}

// Publication is a free data retrieval call binding the contract method 0xf1c2938e.
//
// Solidity: function publication(bytes32 job, uint64 epoch) view returns((string,string,string,bytes32,bytes,address,uint64))
func (_PublicationRegistry *PublicationRegistryCaller) Publication(opts *bind.CallOpts, job [32]byte, epoch uint64) (PublicationRegistryPublication, error) {
	var out []interface{}
	err := _PublicationRegistry.contract.Call(opts, &out, "publication", job, epoch)

	if err != nil {
		return *new(PublicationRegistryPublication), err
	}

	out0 := *abi.ConvertType(out[0], new(PublicationRegistryPublication)).(*PublicationRegistryPublication)

	return out0, err

}

// Publication is a free data retrieval call binding the contract method 0xf1c2938e.
//
// Solidity: function publication(bytes32 job, uint64 epoch) view returns((string,string,string,bytes32,bytes,address,uint64))
func (_PublicationRegistry *PublicationRegistrySession) Publication(job [32]byte, epoch uint64) (PublicationRegistryPublication, error) {
	return _PublicationRegistry.Contract.Publication(&_PublicationRegistry.CallOpts, job, epoch)
}

// Publication is a free data retrieval call binding the contract method 0xf1c2938e.
//
// Solidity: function publication(bytes32 job, uint64 epoch) view returns((string,string,string,bytes32,bytes,address,uint64))
func (_PublicationRegistry *PublicationRegistryCallerSession) Publication(job [32]byte, epoch uint64) (PublicationRegistryPublication, error) {
	return _PublicationRegistry.Contract.Publication(&_PublicationRegistry.CallOpts, job, epoch)
}

// Token is a free data retrieval call binding the contract method 0xfc0c546a.
//
// Solidity: function token() view returns(address)
func (_PublicationRegistry *PublicationRegistryCaller) Token(opts *bind.CallOpts) (common.Address, error) {
	var out []interface{}
	err := _PublicationRegistry.contract.Call(opts, &out, "token")

	if err != nil {
		return *new(common.Address), err
	}

	out0 := *abi.ConvertType(out[0], new(common.Address)).(*common.Address)

	return out0, err

}

// Token is a free data retrieval call binding the contract method 0xfc0c546a.
//
// Solidity: function token() view returns(address)
func (_PublicationRegistry *PublicationRegistrySession) Token() (common.Address, error) {
	return _PublicationRegistry.Contract.Token(&_PublicationRegistry.CallOpts)
}

// Token is a free data retrieval call binding the contract method 0xfc0c546a.
//
// Solidity: function token() view returns(address)
func (_PublicationRegistry *PublicationRegistryCallerSession) Token() (common.Address, error) {
	return _PublicationRegistry.Contract.Token(&_PublicationRegistry.CallOpts)
}

// RecordPublication is a paid mutator transaction binding the contract method 0x1e622404.
//
// Solidity: function recordPublication(bytes32 job, uint64 epoch, string cid, string weightsCid, string hubRepo, bytes32 signer, bytes signature) returns()
func (_PublicationRegistry *PublicationRegistryTransactor) RecordPublication(opts *bind.TransactOpts, job [32]byte, epoch uint64, cid string, weightsCid string, hubRepo string, signer [32]byte, signature []byte) (*types.Transaction, error) {
	return _PublicationRegistry.contract.Transact(opts, "recordPublication", job, epoch, cid, weightsCid, hubRepo, signer, signature)
}

// RecordPublication is a paid mutator transaction binding the contract method 0x1e622404.
//
// Solidity: function recordPublication(bytes32 job, uint64 epoch, string cid, string weightsCid, string hubRepo, bytes32 signer, bytes signature) returns()
func (_PublicationRegistry *PublicationRegistrySession) RecordPublication(job [32]byte, epoch uint64, cid string, weightsCid string, hubRepo string, signer [32]byte, signature []byte) (*types.Transaction, error) {
	return _PublicationRegistry.Contract.RecordPublication(&_PublicationRegistry.TransactOpts, job, epoch, cid, weightsCid, hubRepo, signer, signature)
}

// RecordPublication is a paid mutator transaction binding the contract method 0x1e622404.
//
// Solidity: function recordPublication(bytes32 job, uint64 epoch, string cid, string weightsCid, string hubRepo, bytes32 signer, bytes signature) returns()
func (_PublicationRegistry *PublicationRegistryTransactorSession) RecordPublication(job [32]byte, epoch uint64, cid string, weightsCid string, hubRepo string, signer [32]byte, signature []byte) (*types.Transaction, error) {
	return _PublicationRegistry.Contract.RecordPublication(&_PublicationRegistry.TransactOpts, job, epoch, cid, weightsCid, hubRepo, signer, signature)
}

// PublicationRegistryPublicationRecordedIterator is returned from FilterPublicationRecorded and is used to iterate over the raw logs and unpacked data for PublicationRecorded events raised by the PublicationRegistry contract.
type PublicationRegistryPublicationRecordedIterator struct {
	Event *PublicationRegistryPublicationRecorded // Event containing the contract specifics and raw log

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
func (it *PublicationRegistryPublicationRecordedIterator) Next() bool {
	// If the iterator failed, stop iterating
	if it.fail != nil {
		return false
	}
	// If the iterator completed, deliver directly whatever's available
	if it.done {
		select {
		case log := <-it.logs:
			it.Event = new(PublicationRegistryPublicationRecorded)
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
		it.Event = new(PublicationRegistryPublicationRecorded)
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
func (it *PublicationRegistryPublicationRecordedIterator) Error() error {
	return it.fail
}

// Close terminates the iteration process, releasing any pending underlying
// resources.
func (it *PublicationRegistryPublicationRecordedIterator) Close() error {
	it.sub.Unsubscribe()
	return nil
}

// PublicationRegistryPublicationRecorded represents a PublicationRecorded event raised by the PublicationRegistry contract.
type PublicationRegistryPublicationRecorded struct {
	Job        [32]byte
	Epoch      uint64
	Cid        string
	WeightsCid string
	HubRepo    string
	Signer     [32]byte
	Signature  []byte
	Raw        types.Log // Blockchain specific contextual infos
}

// FilterPublicationRecorded is a free log retrieval operation binding the contract event 0x0581f7e64d7246ba38c2f98d22adcfb1767c6628e54514790b35770a09f560c2.
//
// Solidity: event PublicationRecorded(bytes32 indexed job, uint64 indexed epoch, string cid, string weightsCid, string hubRepo, bytes32 signer, bytes signature)
func (_PublicationRegistry *PublicationRegistryFilterer) FilterPublicationRecorded(opts *bind.FilterOpts, job [][32]byte, epoch []uint64) (*PublicationRegistryPublicationRecordedIterator, error) {

	var jobRule []interface{}
	for _, jobItem := range job {
		jobRule = append(jobRule, jobItem)
	}
	var epochRule []interface{}
	for _, epochItem := range epoch {
		epochRule = append(epochRule, epochItem)
	}

	logs, sub, err := _PublicationRegistry.contract.FilterLogs(opts, "PublicationRecorded", jobRule, epochRule)
	if err != nil {
		return nil, err
	}
	return &PublicationRegistryPublicationRecordedIterator{contract: _PublicationRegistry.contract, event: "PublicationRecorded", logs: logs, sub: sub}, nil
}

// WatchPublicationRecorded is a free log subscription operation binding the contract event 0x0581f7e64d7246ba38c2f98d22adcfb1767c6628e54514790b35770a09f560c2.
//
// Solidity: event PublicationRecorded(bytes32 indexed job, uint64 indexed epoch, string cid, string weightsCid, string hubRepo, bytes32 signer, bytes signature)
func (_PublicationRegistry *PublicationRegistryFilterer) WatchPublicationRecorded(opts *bind.WatchOpts, sink chan<- *PublicationRegistryPublicationRecorded, job [][32]byte, epoch []uint64) (event.Subscription, error) {

	var jobRule []interface{}
	for _, jobItem := range job {
		jobRule = append(jobRule, jobItem)
	}
	var epochRule []interface{}
	for _, epochItem := range epoch {
		epochRule = append(epochRule, epochItem)
	}

	logs, sub, err := _PublicationRegistry.contract.WatchLogs(opts, "PublicationRecorded", jobRule, epochRule)
	if err != nil {
		return nil, err
	}
	return event.NewSubscription(func(quit <-chan struct{}) error {
		defer sub.Unsubscribe()
		for {
			select {
			case log := <-logs:
				// New log arrived, parse the event and forward to the user
				event := new(PublicationRegistryPublicationRecorded)
				if err := _PublicationRegistry.contract.UnpackLog(event, "PublicationRecorded", log); err != nil {
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

// ParsePublicationRecorded is a log parse operation binding the contract event 0x0581f7e64d7246ba38c2f98d22adcfb1767c6628e54514790b35770a09f560c2.
//
// Solidity: event PublicationRecorded(bytes32 indexed job, uint64 indexed epoch, string cid, string weightsCid, string hubRepo, bytes32 signer, bytes signature)
func (_PublicationRegistry *PublicationRegistryFilterer) ParsePublicationRecorded(log types.Log) (*PublicationRegistryPublicationRecorded, error) {
	event := new(PublicationRegistryPublicationRecorded)
	if err := _PublicationRegistry.contract.UnpackLog(event, "PublicationRecorded", log); err != nil {
		return nil, err
	}
	event.Raw = log
	return event, nil
}
