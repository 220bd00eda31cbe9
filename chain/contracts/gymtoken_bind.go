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

// GYMTokenSlashRecord is an auto generated low-level Go binding around an user-defined struct.
type GYMTokenSlashRecord struct {
	Offence      uint8
	Pct          uint8
	At           uint64
	Amount       *big.Int
	Reporter     common.Address
	EvidenceHash [32]byte
}

// GYMTokenUnbonding is an auto generated low-level Go binding around an user-defined struct.
type GYMTokenUnbonding struct {
	Amount    *big.Int
	ReleaseAt uint64
}

// GYMTokenMetaData contains all meta data concerning the GYMToken contract.
var GYMTokenMetaData = &bind.MetaData{
	ABI: "[{\"inputs\":[{\"internalType\":\"address\",\"name\":\"admin\",\"type\":\"address\"},{\"internalType\":\"uint64\",\"name\":\"unbondingDelay_\",\"type\":\"uint64\"}],\"stateMutability\":\"nonpayable\",\"type\":\"constructor\"},{\"inputs\":[],\"name\":\"AccessControlBadConfirmation\",\"type\":\"error\"},{\"inputs\":[{\"internalType\":\"address\",\"name\":\"account\",\"type\":\"address\"},{\"internalType\":\"bytes32\",\"name\":\"neededRole\",\"type\":\"bytes32\"}],\"name\":\"AccessControlUnauthorizedAccount\",\"type\":\"error\"},{\"inputs\":[{\"internalType\":\"address\",\"name\":\"account\",\"type\":\"address\"}],\"name\":\"AccountBanned\",\"type\":\"error\"},{\"inputs\":[],\"name\":\"BadNodeBinding\",\"type\":\"error\"},{\"inputs\":[{\"internalType\":\"address\",\"name\":\"spender\",\"type\":\"address\"},{\"internalType\":\"uint256\",\"name\":\"allowance\",\"type\":\"uint256\"},{\"internalType\":\"uint256\",\"name\":\"needed\",\"type\":\"uint256\"}],\"name\":\"ERC20InsufficientAllowance\",\"type\":\"error\"},{\"inputs\":[{\"internalType\":\"address\",\"name\":\"sender\",\"type\":\"address\"},{\"internalType\":\"uint256\",\"name\":\"balance\",\"type\":\"uint256\"},{\"internalType\":\"uint256\",\"name\":\"needed\",\"type\":\"uint256\"}],\"name\":\"ERC20InsufficientBalance\",\"type\":\"error\"},{\"inputs\":[{\"internalType\":\"address\",\"name\":\"approver\",\"type\":\"address\"}],\"name\":\"ERC20InvalidApprover\",\"type\":\"error\"},{\"inputs\":[{\"internalType\":\"address\",\"name\":\"receiver\",\"type\":\"address\"}],\"name\":\"ERC20InvalidReceiver\",\"type\":\"error\"},{\"inputs\":[{\"internalType\":\"address\",\"name\":\"sender\",\"type\":\"address\"}],\"name\":\"ERC20InvalidSender\",\"type\":\"error\"},{\"inputs\":[{\"internalType\":\"address\",\"name\":\"spender\",\"type\":\"address\"}],\"name\":\"ERC20InvalidSpender\",\"type\":\"error\"},{\"inputs\":[{\"internalType\":\"uint256\",\"name\":\"requested\",\"type\":\"uint256\"},{\"internalType\":\"uint256\",\"name\":\"bonded\",\"type\":\"uint256\"}],\"name\":\"InsufficientStake\",\"type\":\"error\"},{\"inputs\":[],\"name\":\"NoTreasury\",\"type\":\"error\"},{\"inputs\":[{\"internalType\":\"address\",\"name\":\"caller\",\"type\":\"address\"}],\"name\":\"NotOrchestrator\",\"type\":\"error\"},{\"inputs\":[{\"internalType\":\"address\",\"name\":\"account\",\"type\":\"address\"}],\"name\":\"NothingToSlash\",\"type\":\"error\"},{\"inputs\":[],\"name\":\"NothingToWithdraw\",\"type\":\"error\"},{\"inputs\":[{\"internalType\":\"uint8\",\"name\":\"current\",\"type\":\"uint8\"},{\"internalType\":\"uint8\",\"name\":\"requested\",\"type\":\"uint8\"}],\"name\":\"RoleMismatch\",\"type\":\"error\"},{\"inputs\":[{\"internalType\":\"uint8\",\"name\":\"bits\",\"type\":\"uint8\"},{\"internalType\":\"uint256\",\"name\":\"value\",\"type\":\"uint256\"}],\"name\":\"SafeCastOverflowedUintDowncast\",\"type\":\"error\"},{\"inputs\":[{\"internalType\":\"uint8\",\"name\":\"requested\",\"type\":\"uint8\"},{\"internalType\":\"uint8\",\"name\":\"planned\",\"type\":\"uint8\"}],\"name\":\"SlashPlanMismatch\",\"type\":\"error\"},{\"inputs\":[{\"internalType\":\"uint256\",\"name\":\"stake\",\"type\":\"uint256\"},{\"internalType\":\"uint256\",\"name\":\"minimum\",\"type\":\"uint256\"}],\"name\":\"StakeBelowMinimum\",\"type\":\"error\"},{\"inputs\":[{\"internalType\":\"address\",\"name\":\"account\",\"type\":\"address\"},{\"internalType\":\"uint32\",\"name\":\"jobs\",\"type\":\"uint32\"}],\"name\":\"StakeLocked\",\"type\":\"error\"},{\"inputs\":[{\"internalType\":\"uint8\",\"name\":\"role\",\"type\":\"uint8\"}],\"name\":\"UnknownRole\",\"type\":\"error\"},{\"inputs\":[],\"name\":\"ZeroAmount\",\"type\":\"error\"},{\"anonymous\":false,\"inputs\":[{\"indexed\":true,\"internalType\":\"address\",\"name\":\"owner\",\"type\":\"address\"},{\"indexed\":true,\"internalType\":\"address\",\"name\":\"spender\",\"type\":\"address\"},{\"indexed\":false,\"internalType\":\"uint256\",\"name\":\"value\",\"type\":\"uint256\"}],\"name\":\"Approval\",\"type\":\"event\"},{\"anonymous\":false,\"inputs\":[{\"indexed\":true,\"internalType\":\"bytes32\",\"name\":\"job\",\"type\":\"bytes32\"},{\"indexed\":true,\"internalType\":\"address\",\"name\":\"account\",\"type\":\"address\"}],\"name\":\"Locked\",\"type\":\"event\"},{\"anonymous\":false,\"inputs\":[{\"indexed\":true,\"internalType\":\"bytes32\",\"name\":\"nodeKey\",\"type\":\"bytes32\"},{\"indexed\":true,\"internalType\":\"address\",\"name\":\"account\",\"type\":\"address\"},{\"indexed\":false,\"internalType\":\"bytes\",\"name\":\"signature\",\"type\":\"bytes\"}],\"name\":\"NodeBound\",\"type\":\"event\"},{\"anonymous\":false,\"inputs\":[{\"indexed\":true,\"internalType\":\"bytes32\",\"name\":\"role\",\"type\":\"bytes32\"},{\"indexed\":true,\"internalType\":\"bytes32\",\"name\":\"previousAdminRole\",\"type\":\"bytes32\"},{\"indexed\":true,\"internalType\":\"bytes32\",\"name\":\"newAdminRole\",\"type\":\"bytes32\"}],\"name\":\"RoleAdminChanged\",\"type\":\"event\"},{\"anonymous\":false,\"inputs\":[{\"indexed\":true,\"internalType\":\"bytes32\",\"name\":\"role\",\"type\":\"bytes32\"},{\"indexed\":true,\"internalType\":\"address\",\"name\":\"account\",\"type\":\"address\"},{\"indexed\":true,\"internalType\":\"address\",\"name\":\"sender\",\"type\":\"address\"}],\"name\":\"RoleGranted\",\"type\":\"event\"},{\"anonymous\":false,\"inputs\":[{\"indexed\":true,\"internalType\":\"bytes32\",\"name\":\"role\",\"type\":\"bytes32\"},{\"indexed\":true,\"internalType\":\"address\",\"name\":\"account\",\"type\":\"address\"},{\"indexed\":true,\"internalType\":\"address\",\"name\":\"sender\",\"type\":\"address\"}],\"name\":\"RoleRevoked\",\"type\":\"event\"},{\"anonymous\":false,\"inputs\":[{\"indexed\":true,\"internalType\":\"address\",\"name\":\"node\",\"type\":\"address\"},{\"indexed\":false,\"internalType\":\"uint8\",\"name\":\"offence\",\"type\":\"uint8\"},{\"indexed\":false,\"internalType\":\"uint8\",\"name\":\"pct\",\"type\":\"uint8\"},{\"indexed\":false,\"internalType\":\"uint256\",\"name\":\"amount\",\"type\":\"uint256\"},{\"indexed\":true,\"internalType\":\"address\",\"name\":\"reporter\",\"type\":\"address\"},{\"indexed\":false,\"internalType\":\"bytes32\",\"name\":\"evidenceHash\",\"type\":\"bytes32\"},{\"indexed\":false,\"internalType\":\"bool\",\"name\":\"banned\",\"type\":\"bool\"}],\"name\":\"Slashed\",\"type\":\"event\"},{\"anonymous\":false,\"inputs\":[{\"indexed\":true,\"internalType\":\"address\",\"name\":\"account\",\"type\":\"address\"},{\"indexed\":false,\"internalType\":\"uint8\",\"name\":\"role\",\"type\":\"uint8\"},{\"indexed\":false,\"internalType\":\"uint256\",\"name\":\"amount\",\"type\":\"uint256\"},{\"indexed\":false,\"internalType\":\"uint256\",\"name\":\"total\",\"type\":\"uint256\"}],\"name\":\"Staked\",\"type\":\"event\"},{\"anonymous\":false,\"inputs\":[{\"indexed\":true,\"internalType\":\"address\",\"name\":\"from\",\"type\":\"address\"},{\"indexed\":true,\"internalType\":\"address\",\"name\":\"to\",\"type\":\"address\"},{\"indexed\":false,\"internalType\":\"uint256\",\"name\":\"value\",\"type\":\"uint256\"}],\"name\":\"Transfer\",\"type\":\"event\"},{\"anonymous\":false,\"inputs\":[{\"indexed\":false,\"internalType\":\"address\",\"name\":\"treasury\",\"type\":\"address\"}],\"name\":\"TreasuryChanged\",\"type\":\"event\"},{\"anonymous\":false,\"inputs\":[{\"indexed\":true,\"internalType\":\"address\",\"name\":\"account\",\"type\":\"address\"},{\"indexed\":false,\"internalType\":\"uint256\",\"name\":\"amount\",\"type\":\"uint256\"},{\"indexed\":false,\"internalType\":\"uint64\",\"name\":\"releaseAt\",\"type\":\"uint64\"}],\"name\":\"Unbonded\",\"type\":\"event\"},{\"anonymous\":false,\"inputs\":[{\"indexed\":true,\"internalType\":\"bytes32\",\"name\":\"job\",\"type\":\"bytes32\"},{\"indexed\":true,\"internalType\":\"address\",\"name\":\"account\",\"type\":\"address\"}],\"name\":\"Unlocked\",\"type\":\"event\"},{\"anonymous\":false,\"inputs\":[{\"indexed\":true,\"internalType\":\"address\",\"name\":\"account\",\"type\":\"address\"},{\"indexed\":false,\"internalType\":\"uint256\",\"name\":\"amount\",\"type\":\"uint256\"}],\"name\":\"Withdrawn\",\"type\":\"event\"},{\"inputs\":[],\"name\":\"DEFAULT_ADMIN_ROLE\",\"outputs\":[{\"internalType\":\"bytes32\",\"name\":\"\",\"type\":\"bytes32\"}],\"stateMutability\":\"view\",\"type\":\"function\"},{\"inputs\":[],\"name\":\"FINAL_SLASH_PCT\",\"outputs\":[{\"internalType\":\"uint8\",\"name\":\"\",\"type\":\"uint8\"}],\"stateMutability\":\"view\",\"type\":\"function\"},{\"inputs\":[],\"name\":\"FIRST_SLASH_PCT\",\"outputs\":[{\"internalType\":\"uint8\",\"name\":\"\",\"type\":\"uint8\"}],\"stateMutability\":\"view\",\"type\":\"function\"},{\"inputs\":[],\"name\":\"MINTER_ROLE\",\"outputs\":[{\"internalType\":\"bytes32\",\"name\":\"\",\"type\":\"bytes32\"}],\"stateMutability\":\"view\",\"type\":\"function\"},{\"inputs\":[],\"name\":\"NODE_MIN_STAKE\",\"outputs\":[{\"internalType\":\"uint256\",\"name\":\"\",\"type\":\"uint256\"}],\"stateMutability\":\"view\",\"type\":\"function\"},{\"inputs\":[],\"name\":\"ORCHESTRATOR_MIN_STAKE\",\"outputs\":[{\"internalType\":\"uint256\",\"name\":\"\",\"type\":\"uint256\"}],\"stateMutability\":\"view\",\"type\":\"function\"},{\"inputs\":[],\"name\":\"ORCHESTRATOR_ROLE\",\"outputs\":[{\"internalType\":\"bytes32\",\"name\":\"\",\"type\":\"bytes32\"}],\"stateMutability\":\"view\",\"type\":\"function\"},{\"inputs\":[],\"name\":\"ROLE_NODE\",\"outputs\":[{\"internalType\":\"uint8\",\"name\":\"\",\"type\":\"uint8\"}],\"stateMutability\":\"view\",\"type\":\"function\"},{\"inputs\":[],\"name\":\"ROLE_NONE\",\"outputs\":[{\"internalType\":\"uint8\",\"name\":\"\",\"type\":\"uint8\"}],\"stateMutability\":\"view\",\"type\":\"function\"},{\"inputs\":[],\"name\":\"ROLE_ORCHESTRATOR\",\"outputs\":[{\"internalType\":\"uint8\",\"name\":\"\",\"type\":\"uint8\"}],\"stateMutability\":\"view\",\"type\":\"function\"},{\"inputs\":[],\"name\":\"ROLE_VALIDATOR\",\"outputs\":[{\"internalType\":\"uint8\",\"name\":\"\",\"type\":\"uint8\"}],\"stateMutability\":\"view\",\"type\":\"function\"},{\"inputs\":[],\"name\":\"SECOND_SLASH_PCT\",\"outputs\":[{\"internalType\":\"uint8\",\"name\":\"\",\"type\":\"uint8\"}],\"stateMutability\":\"view\",\"type\":\"function\"},{\"inputs\":[],\"name\":\"VALIDATOR_MIN_STAKE\",\"outputs\":[{\"internalType\":\"uint256\",\"name\":\"\",\"type\":\"uint256\"}],\"stateMutability\":\"view\",\"type\":\"function\"},{\"inputs\":[{\"internalType\":\"address\",\"name\":\"owner\",\"type\":\"address\"},{\"internalType\":\"address\",\"name\":\"spender\",\"type\":\"address\"}],\"name\":\"allowance\",\"outputs\":[{\"internalType\":\"uint256\",\"name\":\"\",\"type\":\"uint256\"}],\"stateMutability\":\"view\",\"type\":\"function\"},{\"inputs\":[{\"internalType\":\"address\",\"name\":\"spender\",\"type\":\"address\"},{\"internalType\":\"uint256\",\"name\":\"value\",\"type\":\"uint256\"}],\"name\":\"approve\",\"outputs\":[{\"internalType\":\"bool\",\"name\":\"\",\"type\":\"bool\"}],\"stateMutability\":\"nonpayable\",\"type\":\"function\"},{\"inputs\":[{\"internalType\":\"address\",\"name\":\"account\",\"type\":\"address\"}],\"name\":\"balanceOf\",\"outputs\":[{\"internalType\":\"uint256\",\"name\":\"\",\"type\":\"uint256\"}],\"stateMutability\":\"view\",\"type\":\"function\"},{\"inputs\":[{\"internalType\":\"address\",\"name\":\"account\",\"type\":\"address\"}],\"name\":\"banned\",\"outputs\":[{\"internalType\":\"bool\",\"name\":\"\",\"type\":\"bool\"}],\"stateMutability\":\"view\",\"type\":\"function\"},{\"inputs\":[{\"internalType\":\"bytes32\",\"name\":\"nodeKey\",\"type\":\"bytes32\"},{\"internalType\":\"bytes\",\"name\":\"signature\",\"type\":\"bytes\"}],\"name\":\"bindNode\",\"outputs\":[],\"stateMutability\":\"nonpayable\",\"type\":\"function\"},{\"inputs\":[],\"name\":\"decimals\",\"outputs\":[{\"internalType\":\"uint8\",\"name\":\"\",\"type\":\"uint8\"}],\"stateMutability\":\"pure\",\"type\":\"function\"},{\"inputs\":[{\"internalType\":\"bytes32\",\"name\":\"role\",\"type\":\"bytes32\"}],\"name\":\"getRoleAdmin\",\"outputs\":[{\"internalType\":\"bytes32\",\"name\":\"\",\"type\":\"bytes32\"}],\"stateMutability\":\"view\",\"type\":\"function\"},{\"inputs\":[{\"internalType\":\"bytes32\",\"name\":\"role\",\"type\":\"bytes32\"},{\"internalType\":\"address\",\"name\":\"account\",\"type\":\"address\"}],\"name\":\"grantRole\",\"outputs\":[],\"stateMutability\":\"nonpayable\",\"type\":\"function\"},{\"inputs\":[{\"internalType\":\"bytes32\",\"name\":\"role\",\"type\":\"bytes32\"},{\"internalType\":\"address\",\"name\":\"account\",\"type\":\"address\"}],\"name\":\"hasRole\",\"outputs\":[{\"internalType\":\"bool\",\"name\":\"\",\"type\":\"bool\"}],\"stateMutability\":\"view\",\"type\":\"function\"},{\"inputs\":[{\"internalType\":\"address\",\"name\":\"account\",\"type\":\"address\"}],\"name\":\"isOrchestrator\",\"outputs\":[{\"internalType\":\"bool\",\"name\":\"\",\"type\":\"bool\"}],\"stateMutability\":\"view\",\"type\":\"function\"},{\"inputs\":[{\"internalType\":\"address\",\"name\":\"account\",\"type\":\"address\"},{\"internalType\":\"uint8\",\"name\":\"role\",\"type\":\"uint8\"}],\"name\":\"isStaked\",\"outputs\":[{\"internalType\":\"bool\",\"name\":\"\",\"type\":\"bool\"}],\"stateMutability\":\"view\",\"type\":\"function\"},{\"inputs\":[{\"internalType\":\"bytes32\",\"name\":\"job\",\"type\":\"bytes32\"},{\"internalType\":\"address[]\",\"name\":\"members\",\"type\":\"address[]\"}],\"name\":\"lock\",\"outputs\":[],\"stateMutability\":\"nonpayable\",\"type\":\"function\"},{\"inputs\":[{\"internalType\":\"bytes32\",\"name\":\"\",\"type\":\"bytes32\"},{\"internalType\":\"address\",\"name\":\"\",\"type\":\"address\"}],\"name\":\"lockedFor\",\"outputs\":[{\"internalType\":\"bool\",\"name\":\"\",\"type\":\"bool\"}],\"stateMutability\":\"view\",\"type\":\"function\"},{\"inputs\":[{\"internalType\":\"address\",\"name\":\"account\",\"type\":\"address\"}],\"name\":\"locks\",\"outputs\":[{\"internalType\":\"uint32\",\"name\":\"\",\"type\":\"uint32\"}],\"stateMutability\":\"view\",\"type\":\"function\"},{\"inputs\":[{\"internalType\":\"uint8\",\"name\":\"role\",\"type\":\"uint8\"}],\"name\":\"minimumStake\",\"outputs\":[{\"internalType\":\"uint256\",\"name\":\"\",\"type\":\"uint256\"}],\"stateMutability\":\"pure\",\"type\":\"function\"},{\"inputs\":[{\"internalType\":\"address\",\"name\":\"to\",\"type\":\"address\"},{\"internalType\":\"uint256\",\"name\":\"amount\",\"type\":\"uint256\"}],\"name\":\"mint\",\"outputs\":[],\"stateMutability\":\"nonpayable\",\"type\":\"function\"},{\"inputs\":[],\"name\":\"name\",\"outputs\":[{\"internalType\":\"string\",\"name\":\"\",\"type\":\"string\"}],\"stateMutability\":\"view\",\"type\":\"function\"},{\"inputs\":[{\"internalType\":\"address\",\"name\":\"account\",\"type\":\"address\"}],\"name\":\"nextSlashPct\",\"outputs\":[{\"internalType\":\"uint8\",\"name\":\"\",\"type\":\"uint8\"}],\"stateMutability\":\"view\",\"type\":\"function\"},{\"inputs\":[{\"internalType\":\"address\",\"name\":\"\",\"type\":\"address\"}],\"name\":\"nodeKeyOf\",\"outputs\":[{\"internalType\":\"bytes32\",\"name\":\"\",\"type\":\"bytes32\"}],\"stateMutability\":\"view\",\"type\":\"function\"},{\"inputs\":[{\"internalType\":\"bytes32\",\"name\":\"role\",\"type\":\"bytes32\"},{\"internalType\":\"address\",\"name\":\"callerConfirmation\",\"type\":\"address\"}],\"name\":\"renounceRole\",\"outputs\":[],\"stateMutability\":\"nonpayable\",\"type\":\"function\"},{\"inputs\":[{\"internalType\":\"bytes32\",\"name\":\"role\",\"type\":\"bytes32\"},{\"internalType\":\"address\",\"name\":\"account\",\"type\":\"address\"}],\"name\":\"revokeRole\",\"outputs\":[],\"stateMutability\":\"nonpayable\",\"type\":\"function\"},{\"inputs\":[{\"internalType\":\"address\",\"name\":\"account\",\"type\":\"address\"}],\"name\":\"roleOf\",\"outputs\":[{\"internalType\":\"uint8\",\"name\":\"\",\"type\":\"uint8\"}],\"stateMutability\":\"view\",\"type\":\"function\"},{\"inputs\":[{\"internalType\":\"address\",\"name\":\"treasury_\",\"type\":\"address\"}],\"name\":\"setTreasury\",\"outputs\":[],\"stateMutability\":\"nonpayable\",\"type\":\"function\"},{\"inputs\":[{\"internalType\":\"address\",\"name\":\"node\",\"type\":\"address\"},{\"internalType\":\"uint8\",\"name\":\"pct\",\"type\":\"uint8\"},{\"internalType\":\"address\",\"name\":\"reporter\",\"type\":\"address\"},{\"internalType\":\"bytes\",\"name\":\"evidence\",\"type\":\"bytes\"}],\"name\":\"slash\",\"outputs\":[],\"stateMutability\":\"nonpayable\",\"type\":\"function\"},{\"inputs\":[{\"internalType\":\"address\",\"name\":\"account\",\"type\":\"address\"}],\"name\":\"slashesOf\",\"outputs\":[{\"components\":[{\"internalType\":\"uint8\",\"name\":\"offence\",\"type\":\"uint8\"},{\"internalType\":\"uint8\",\"name\":\"pct\",\"type\":\"uint8\"},{\"internalType\":\"uint64\",\"name\":\"at\",\"type\":\"uint64\"},{\"internalType\":\"uint128\",\"name\":\"amount\",\"type\":\"uint128\"},{\"internalType\":\"address\",\"name\":\"reporter\",\"type\":\"address\"},{\"internalType\":\"bytes32\",\"name\":\"evidenceHash\",\"type\":\"bytes32\"}],\"internalType\":\"structGYMToken.SlashRecord[]\",\"name\":\"\",\"type\":\"tuple[]\"}],\"stateMutability\":\"view\",\"type\":\"function\"},{\"inputs\":[{\"internalType\":\"uint8\",\"name\":\"role\",\"type\":\"uint8\"},{\"internalType\":\"uint256\",\"name\":\"amount\",\"type\":\"uint256\"}],\"name\":\"stake\",\"outputs\":[],\"stateMutability\":\"nonpayable\",\"type\":\"function\"},{\"inputs\":[{\"internalType\":\"address\",\"name\":\"account\",\"type\":\"address\"}],\"name\":\"stakes\",\"outputs\":[{\"internalType\":\"uint256\",\"name\":\"\",\"type\":\"uint256\"}],\"stateMutability\":\"view\",\"type\":\"function\"},{\"inputs\":[{\"internalType\":\"bytes4\",\"name\":\"interfaceId\",\"type\":\"bytes4\"}],\"name\":\"supportsInterface\",\"outputs\":[{\"internalType\":\"bool\",\"name\":\"\",\"type\":\"bool\"}],\"stateMutability\":\"view\",\"type\":\"function\"},{\"inputs\":[],\"name\":\"symbol\",\"outputs\":[{\"internalType\":\"string\",\"name\":\"\",\"type\":\"string\"}],\"stateMutability\":\"view\",\"type\":\"function\"},{\"inputs\":[],\"name\":\"totalSupply\",\"outputs\":[{\"internalType\":\"uint256\",\"name\":\"\",\"type\":\"uint256\"}],\"stateMutability\":\"view\",\"type\":\"function\"},{\"inputs\":[{\"internalType\":\"address\",\"name\":\"to\",\"type\":\"address\"},{\"internalType\":\"uint256\",\"name\":\"value\",\"type\":\"uint256\"}],\"name\":\"transfer\",\"outputs\":[{\"internalType\":\"bool\",\"name\":\"\",\"type\":\"bool\"}],\"stateMutability\":\"nonpayable\",\"type\":\"function\"},{\"inputs\":[{\"internalType\":\"address\",\"name\":\"from\",\"type\":\"address\"},{\"internalType\":\"address\",\"name\":\"to\",\"type\":\"address\"},{\"internalType\":\"uint256\",\"name\":\"value\",\"type\":\"uint256\"}],\"name\":\"transferFrom\",\"outputs\":[{\"internalType\":\"bool\",\"name\":\"\",\"type\":\"bool\"}],\"stateMutability\":\"nonpayable\",\"type\":\"function\"},{\"inputs\":[],\"name\":\"treasury\",\"outputs\":[{\"internalType\":\"address\",\"name\":\"\",\"type\":\"address\"}],\"stateMutability\":\"view\",\"type\":\"function\"},{\"inputs\":[{\"internalType\":\"uint256\",\"name\":\"amount\",\"type\":\"uint256\"}],\"name\":\"unbond\",\"outputs\":[],\"stateMutability\":\"nonpayable\",\"type\":\"function\"},{\"inputs\":[],\"name\":\"unbondingDelay\",\"outputs\":[{\"internalType\":\"uint64\",\"name\":\"\",\"type\":\"uint64\"}],\"stateMutability\":\"view\",\"type\":\"function\"},{\"inputs\":[{\"internalType\":\"address\",\"name\":\"account\",\"type\":\"address\"}],\"name\":\"unbondingOf\",\"outputs\":[{\"components\":[{\"internalType\":\"uint192\",\"name\":\"amount\",\"type\":\"uint192\"},{\"internalType\":\"uint64\",\"name\":\"releaseAt\",\"type\":\"uint64\"}],\"internalType\":\"structGYMToken.Unbonding[]\",\"name\":\"\",\"type\":\"tuple[]\"}],\"stateMutability\":\"view\",\"type\":\"function\"},{\"inputs\":[{\"internalType\":\"address\",\"name\":\"account\",\"type\":\"address\"}],\"name\":\"unbondingTotal\",\"outputs\":[{\"internalType\":\"uint256\",\"name\":\"total\",\"type\":\"uint256\"}],\"stateMutability\":\"view\",\"type\":\"function\"},{\"inputs\":[{\"internalType\":\"bytes32\",\"name\":\"job\",\"type\":\"bytes32\"},{\"internalType\":\"address[]\",\"name\":\"members\",\"type\":\"address[]\"}],\"name\":\"unlock\",\"outputs\":[],\"stateMutability\":\"nonpayable\",\"type\":\"function\"},{\"inputs\":[],\"name\":\"withdraw\",\"outputs\":[{\"internalType\":\"uint256\",\"name\":\"amount\",\"type\":\"uint256\"}],\"stateMutability\":\"nonpayable\",\"type\":\"function\"}]",
	Bin: "0x60a060405234801561000f575f5ffd5b5060405161292738038061292783398101604081905261002e91610155565b604051806040016040528060078152602001665a6f6f2047796d60c81b8152506040518060400160405280600381526020016247594d60e81b8152508160039081610079919061023b565b506004610086828261023b565b5061009591505f9050836100a8565b506001600160401b0316608052506102f5565b5f8281526005602090815260408083206001600160a01b038516845290915281205460ff1661014c575f8381526005602090815260408083206001600160a01b03861684529091529020805460ff191660011790556101043390565b6001600160a01b0316826001600160a01b0316847f2f8788117e7eff1d82e926ec794901d17c78024a50270940304540a733656f0d60405160405180910390a450600161014f565b505f5b92915050565b5f5f60408385031215610166575f5ffd5b82516001600160a01b038116811461017c575f5ffd5b60208401519092506001600160401b0381168114610198575f5ffd5b809150509250929050565b634e487b7160e01b5f52604160045260245ffd5b600181811c908216806101cb57607f821691505b6020821081036101e957634e487b7160e01b5f52602260045260245ffd5b50919050565b601f82111561023657805f5260205f20601f840160051c810160208510156102145750805b601f840160051c820191505b81811015610233575f8155600101610220565b50505b505050565b81516001600160401b03811115610254576102546101a3565b6102688161026284546101b7565b846101ef565b6020601f82116001811461029a575f83156102835750848201515b5f19600385901b1c1916600184901b178455610233565b5f84815260208120601f198516915b828110156102c957878501518255602094850194600190920191016102a9565b50848210156102e657868401515f19600387901b60f8161c191681555b50505050600190811b01905550565b6080516126136103145f395f81816106f90152610b7401526126135ff3fe608060405234801561000f575f5ffd5b50600436106102ff575f3560e01c8063796a486c11610195578063d5391393116100e4578063e172cece1161009e578063e4fd189f11610079578063e4fd189f1461079a578063f0f44260146107ad578063f5aefaab146107c0578063ff52f39e146107d3575f5ffd5b8063e172cece1461077e578063e1ae055d14610786578063e2ae91a314610792575f5ffd5b8063d5391393146106a7578063d547741f146106ce578063d701dcbd146106e1578063db7dd35a146106f4578063dd62ed3e14610733578063dd752e551461076b575f5ffd5b80639c8d83bb1161014f578063a5d7827e1161012a578063a5d7827e1461062f578063a9059cbb14610661578063acf0991214610674578063afa5e6c414610694575f5ffd5b80639c8d83bb146105e3578063a217fddf14610615578063a576a9231461061c575f5ffd5b8063796a486c146105925780637b4599d4146105a55780638d3abd7e146105ad5780638ea18651146105b557806391d14854146105c857806395d89b41146105db575f5ffd5b806336568abe116102515780634cfb92df1161020b57806361d027b3116101e657806361d027b31461052c57806370a08231146105575780637661b3021461057f57806377cc16e01461058b575f5ffd5b80634cfb92df146104b757806350633b3d146104d65780635de9a137146104e2575f5ffd5b806336568abe146104665780633c996b37146104795780633ccfd60b1461048c57806340c10f191461049457806341cbe69f146104a75780634cd5d637146104af575f5ffd5b806318160ddd116102bc57806327de9e321161029757806327de9e321461040b5780632f2ff15d1461041e5780632fc67d0c14610431578063313ce56714610451575f5ffd5b806318160ddd146103ce57806323b872dd146103d6578063248a9ca3146103e9575f5ffd5b806301ffc9a71461030357806306fdde031461032b578063095ea7b31461034057806309e0a34f1461035357806315cb92681461038857806316934fc41461039d575b5f5ffd5b610316610311366004612003565b610800565b60405190151581526020015b60405180910390f35b610333610836565b604051610322919061202a565b61031661034e36600461207a565b6108c6565b61037a7fe098e2e7d2d4d3ca0e3877ceaaf3cdfbd47483f6699688ad12b1d6732deef10b81565b604051908152602001610322565b61039b6103963660046120a2565b6108dd565b005b61037a6103ab36600461211a565b6001600160a01b03165f908152600760205260409020546001600160801b031690565b60025461037a565b6103166103e4366004612133565b610a22565b61037a6103f736600461216d565b5f9081526005602052604090206001015490565b61039b61041936600461216d565b610a45565b61039b61042c366004612184565b610c3a565b61044461043f36600461211a565b610c5e565b60405161032291906121ae565b60065b60405160ff9091168152602001610322565b61039b610474366004612184565b610d2e565b61045461048736600461211a565b610d66565b61037a610da8565b61039b6104a236600461207a565b610f68565b610454601981565b610454606481565b61037a6104c536600461211a565b600b6020525f908152604090205481565b61037a6405d21dba0081565b6105176104f036600461211a565b6001600160a01b03165f90815260076020526040902054600160901b900463ffffffff1690565b60405163ffffffff9091168152602001610322565b60065461053f906001600160a01b031681565b6040516001600160a01b039091168152602001610322565b61037a61056536600461211a565b6001600160a01b03165f9081526020819052604090205490565b61037a6402540be40081565b6104545f81565b61037a6105a036600461225a565b610fbc565b610454600281565b610454600581565b61039b6105c33660046122b7565b611022565b6103166105d6366004612184565b6113c7565b6103336113f1565b6103166105f136600461211a565b6001600160a01b03165f90815260076020526040902054600160881b900460ff1690565b61037a5f81565b61037a61062a36600461211a565b611400565b61045461063d36600461211a565b6001600160a01b03165f90815260076020526040902054600160801b900460ff1690565b61031661066f36600461207a565b611463565b61068761068236600461211a565b611470565b6040516103229190612327565b6103166106a236600461237c565b6114f5565b61037a7f9f2df0fed2c77648de5860a4cc508cd0818c85b8b8a1ab4ceeef8d981c8956a681565b61039b6106dc366004612184565b611558565b6103166106ef36600461211a565b61157c565b61071b7f000000000000000000000000000000000000000000000000000000000000000081565b6040516001600160401b039091168152602001610322565b61037a6107413660046123a4565b6001600160a01b039182165f90815260016020908152604080832093909416825291909152205490565b61039b6107793660046123cc565b61160d565b610454600181565b61037a640ba43b740081565b610454600381565b61039b6107a83660046120a2565b611797565b61039b6107bb36600461211a565b6118ce565b61039b6107ce3660046123e6565b61192d565b6103166107e1366004612184565b600860209081525f928352604080842090915290825290205460ff1681565b5f6001600160e01b03198216637965db0b60e01b148061083057506301ffc9a760e01b6001600160e01b03198316145b92915050565b6060600380546108459061242d565b80601f01602080910402602001604051908101604052809291908181526020018280546108719061242d565b80156108bc5780601f10610893576101008083540402835291602001916108bc565b820191905f5260205f20905b81548152906001019060200180831161089f57829003601f168201915b5050505050905090565b5f336108d38185856119ab565b5060019392505050565b6108e63361157c565b61090a5760405163b9057a2960e01b81523360048201526024015b60405180910390fd5b5f5b81811015610a1c575f83838381811061092757610927612465565b905060200201602081019061093c919061211a565b5f8681526008602090815260408083206001600160a01b038516845290915290205490915060ff16610a13575f8581526008602090815260408083206001600160a01b03851684528252808320805460ff19166001908117909155600790925290912080546012906109bd90849063ffffffff600160901b9091041661248d565b92506101000a81548163ffffffff021916908363ffffffff160217905550806001600160a01b0316857f326122659a23f936a4aff830b51d3f09cd06f309fa04e3649d9829acb7580c1060405160405180910390a35b5060010161090c565b50505050565b5f33610a2f8582856119b8565b610a3a858585611a2e565b506001949350505050565b805f03610a6557604051631f2a200560e01b815260040160405180910390fd5b335f9081526007602052604090208054600160901b900463ffffffff168015610aaf576040516340cb9ea560e01b815233600482015263ffffffff82166024820152604401610901565b81546001600160801b031680841115610ae5576040516322df051360e11b81526004810185905260248101829052604401610901565b5f610af085836124a9565b90505f81118015610b0a57508354600160881b900460ff16155b15610b555783545f90610b2690600160801b900460ff16610fbc565b905080821015610b53576040516378e030db60e01b81526004810183905260248101829052604401610901565b505b83546001600160801b0319166001600160801b0382161784555f610b997f0000000000000000000000000000000000000000000000000000000000000000426124bc565b335f818152600960209081526040808320815180830183526001600160c01b038d811682526001600160401b0388811683870181815285546001810187559589529787902093519751909116600160c01b02969091169590951791015580518b81529182019290925292935090917ff00bd8f1dcf66a1fe96ce25aa63de91c4b8fe4f407e9f0c027d928e6c5db79f9910160405180910390a2505050505050565b5f82815260056020526040902060010154610c5481611a8b565b610a1c8383611a98565b6001600160a01b0381165f908152600a60209081526040808320805482518185028101850190935280835260609492939192909184015b82821015610d23575f8481526020908190206040805160c08101825260038602909201805460ff8082168552610100820416848601526201000081046001600160401b031692840192909252600160501b9091046001600160801b031660608301526001808201546001600160a01b0316608084015260029091015460a08301529083529092019101610c95565b505050509050919050565b6001600160a01b0381163314610d575760405163334bd91960e11b815260040160405180910390fd5b610d618282611b29565b505050565b6001600160a01b0381165f908152600a6020526040812054808203610d8e5750600592915050565b80600103610d9f5750601992915050565b50606492915050565b335f9081526009602052604081208054825b8181108015610df5575042838281548110610dd757610dd7612465565b5f91825260209091200154600160c01b90046001600160401b031611155b15610e3e57828181548110610e0c57610e0c612465565b5f91825260209091200154610e2a906001600160c01b0316856124db565b935080610e36816124ee565b915050610dba565b835f03610e5e57604051630686827b60e51b815260040160405180910390fd5b805b82811015610ee857838181548110610e7a57610e7a612465565b905f5260205f2001848383610e8f91906124a9565b81548110610e9f57610e9f612465565b5f91825260209091208254910180546001600160c01b0319166001600160c01b03909216918217815591546001600160401b03600160c01b918290041602179055600101610e60565b505f5b81811015610f215783805480610f0357610f03612506565b5f8281526020812082015f1990810191909155019055600101610eeb565b50610f2d303386611a2e565b60405184815233907f7084f5476618d8e60b11ef0d7d3f06914655adb8793e28ff7f018d4c76d505d59060200160405180910390a250505090565b7f9f2df0fed2c77648de5860a4cc508cd0818c85b8b8a1ab4ceeef8d981c8956a6610f9281611a8b565b815f03610fb257604051631f2a200560e01b815260040160405180910390fd5b610d618383611b94565b5f5f1960ff831601610fd457506402540be400919050565b60011960ff831601610fec57506405d21dba00919050565b60021960ff8316016110045750640ba43b7400919050565b60405163db971f0560e01b815260ff83166004820152602401610901565b61102b3361157c565b61104a5760405163b9057a2960e01b8152336004820152602401610901565b6001600160a01b0385165f90815260076020526040902054600160881b900460ff161561109557604051637ae66caf60e11b81526001600160a01b0386166004820152602401610901565b6006546001600160a01b03166110be5760405163177adcc960e21b815260040160405180910390fd5b5f6110c886610d66565b90508060ff168560ff16146110fd57604051637a033eed60e11b815260ff808716600483015282166024820152604401610901565b5f61110787611400565b6001600160a01b0388165f9081526007602052604090205461113291906001600160801b03166124db565b9050805f0361115f57604051630752994b60e51b81526001600160a01b0388166004820152602401610901565b5f60ff871660641461118957606461117a60ff89168461251a565b6111849190612531565b61118b565b815b90506111978882611bcc565b6001600160a01b0388165f908152600a60205260408120546111ba9060016124db565b90505f86866040516111cd929190612550565b604080519182900382206001600160a01b038d165f908152600a60209081529083902060c08501845260ff87811686528e169185018290526001600160401b03421693850193909352909350606414916060810161122a87611da8565b6001600160801b0390811682526001600160a01b038d811660208085019190915260409384018890528554600180820188555f97885296829020865160039092020180549287015195870151606088015160ff93841661ffff199095169490941761010093909716929092029590951762010000600160d01b031916620100006001600160401b03909216919091026fffffffffffffffffffffffffffffffff60501b191617600160501b9190931602919091178255608083015193820180546001600160a01b031916949091169390931790925560a001516002909101558015611338576001600160a01b038b165f908152600760205260409020805460ff60881b1916600160881b1790555b8315611356576006546113569030906001600160a01b031686611a2e565b6040805160ff80861682528c1660208201529081018590526060810183905281151560808201526001600160a01b03808b1691908d16907f1910aa3ef2ad68cb49d0339e58c46b4ccf37fff09dab3bfaf5cab69ff7fb3d6d9060a00160405180910390a35050505050505050505050565b5f9182526005602090815260408084206001600160a01b0393909316845291905290205460ff1690565b6060600480546108459061242d565b6001600160a01b0381165f908152600960205260408120815b815481101561145c5781818154811061143457611434612465565b5f91825260209091200154611452906001600160c01b0316846124db565b9250600101611419565b5050919050565b5f336108d3818585611a2e565b6001600160a01b0381165f908152600960209081526040808320805482518185028101850190935280835260609492939192909184015b82821015610d23575f84815260209081902060408051808201909152908401546001600160c01b0381168252600160c01b90046001600160401b0316818301528252600190920191016114a7565b6001600160a01b0382165f908152600760205260408120805460ff848116600160801b9092041614801561153257508054600160881b900460ff16155b8015611550575061154283610fbc565b81546001600160801b031610155b949350505050565b5f8281526005602052604090206001015461157281611a8b565b610a1c8383611b29565b6001600160a01b0381165f9081526007602052604081206115bd7fe098e2e7d2d4d3ca0e3877ceaaf3cdfbd47483f6699688ad12b1d6732deef10b846113c7565b80156115d457508054600160801b900460ff166003145b80156115f157508054640ba43b74006001600160801b0390911610155b801561160657508054600160881b900460ff16155b9392505050565b805f0361162d57604051631f2a200560e01b815260040160405180910390fd5b335f9081526007602052604090208054600160881b900460ff161561166757604051637ae66caf60e11b8152336004820152602401610901565b5f61167184610fbc565b825490915060ff600160801b820416906001600160801b0316801580159061169f57508560ff168260ff1614155b156116ca57604051632d7e789160e01b815260ff808416600483015287166024820152604401610901565b5f6116d586836124db565b905083811015611702576040516378e030db60e01b81526004810182905260248101859052604401610901565b61170d333088611a2e565b61171681611da8565b855460ff8916600160801b810270ffffffffffffffffffffffffffffffffff199092166001600160801b0393909316929092171786556040805191825260208201889052810182905233907f0a79772743d87ba7576fca49d64545ccce7a2369f471f1badf89540cdb09b2829060600160405180910390a250505050505050565b6117a03361157c565b6117bf5760405163b9057a2960e01b8152336004820152602401610901565b5f5b81811015610a1c575f8383838181106117dc576117dc612465565b90506020020160208101906117f1919061211a565b5f8681526008602090815260408083206001600160a01b038516845290915290205490915060ff16156118c5575f8581526008602090815260408083206001600160a01b03851684528252808320805460ff191690556007909152902080546001919060129061186f908490600160901b900463ffffffff1661255f565b92506101000a81548163ffffffff021916908363ffffffff160217905550806001600160a01b0316857fd62595377959fcf910fa7d1267756ebc89f04296203e93852602e51aa8424e8a60405160405180910390a35b506001016117c1565b5f6118d881611a8b565b600680546001600160a01b0319166001600160a01b0384169081179091556040519081527fc714d22a2f08b695f81e7c707058db484aa5b4d6b4c9fd64beb10fe85832f6089060200160405180910390a15050565b82158061193b575060408114155b15611959576040516375ae020b60e11b815260040160405180910390fd5b335f818152600b6020526040908190208590555184907f98cd7437173cddc3f238ec62469009ab0878068c8178a8345f91489f8bacb48e9061199e908690869061257b565b60405180910390a3505050565b610d618383836001611ddf565b6001600160a01b038381165f908152600160209081526040808320938616835292905220545f19811015610a1c5781811015611a2057604051637dc7a0d960e11b81526001600160a01b03841660048201526024810182905260448101839052606401610901565b610a1c84848484035f611ddf565b6001600160a01b038316611a5757604051634b637e8f60e11b81525f6004820152602401610901565b6001600160a01b038216611a805760405163ec442f0560e01b81525f6004820152602401610901565b610d61838383611eb1565b611a958133611fca565b50565b5f611aa383836113c7565b611b22575f8381526005602090815260408083206001600160a01b03861684529091529020805460ff19166001179055611ada3390565b6001600160a01b0316826001600160a01b0316847f2f8788117e7eff1d82e926ec794901d17c78024a50270940304540a733656f0d60405160405180910390a4506001610830565b505f610830565b5f611b3483836113c7565b15611b22575f8381526005602090815260408083206001600160a01b0386168085529252808320805460ff1916905551339286917ff6391f5c32d9c69d2a47ea670b442974b53935d1edc7fd64eb21e047a839171b9190a4506001610830565b6001600160a01b038216611bbd5760405163ec442f0560e01b81525f6004820152602401610901565b611bc85f8383611eb1565b5050565b6001600160a01b0382165f908152600760205260408120546001600160801b0316908290828210611bfd5782611bff565b815b9050611c0b81846124a9565b6001600160a01b0386165f90815260076020526040902080546001600160801b0319166001600160801b0392909216919091179055611c4a81836124a9565b6001600160a01b0386165f9081526009602052604090208054919350905b5f81118015611c7657505f84115b15611d2d575f82611c886001846124a9565b81548110611c9857611c98612465565b5f91825260209091200180549091506001600160c01b03168510611cc65780546001600160c01b0316611cc8565b845b8154909450849082905f90611ce79084906001600160c01b03166125a9565b92506101000a8154816001600160c01b0302191690836001600160c01b031602179055508385611d1791906124a9565b9450508080611d25906125c8565b915050611c68565b505b805415801590611d70575080548190611d4a906001906124a9565b81548110611d5a57611d5a612465565b5f918252602090912001546001600160c01b0316155b15611da05780805480611d8557611d85612506565b5f8281526020812082015f1990810191909155019055611d2f565b505050505050565b5f6001600160801b03821115611ddb576040516306dfcc6560e41b81526080600482015260248101839052604401610901565b5090565b6001600160a01b038416611e085760405163e602df0560e01b81525f6004820152602401610901565b6001600160a01b038316611e3157604051634a1406b160e11b81525f6004820152602401610901565b6001600160a01b038085165f9081526001602090815260408083209387168352929052208290558015610a1c57826001600160a01b0316846001600160a01b03167f8c5be1e5ebec7d5bd14f71427d1e84f3dd0314c0f7b2291e5b200ac8c7c3b92584604051611ea391815260200190565b60405180910390a350505050565b6001600160a01b038316611edb578060025f828254611ed091906124db565b90915550611f4b9050565b6001600160a01b0383165f9081526020819052604090205481811015611f2d5760405163391434e360e21b81526001600160a01b03851660048201526024810182905260448101839052606401610901565b6001600160a01b0384165f9081526020819052604090209082900390555b6001600160a01b038216611f6757600280548290039055611f85565b6001600160a01b0382165f9081526020819052604090208054820190555b816001600160a01b0316836001600160a01b03167fddf252ad1be2c89b69c2b068fc378daa952ba7f163c4a11628f55a4df523b3ef8360405161199e91815260200190565b611fd482826113c7565b611bc85760405163e2517d3f60e01b81526001600160a01b038216600482015260248101839052604401610901565b5f60208284031215612013575f5ffd5b81356001600160e01b031981168114611606575f5ffd5b602081525f82518060208401528060208501604085015e5f604082850101526040601f19601f83011684010191505092915050565b80356001600160a01b0381168114612075575f5ffd5b919050565b5f5f6040838503121561208b575f5ffd5b6120948361205f565b946020939093013593505050565b5f5f5f604084860312156120b4575f5ffd5b8335925060208401356001600160401b038111156120d0575f5ffd5b8401601f810186136120e0575f5ffd5b80356001600160401b038111156120f5575f5ffd5b8660208260051b8401011115612109575f5ffd5b939660209190910195509293505050565b5f6020828403121561212a575f5ffd5b6116068261205f565b5f5f5f60608486031215612145575f5ffd5b61214e8461205f565b925061215c6020850161205f565b929592945050506040919091013590565b5f6020828403121561217d575f5ffd5b5035919050565b5f5f60408385031215612195575f5ffd5b823591506121a56020840161205f565b90509250929050565b602080825282518282018190525f918401906040840190835b8181101561223f57835160ff815116845260ff60208201511660208501526001600160401b0360408201511660408501526001600160801b03606082015116606085015260018060a01b03608082015116608085015260a081015160a08501525060c0830192506020840193506001810190506121c7565b509095945050505050565b803560ff81168114612075575f5ffd5b5f6020828403121561226a575f5ffd5b6116068261224a565b5f5f83601f840112612283575f5ffd5b5081356001600160401b03811115612299575f5ffd5b6020830191508360208285010111156122b0575f5ffd5b9250929050565b5f5f5f5f5f608086880312156122cb575f5ffd5b6122d48661205f565b94506122e26020870161224a565b93506122f06040870161205f565b925060608601356001600160401b0381111561230a575f5ffd5b61231688828901612273565b969995985093965092949392505050565b602080825282518282018190525f918401906040840190835b8181101561223f57835180516001600160c01b031684526020908101516001600160401b03168185015290930192604090920191600101612340565b5f5f6040838503121561238d575f5ffd5b6123968361205f565b91506121a56020840161224a565b5f5f604083850312156123b5575f5ffd5b6123be8361205f565b91506121a56020840161205f565b5f5f604083850312156123dd575f5ffd5b6120948361224a565b5f5f5f604084860312156123f8575f5ffd5b8335925060208401356001600160401b03811115612414575f5ffd5b61242086828701612273565b9497909650939450505050565b600181811c9082168061244157607f821691505b60208210810361245f57634e487b7160e01b5f52602260045260245ffd5b50919050565b634e487b7160e01b5f52603260045260245ffd5b634e487b7160e01b5f52601160045260245ffd5b63ffffffff818116838216019081111561083057610830612479565b8181038181111561083057610830612479565b6001600160401b03818116838216019081111561083057610830612479565b8082018082111561083057610830612479565b5f600182016124ff576124ff612479565b5060010190565b634e487b7160e01b5f52603160045260245ffd5b808202811582820484141761083057610830612479565b5f8261254b57634e487b7160e01b5f52601260045260245ffd5b500490565b818382375f9101908152919050565b63ffffffff828116828216039081111561083057610830612479565b60208152816020820152818360408301375f818301604090810191909152601f909201601f19160101919050565b6001600160c01b03828116828216039081111561083057610830612479565b5f816125d6576125d6612479565b505f19019056fea2646970667358221220998823ef0bc1b390e70898a4cad6bf16cb55250d4b2f7decacf28c0f4c439e7164736f6c634300081e0033",
}

// GYMTokenABI is the input ABI used to generate the binding from.
// Deprecated: Use GYMTokenMetaData.ABI instead.
var GYMTokenABI = GYMTokenMetaData.ABI

// GYMTokenBin is the compiled bytecode used for deploying new contracts.
// Deprecated: Use GYMTokenMetaData.Bin instead.
var GYMTokenBin = GYMTokenMetaData.Bin

// DeployGYMToken deploys a new Ethereum contract, binding an instance of GYMToken to it.
func DeployGYMToken(auth *bind.TransactOpts, backend bind.ContractBackend, admin common.Address, unbondingDelay_ uint64) (common.Address, *types.Transaction, *GYMToken, error) {
	parsed, err := GYMTokenMetaData.GetAbi()
	if err != nil {
		return common.Address{}, nil, nil, err
	}
	if parsed == nil {
		return common.Address{}, nil, nil, errors.New("GetABI returned nil")
	}

	address, tx, contract, err := bind.DeployContract(auth, *parsed, common.FromHex(GYMTokenBin), backend, admin, unbondingDelay_)
	if err != nil {
		return common.Address{}, nil, nil, err
	}
	return address, tx, &GYMToken{GYMTokenCaller: GYMTokenCaller{contract: contract}, GYMTokenTransactor: GYMTokenTransactor{contract: contract}, GYMTokenFilterer: GYMTokenFilterer{contract: contract}}, nil
}

// GYMToken is an auto generated Go binding around an Ethereum contract.
type GYMToken struct {
	GYMTokenCaller     // Read-only binding to the contract
	GYMTokenTransactor // Write-only binding to the contract
	GYMTokenFilterer   // Log filterer for contract events
}

// GYMTokenCaller is an auto generated read-only Go binding around an Ethereum contract.
type GYMTokenCaller struct {
	contract *bind.BoundContract // Generic contract wrapper for the low level calls
}

// GYMTokenTransactor is an auto generated write-only Go binding around an Ethereum contract.
type GYMTokenTransactor struct {
	contract *bind.BoundContract // Generic contract wrapper for the low level calls
}

// GYMTokenFilterer is an auto generated log filtering Go binding around an Ethereum contract events.
type GYMTokenFilterer struct {
	contract *bind.BoundContract // Generic contract wrapper for the low level calls
}

// GYMTokenSession is an auto generated Go binding around an Ethereum contract,
// with pre-set call and transact options.
type GYMTokenSession struct {
	Contract     *GYMToken         // Generic contract binding to set the session for
	CallOpts     bind.CallOpts     // Call options to use throughout this session
	TransactOpts bind.TransactOpts // Transaction auth options to use throughout this session
}

// GYMTokenCallerSession is an auto generated read-only Go binding around an Ethereum contract,
// with pre-set call options.
type GYMTokenCallerSession struct {
	Contract *GYMTokenCaller // Generic contract caller binding to set the session for
	CallOpts bind.CallOpts   // Call options to use throughout this session
}

// GYMTokenTransactorSession is an auto generated write-only Go binding around an Ethereum contract,
// with pre-set transact options.
type GYMTokenTransactorSession struct {
	Contract     *GYMTokenTransactor // Generic contract transactor binding to set the session for
	TransactOpts bind.TransactOpts   // Transaction auth options to use throughout this session
}

// GYMTokenRaw is an auto generated low-level Go binding around an Ethereum contract.
type GYMTokenRaw struct {
	Contract *GYMToken // Generic contract binding to access the raw methods on
}

// GYMTokenCallerRaw is an auto generated low-level read-only Go binding around an Ethereum contract.
type GYMTokenCallerRaw struct {
	Contract *GYMTokenCaller // Generic read-only contract binding to access the raw methods on
}

// GYMTokenTransactorRaw is an auto generated low-level write-only Go binding around an Ethereum contract.
type GYMTokenTransactorRaw struct {
	Contract *GYMTokenTransactor // Generic write-only contract binding to access the raw methods on
}

// NewGYMToken creates a new instance of GYMToken, bound to a specific deployed contract.
func NewGYMToken(address common.Address, backend bind.ContractBackend) (*GYMToken, error) {
	contract, err := bindGYMToken(address, backend, backend, backend)
	if err != nil {
		return nil, err
	}
	return &GYMToken{GYMTokenCaller: GYMTokenCaller{contract: contract}, GYMTokenTransactor: GYMTokenTransactor{contract: contract}, GYMTokenFilterer: GYMTokenFilterer{contract: contract}}, nil
}

// NewGYMTokenCaller creates a new read-only instance of GYMToken, bound to a specific deployed contract.
func NewGYMTokenCaller(address common.Address, caller bind.ContractCaller) (*GYMTokenCaller, error) {
	contract, err := bindGYMToken(address, caller, nil, nil)
	if err != nil {
		return nil, err
	}
	return &GYMTokenCaller{contract: contract}, nil
}

// NewGYMTokenTransactor creates a new write-only instance of GYMToken, bound to a specific deployed contract.
func NewGYMTokenTransactor(address common.Address, transactor bind.ContractTransactor) (*GYMTokenTransactor, error) {
	contract, err := bindGYMToken(address, nil, transactor, nil)
	if err != nil {
		return nil, err
	}
	return &GYMTokenTransactor{contract: contract}, nil
}

// NewGYMTokenFilterer creates a new log filterer instance of GYMToken, bound to a specific deployed contract.
func NewGYMTokenFilterer(address common.Address, filterer bind.ContractFilterer) (*GYMTokenFilterer, error) {
	contract, err := bindGYMToken(address, nil, nil, filterer)
	if err != nil {
		return nil, err
	}
	return &GYMTokenFilterer{contract: contract}, nil
}

// bindGYMToken binds a generic wrapper to an already deployed contract.
func bindGYMToken(address common.Address, caller bind.ContractCaller, transactor bind.ContractTransactor, filterer bind.ContractFilterer) (*bind.BoundContract, error) {
	parsed, err := GYMTokenMetaData.GetAbi()
	if err != nil {
		return nil, err
	}
	return bind.NewBoundContract(address, *parsed, caller, transactor, filterer), nil
}

// Call invokes the (constant) contract method with params as input values and
// sets the output to result. The result type might be a single field for simple
// returns, a slice of interfaces for anonymous returns and a struct for named
// returns.
func (_GYMToken *GYMTokenRaw) Call(opts *bind.CallOpts, result *[]interface{}, method string, params ...interface{}) error {
	return _GYMToken.Contract.GYMTokenCaller.contract.Call(opts, result, method, params...)
}

// Transfer initiates a plain transaction to move funds to the contract, calling
// its default method if one is available.
func (_GYMToken *GYMTokenRaw) Transfer(opts *bind.TransactOpts) (*types.Transaction, error) {
	return _GYMToken.Contract.GYMTokenTransactor.contract.Transfer(opts)
}

// Transact invokes the (paid) contract method with params as input values.
func (_GYMToken *GYMTokenRaw) Transact(opts *bind.TransactOpts, method string, params ...interface{}) (*types.Transaction, error) {
	return _GYMToken.Contract.GYMTokenTransactor.contract.Transact(opts, method, params...)
}

// Call invokes the (constant) contract method with params as input values and
// sets the output to result. The result type might be a single field for simple
// returns, a slice of interfaces for anonymous returns and a struct for named
// returns.
func (_GYMToken *GYMTokenCallerRaw) Call(opts *bind.CallOpts, result *[]interface{}, method string, params ...interface{}) error {
	return _GYMToken.Contract.contract.Call(opts, result, method, params...)
}

// Transfer initiates a plain transaction to move funds to the contract, calling
// its default method if one is available.
func (_GYMToken *GYMTokenTransactorRaw) Transfer(opts *bind.TransactOpts) (*types.Transaction, error) {
	return _GYMToken.Contract.contract.Transfer(opts)
}

// Transact invokes the (paid) contract method with params as input values.
func (_GYMToken *GYMTokenTransactorRaw) Transact(opts *bind.TransactOpts, method string, params ...interface{}) (*types.Transaction, error) {
	return _GYMToken.Contract.contract.Transact(opts, method, params...)
}

// DEFAULTADMINROLE is a free data retrieval call binding the contract method 0xa217fddf.
//
// Solidity: function DEFAULT_ADMIN_ROLE() view returns(bytes32)
func (_GYMToken *GYMTokenCaller) DEFAULTADMINROLE(opts *bind.CallOpts) ([32]byte, error) {
	var out []interface{}
	err := _GYMToken.contract.Call(opts, &out, "DEFAULT_ADMIN_ROLE")

	if err != nil {
		return *new([32]byte), err
	}

	out0 := *abi.ConvertType(out[0], new([32]byte)).(*[32]byte)

	return out0, err

}

// DEFAULTADMINROLE is a free data retrieval call binding the contract method 0xa217fddf.
//
// Solidity: function DEFAULT_ADMIN_ROLE() view returns(bytes32)
func (_GYMToken *GYMTokenSession) DEFAULTADMINROLE() ([32]byte, error) {
	return _GYMToken.Contract.DEFAULTADMINROLE(&_GYMToken.CallOpts)
}

// DEFAULTADMINROLE is a free data retrieval call binding the contract method 0xa217fddf.
//
// Solidity: function DEFAULT_ADMIN_ROLE() view returns(bytes32)
func (_GYMToken *GYMTokenCallerSession) DEFAULTADMINROLE() ([32]byte, error) {
	return _GYMToken.Contract.DEFAULTADMINROLE(&_GYMToken.CallOpts)
}

// FINALSLASHPCT is a free data retrieval call binding the contract method 0x4cd5d637.
//
// Solidity: function FINAL_SLASH_PCT() view returns(uint8)
func (_GYMToken *GYMTokenCaller) FINALSLASHPCT(opts *bind.CallOpts) (uint8, error) {
	var out []interface{}
	err := _GYMToken.contract.Call(opts, &out, "FINAL_SLASH_PCT")

	if err != nil {
		return *new(uint8), err
	}

	out0 := *abi.ConvertType(out[0], new(uint8)).(*uint8)

	return out0, err

}

// FINALSLASHPCT is a free data retrieval call binding the contract method 0x4cd5d637.
//
// Solidity: function FINAL_SLASH_PCT() view returns(uint8)
func (_GYMToken *GYMTokenSession) FINALSLASHPCT() (uint8, error) {
	return _GYMToken.Contract.FINALSLASHPCT(&_GYMToken.CallOpts)
}

// FINALSLASHPCT is a free data retrieval call binding the contract method 0x4cd5d637.
//
// Solidity: function FINAL_SLASH_PCT() view returns(uint8)
func (_GYMToken *GYMTokenCallerSession) FINALSLASHPCT() (uint8, error) {
	return _GYMToken.Contract.FINALSLASHPCT(&_GYMToken.CallOpts)
}

// FIRSTSLASHPCT is a free data retrieval call binding the contract method 0x8d3abd7e.
//
// Solidity: function FIRST_SLASH_PCT() view returns(uint8)
func (_GYMToken *GYMTokenCaller) FIRSTSLASHPCT(opts *bind.CallOpts) (uint8, error) {
	var out []interface{}
	err := _GYMToken.contract.Call(opts, &out, "FIRST_SLASH_PCT")

	if err != nil {
		return *new(uint8), err
	}

	out0 := *abi.ConvertType(out[0], new(uint8)).(*uint8)

	return out0, err

}

// FIRSTSLASHPCT is a free data retrieval call binding the contract method 0x8d3abd7e.
//
// Solidity: function FIRST_SLASH_PCT() view returns(uint8)
func (_GYMToken *GYMTokenSession) FIRSTSLASHPCT() (uint8, error) {
	return _GYMToken.Contract.FIRSTSLASHPCT(&_GYMToken.CallOpts)
}

// FIRSTSLASHPCT is a free data retrieval call binding the contract method 0x8d3abd7e.
//
// Solidity: function FIRST_SLASH_PCT() view returns(uint8)
func (_GYMToken *GYMTokenCallerSession) FIRSTSLASHPCT() (uint8, error) {
	return _GYMToken.Contract.FIRSTSLASHPCT(&_GYMToken.CallOpts)
}

// MINTERROLE is a free data retrieval call binding the contract method 0xd5391393.
//
// Solidity: function MINTER_ROLE() view returns(bytes32)
func (_GYMToken *GYMTokenCaller) MINTERROLE(opts *bind.CallOpts) ([32]byte, error) {
	var out []interface{}
	err := _GYMToken.contract.Call(opts, &out, "MINTER_ROLE")

	if err != nil {
		return *new([32]byte), err
	}

	out0 := *abi.ConvertType(out[0], new([32]byte)).(*[32]byte)

	return out0, err

}

// MINTERROLE is a free data retrieval call binding the contract method 0xd5391393.
//
// Solidity: function MINTER_ROLE() view returns(bytes32)
func (_GYMToken *GYMTokenSession) MINTERROLE() ([32]byte, error) {
	return _GYMToken.Contract.MINTERROLE(&_GYMToken.CallOpts)
}

// MINTERROLE is a free data retrieval call binding the contract method 0xd5391393.
//
// Solidity: function MINTER_ROLE() view returns(bytes32)
func (_GYMToken *GYMTokenCallerSession) MINTERROLE() ([32]byte, error) {
	return _GYMToken.Contract.MINTERROLE(&_GYMToken.CallOpts)
}

// NODEMINSTAKE is a free data retrieval call binding the contract method 0x7661b302.
//
// Solidity: function NODE_MIN_STAKE() view returns(uint256)
func (_GYMToken *GYMTokenCaller) NODEMINSTAKE(opts *bind.CallOpts) (*big.Int, error) {
	var out []interface{}
	err := _GYMToken.contract.Call(opts, &out, "NODE_MIN_STAKE")

	if err != nil {
		return *new(*big.Int), err
	}

	out0 := *abi.ConvertType(out[0], new(*big.Int)).(**big.Int)

	return out0, err

}

// NODEMINSTAKE is a free data retrieval call binding the contract method 0x7661b302.
//
// Solidity: function NODE_MIN_STAKE() view returns(uint256)
func (_GYMToken *GYMTokenSession) NODEMINSTAKE() (*big.Int, error) {
	return _GYMToken.Contract.NODEMINSTAKE(&_GYMToken.CallOpts)
}

// NODEMINSTAKE is a free data retrieval call binding the contract method 0x7661b302.
//
// Solidity: function NODE_MIN_STAKE() view returns(uint256)
func (_GYMToken *GYMTokenCallerSession) NODEMINSTAKE() (*big.Int, error) {
	return _GYMToken.Contract.NODEMINSTAKE(&_GYMToken.CallOpts)
}

// ORCHESTRATORMINSTAKE is a free data retrieval call binding the contract method 0xe1ae055d.
//
// Solidity: function ORCHESTRATOR_MIN_STAKE() view returns(uint256)
func (_GYMToken *GYMTokenCaller) ORCHESTRATORMINSTAKE(opts *bind.CallOpts) (*big.Int, error) {
	var out []interface{}
	err := _GYMToken.contract.Call(opts, &out, "ORCHESTRATOR_MIN_STAKE")

	if err != nil {
		return *new(*big.Int), err
	}

	out0 := *abi.ConvertType(out[0], new(*big.Int)).(**big.Int)

	return out0, err

}

// ORCHESTRATORMINSTAKE is a free data retrieval call binding the contract method 0xe1ae055d.
//
// Solidity: function ORCHESTRATOR_MIN_STAKE() view returns(uint256)
func (_GYMToken *GYMTokenSession) ORCHESTRATORMINSTAKE() (*big.Int, error) {
	return _GYMToken.Contract.ORCHESTRATORMINSTAKE(&_GYMToken.CallOpts)
}

// ORCHESTRATORMINSTAKE is a free data retrieval call binding the contract method 0xe1ae055d.
//
// Solidity: function ORCHESTRATOR_MIN_STAKE() view returns(uint256)
func (_GYMToken *GYMTokenCallerSession) ORCHESTRATORMINSTAKE() (*big.Int, error) {
	return _GYMToken.Contract.ORCHESTRATORMINSTAKE(&_GYMToken.CallOpts)
}

// ORCHESTRATORROLE is a free data retrieval call binding the contract method 0x09e0a34f.
//
// Solidity: function ORCHESTRATOR_ROLE() view returns(bytes32)
func (_GYMToken *GYMTokenCaller) ORCHESTRATORROLE(opts *bind.CallOpts) ([32]byte, error) {
	var out []interface{}
	err := _GYMToken.contract.Call(opts, &out, "ORCHESTRATOR_ROLE")

	if err != nil {
		return *new([32]byte), err
	}

	out0 := *abi.ConvertType(out[0], new([32]byte)).(*[32]byte)

	return out0, err

}

// ORCHESTRATORROLE is a free data retrieval call binding the contract method 0x09e0a34f.
//
// Solidity: function ORCHESTRATOR_ROLE() view returns(bytes32)
func (_GYMToken *GYMTokenSession) ORCHESTRATORROLE() ([32]byte, error) {
	return _GYMToken.Contract.ORCHESTRATORROLE(&_GYMToken.CallOpts)
}

// ORCHESTRATORROLE is a free data retrieval call binding the contract method 0x09e0a34f.
//
// Solidity: function ORCHESTRATOR_ROLE() view returns(bytes32)
func (_GYMToken *GYMTokenCallerSession) ORCHESTRATORROLE() ([32]byte, error) {
	return _GYMToken.Contract.ORCHESTRATORROLE(&_GYMToken.CallOpts)
}

// ROLENODE is a free data retrieval call binding the contract method 0xe172cece.
//
// Solidity: function ROLE_NODE() view returns(uint8)
func (_GYMToken *GYMTokenCaller) ROLENODE(opts *bind.CallOpts) (uint8, error) {
	var out []interface{}
	err := _GYMToken.contract.Call(opts, &out, "ROLE_NODE")

	if err != nil {
		return *new(uint8), err
	}

	out0 := *abi.ConvertType(out[0], new(uint8)).(*uint8)

	return out0, err

}

// ROLENODE is a free data retrieval call binding the contract method 0xe172cece.
//
// Solidity: function ROLE_NODE() view returns(uint8)
func (_GYMToken *GYMTokenSession) ROLENODE() (uint8, error) {
	return _GYMToken.Contract.ROLENODE(&_GYMToken.CallOpts)
}

// ROLENODE is a free data retrieval call binding the contract method 0xe172cece.
//
// Solidity: function ROLE_NODE() view returns(uint8)
func (_GYMToken *GYMTokenCallerSession) ROLENODE() (uint8, error) {
	return _GYMToken.Contract.ROLENODE(&_GYMToken.CallOpts)
}

// ROLENONE is a free data retrieval call binding the contract method 0x77cc16e0.
//
// Solidity: function ROLE_NONE() view returns(uint8)
func (_GYMToken *GYMTokenCaller) ROLENONE(opts *bind.CallOpts) (uint8, error) {
	var out []interface{}
	err := _GYMToken.contract.Call(opts, &out, "ROLE_NONE")

	if err != nil {
		return *new(uint8), err
	}

	out0 := *abi.ConvertType(out[0], new(uint8)).(*uint8)

	return out0, err

}

// ROLENONE is a free data retrieval call binding the contract method 0x77cc16e0.
//
// Solidity: function ROLE_NONE() view returns(uint8)
func (_GYMToken *GYMTokenSession) ROLENONE() (uint8, error) {
	return _GYMToken.Contract.ROLENONE(&_GYMToken.CallOpts)
}

// ROLENONE is a free data retrieval call binding the contract method 0x77cc16e0.
//
// Solidity: function ROLE_NONE() view returns(uint8)
func (_GYMToken *GYMTokenCallerSession) ROLENONE() (uint8, error) {
	return _GYMToken.Contract.ROLENONE(&_GYMToken.CallOpts)
}

// ROLEORCHESTRATOR is a free data retrieval call binding the contract method 0xe2ae91a3.
//
// Solidity: function ROLE_ORCHESTRATOR() view returns(uint8)
func (_GYMToken *GYMTokenCaller) ROLEORCHESTRATOR(opts *bind.CallOpts) (uint8, error) {
	var out []interface{}
	err := _GYMToken.contract.Call(opts, &out, "ROLE_ORCHESTRATOR")

	if err != nil {
		return *new(uint8), err
	}

	out0 := *abi.ConvertType(out[0], new(uint8)).(*uint8)

	return out0, err

}

// ROLEORCHESTRATOR is a free data retrieval call binding the contract method 0xe2ae91a3.
//
// Solidity: function ROLE_ORCHESTRATOR() view returns(uint8)
func (_GYMToken *GYMTokenSession) ROLEORCHESTRATOR() (uint8, error) {
	return _GYMToken.Contract.ROLEORCHESTRATOR(&_GYMToken.CallOpts)
}

// ROLEORCHESTRATOR is a free data retrieval call binding the contract method 0xe2ae91a3.
//
// Solidity: function ROLE_ORCHESTRATOR() view returns(uint8)
func (_GYMToken *GYMTokenCallerSession) ROLEORCHESTRATOR() (uint8, error) {
	return _GYMToken.Contract.ROLEORCHESTRATOR(&_GYMToken.CallOpts)
}

// ROLEVALIDATOR is a free data retrieval call binding the contract method 0x7b4599d4.
//
// Solidity: function ROLE_VALIDATOR() view returns(uint8)
func (_GYMToken *GYMTokenCaller) ROLEVALIDATOR(opts *bind.CallOpts) (uint8, error) {
	var out []interface{}
	err := _GYMToken.contract.Call(opts, &out, "ROLE_VALIDATOR")

	if err != nil {
		return *new(uint8), err
	}

	out0 := *abi.ConvertType(out[0], new(uint8)).(*uint8)

	return out0, err

}

// ROLEVALIDATOR is a free data retrieval call binding the contract method 0x7b4599d4.
//
// Solidity: function ROLE_VALIDATOR() view returns(uint8)
func (_GYMToken *GYMTokenSession) ROLEVALIDATOR() (uint8, error) {
	return _GYMToken.Contract.ROLEVALIDATOR(&_GYMToken.CallOpts)
}

// ROLEVALIDATOR is a free data retrieval call binding the contract method 0x7b4599d4.
//
// Solidity: function ROLE_VALIDATOR() view returns(uint8)
func (_GYMToken *GYMTokenCallerSession) ROLEVALIDATOR() (uint8, error) {
	return _GYMToken.Contract.ROLEVALIDATOR(&_GYMToken.CallOpts)
}

// SECONDSLASHPCT is a free data retrieval call binding the contract method 0x41cbe69f.
//
// Solidity: function SECOND_SLASH_PCT() view returns(uint8)
func (_GYMToken *GYMTokenCaller) SECONDSLASHPCT(opts *bind.CallOpts) (uint8, error) {
	var out []interface{}
	err := _GYMToken.contract.Call(opts, &out, "SECOND_SLASH_PCT")

	if err != nil {
		return *new(uint8), err
	}

	out0 := *abi.ConvertType(out[0], new(uint8)).(*uint8)

	return out0, err

}

// SECONDSLASHPCT is a free data retrieval call binding the contract method 0x41cbe69f.
//
// Solidity: function SECOND_SLASH_PCT() view returns(uint8)
func (_GYMToken *GYMTokenSession) SECONDSLASHPCT() (uint8, error) {
	return _GYMToken.Contract.SECONDSLASHPCT(&_GYMToken.CallOpts)
}

// SECONDSLASHPCT is a free data retrieval call binding the contract method 0x41cbe69f.
//
// Solidity: function SECOND_SLASH_PCT() view returns(uint8)
func (_GYMToken *GYMTokenCallerSession) SECONDSLASHPCT() (uint8, error) {
	return _GYMToken.Contract.SECONDSLASHPCT(&_GYMToken.CallOpts)
}

// VALIDATORMINSTAKE is a free data retrieval call binding the contract method 0x50633b3d.
//
// Solidity: function VALIDATOR_MIN_STAKE() view returns(uint256)
func (_GYMToken *GYMTokenCaller) VALIDATORMINSTAKE(opts *bind.CallOpts) (*big.Int, error) {
	var out []interface{}
	err := _GYMToken.contract.Call(opts, &out, "VALIDATOR_MIN_STAKE")

	if err != nil {
		return *new(*big.Int), err
	}

	out0 := *abi.ConvertType(out[0], new(*big.Int)).(**big.Int)

	return out0, err

}

// VALIDATORMINSTAKE is a free data retrieval call binding the contract method 0x50633b3d.
//
// Solidity: function VALIDATOR_MIN_STAKE() view returns(uint256)
func (_GYMToken *GYMTokenSession) VALIDATORMINSTAKE() (*big.Int, error) {
	return _GYMToken.Contract.VALIDATORMINSTAKE(&_GYMToken.CallOpts)
}

// VALIDATORMINSTAKE is a free data retrieval call binding the contract method 0x50633b3d.
//
// Solidity: function VALIDATOR_MIN_STAKE() view returns(uint256)
func (_GYMToken *GYMTokenCallerSession) VALIDATORMINSTAKE() (*big.Int, error) {
	return _GYMToken.Contract.VALIDATORMINSTAKE(&_GYMToken.CallOpts)
}

// Allowance is a free data retrieval call binding the contract method 0xdd62ed3e.
//
// Solidity: function allowance(address owner, address spender) view returns(uint256)
func (_GYMToken *GYMTokenCaller) Allowance(opts *bind.CallOpts, owner common.Address, spender common.Address) (*big.Int, error) {
	var out []interface{}
	err := _GYMToken.contract.Call(opts, &out, "allowance", owner, spender)

	if err != nil {
		return *new(*big.Int), err
	}

	out0 := *abi.ConvertType(out[0], new(*big.Int)).(**big.Int)

	return out0, err

}

// Allowance is a free data retrieval call binding the contract method 0xdd62ed3e.
//
// Solidity: function allowance(address owner, address spender) view returns(uint256)
func (_GYMToken *GYMTokenSession) Allowance(owner common.Address, spender common.Address) (*big.Int, error) {
	return _GYMToken.Contract.Allowance(&_GYMToken.CallOpts, owner, spender)
}

// Allowance is a free data retrieval call binding the contract method 0xdd62ed3e.
//
// Solidity: function allowance(address owner, address spender) view returns(uint256)
func (_GYMToken *GYMTokenCallerSession) Allowance(owner common.Address, spender common.Address) (*big.Int, error) {
	return _GYMToken.Contract.Allowance(&_GYMToken.CallOpts, owner, spender)
}

// BalanceOf is a free data retrieval call binding the contract method 0x70a08231.
//
// Solidity: function balanceOf(address account) view returns(uint256)
func (_GYMToken *GYMTokenCaller) BalanceOf(opts *bind.CallOpts, account common.Address) (*big.Int, error) {
	var out []interface{}
	err := _GYMToken.contract.Call(opts, &out, "balanceOf", account)

	if err != nil {
		return *new(*big.Int), err
	}

	out0 := *abi.ConvertType(out[0], new(*big.Int)).(**big.Int)

	return out0, err

}

// BalanceOf is a free data retrieval call binding the contract method 0x70a08231.
//
// Solidity: function balanceOf(address account) view returns(uint256)
func (_GYMToken *GYMTokenSession) BalanceOf(account common.Address) (*big.Int, error) {
	return _GYMToken.Contract.BalanceOf(&_GYMToken.CallOpts, account)
}

// BalanceOf is a free data retrieval call binding the contract method 0x70a08231.
//
// Solidity: function balanceOf(address account) view returns(uint256)
func (_GYMToken *GYMTokenCallerSession) BalanceOf(account common.Address) (*big.Int, error) {
	return _GYMToken.Contract.BalanceOf(&_GYMToken.CallOpts, account)
}

// Banned is a free data retrieval call binding the contract method 0x9c8d83bb.
//
// Solidity: function banned(address account) view returns(bool)
func (_GYMToken *GYMTokenCaller) Banned(opts *bind.CallOpts, account common.Address) (bool, error) {
	var out []interface{}
	err := _GYMToken.contract.Call(opts, &out, "banned", account)

	if err != nil {
		return *new(bool), err
	}

	out0 := *abi.ConvertType(out[0], new(bool)).(*bool)

	return out0, err

}

// Banned is a free data retrieval call binding the contract method 0x9c8d83bb.
//
// Solidity: function banned(address account) view returns(bool)
func (_GYMToken *GYMTokenSession) Banned(account common.Address) (bool, error) {
	return _GYMToken.Contract.Banned(&_GYMToken.CallOpts, account)
}

// Banned is a free data retrieval call binding the contract method 0x9c8d83bb.
//
// Solidity: function banned(address account) view returns(bool)
func (_GYMToken *GYMTokenCallerSession) Banned(account common.Address) (bool, error) {
	return _GYMToken.Contract.Banned(&_GYMToken.CallOpts, account)
}

// Decimals is a free data retrieval call binding the contract method 0x313ce567.
//
// Solidity: function decimals() pure returns(uint8)
func (_GYMToken *GYMTokenCaller) Decimals(opts *bind.CallOpts) (uint8, error) {
	var out []interface{}
	err := _GYMToken.contract.Call(opts, &out, "decimals")

	if err != nil {
		return *new(uint8), err
	}

	out0 := *abi.ConvertType(out[0], new(uint8)).(*uint8)

	return out0, err

}

// Decimals is a free data retrieval call binding the contract method 0x313ce567.
//
// Solidity: function decimals() pure returns(uint8)
func (_GYMToken *GYMTokenSession) Decimals() (uint8, error) {
	return _GYMToken.Contract.Decimals(&_GYMToken.CallOpts)
}

// Decimals is a free data retrieval call binding the contract method 0x313ce567.
//
// Solidity: function decimals() pure returns(uint8)
func (_GYMToken *GYMTokenCallerSession) Decimals() (uint8, error) {
	return _GYMToken.Contract.Decimals(&_GYMToken.CallOpts)
}

// GetRoleAdmin is a free data retrieval call binding the contract method 0x248a9ca3.
//
// Solidity: function getRoleAdmin(bytes32 role) view returns(bytes32)
func (_GYMToken *GYMTokenCaller) GetRoleAdmin(opts *bind.CallOpts, role [32]byte) ([32]byte, error) {
	var out []interface{}
	err := _GYMToken.contract.Call(opts, &out, "getRoleAdmin", role)

	if err != nil {
		return *new([32]byte), err
	}

	out0 := *abi.ConvertType(out[0], new([32]byte)).(*[32]byte)

	return out0, err

}

// GetRoleAdmin is a free data retrieval call binding the contract method 0x248a9ca3.
//
// Solidity: function getRoleAdmin(bytes32 role) view returns(bytes32)
func (_GYMToken *GYMTokenSession) GetRoleAdmin(role [32]byte) ([32]byte, error) {
	return _GYMToken.Contract.GetRoleAdmin(&_GYMToken.CallOpts, role)
}

// GetRoleAdmin is a free data retrieval call binding the contract method 0x248a9ca3.
//
// Solidity: function getRoleAdmin(bytes32 role) view returns(bytes32)
func (_GYMToken *GYMTokenCallerSession) GetRoleAdmin(role [32]byte) ([32]byte, error) {
	return _GYMToken.Contract.GetRoleAdmin(&_GYMToken.CallOpts, role)
}

// HasRole is a free data retrieval call binding the contract method 0x91d14854.
//
// Solidity: function hasRole(bytes32 role, address account) view returns(bool)
func (_GYMToken *GYMTokenCaller) HasRole(opts *bind.CallOpts, role [32]byte, account common.Address) (bool, error) {
	var out []interface{}
	err := _GYMToken.contract.Call(opts, &out, "hasRole", role, account)

	if err != nil {
		return *new(bool), err
	}

	out0 := *abi.ConvertType(out[0], new(bool)).(*bool)

	return out0, err

}

// HasRole is a free data retrieval call binding the contract method 0x91d14854.
//
// Solidity: function hasRole(bytes32 role, address account) view returns(bool)
func (_GYMToken *GYMTokenSession) HasRole(role [32]byte, account common.Address) (bool, error) {
	return _GYMToken.Contract.HasRole(&_GYMToken.CallOpts, role, account)
}

// HasRole is a free data retrieval call binding the contract method 0x91d14854.
//
// Solidity: function hasRole(bytes32 role, address account) view returns(bool)
func (_GYMToken *GYMTokenCallerSession) HasRole(role [32]byte, account common.Address) (bool, error) {
	return _GYMToken.Contract.HasRole(&_GYMToken.CallOpts, role, account)
}

// IsOrchestrator is a free data retrieval call binding the contract method 0xd701dcbd.
//
// Solidity: function isOrchestrator(address account) view returns(bool)
func (_GYMToken *GYMTokenCaller) IsOrchestrator(opts *bind.CallOpts, account common.Address) (bool, error) {
	var out []interface{}
	err := _GYMToken.contract.Call(opts, &out, "isOrchestrator", account)

	if err != nil {
		return *new(bool), err
	}

	out0 := *abi.ConvertType(out[0], new(bool)).(*bool)

	return out0, err

}

// IsOrchestrator is a free data retrieval call binding the contract method 0xd701dcbd.
//
// Solidity: function isOrchestrator(address account) view returns(bool)
func (_GYMToken *GYMTokenSession) IsOrchestrator(account common.Address) (bool, error) {
	return _GYMToken.Contract.IsOrchestrator(&_GYMToken.CallOpts, account)
}

// IsOrchestrator is a free data retrieval call binding the contract method 0xd701dcbd.
//
// Solidity: function isOrchestrator(address account) view returns(bool)
func (_GYMToken *GYMTokenCallerSession) IsOrchestrator(account common.Address) (bool, error) {
	return _GYMToken.Contract.IsOrchestrator(&_GYMToken.CallOpts, account)
}

// IsStaked is a free data retrieval call binding the contract method 0xafa5e6c4.
//
// Solidity: function isStaked(address account, uint8 role) view returns(bool)
func (_GYMToken *GYMTokenCaller) IsStaked(opts *bind.CallOpts, account common.Address, role uint8) (bool, error) {
	var out []interface{}
	err := _GYMToken.contract.Call(opts, &out, "isStaked", account, role)

	if err != nil {
		return *new(bool), err
	}

	out0 := *abi.ConvertType(out[0], new(bool)).(*bool)

	return out0, err

}

// IsStaked is a free data retrieval call binding the contract method 0xafa5e6c4.
//
// Solidity: function isStaked(address account, uint8 role) view returns(bool)
func (_GYMToken *GYMTokenSession) IsStaked(account common.Address, role uint8) (bool, error) {
	return _GYMToken.Contract.IsStaked(&_GYMToken.CallOpts, account, role)
}

// IsStaked is a free data retrieval call binding the contract method 0xafa5e6c4.
//
// Solidity: function isStaked(address account, uint8 role) view returns(bool)
func (_GYMToken *GYMTokenCallerSession) IsStaked(account common.Address, role uint8) (bool, error) {
	return _GYMToken.Contract.IsStaked(&_GYMToken.CallOpts, account, role)
}

// LockedFor is a free data retrieval call binding the contract method 0xff52f39e.
//
// Solidity: function lockedFor(bytes32 , address ) view returns(bool)
func (_GYMToken *GYMTokenCaller) LockedFor(opts *bind.CallOpts, arg0 [32]byte, arg1 common.Address) (bool, error) {
	var out []interface{}
	err := _GYMToken.contract.Call(opts, &out, "lockedFor", arg0, arg1)

	if err != nil {
		return *new(bool), err
	}

	out0 := *abi.ConvertType(out[0], new(bool)).(*bool)

	return out0, err

}

// LockedFor is a free data retrieval call binding the contract method 0xff52f39e.
//
// Solidity: function lockedFor(bytes32 , address ) view returns(bool)
func (_GYMToken *GYMTokenSession) LockedFor(arg0 [32]byte, arg1 common.Address) (bool, error) {
	return _GYMToken.Contract.LockedFor(&_GYMToken.CallOpts, arg0, arg1)
}

// LockedFor is a free data retrieval call binding the contract method 0xff52f39e.
//
// Solidity: function lockedFor(bytes32 , address ) view returns(bool)
func (_GYMToken *GYMTokenCallerSession) LockedFor(arg0 [32]byte, arg1 common.Address) (bool, error) {
	return _GYMToken.Contract.LockedFor(&_GYMToken.CallOpts, arg0, arg1)
}

// Locks is a free data retrieval call binding the contract method 0x5de9a137.
//
// Solidity: function locks(address account) view returns(uint32)
func (_GYMToken *GYMTokenCaller) Locks(opts *bind.CallOpts, account common.Address) (uint32, error) {
	var out []interface{}
	err := _GYMToken.contract.Call(opts, &out, "locks", account)

	if err != nil {
		return *new(uint32), err
	}

	out0 := *abi.ConvertType(out[0], new(uint32)).(*uint32)

	return out0, err

}

// Locks is a free data retrieval call binding the contract method 0x5de9a137.
//
// Solidity: function locks(address account) view returns(uint32)
func (_GYMToken *GYMTokenSession) Locks(account common.Address) (uint32, error) {
	return _GYMToken.Contract.Locks(&_GYMToken.CallOpts, account)
}

// Locks is a free data retrieval call binding the contract method 0x5de9a137.
//
// Solidity: function locks(address account) view returns(uint32)
func (_GYMToken *GYMTokenCallerSession) Locks(account common.Address) (uint32, error) {
	return _GYMToken.Contract.Locks(&_GYMToken.CallOpts, account)
}

// MinimumStake is a free data retrieval call binding the contract method 0x796a486c.
//
// Solidity: function minimumStake(uint8 role) pure returns(uint256)
func (_GYMToken *GYMTokenCaller) MinimumStake(opts *bind.CallOpts, role uint8) (*big.Int, error) {
	var out []interface{}
	err := _GYMToken.contract.Call(opts, &out, "minimumStake", role)

	if err != nil {
		return *new(*big.Int), err
	}

	out0 := *abi.ConvertType(out[0], new(*big.Int)).(**big.Int)

	return out0, err

}

// MinimumStake is a free data retrieval call binding the contract method 0x796a486c.
//
// Solidity: function minimumStake(uint8 role) pure returns(uint256)
func (_GYMToken *GYMTokenSession) MinimumStake(role uint8) (*big.Int, error) {
	return _GYMToken.Contract.MinimumStake(&_GYMToken.CallOpts, role)
}

// MinimumStake is a free data retrieval call binding the contract method 0x796a486c.
//
// Solidity: function minimumStake(uint8 role) pure returns(uint256)
func (_GYMToken *GYMTokenCallerSession) MinimumStake(role uint8) (*big.Int, error) {
	return _GYMToken.Contract.MinimumStake(&_GYMToken.CallOpts, role)
}

// Name is a free data retrieval call binding the contract method 0x06fdde03.
//
// Solidity: function name() view returns(string)
func (_GYMToken *GYMTokenCaller) Name(opts *bind.CallOpts) (string, error) {
	var out []interface{}
	err := _GYMToken.contract.Call(opts, &out, "name")

	if err != nil {
		return *new(string), err
	}

	out0 := *abi.ConvertType(out[0], new(string)).(*string)

	return out0, err

}

// Name is a free data retrieval call binding the contract method 0x06fdde03.
//
// Solidity: function name() view returns(string)
func (_GYMToken *GYMTokenSession) Name() (string, error) {
	return _GYMToken.Contract.Name(&_GYMToken.CallOpts)
}

// Name is a free data retrieval call binding the contract method 0x06fdde03.
//
// Solidity: function name() view returns(string)
func (_GYMToken *GYMTokenCallerSession) Name() (string, error) {
	return _GYMToken.Contract.Name(&_GYMToken.CallOpts)
}

// NextSlashPct is a free data retrieval call binding the contract method 0x3c996b37.
//
// Solidity: function nextSlashPct(address account) view returns(uint8)
func (_GYMToken *GYMTokenCaller) NextSlashPct(opts *bind.CallOpts, account common.Address) (uint8, error) {
	var out []interface{}
	err := _GYMToken.contract.Call(opts, &out, "nextSlashPct", account)

	if err != nil {
		return *new(uint8), err
	}

	out0 := *abi.ConvertType(out[0], new(uint8)).(*uint8)

	return out0, err

}

// NextSlashPct is a free data retrieval call binding the contract method 0x3c996b37.
//
// Solidity: function nextSlashPct(address account) view returns(uint8)
func (_GYMToken *GYMTokenSession) NextSlashPct(account common.Address) (uint8, error) {
	return _GYMToken.Contract.NextSlashPct(&_GYMToken.CallOpts, account)
}

// NextSlashPct is a free data retrieval call binding the contract method 0x3c996b37.
//
// Solidity: function nextSlashPct(address account) view returns(uint8)
func (_GYMToken *GYMTokenCallerSession) NextSlashPct(account common.Address) (uint8, error) {
	return _GYMToken.Contract.NextSlashPct(&_GYMToken.CallOpts, account)
}

// NodeKeyOf is a free data retrieval call binding the contract method 0x4cfb92df.
//
// Solidity: function nodeKeyOf(address ) view returns(bytes32)
func (_GYMToken *GYMTokenCaller) NodeKeyOf(opts *bind.CallOpts, arg0 common.Address) ([32]byte, error) {
	var out []interface{}
	err := _GYMToken.contract.Call(opts, &out, "nodeKeyOf", arg0)

	if err != nil {
		return *new([32]byte), err
	}

	out0 := *abi.ConvertType(out[0], new([32]byte)).(*[32]byte)

	return out0, err

}

// NodeKeyOf is a free data retrieval call binding the contract method 0x4cfb92df.
//
// Solidity: function nodeKeyOf(address ) view returns(bytes32)
func (_GYMToken *GYMTokenSession) NodeKeyOf(arg0 common.Address) ([32]byte, error) {
	return _GYMToken.Contract.NodeKeyOf(&_GYMToken.CallOpts, arg0)
}

// NodeKeyOf is a free data retrieval call binding the contract method 0x4cfb92df.
//
// Solidity: function nodeKeyOf(address ) view returns(bytes32)
func (_GYMToken *GYMTokenCallerSession) NodeKeyOf(arg0 common.Address) ([32]byte, error) {
	return _GYMToken.Contract.NodeKeyOf(&_GYMToken.CallOpts, arg0)
}

// RoleOf is a free data retrieval call binding the contract method 0xa5d7827e.
//
// Solidity: function roleOf(address account) view returns(uint8)
func (_GYMToken *GYMTokenCaller) RoleOf(opts *bind.CallOpts, account common.Address) (uint8, error) {
	var out []interface{}
	err := _GYMToken.contract.Call(opts, &out, "roleOf", account)

	if err != nil {
		return *new(uint8), err
	}

	out0 := *abi.ConvertType(out[0], new(uint8)).(*uint8)

	return out0, err

}

// RoleOf is a free data retrieval call binding the contract method 0xa5d7827e.
//
// Solidity: function roleOf(address account) view returns(uint8)
func (_GYMToken *GYMTokenSession) RoleOf(account common.Address) (uint8, error) {
	return _GYMToken.Contract.RoleOf(&_GYMToken.CallOpts, account)
}

// RoleOf is a free data retrieval call binding the contract method 0xa5d7827e.
//
// Solidity: function roleOf(address account) view returns(uint8)
func (_GYMToken *GYMTokenCallerSession) RoleOf(account common.Address) (uint8, error) {
	return _GYMToken.Contract.RoleOf(&_GYMToken.CallOpts, account)
}

// SlashesOf is a free data retrieval call binding the contract method 0x2fc67d0c.
//
// Solidity: function slashesOf(address account) view returns((uint8,uint8,uint64,uint128,address,bytes32)[])
func (_GYMToken *GYMTokenCaller) SlashesOf(opts *bind.CallOpts, account common.Address) ([]GYMTokenSlashRecord, error) {
	var out []interface{}
	err := _GYMToken.contract.Call(opts, &out, "slashesOf", account)

	if err != nil {
		return *new([]GYMTokenSlashRecord), err
	}

	out0 := *abi.ConvertType(out[0], new([]GYMTokenSlashRecord)).(*[]GYMTokenSlashRecord)

	return out0, err

}

// SlashesOf is a free data retrieval call binding the contract method 0x2fc67d0c.
//
// Solidity: function slashesOf(address account) view returns((uint8,uint8,uint64,uint128,address,bytes32)[])
func (_GYMToken *GYMTokenSession) SlashesOf(account common.Address) ([]GYMTokenSlashRecord, error) {
	return _GYMToken.Contract.SlashesOf(&_GYMToken.CallOpts, account)
}

// SlashesOf is a free data retrieval call binding the contract method 0x2fc67d0c.
//
// Solidity: function slashesOf(address account) view returns((uint8,uint8,uint64,uint128,address,bytes32)[])
func (_GYMToken *GYMTokenCallerSession) SlashesOf(account common.Address) ([]GYMTokenSlashRecord, error) {
	return _GYMToken.Contract.SlashesOf(&_GYMToken.CallOpts, account)
}

// Stakes is a free data retrieval call binding the contract method 0x16934fc4.
//
// Solidity: function stakes(address account) view returns(uint256)
func (_GYMToken *GYMTokenCaller) Stakes(opts *bind.CallOpts, account common.Address) (*big.Int, error) {
	var out []interface{}
	err := _GYMToken.contract.Call(opts, &out, "stakes", account)

	if err != nil {
		return *new(*big.Int), err
	}

	out0 := *abi.ConvertType(out[0], new(*big.Int)).(**big.Int)

	return out0, err

}

// Stakes is a free data retrieval call binding the contract method 0x16934fc4.
//
// Solidity: function stakes(address account) view returns(uint256)
func (_GYMToken *GYMTokenSession) Stakes(account common.Address) (*big.Int, error) {
	return _GYMToken.Contract.Stakes(&_GYMToken.CallOpts, account)
}

// Stakes is a free data retrieval call binding the contract method 0x16934fc4.
//
// Solidity: function stakes(address account) view returns(uint256)
func (_GYMToken *GYMTokenCallerSession) Stakes(account common.Address) (*big.Int, error) {
	return _GYMToken.Contract.Stakes(&_GYMToken.CallOpts, account)
}

// SupportsInterface is a free data retrieval call binding the contract method 0x01ffc9a7.
//
// Solidity: function supportsInterface(bytes4 interfaceId) view returns(bool)
func (_GYMToken *GYMTokenCaller) SupportsInterface(opts *bind.CallOpts, interfaceId [4]byte) (bool, error) {
	var out []interface{}
	err := _GYMToken.contract.Call(opts, &out, "supportsInterface", interfaceId)

	if err != nil {
		return *new(bool), err
	}

	out0 := *abi.ConvertType(out[0], new(bool)).(*bool)

	return out0, err

}

// SupportsInterface is a free data retrieval call binding the contract method 0x01ffc9a7.
//
// Solidity: function supportsInterface(bytes4 interfaceId) view returns(bool)
func (_GYMToken *GYMTokenSession) SupportsInterface(interfaceId [4]byte) (bool, error) {
	return _GYMToken.Contract.SupportsInterface(&_GYMToken.CallOpts, interfaceId)
}

// SupportsInterface is a free data retrieval call binding the contract method 0x01ffc9a7.
//
// Solidity: function supportsInterface(bytes4 interfaceId) view returns(bool)
func (_GYMToken *GYMTokenCallerSession) SupportsInterface(interfaceId [4]byte) (bool, error) {
	return _GYMToken.Contract.SupportsInterface(&_GYMToken.CallOpts, interfaceId)
}

// Symbol is a free data retrieval call binding the contract method 0x95d89b41.
//
// Solidity: function symbol() view returns(string)
func (_GYMToken *GYMTokenCaller) Symbol(opts *bind.CallOpts) (string, error) {
	var out []interface{}
	err := _GYMToken.contract.Call(opts, &out, "symbol")

	if err != nil {
		return *new(string), err
	}

	out0 := *abi.ConvertType(out[0], new(string)).(*string)

	return out0, err

}

// Symbol is a free data retrieval call binding the contract method 0x95d89b41.
//
// Solidity: function symbol() view returns(string)
func (_GYMToken *GYMTokenSession) Symbol() (string, error) {
	return _GYMToken.Contract.Symbol(&_GYMToken.CallOpts)
}

// Symbol is a free data retrieval call binding the contract method 0x95d89b41.
//
// Solidity: function symbol() view returns(string)
func (_GYMToken *GYMTokenCallerSession) Symbol() (string, error) {
	return _GYMToken.Contract.Symbol(&_GYMToken.CallOpts)
}

// TotalSupply is a free data retrieval call binding the contract method 0x18160ddd.
//
// Solidity: function totalSupply() view returns(uint256)
func (_GYMToken *GYMTokenCaller) TotalSupply(opts *bind.CallOpts) (*big.Int, error) {
	var out []interface{}
	err := _GYMToken.contract.Call(opts, &out, "totalSupply")

	if err != nil {
		return *new(*big.Int), err
	}

	out0 := *abi.ConvertType(out[0], new(*big.Int)).(**big.Int)

	return out0, err

}

// TotalSupply is a free data retrieval call binding the contract method 0x18160ddd.
//
// Solidity: function totalSupply() view returns(uint256)
func (_GYMToken *GYMTokenSession) TotalSupply() (*big.Int, error) {
	return _GYMToken.Contract.TotalSupply(&_GYMToken.CallOpts)
}

// TotalSupply is a free data retrieval call binding the contract method 0x18160ddd.
//
// Solidity: function totalSupply() view returns(uint256)
func (_GYMToken *GYMTokenCallerSession) TotalSupply() (*big.Int, error) {
	return _GYMToken.Contract.TotalSupply(&_GYMToken.CallOpts)
}

// Treasury is a free data retrieval call binding the contract method 0x61d027b3.
//
// Solidity: function treasury() view returns(address)
func (_GYMToken *GYMTokenCaller) Treasury(opts *bind.CallOpts) (common.Address, error) {
	var out []interface{}
	err := _GYMToken.contract.Call(opts, &out, "treasury")

	if err != nil {
		return *new(common.Address), err
	}

	out0 := *abi.ConvertType(out[0], new(common.Address)).(*common.Address)

	return out0, err

}

// Treasury is a free data retrieval call binding the contract method 0x61d027b3.
//
// Solidity: function treasury() view returns(address)
func (_GYMToken *GYMTokenSession) Treasury() (common.Address, error) {
	return _GYMToken.Contract.Treasury(&_GYMToken.CallOpts)
}

// Treasury is a free data retrieval call binding the contract method 0x61d027b3.
//
// Solidity: function treasury() view returns(address)
func (_GYMToken *GYMTokenCallerSession) Treasury() (common.Address, error) {
	return _GYMToken.Contract.Treasury(&_GYMToken.CallOpts)
}

// UnbondingDelay is a free data retrieval call binding the contract method 0xdb7dd35a.
//
// Solidity: function unbondingDelay() view returns(uint64)
func (_GYMToken *GYMTokenCaller) UnbondingDelay(opts *bind.CallOpts) (uint64, error) {
	var out []interface{}
	err := _GYMToken.contract.Call(opts, &out, "unbondingDelay")

	if err != nil {
		return *new(uint64), err
	}

	out0 := *abi.ConvertType(out[0], new(uint64)).(*uint64)

	return out0, err

}

// UnbondingDelay is a free data retrieval call binding the contract method 0xdb7dd35a.
//
// Solidity: function unbondingDelay() view returns(uint64)
func (_GYMToken *GYMTokenSession) UnbondingDelay() (uint64, error) {
	return _GYMToken.Contract.UnbondingDelay(&_GYMToken.CallOpts)
}

// UnbondingDelay is a free data retrieval call binding the contract method 0xdb7dd35a.
//
// Solidity: function unbondingDelay() view returns(uint64)
func (_GYMToken *GYMTokenCallerSession) UnbondingDelay() (uint64, error) {
	return _GYMToken.Contract.UnbondingDelay(&_GYMToken.CallOpts)
}

// UnbondingOf is a free data retrieval call binding the contract method 0xacf09912.
//
// Solidity: function unbondingOf(address account) view returns((uint192,uint64)[])
func (_GYMToken *GYMTokenCaller) UnbondingOf(opts *bind.CallOpts, account common.Address) ([]GYMTokenUnbonding, error) {
	var out []interface{}
	err := _GYMToken.contract.Call(opts, &out, "unbondingOf", account)

	if err != nil {
		return *new([]GYMTokenUnbonding), err
	}

	out0 := *abi.ConvertType(out[0], new([]GYMTokenUnbonding)).(*[]GYMTokenUnbonding)

	return out0, err

}

// UnbondingOf is a free data retrieval call binding the contract method 0xacf09912.
//
// Solidity: function unbondingOf(address account) view returns((uint192,uint64)[])
func (_GYMToken *GYMTokenSession) UnbondingOf(account common.Address) ([]GYMTokenUnbonding, error) {
	return _GYMToken.Contract.UnbondingOf(&_GYMToken.CallOpts, account)
}

// UnbondingOf is a free data retrieval call binding the contract method 0xacf09912.
//
// Solidity: function unbondingOf(address account) view returns((uint192,uint64)[])
func (_GYMToken *GYMTokenCallerSession) UnbondingOf(account common.Address) ([]GYMTokenUnbonding, error) {
	return _GYMToken.Contract.UnbondingOf(&_GYMToken.CallOpts, account)
}

// UnbondingTotal is a free data retrieval call binding the contract method 0xa576a923.
//
// Solidity: function unbondingTotal(address account) view returns(uint256 total)
func (_GYMToken *GYMTokenCaller) UnbondingTotal(opts *bind.CallOpts, account common.Address) (*big.Int, error) {
	var out []interface{}
	err := _GYMToken.contract.Call(opts, &out, "unbondingTotal", account)

	if err != nil {
		return *new(*big.Int), err
	}

	out0 := *abi.ConvertType(out[0], new(*big.Int)).(**big.Int)

	return out0, err

}

// UnbondingTotal is a free data retrieval call binding the contract method 0xa576a923.
//
// Solidity: function unbondingTotal(address account) view returns(uint256 total)
func (_GYMToken *GYMTokenSession) UnbondingTotal(account common.Address) (*big.Int, error) {
	return _GYMToken.Contract.UnbondingTotal(&_GYMToken.CallOpts, account)
}

// UnbondingTotal is a free data retrieval call binding the contract method 0xa576a923.
//
// Solidity: function unbondingTotal(address account) view returns(uint256 total)
func (_GYMToken *GYMTokenCallerSession) UnbondingTotal(account common.Address) (*big.Int, error) {
	return _GYMToken.Contract.UnbondingTotal(&_GYMToken.CallOpts, account)
}

// Approve is a paid mutator transaction binding the contract method 0x095ea7b3.
//
// Solidity: function approve(address spender, uint256 value) returns(bool)
func (_GYMToken *GYMTokenTransactor) Approve(opts *bind.TransactOpts, spender common.Address, value *big.Int) (*types.Transaction, error) {
	return _GYMToken.contract.Transact(opts, "approve", spender, value)
}

// Approve is a paid mutator transaction binding the contract method 0x095ea7b3.
//
// Solidity: function approve(address spender, uint256 value) returns(bool)
func (_GYMToken *GYMTokenSession) Approve(spender common.Address, value *big.Int) (*types.Transaction, error) {
	return _GYMToken.Contract.Approve(&_GYMToken.TransactOpts, spender, value)
}

// Approve is a paid mutator transaction binding the contract method 0x095ea7b3.
//
// Solidity: function approve(address spender, uint256 value) returns(bool)
func (_GYMToken *GYMTokenTransactorSession) Approve(spender common.Address, value *big.Int) (*types.Transaction, error) {
	return _GYMToken.Contract.Approve(&_GYMToken.TransactOpts, spender, value)
}

// BindNode is a paid mutator transaction binding the contract method 0xf5aefaab.
//
// Solidity: function bindNode(bytes32 nodeKey, bytes signature) returns()
func (_GYMToken *GYMTokenTransactor) BindNode(opts *bind.TransactOpts, nodeKey [32]byte, signature []byte) (*types.Transaction, error) {
	return _GYMToken.contract.Transact(opts, "bindNode", nodeKey, signature)
}

// BindNode is a paid mutator transaction binding the contract method 0xf5aefaab.
//
// Solidity: function bindNode(bytes32 nodeKey, bytes signature) returns()
func (_GYMToken *GYMTokenSession) BindNode(nodeKey [32]byte, signature []byte) (*types.Transaction, error) {
	return _GYMToken.Contract.BindNode(&_GYMToken.TransactOpts, nodeKey, signature)
}

// BindNode is a paid mutator transaction binding the contract method 0xf5aefaab.
//
// Solidity: function bindNode(bytes32 nodeKey, bytes signature) returns()
func (_GYMToken *GYMTokenTransactorSession) BindNode(nodeKey [32]byte, signature []byte) (*types.Transaction, error) {
	return _GYMToken.Contract.BindNode(&_GYMToken.TransactOpts, nodeKey, signature)
}

// GrantRole is a paid mutator transaction binding the contract method 0x2f2ff15d.
//
// Solidity: function grantRole(bytes32 role, address account) returns()
func (_GYMToken *GYMTokenTransactor) GrantRole(opts *bind.TransactOpts, role [32]byte, account common.Address) (*types.Transaction, error) {
	return _GYMToken.contract.Transact(opts, "grantRole", role, account)
}

// GrantRole is a paid mutator transaction binding the contract method 0x2f2ff15d.
//
// Solidity: function grantRole(bytes32 role, address account) returns()
func (_GYMToken *GYMTokenSession) GrantRole(role [32]byte, account common.Address) (*types.Transaction, error) {
	return _GYMToken.Contract.GrantRole(&_GYMToken.TransactOpts, role, account)
}

// GrantRole is a paid mutator transaction binding the contract method 0x2f2ff15d.
//
// Solidity: function grantRole(bytes32 role, address account) returns()
func (_GYMToken *GYMTokenTransactorSession) GrantRole(role [32]byte, account common.Address) (*types.Transaction, error) {
	return _GYMToken.Contract.GrantRole(&_GYMToken.TransactOpts, role, account)
}

// Lock is a paid mutator transaction binding the contract method 0x15cb9268.
//
// Solidity: function lock(bytes32 job, address[] members) returns()
func (_GYMToken *GYMTokenTransactor) Lock(opts *bind.TransactOpts, job [32]byte, members []common.Address) (*types.Transaction, error) {
	return _GYMToken.contract.Transact(opts, "lock", job, members)
}

// Lock is a paid mutator transaction binding the contract method 0x15cb9268.
//
// Solidity: function lock(bytes32 job, address[] members) returns()
func (_GYMToken *GYMTokenSession) Lock(job [32]byte, members []common.Address) (*types.Transaction, error) {
	return _GYMToken.Contract.Lock(&_GYMToken.TransactOpts, job, members)
}

// Lock is a paid mutator transaction binding the contract method 0x15cb9268.
//
// Solidity: function lock(bytes32 job, address[] members) returns()
func (_GYMToken *GYMTokenTransactorSession) Lock(job [32]byte, members []common.Address) (*types.Transaction, error) {
	return _GYMToken.Contract.Lock(&_GYMToken.TransactOpts, job, members)
}

// Mint is a paid mutator transaction binding the contract method 0x40c10f19.
//
// Solidity: function mint(address to, uint256 amount) returns()
func (_GYMToken *GYMTokenTransactor) Mint(opts *bind.TransactOpts, to common.Address, amount *big.Int) (*types.Transaction, error) {
	return _GYMToken.contract.Transact(opts, "mint", to, amount)
}

// Mint is a paid mutator transaction binding the contract method 0x40c10f19.
//
// Solidity: function mint(address to, uint256 amount) returns()
func (_GYMToken *GYMTokenSession) Mint(to common.Address, amount *big.Int) (*types.Transaction, error) {
	return _GYMToken.Contract.Mint(&_GYMToken.TransactOpts, to, amount)
}

// Mint is a paid mutator transaction binding the contract method 0x40c10f19.
//
// Solidity: function mint(address to, uint256 amount) returns()
func (_GYMToken *GYMTokenTransactorSession) Mint(to common.Address, amount *big.Int) (*types.Transaction, error) {
	return _GYMToken.Contract.Mint(&_GYMToken.TransactOpts, to, amount)
}

// RenounceRole is a paid mutator transaction binding the contract method 0x36568abe.
//
// Solidity: function renounceRole(bytes32 role, address callerConfirmation) returns()
func (_GYMToken *GYMTokenTransactor) RenounceRole(opts *bind.TransactOpts, role [32]byte, callerConfirmation common.Address) (*types.Transaction, error) {
	return _GYMToken.contract.Transact(opts, "renounceRole", role, callerConfirmation)
}

// RenounceRole is a paid mutator transaction binding the contract method 0x36568abe.
//
// Solidity: function renounceRole(bytes32 role, address callerConfirmation) returns()
func (_GYMToken *GYMTokenSession) RenounceRole(role [32]byte, callerConfirmation common.Address) (*types.Transaction, error) {
	return _GYMToken.Contract.RenounceRole(&_GYMToken.TransactOpts, role, callerConfirmation)
}

// RenounceRole is a paid mutator transaction binding the contract method 0x36568abe.
//
// Solidity: function renounceRole(bytes32 role, address callerConfirmation) returns()
func (_GYMToken *GYMTokenTransactorSession) RenounceRole(role [32]byte, callerConfirmation common.Address) (*types.Transaction, error) {
	return _GYMToken.Contract.RenounceRole(&_GYMToken.TransactOpts, role, callerConfirmation)
}

// RevokeRole is a paid mutator transaction binding the contract method 0xd547741f.
//
// Solidity: function revokeRole(bytes32 role, address account) returns()
func (_GYMToken *GYMTokenTransactor) RevokeRole(opts *bind.TransactOpts, role [32]byte, account common.Address) (*types.Transaction, error) {
	return _GYMToken.contract.Transact(opts, "revokeRole", role, account)
}

// RevokeRole is a paid mutator transaction binding the contract method 0xd547741f.
//
// Solidity: function revokeRole(bytes32 role, address account) returns()
func (_GYMToken *GYMTokenSession) RevokeRole(role [32]byte, account common.Address) (*types.Transaction, error) {
	return _GYMToken.Contract.RevokeRole(&_GYMToken.TransactOpts, role, account)
}

// RevokeRole is a paid mutator transaction binding the contract method 0xd547741f.
//
// Solidity: function revokeRole(bytes32 role, address account) returns()
func (_GYMToken *GYMTokenTransactorSession) RevokeRole(role [32]byte, account common.Address) (*types.Transaction, error) {
	return _GYMToken.Contract.RevokeRole(&_GYMToken.TransactOpts, role, account)
}

// SetTreasury is a paid mutator transaction binding the contract method 0xf0f44260.
//
// Solidity: function setTreasury(address treasury_) returns()
func (_GYMToken *GYMTokenTransactor) SetTreasury(opts *bind.TransactOpts, treasury_ common.Address) (*types.Transaction, error) {
	return _GYMToken.contract.Transact(opts, "setTreasury", treasury_)
}

// SetTreasury is a paid mutator transaction binding the contract method 0xf0f44260.
//
// Solidity: function setTreasury(address treasury_) returns()
func (_GYMToken *GYMTokenSession) SetTreasury(treasury_ common.Address) (*types.Transaction, error) {
	return _GYMToken.Contract.SetTreasury(&_GYMToken.TransactOpts, treasury_)
}

// SetTreasury is a paid mutator transaction binding the contract method 0xf0f44260.
//
// Solidity: function setTreasury(address treasury_) returns()
func (_GYMToken *GYMTokenTransactorSession) SetTreasury(treasury_ common.Address) (*types.Transaction, error) {
	return _GYMToken.Contract.SetTreasury(&_GYMToken.TransactOpts, treasury_)
}

// Slash is a paid mutator transaction binding the contract method 0x8ea18651.
//
// Solidity: function slash(address node, uint8 pct, address reporter, bytes evidence) returns()
func (_GYMToken *GYMTokenTransactor) Slash(opts *bind.TransactOpts, node common.Address, pct uint8, reporter common.Address, evidence []byte) (*types.Transaction, error) {
	return _GYMToken.contract.Transact(opts, "slash", node, pct, reporter, evidence)
}

// Slash is a paid mutator transaction binding the contract method 0x8ea18651.
//
// Solidity: function slash(address node, uint8 pct, address reporter, bytes evidence) returns()
func (_GYMToken *GYMTokenSession) Slash(node common.Address, pct uint8, reporter common.Address, evidence []byte) (*types.Transaction, error) {
	return _GYMToken.Contract.Slash(&_GYMToken.TransactOpts, node, pct, reporter, evidence)
}

// Slash is a paid mutator transaction binding the contract method 0x8ea18651.
//
// Solidity: function slash(address node, uint8 pct, address reporter, bytes evidence) returns()
func (_GYMToken *GYMTokenTransactorSession) Slash(node common.Address, pct uint8, reporter common.Address, evidence []byte) (*types.Transaction, error) {
	return _GYMToken.Contract.Slash(&_GYMToken.TransactOpts, node, pct, reporter, evidence)
}

// Stake is a paid mutator transaction binding the contract method 0xdd752e55.
//
// Solidity: function stake(uint8 role, uint256 amount) returns()
func (_GYMToken *GYMTokenTransactor) Stake(opts *bind.TransactOpts, role uint8, amount *big.Int) (*types.Transaction, error) {
	return _GYMToken.contract.Transact(opts, "stake", role, amount)
}

// Stake is a paid mutator transaction binding the contract method 0xdd752e55.
//
// Solidity: function stake(uint8 role, uint256 amount) returns()
func (_GYMToken *GYMTokenSession) Stake(role uint8, amount *big.Int) (*types.Transaction, error) {
	return _GYMToken.Contract.Stake(&_GYMToken.TransactOpts, role, amount)
}

// Stake is a paid mutator transaction binding the contract method 0xdd752e55.
//
// Solidity: function stake(uint8 role, uint256 amount) returns()
func (_GYMToken *GYMTokenTransactorSession) Stake(role uint8, amount *big.Int) (*types.Transaction, error) {
	return _GYMToken.Contract.Stake(&_GYMToken.TransactOpts, role, amount)
}

// Transfer is a paid mutator transaction binding the contract method 0xa9059cbb.
//
// Solidity: function transfer(address to, uint256 value) returns(bool)
func (_GYMToken *GYMTokenTransactor) Transfer(opts *bind.TransactOpts, to common.Address, value *big.Int) (*types.Transaction, error) {
	return _GYMToken.contract.Transact(opts, "transfer", to, value)
}

// Transfer is a paid mutator transaction binding the contract method 0xa9059cbb.
//
// Solidity: function transfer(address to, uint256 value) returns(bool)
func (_GYMToken *GYMTokenSession) Transfer(to common.Address, value *big.Int) (*types.Transaction, error) {
	return _GYMToken.Contract.Transfer(&_GYMToken.TransactOpts, to, value)
}

// Transfer is a paid mutator transaction binding the contract method 0xa9059cbb.
//
// Solidity: function transfer(address to, uint256 value) returns(bool)
func (_GYMToken *GYMTokenTransactorSession) Transfer(to common.Address, value *big.Int) (*types.Transaction, error) {
	return _GYMToken.Contract.Transfer(&_GYMToken.TransactOpts, to, value)
}

// TransferFrom is a paid mutator transaction binding the contract method 0x23b872dd.
//
// Solidity: function transferFrom(address from, address to, uint256 value) returns(bool)
func (_GYMToken *GYMTokenTransactor) TransferFrom(opts *bind.TransactOpts, from common.Address, to common.Address, value *big.Int) (*types.Transaction, error) {
	return _GYMToken.contract.Transact(opts, "transferFrom", from, to, value)
}

// TransferFrom is a paid mutator transaction binding the contract method 0x23b872dd.
//
// Solidity: function transferFrom(address from, address to, uint256 value) returns(bool)
func (_GYMToken *GYMTokenSession) TransferFrom(from common.Address, to common.Address, value *big.Int) (*types.Transaction, error) {
	return _GYMToken.Contract.TransferFrom(&_GYMToken.TransactOpts, from, to, value)
}

// TransferFrom is a paid mutator transaction binding the contract method 0x23b872dd.
//
// Solidity: function transferFrom(address from, address to, uint256 value) returns(bool)
func (_GYMToken *GYMTokenTransactorSession) TransferFrom(from common.Address, to common.Address, value *big.Int) (*types.Transaction, error) {
	return _GYMToken.Contract.TransferFrom(&_GYMToken.TransactOpts, from, to, value)
}

// Unbond is a paid mutator transaction binding the contract method 0x27de9e32.
//
// Solidity: function unbond(uint256 amount) returns()
func (_GYMToken *GYMTokenTransactor) Unbond(opts *bind.TransactOpts, amount *big.Int) (*types.Transaction, error) {
	return _GYMToken.contract.Transact(opts, "unbond", amount)
}

// Unbond is a paid mutator transaction binding the contract method 0x27de9e32.
//
// Solidity: function unbond(uint256 amount) returns()
func (_GYMToken *GYMTokenSession) Unbond(amount *big.Int) (*types.Transaction, error) {
	return _GYMToken.Contract.Unbond(&_GYMToken.TransactOpts, amount)
}

// Unbond is a paid mutator transaction binding the contract method 0x27de9e32.
//
// Solidity: function unbond(uint256 amount) returns()
func (_GYMToken *GYMTokenTransactorSession) Unbond(amount *big.Int) (*types.Transaction, error) {
	return _GYMToken.Contract.Unbond(&_GYMToken.TransactOpts, amount)
}

// Unlock is a paid mutator transaction binding the contract method 0xe4fd189f.
//
// Solidity: function unlock(bytes32 job, address[] members) returns()
func (_GYMToken *GYMTokenTransactor) Unlock(opts *bind.TransactOpts, job [32]byte, members []common.Address) (*types.Transaction, error) {
	return _GYMToken.contract.Transact(opts, "unlock", job, members)
}

// Unlock is a paid mutator transaction binding the contract method 0xe4fd189f.
//
// Solidity: function unlock(bytes32 job, address[] members) returns()
func (_GYMToken *GYMTokenSession) Unlock(job [32]byte, members []common.Address) (*types.Transaction, error) {
	return _GYMToken.Contract.Unlock(&_GYMToken.TransactOpts, job, members)
}

// Unlock is a paid mutator transaction binding the contract method 0xe4fd189f.
//
// Solidity: function unlock(bytes32 job, address[] members) returns()
func (_GYMToken *GYMTokenTransactorSession) Unlock(job [32]byte, members []common.Address) (*types.Transaction, error) {
	return _GYMToken.Contract.Unlock(&_GYMToken.TransactOpts, job, members)
}

// Withdraw is a paid mutator transaction binding the contract method 0x3ccfd60b.
//
// Solidity: function withdraw() returns(uint256 amount)
func (_GYMToken *GYMTokenTransactor) Withdraw(opts *bind.TransactOpts) (*types.Transaction, error) {
	return _GYMToken.contract.Transact(opts, "withdraw")
}

// Withdraw is a paid mutator transaction binding the contract method 0x3ccfd60b.
//
// Solidity: function withdraw() returns(uint256 amount)
func (_GYMToken *GYMTokenSession) Withdraw() (*types.Transaction, error) {
	return _GYMToken.Contract.Withdraw(&_GYMToken.TransactOpts)
}

// Withdraw is a paid mutator transaction binding the contract method 0x3ccfd60b.
//
// Solidity: function withdraw() returns(uint256 amount)
func (_GYMToken *GYMTokenTransactorSession) Withdraw() (*types.Transaction, error) {
	return _GYMToken.Contract.Withdraw(&_GYMToken.TransactOpts)
}

// GYMTokenApprovalIterator is returned from FilterApproval and is used to iterate over the raw logs and unpacked data for Approval events raised by the GYMToken contract.
type GYMTokenApprovalIterator struct {
	Event *GYMTokenApproval // Event containing the contract specifics and raw log

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
func (it *GYMTokenApprovalIterator) Next() bool {
	// If the iterator failed, stop iterating
	if it.fail != nil {
		return false
	}
	// If the iterator completed, deliver directly whatever's available
	if it.done {
		select {
		case log := <-it.logs:
			it.Event = new(GYMTokenApproval)
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
		it.Event = new(GYMTokenApproval)
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
func (it *GYMTokenApprovalIterator) Error() error {
	return it.fail
}

// Close terminates the iteration process, releasing any pending underlying
// resources.
func (it *GYMTokenApprovalIterator) Close() error {
	it.sub.Unsubscribe()
	return nil
}

// GYMTokenApproval represents a Approval event raised by the GYMToken contract.
type GYMTokenApproval struct {
	Owner   common.Address
	Spender common.Address
	Value   *big.Int
	Raw     types.Log // Blockchain specific contextual infos
}

// FilterApproval is a free log retrieval operation binding the contract event 0x8c5be1e5ebec7d5bd14f71427d1e84f3dd0314c0f7b2291e5b200ac8c7c3b925.
//
// Solidity: event Approval(address indexed owner, address indexed spender, uint256 value)
func (_GYMToken *GYMTokenFilterer) FilterApproval(opts *bind.FilterOpts, owner []common.Address, spender []common.Address) (*GYMTokenApprovalIterator, error) {

	var ownerRule []interface{}
	for _, ownerItem := range owner {
		ownerRule = append(ownerRule, ownerItem)
	}
	var spenderRule []interface{}
	for _, spenderItem := range spender {
		spenderRule = append(spenderRule, spenderItem)
	}

	logs, sub, err := _GYMToken.contract.FilterLogs(opts, "Approval", ownerRule, spenderRule)
	if err != nil {
		return nil, err
	}
	return &GYMTokenApprovalIterator{contract: _GYMToken.contract, event: "Approval", logs: logs, sub: sub}, nil
}

// WatchApproval is a free log subscription operation binding the contract event 0x8c5be1e5ebec7d5bd14f71427d1e84f3dd0314c0f7b2291e5b200ac8c7c3b925.
//
// Solidity: event Approval(address indexed owner, address indexed spender, uint256 value)
func (_GYMToken *GYMTokenFilterer) WatchApproval(opts *bind.WatchOpts, sink chan<- *GYMTokenApproval, owner []common.Address, spender []common.Address) (event.Subscription, error) {

	var ownerRule []interface{}
	for _, ownerItem := range owner {
		ownerRule = append(ownerRule, ownerItem)
	}
	var spenderRule []interface{}
	for _, spenderItem := range spender {
		spenderRule = append(spenderRule, spenderItem)
	}

	logs, sub, err := _GYMToken.contract.WatchLogs(opts, "Approval", ownerRule, spenderRule)
	if err != nil {
		return nil, err
	}
	return event.NewSubscription(func(quit <-chan struct{}) error {
		defer sub.Unsubscribe()
		for {
			select {
			case log := <-logs:
				// New log arrived, parse the event and forward to the user
				event := new(GYMTokenApproval)
				if err := _GYMToken.contract.UnpackLog(event, "Approval", log); err != nil {
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

// ParseApproval is a log parse operation binding the contract event 0x8c5be1e5ebec7d5bd14f71427d1e84f3dd0314c0f7b2291e5b200ac8c7c3b925.
//
// Solidity: event Approval(address indexed owner, address indexed spender, uint256 value)
func (_GYMToken *GYMTokenFilterer) ParseApproval(log types.Log) (*GYMTokenApproval, error) {
	event := new(GYMTokenApproval)
	if err := _GYMToken.contract.UnpackLog(event, "Approval", log); err != nil {
		return nil, err
	}
	event.Raw = log
	return event, nil
}

// GYMTokenLockedIterator is returned from FilterLocked and is used to iterate over the raw logs and unpacked data for Locked events raised by the GYMToken contract.
type GYMTokenLockedIterator struct {
	Event *GYMTokenLocked // Event containing the contract specifics and raw log

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
func (it *GYMTokenLockedIterator) Next() bool {
	// If the iterator failed, stop iterating
	if it.fail != nil {
		return false
	}
	// If the iterator completed, deliver directly whatever's available
	if it.done {
		select {
		case log := <-it.logs:
			it.Event = new(GYMTokenLocked)
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
		it.Event = new(GYMTokenLocked)
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
func (it *GYMTokenLockedIterator) Error() error {
	return it.fail
}

// Close terminates the iteration process, releasing any pending underlying
// resources.
func (it *GYMTokenLockedIterator) Close() error {
	it.sub.Unsubscribe()
	return nil
}

// GYMTokenLocked represents a Locked event raised by the GYMToken contract.
type GYMTokenLocked struct {
	Job     [32]byte
	Account common.Address
	Raw     types.Log // Blockchain specific contextual infos
}

// FilterLocked is a free log retrieval operation binding the contract event 0x326122659a23f936a4aff830b51d3f09cd06f309fa04e3649d9829acb7580c10.
//
// Solidity: event Locked(bytes32 indexed job, address indexed account)
func (_GYMToken *GYMTokenFilterer) FilterLocked(opts *bind.FilterOpts, job [][32]byte, account []common.Address) (*GYMTokenLockedIterator, error) {

	var jobRule []interface{}
	for _, jobItem := range job {
		jobRule = append(jobRule, jobItem)
	}
	var accountRule []interface{}
	for _, accountItem := range account {
		accountRule = append(accountRule, accountItem)
	}

	logs, sub, err := _GYMToken.contract.FilterLogs(opts, "Locked", jobRule, accountRule)
	if err != nil {
		return nil, err
	}
	return &GYMTokenLockedIterator{contract: _GYMToken.contract, event: "Locked", logs: logs, sub: sub}, nil
}

// WatchLocked is a free log subscription operation binding the contract event 0x326122659a23f936a4aff830b51d3f09cd06f309fa04e3649d9829acb7580c10.
//
// Solidity: event Locked(bytes32 indexed job, address indexed account)
func (_GYMToken *GYMTokenFilterer) WatchLocked(opts *bind.WatchOpts, sink chan<- *GYMTokenLocked, job [][32]byte, account []common.Address) (event.Subscription, error) {

	var jobRule []interface{}
	for _, jobItem := range job {
		jobRule = append(jobRule, jobItem)
	}
	var accountRule []interface{}
	for _, accountItem := range account {
		accountRule = append(accountRule, accountItem)
	}

	logs, sub, err := _GYMToken.contract.WatchLogs(opts, "Locked", jobRule, accountRule)
	if err != nil {
		return nil, err
	}
	return event.NewSubscription(func(quit <-chan struct{}) error {
		defer sub.Unsubscribe()
		for {
			select {
			case log := <-logs:
				// New log arrived, parse the event and forward to the user
				event := new(GYMTokenLocked)
				if err := _GYMToken.contract.UnpackLog(event, "Locked", log); err != nil {
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

// ParseLocked is a log parse operation binding the contract event 0x326122659a23f936a4aff830b51d3f09cd06f309fa04e3649d9829acb7580c10.
//
// Solidity: event Locked(bytes32 indexed job, address indexed account)
func (_GYMToken *GYMTokenFilterer) ParseLocked(log types.Log) (*GYMTokenLocked, error) {
	event := new(GYMTokenLocked)
	if err := _GYMToken.contract.UnpackLog(event, "Locked", log); err != nil {
		return nil, err
	}
	event.Raw = log
	return event, nil
}

// GYMTokenNodeBoundIterator is returned from FilterNodeBound and is used to iterate over the raw logs and unpacked data for NodeBound events raised by the GYMToken contract.
type GYMTokenNodeBoundIterator struct {
	Event *GYMTokenNodeBound // Event containing the contract specifics and raw log

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
func (it *GYMTokenNodeBoundIterator) Next() bool {
	// If the iterator failed, stop iterating
	if it.fail != nil {
		return false
	}
	// If the iterator completed, deliver directly whatever's available
	if it.done {
		select {
		case log := <-it.logs:
			it.Event = new(GYMTokenNodeBound)
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
		it.Event = new(GYMTokenNodeBound)
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
func (it *GYMTokenNodeBoundIterator) Error() error {
	return it.fail
}

// Close terminates the iteration process, releasing any pending underlying
// resources.
func (it *GYMTokenNodeBoundIterator) Close() error {
	it.sub.Unsubscribe()
	return nil
}

// GYMTokenNodeBound represents a NodeBound event raised by the GYMToken contract.
type GYMTokenNodeBound struct {
	NodeKey   [32]byte
	Account   common.Address
	Signature []byte
	Raw       types.Log // Blockchain specific contextual infos
}

// FilterNodeBound is a free log retrieval operation binding the contract event 0x98cd7437173cddc3f238ec62469009ab0878068c8178a8345f91489f8bacb48e.
//
// Solidity: event NodeBound(bytes32 indexed nodeKey, address indexed account, bytes signature)
func (_GYMToken *GYMTokenFilterer) FilterNodeBound(opts *bind.FilterOpts, nodeKey [][32]byte, account []common.Address) (*GYMTokenNodeBoundIterator, error) {

	var nodeKeyRule []interface{}
	for _, nodeKeyItem := range nodeKey {
		nodeKeyRule = append(nodeKeyRule, nodeKeyItem)
	}
	var accountRule []interface{}
	for _, accountItem := range account {
		accountRule = append(accountRule, accountItem)
	}

	logs, sub, err := _GYMToken.contract.FilterLogs(opts, "NodeBound", nodeKeyRule, accountRule)
	if err != nil {
		return nil, err
	}
	return &GYMTokenNodeBoundIterator{contract: _GYMToken.contract, event: "NodeBound", logs: logs, sub: sub}, nil
}

// WatchNodeBound is a free log subscription operation binding the contract event 0x98cd7437173cddc3f238ec62469009ab0878068c8178a8345f91489f8bacb48e.
//
// Solidity: event NodeBound(bytes32 indexed nodeKey, address indexed account, bytes signature)
func (_GYMToken *GYMTokenFilterer) WatchNodeBound(opts *bind.WatchOpts, sink chan<- *GYMTokenNodeBound, nodeKey [][32]byte, account []common.Address) (event.Subscription, error) {

	var nodeKeyRule []interface{}
	for _, nodeKeyItem := range nodeKey {
		nodeKeyRule = append(nodeKeyRule, nodeKeyItem)
	}
	var accountRule []interface{}
	for _, accountItem := range account {
		accountRule = append(accountRule, accountItem)
	}

	logs, sub, err := _GYMToken.contract.WatchLogs(opts, "NodeBound", nodeKeyRule, accountRule)
	if err != nil {
		return nil, err
	}
	return event.NewSubscription(func(quit <-chan struct{}) error {
		defer sub.Unsubscribe()
		for {
			select {
			case log := <-logs:
				// New log arrived, parse the event and forward to the user
				event := new(GYMTokenNodeBound)
				if err := _GYMToken.contract.UnpackLog(event, "NodeBound", log); err != nil {
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

// ParseNodeBound is a log parse operation binding the contract event 0x98cd7437173cddc3f238ec62469009ab0878068c8178a8345f91489f8bacb48e.
//
// Solidity: event NodeBound(bytes32 indexed nodeKey, address indexed account, bytes signature)
func (_GYMToken *GYMTokenFilterer) ParseNodeBound(log types.Log) (*GYMTokenNodeBound, error) {
	event := new(GYMTokenNodeBound)
	if err := _GYMToken.contract.UnpackLog(event, "NodeBound", log); err != nil {
		return nil, err
	}
	event.Raw = log
	return event, nil
}

// GYMTokenRoleAdminChangedIterator is returned from FilterRoleAdminChanged and is used to iterate over the raw logs and unpacked data for RoleAdminChanged events raised by the GYMToken contract.
type GYMTokenRoleAdminChangedIterator struct {
	Event *GYMTokenRoleAdminChanged // Event containing the contract specifics and raw log

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
func (it *GYMTokenRoleAdminChangedIterator) Next() bool {
	// If the iterator failed, stop iterating
	if it.fail != nil {
		return false
	}
	// If the iterator completed, deliver directly whatever's available
	if it.done {
		select {
		case log := <-it.logs:
			it.Event = new(GYMTokenRoleAdminChanged)
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
		it.Event = new(GYMTokenRoleAdminChanged)
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
func (it *GYMTokenRoleAdminChangedIterator) Error() error {
	return it.fail
}

// Close terminates the iteration process, releasing any pending underlying
// resources.
func (it *GYMTokenRoleAdminChangedIterator) Close() error {
	it.sub.Unsubscribe()
	return nil
}

// GYMTokenRoleAdminChanged represents a RoleAdminChanged event raised by the GYMToken contract.
type GYMTokenRoleAdminChanged struct {
	Role              [32]byte
	PreviousAdminRole [32]byte
	NewAdminRole      [32]byte
	Raw               types.Log // Blockchain specific contextual infos
}

// FilterRoleAdminChanged is a free log retrieval operation binding the contract event 0xbd79b86ffe0ab8e8776151514217cd7cacd52c909f66475c3af44e129f0b00ff.
//
// Solidity: event RoleAdminChanged(bytes32 indexed role, bytes32 indexed previousAdminRole, bytes32 indexed newAdminRole)
func (_GYMToken *GYMTokenFilterer) FilterRoleAdminChanged(opts *bind.FilterOpts, role [][32]byte, previousAdminRole [][32]byte, newAdminRole [][32]byte) (*GYMTokenRoleAdminChangedIterator, error) {

	var roleRule []interface{}
	for _, roleItem := range role {
		roleRule = append(roleRule, roleItem)
	}
	var previousAdminRoleRule []interface{}
	for _, previousAdminRoleItem := range previousAdminRole {
		previousAdminRoleRule = append(previousAdminRoleRule, previousAdminRoleItem)
	}
	var newAdminRoleRule []interface{}
	for _, newAdminRoleItem := range newAdminRole {
		newAdminRoleRule = append(newAdminRoleRule, newAdminRoleItem)
	}

	logs, sub, err := _GYMToken.contract.FilterLogs(opts, "RoleAdminChanged", roleRule, previousAdminRoleRule, newAdminRoleRule)
	if err != nil {
		return nil, err
	}
	return &GYMTokenRoleAdminChangedIterator{contract: _GYMToken.contract, event: "RoleAdminChanged", logs: logs, sub: sub}, nil
}

// WatchRoleAdminChanged is a free log subscription operation binding the contract event 0xbd79b86ffe0ab8e8776151514217cd7cacd52c909f66475c3af44e129f0b00ff.
//
// Solidity: event RoleAdminChanged(bytes32 indexed role, bytes32 indexed previousAdminRole, bytes32 indexed newAdminRole)
func (_GYMToken *GYMTokenFilterer) WatchRoleAdminChanged(opts *bind.WatchOpts, sink chan<- *GYMTokenRoleAdminChanged, role [][32]byte, previousAdminRole [][32]byte, newAdminRole [][32]byte) (event.Subscription, error) {

	var roleRule []interface{}
	for _, roleItem := range role {
		roleRule = append(roleRule, roleItem)
	}
	var previousAdminRoleRule []interface{}
	for _, previousAdminRoleItem := range previousAdminRole {
		previousAdminRoleRule = append(previousAdminRoleRule, previousAdminRoleItem)
	}
	var newAdminRoleRule []interface{}
	for _, newAdminRoleItem := range newAdminRole {
		newAdminRoleRule = append(newAdminRoleRule, newAdminRoleItem)
	}

	logs, sub, err := _GYMToken.contract.WatchLogs(opts, "RoleAdminChanged", roleRule, previousAdminRoleRule, newAdminRoleRule)
	if err != nil {
		return nil, err
	}
	return event.NewSubscription(func(quit <-chan struct{}) error {
		defer sub.Unsubscribe()
		for {
			select {
			case log := <-logs:
				// New log arrived, parse the event and forward to the user
				event := new(GYMTokenRoleAdminChanged)
				if err := _GYMToken.contract.UnpackLog(event, "RoleAdminChanged", log); err != nil {
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

// ParseRoleAdminChanged is a log parse operation binding the contract event 0xbd79b86ffe0ab8e8776151514217cd7cacd52c909f66475c3af44e129f0b00ff.
//
// Solidity: event RoleAdminChanged(bytes32 indexed role, bytes32 indexed previousAdminRole, bytes32 indexed newAdminRole)
func (_GYMToken *GYMTokenFilterer) ParseRoleAdminChanged(log types.Log) (*GYMTokenRoleAdminChanged, error) {
	event := new(GYMTokenRoleAdminChanged)
	if err := _GYMToken.contract.UnpackLog(event, "RoleAdminChanged", log); err != nil {
		return nil, err
	}
	event.Raw = log
	return event, nil
}

// GYMTokenRoleGrantedIterator is returned from FilterRoleGranted and is used to iterate over the raw logs and unpacked data for RoleGranted events raised by the GYMToken contract.
type GYMTokenRoleGrantedIterator struct {
	Event *GYMTokenRoleGranted // Event containing the contract specifics and raw log

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
func (it *GYMTokenRoleGrantedIterator) Next() bool {
	// If the iterator failed, stop iterating
	if it.fail != nil {
		return false
	}
	// If the iterator completed, deliver directly whatever's available
	if it.done {
		select {
		case log := <-it.logs:
			it.Event = new(GYMTokenRoleGranted)
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
		it.Event = new(GYMTokenRoleGranted)
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
func (it *GYMTokenRoleGrantedIterator) Error() error {
	return it.fail
}

// Close terminates the iteration process, releasing any pending underlying
// resources.
func (it *GYMTokenRoleGrantedIterator) Close() error {
	it.sub.Unsubscribe()
	return nil
}

// GYMTokenRoleGranted represents a RoleGranted event raised by the GYMToken contract.
type GYMTokenRoleGranted struct {
	Role    [32]byte
	Account common.Address
	Sender  common.Address
	Raw     types.Log // Blockchain specific contextual infos
}

// FilterRoleGranted is a free log retrieval operation binding the contract event 0x2f8788117e7eff1d82e926ec794901d17c78024a50270940304540a733656f0d.
//
// Solidity: event RoleGranted(bytes32 indexed role, address indexed account, address indexed sender)
func (_GYMToken *GYMTokenFilterer) FilterRoleGranted(opts *bind.FilterOpts, role [][32]byte, account []common.Address, sender []common.Address) (*GYMTokenRoleGrantedIterator, error) {

	var roleRule []interface{}
	for _, roleItem := range role {
		roleRule = append(roleRule, roleItem)
	}
	var accountRule []interface{}
	for _, accountItem := range account {
		accountRule = append(accountRule, accountItem)
	}
	var senderRule []interface{}
	for _, senderItem := range sender {
		senderRule = append(senderRule, senderItem)
	}

	logs, sub, err := _GYMToken.contract.FilterLogs(opts, "RoleGranted", roleRule, accountRule, senderRule)
	if err != nil {
		return nil, err
	}
	return &GYMTokenRoleGrantedIterator{contract: _GYMToken.contract, event: "RoleGranted", logs: logs, sub: sub}, nil
}

// WatchRoleGranted is a free log subscription operation binding the contract event 0x2f8788117e7eff1d82e926ec794901d17c78024a50270940304540a733656f0d.
//
// Solidity: event RoleGranted(bytes32 indexed role, address indexed account, address indexed sender)
func (_GYMToken *GYMTokenFilterer) WatchRoleGranted(opts *bind.WatchOpts, sink chan<- *GYMTokenRoleGranted, role [][32]byte, account []common.Address, sender []common.Address) (event.Subscription, error) {

	var roleRule []interface{}
	for _, roleItem := range role {
		roleRule = append(roleRule, roleItem)
	}
	var accountRule []interface{}
	for _, accountItem := range account {
		accountRule = append(accountRule, accountItem)
	}
	var senderRule []interface{}
	for _, senderItem := range sender {
		senderRule = append(senderRule, senderItem)
	}

	logs, sub, err := _GYMToken.contract.WatchLogs(opts, "RoleGranted", roleRule, accountRule, senderRule)
	if err != nil {
		return nil, err
	}
	return event.NewSubscription(func(quit <-chan struct{}) error {
		defer sub.Unsubscribe()
		for {
			select {
			case log := <-logs:
				// New log arrived, parse the event and forward to the user
				event := new(GYMTokenRoleGranted)
				if err := _GYMToken.contract.UnpackLog(event, "RoleGranted", log); err != nil {
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

// ParseRoleGranted is a log parse operation binding the contract event 0x2f8788117e7eff1d82e926ec794901d17c78024a50270940304540a733656f0d.
//
// Solidity: event RoleGranted(bytes32 indexed role, address indexed account, address indexed sender)
func (_GYMToken *GYMTokenFilterer) ParseRoleGranted(log types.Log) (*GYMTokenRoleGranted, error) {
	event := new(GYMTokenRoleGranted)
	if err := _GYMToken.contract.UnpackLog(event, "RoleGranted", log); err != nil {
		return nil, err
	}
	event.Raw = log
	return event, nil
}

// GYMTokenRoleRevokedIterator is returned from FilterRoleRevoked and is used to iterate over the raw logs and unpacked data for RoleRevoked events raised by the GYMToken contract.
type GYMTokenRoleRevokedIterator struct {
	Event *GYMTokenRoleRevoked // Event containing the contract specifics and raw log

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
func (it *GYMTokenRoleRevokedIterator) Next() bool {
	// If the iterator failed, stop iterating
	if it.fail != nil {
		return false
	}
	// If the iterator completed, deliver directly whatever's available
	if it.done {
		select {
		case log := <-it.logs:
			it.Event = new(GYMTokenRoleRevoked)
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
		it.Event = new(GYMTokenRoleRevoked)
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
func (it *GYMTokenRoleRevokedIterator) Error() error {
	return it.fail
}

// Close terminates the iteration process, releasing any pending underlying
// resources.
func (it *GYMTokenRoleRevokedIterator) Close() error {
	it.sub.Unsubscribe()
	return nil
}

// GYMTokenRoleRevoked represents a RoleRevoked event raised by the GYMToken contract.
type GYMTokenRoleRevoked struct {
	Role    [32]byte
	Account common.Address
	Sender  common.Address
	Raw     types.Log // Blockchain specific contextual infos
}

// FilterRoleRevoked is a free log retrieval operation binding the contract event 0xf6391f5c32d9c69d2a47ea670b442974b53935d1edc7fd64eb21e047a839171b.
//
// Solidity: event RoleRevoked(bytes32 indexed role, address indexed account, address indexed sender)
func (_GYMToken *GYMTokenFilterer) FilterRoleRevoked(opts *bind.FilterOpts, role [][32]byte, account []common.Address, sender []common.Address) (*GYMTokenRoleRevokedIterator, error) {

	var roleRule []interface{}
	for _, roleItem := range role {
		roleRule = append(roleRule, roleItem)
	}
	var accountRule []interface{}
	for _, accountItem := range account {
		accountRule = append(accountRule, accountItem)
	}
	var senderRule []interface{}
	for _, senderItem := range sender {
		senderRule = append(senderRule, senderItem)
	}

	logs, sub, err := _GYMToken.contract.FilterLogs(opts, "RoleRevoked", roleRule, accountRule, senderRule)
	if err != nil {
		return nil, err
	}
	return &GYMTokenRoleRevokedIterator{contract: _GYMToken.contract, event: "RoleRevoked", logs: logs, sub: sub}, nil
}

// WatchRoleRevoked is a free log subscription operation binding the contract event 0xf6391f5c32d9c69d2a47ea670b442974b53935d1edc7fd64eb21e047a839171b.
//
// Solidity: event RoleRevoked(bytes32 indexed role, address indexed account, address indexed sender)
func (_GYMToken *GYMTokenFilterer) WatchRoleRevoked(opts *bind.WatchOpts, sink chan<- *GYMTokenRoleRevoked, role [][32]byte, account []common.Address, sender []common.Address) (event.Subscription, error) {

	var roleRule []interface{}
	for _, roleItem := range role {
		roleRule = append(roleRule, roleItem)
	}
	var accountRule []interface{}
	for _, accountItem := range account {
		accountRule = append(accountRule, accountItem)
	}
	var senderRule []interface{}
	for _, senderItem := range sender {
		senderRule = append(senderRule, senderItem)
	}

	logs, sub, err := _GYMToken.contract.WatchLogs(opts, "RoleRevoked", roleRule, accountRule, senderRule)
	if err != nil {
		return nil, err
	}
	return event.NewSubscription(func(quit <-chan struct{}) error {
		defer sub.Unsubscribe()
		for {
			select {
			case log := <-logs:
				// New log arrived, parse the event and forward to the user
				event := new(GYMTokenRoleRevoked)
				if err := _GYMToken.contract.UnpackLog(event, "RoleRevoked", log); err != nil {
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

// ParseRoleRevoked is a log parse operation binding the contract event 0xf6391f5c32d9c69d2a47ea670b442974b53935d1edc7fd64eb21e047a839171b.
//
// Solidity: event RoleRevoked(bytes32 indexed role, address indexed account, address indexed sender)
func (_GYMToken *GYMTokenFilterer) ParseRoleRevoked(log types.Log) (*GYMTokenRoleRevoked, error) {
	event := new(GYMTokenRoleRevoked)
	if err := _GYMToken.contract.UnpackLog(event, "RoleRevoked", log); err != nil {
		return nil, err
	}
	event.Raw = log
	return event, nil
}

// GYMTokenSlashedIterator is returned from FilterSlashed and is used to iterate over the raw logs and unpacked data for Slashed events raised by the GYMToken contract.
type GYMTokenSlashedIterator struct {
	Event *GYMTokenSlashed // Event containing the contract specifics and raw log

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
func (it *GYMTokenSlashedIterator) Next() bool {
	// If the iterator failed, stop iterating
	if it.fail != nil {
		return false
	}
	// If the iterator completed, deliver directly whatever's available
	if it.done {
		select {
		case log := <-it.logs:
			it.Event = new(GYMTokenSlashed)
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
		it.Event = new(GYMTokenSlashed)
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
func (it *GYMTokenSlashedIterator) Error() error {
	return it.fail
}

// Close terminates the iteration process, releasing any pending underlying
// resources.
func (it *GYMTokenSlashedIterator) Close() error {
	it.sub.Unsubscribe()
	return nil
}

// GYMTokenSlashed represents a Slashed event raised by the GYMToken contract.
type GYMTokenSlashed struct {
	Node         common.Address
	Offence      uint8
	Pct          uint8
	Amount       *big.Int
	Reporter     common.Address
	EvidenceHash [32]byte
	Banned       bool
	Raw          types.Log // Blockchain specific contextual infos
}

// FilterSlashed is a free log retrieval operation binding the contract event 0x1910aa3ef2ad68cb49d0339e58c46b4ccf37fff09dab3bfaf5cab69ff7fb3d6d.
//
// Solidity: event Slashed(address indexed node, uint8 offence, uint8 pct, uint256 amount, address indexed reporter, bytes32 evidenceHash, bool banned)
func (_GYMToken *GYMTokenFilterer) FilterSlashed(opts *bind.FilterOpts, node []common.Address, reporter []common.Address) (*GYMTokenSlashedIterator, error) {

	var nodeRule []interface{}
	for _, nodeItem := range node {
		nodeRule = append(nodeRule, nodeItem)
	}

	var reporterRule []interface{}
	for _, reporterItem := range reporter {
		reporterRule = append(reporterRule, reporterItem)
	}

	logs, sub, err := _GYMToken.contract.FilterLogs(opts, "Slashed", nodeRule, reporterRule)
	if err != nil {
		return nil, err
	}
	return &GYMTokenSlashedIterator{contract: _GYMToken.contract, event: "Slashed", logs: logs, sub: sub}, nil
}

// WatchSlashed is a free log subscription operation binding the contract event 0x1910aa3ef2ad68cb49d0339e58c46b4ccf37fff09dab3bfaf5cab69ff7fb3d6d.
//
// Solidity: event Slashed(address indexed node, uint8 offence, uint8 pct, uint256 amount, address indexed reporter, bytes32 evidenceHash, bool banned)
func (_GYMToken *GYMTokenFilterer) WatchSlashed(opts *bind.WatchOpts, sink chan<- *GYMTokenSlashed, node []common.Address, reporter []common.Address) (event.Subscription, error) {

	var nodeRule []interface{}
	for _, nodeItem := range node {
		nodeRule = append(nodeRule, nodeItem)
	}

	var reporterRule []interface{}
	for _, reporterItem := range reporter {
		reporterRule = append(reporterRule, reporterItem)
	}

	logs, sub, err := _GYMToken.contract.WatchLogs(opts, "Slashed", nodeRule, reporterRule)
	if err != nil {
		return nil, err
	}
	return event.NewSubscription(func(quit <-chan struct{}) error {
		defer sub.Unsubscribe()
		for {
			select {
			case log := <-logs:
				// New log arrived, parse the event and forward to the user
				event := new(GYMTokenSlashed)
				if err := _GYMToken.contract.UnpackLog(event, "Slashed", log); err != nil {
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

// ParseSlashed is a log parse operation binding the contract event 0x1910aa3ef2ad68cb49d0339e58c46b4ccf37fff09dab3bfaf5cab69ff7fb3d6d.
//
// Solidity: event Slashed(address indexed node, uint8 offence, uint8 pct, uint256 amount, address indexed reporter, bytes32 evidenceHash, bool banned)
func (_GYMToken *GYMTokenFilterer) ParseSlashed(log types.Log) (*GYMTokenSlashed, error) {
	event := new(GYMTokenSlashed)
	if err := _GYMToken.contract.UnpackLog(event, "Slashed", log); err != nil {
		return nil, err
	}
	event.Raw = log
	return event, nil
}

// GYMTokenStakedIterator is returned from FilterStaked and is used to iterate over the raw logs and unpacked data for Staked events raised by the GYMToken contract.
type GYMTokenStakedIterator struct {
	Event *GYMTokenStaked // Event containing the contract specifics and raw log

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
func (it *GYMTokenStakedIterator) Next() bool {
	// If the iterator failed, stop iterating
	if it.fail != nil {
		return false
	}
	// If the iterator completed, deliver directly whatever's available
	if it.done {
		select {
		case log := <-it.logs:
			it.Event = new(GYMTokenStaked)
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
		it.Event = new(GYMTokenStaked)
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
func (it *GYMTokenStakedIterator) Error() error {
	return it.fail
}

// Close terminates the iteration process, releasing any pending underlying
// resources.
func (it *GYMTokenStakedIterator) Close() error {
	it.sub.Unsubscribe()
	return nil
}

// GYMTokenStaked represents a Staked event raised by the GYMToken contract.
type GYMTokenStaked struct {
	Account common.Address
	Role    uint8
	Amount  *big.Int
	Total   *big.Int
	Raw     types.Log // Blockchain specific contextual infos
}

// FilterStaked is a free log retrieval operation binding the contract event 0x0a79772743d87ba7576fca49d64545ccce7a2369f471f1badf89540cdb09b282.
//
// Solidity: event Staked(address indexed account, uint8 role, uint256 amount, uint256 total)
func (_GYMToken *GYMTokenFilterer) FilterStaked(opts *bind.FilterOpts, account []common.Address) (*GYMTokenStakedIterator, error) {

	var accountRule []interface{}
	for _, accountItem := range account {
		accountRule = append(accountRule, accountItem)
	}

	logs, sub, err := _GYMToken.contract.FilterLogs(opts, "Staked", accountRule)
	if err != nil {
		return nil, err
	}
	return &GYMTokenStakedIterator{contract: _GYMToken.contract, event: "Staked", logs: logs, sub: sub}, nil
}

// WatchStaked is a free log subscription operation binding the contract event 0x0a79772743d87ba7576fca49d64545ccce7a2369f471f1badf89540cdb09b282.
//
// Solidity: event Staked(address indexed account, uint8 role, uint256 amount, uint256 total)
func (_GYMToken *GYMTokenFilterer) WatchStaked(opts *bind.WatchOpts, sink chan<- *GYMTokenStaked, account []common.Address) (event.Subscription, error) {

	var accountRule []interface{}
	for _, accountItem := range account {
		accountRule = append(accountRule, accountItem)
	}

	logs, sub, err := _GYMToken.contract.WatchLogs(opts, "Staked", accountRule)
	if err != nil {
		return nil, err
	}
	return event.NewSubscription(func(quit <-chan struct{}) error {
		defer sub.Unsubscribe()
		for {
			select {
			case log := <-logs:
				// New log arrived, parse the event and forward to the user
				event := new(GYMTokenStaked)
				if err := _GYMToken.contract.UnpackLog(event, "Staked", log); err != nil {
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

// ParseStaked is a log parse operation binding the contract event 0x0a79772743d87ba7576fca49d64545ccce7a2369f471f1badf89540cdb09b282.
//
// Solidity: event Staked(address indexed account, uint8 role, uint256 amount, uint256 total)
func (_GYMToken *GYMTokenFilterer) ParseStaked(log types.Log) (*GYMTokenStaked, error) {
	event := new(GYMTokenStaked)
	if err := _GYMToken.contract.UnpackLog(event, "Staked", log); err != nil {
		return nil, err
	}
	event.Raw = log
	return event, nil
}

// GYMTokenTransferIterator is returned from FilterTransfer and is used to iterate over the raw logs and unpacked data for Transfer events raised by the GYMToken contract.
type GYMTokenTransferIterator struct {
	Event *GYMTokenTransfer // Event containing the contract specifics and raw log

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
func (it *GYMTokenTransferIterator) Next() bool {
	// If the iterator failed, stop iterating
	if it.fail != nil {
		return false
	}
	// If the iterator completed, deliver directly whatever's available
	if it.done {
		select {
		case log := <-it.logs:
			it.Event = new(GYMTokenTransfer)
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
		it.Event = new(GYMTokenTransfer)
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
func (it *GYMTokenTransferIterator) Error() error {
	return it.fail
}

// Close terminates the iteration process, releasing any pending underlying
// resources.
func (it *GYMTokenTransferIterator) Close() error {
	it.sub.Unsubscribe()
	return nil
}

// GYMTokenTransfer represents a Transfer event raised by the GYMToken contract.
type GYMTokenTransfer struct {
	From  common.Address
	To    common.Address
	Value *big.Int
	Raw   types.Log // Blockchain specific contextual infos
}

// FilterTransfer is a free log retrieval operation binding the contract event 0xddf252ad1be2c89b69c2b068fc378daa952ba7f163c4a11628f55a4df523b3ef.
//
// Solidity: event Transfer(address indexed from, address indexed to, uint256 value)
func (_GYMToken *GYMTokenFilterer) FilterTransfer(opts *bind.FilterOpts, from []common.Address, to []common.Address) (*GYMTokenTransferIterator, error) {

	var fromRule []interface{}
	for _, fromItem := range from {
		fromRule = append(fromRule, fromItem)
	}
	var toRule []interface{}
	for _, toItem := range to {
		toRule = append(toRule, toItem)
	}

	logs, sub, err := _GYMToken.contract.FilterLogs(opts, "Transfer", fromRule, toRule)
	if err != nil {
		return nil, err
	}
	return &GYMTokenTransferIterator{contract: _GYMToken.contract, event: "Transfer", logs: logs, sub: sub}, nil
}

// WatchTransfer is a free log subscription operation binding the contract event 0xddf252ad1be2c89b69c2b068fc378daa952ba7f163c4a11628f55a4df523b3ef.
//
// Solidity: event Transfer(address indexed from, address indexed to, uint256 value)
func (_GYMToken *GYMTokenFilterer) WatchTransfer(opts *bind.WatchOpts, sink chan<- *GYMTokenTransfer, from []common.Address, to []common.Address) (event.Subscription, error) {

	var fromRule []interface{}
	for _, fromItem := range from {
		fromRule = append(fromRule, fromItem)
	}
	var toRule []interface{}
	for _, toItem := range to {
		toRule = append(toRule, toItem)
	}

	logs, sub, err := _GYMToken.contract.WatchLogs(opts, "Transfer", fromRule, toRule)
	if err != nil {
		return nil, err
	}
	return event.NewSubscription(func(quit <-chan struct{}) error {
		defer sub.Unsubscribe()
		for {
			select {
			case log := <-logs:
				// New log arrived, parse the event and forward to the user
				event := new(GYMTokenTransfer)
				if err := _GYMToken.contract.UnpackLog(event, "Transfer", log); err != nil {
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

// ParseTransfer is a log parse operation binding the contract event 0xddf252ad1be2c89b69c2b068fc378daa952ba7f163c4a11628f55a4df523b3ef.
//
// Solidity: event Transfer(address indexed from, address indexed to, uint256 value)
func (_GYMToken *GYMTokenFilterer) ParseTransfer(log types.Log) (*GYMTokenTransfer, error) {
	event := new(GYMTokenTransfer)
	if err := _GYMToken.contract.UnpackLog(event, "Transfer", log); err != nil {
		return nil, err
	}
	event.Raw = log
	return event, nil
}

// GYMTokenTreasuryChangedIterator is returned from FilterTreasuryChanged and is used to iterate over the raw logs and unpacked data for TreasuryChanged events raised by the GYMToken contract.
type GYMTokenTreasuryChangedIterator struct {
	Event *GYMTokenTreasuryChanged // Event containing the contract specifics and raw log

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
func (it *GYMTokenTreasuryChangedIterator) Next() bool {
	// If the iterator failed, stop iterating
	if it.fail != nil {
		return false
	}
	// If the iterator completed, deliver directly whatever's available
	if it.done {
		select {
		case log := <-it.logs:
			it.Event = new(GYMTokenTreasuryChanged)
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
		it.Event = new(GYMTokenTreasuryChanged)
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
func (it *GYMTokenTreasuryChangedIterator) Error() error {
	return it.fail
}

// Close terminates the iteration process, releasing any pending underlying
// resources.
func (it *GYMTokenTreasuryChangedIterator) Close() error {
	it.sub.Unsubscribe()
	return nil
}

// GYMTokenTreasuryChanged represents a TreasuryChanged event raised by the GYMToken contract.
type GYMTokenTreasuryChanged struct {
	Treasury common.Address
	Raw      types.Log // Blockchain specific contextual infos
}

// FilterTreasuryChanged is a free log retrieval operation binding the contract event 0xc714d22a2f08b695f81e7c707058db484aa5b4d6b4c9fd64beb10fe85832f608.
//
// Solidity: event TreasuryChanged(address treasury)
func (_GYMToken *GYMTokenFilterer) FilterTreasuryChanged(opts *bind.FilterOpts) (*GYMTokenTreasuryChangedIterator, error) {

	logs, sub, err := _GYMToken.contract.FilterLogs(opts, "TreasuryChanged")
	if err != nil {
		return nil, err
	}
	return &GYMTokenTreasuryChangedIterator{contract: _GYMToken.contract, event: "TreasuryChanged", logs: logs, sub: sub}, nil
}

// WatchTreasuryChanged is a free log subscription operation binding the contract event 0xc714d22a2f08b695f81e7c707058db484aa5b4d6b4c9fd64beb10fe85832f608.
//
// Solidity: event TreasuryChanged(address treasury)
func (_GYMToken *GYMTokenFilterer) WatchTreasuryChanged(opts *bind.WatchOpts, sink chan<- *GYMTokenTreasuryChanged) (event.Subscription, error) {

	logs, sub, err := _GYMToken.contract.WatchLogs(opts, "TreasuryChanged")
	if err != nil {
		return nil, err
	}
	return event.NewSubscription(func(quit <-chan struct{}) error {
		defer sub.Unsubscribe()
		for {
			select {
			case log := <-logs:
				// New log arrived, parse the event and forward to the user
				event := new(GYMTokenTreasuryChanged)
				if err := _GYMToken.contract.UnpackLog(event, "TreasuryChanged", log); err != nil {
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

// ParseTreasuryChanged is a log parse operation binding the contract event 0xc714d22a2f08b695f81e7c707058db484aa5b4d6b4c9fd64beb10fe85832f608.
//
// Solidity: event TreasuryChanged(address treasury)
func (_GYMToken *GYMTokenFilterer) ParseTreasuryChanged(log types.Log) (*GYMTokenTreasuryChanged, error) {
	event := new(GYMTokenTreasuryChanged)
	if err := _GYMToken.contract.UnpackLog(event, "TreasuryChanged", log); err != nil {
		return nil, err
	}
	event.Raw = log
	return event, nil
}

// GYMTokenUnbondedIterator is returned from FilterUnbonded and is used to iterate over the raw logs and unpacked data for Unbonded events raised by the GYMToken contract.
type GYMTokenUnbondedIterator struct {
	Event *GYMTokenUnbonded // Event containing the contract specifics and raw log

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
func (it *GYMTokenUnbondedIterator) Next() bool {
	// If the iterator failed, stop iterating
	if it.fail != nil {
		return false
	}
	// If the iterator completed, deliver directly whatever's available
	if it.done {
		select {
		case log := <-it.logs:
			it.Event = new(GYMTokenUnbonded)
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
		it.Event = new(GYMTokenUnbonded)
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
func (it *GYMTokenUnbondedIterator) Error() error {
	return it.fail
}

// Close terminates the iteration process, releasing any pending underlying
// resources.
func (it *GYMTokenUnbondedIterator) Close() error {
	it.sub.Unsubscribe()
	return nil
}

// GYMTokenUnbonded represents a Unbonded event raised by the GYMToken contract.
type GYMTokenUnbonded struct {
	Account   common.Address
	Amount    *big.Int
	ReleaseAt uint64
	Raw       types.Log // Blockchain specific contextual infos
}

// FilterUnbonded is a free log retrieval operation binding the contract event 0xf00bd8f1dcf66a1fe96ce25aa63de91c4b8fe4f407e9f0c027d928e6c5db79f9.
//
// Solidity: event Unbonded(address indexed account, uint256 amount, uint64 releaseAt)
func (_GYMToken *GYMTokenFilterer) FilterUnbonded(opts *bind.FilterOpts, account []common.Address) (*GYMTokenUnbondedIterator, error) {

	var accountRule []interface{}
	for _, accountItem := range account {
		accountRule = append(accountRule, accountItem)
	}

	logs, sub, err := _GYMToken.contract.FilterLogs(opts, "Unbonded", accountRule)
	if err != nil {
		return nil, err
	}
	return &GYMTokenUnbondedIterator{contract: _GYMToken.contract, event: "Unbonded", logs: logs, sub: sub}, nil
}

// WatchUnbonded is a free log subscription operation binding the contract event 0xf00bd8f1dcf66a1fe96ce25aa63de91c4b8fe4f407e9f0c027d928e6c5db79f9.
//
// Solidity: event Unbonded(address indexed account, uint256 amount, uint64 releaseAt)
func (_GYMToken *GYMTokenFilterer) WatchUnbonded(opts *bind.WatchOpts, sink chan<- *GYMTokenUnbonded, account []common.Address) (event.Subscription, error) {

	var accountRule []interface{}
	for _, accountItem := range account {
		accountRule = append(accountRule, accountItem)
	}

	logs, sub, err := _GYMToken.contract.WatchLogs(opts, "Unbonded", accountRule)
	if err != nil {
		return nil, err
	}
	return event.NewSubscription(func(quit <-chan struct{}) error {
		defer sub.Unsubscribe()
		for {
			select {
			case log := <-logs:
				// New log arrived, parse the event and forward to the user
				event := new(GYMTokenUnbonded)
				if err := _GYMToken.contract.UnpackLog(event, "Unbonded", log); err != nil {
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

// ParseUnbonded is a log parse operation binding the contract event 0xf00bd8f1dcf66a1fe96ce25aa63de91c4b8fe4f407e9f0c027d928e6c5db79f9.
//
// Solidity: event Unbonded(address indexed account, uint256 amount, uint64 releaseAt)
func (_GYMToken *GYMTokenFilterer) ParseUnbonded(log types.Log) (*GYMTokenUnbonded, error) {
	event := new(GYMTokenUnbonded)
	if err := _GYMToken.contract.UnpackLog(event, "Unbonded", log); err != nil {
		return nil, err
	}
	event.Raw = log
	return event, nil
}

// GYMTokenUnlockedIterator is returned from FilterUnlocked and is used to iterate over the raw logs and unpacked data for Unlocked events raised by the GYMToken contract.
type GYMTokenUnlockedIterator struct {
	Event *GYMTokenUnlocked // Event containing the contract specifics and raw log

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
func (it *GYMTokenUnlockedIterator) Next() bool {
	// If the iterator failed, stop iterating
	if it.fail != nil {
		return false
	}
	// If the iterator completed, deliver directly whatever's available
	if it.done {
		select {
		case log := <-it.logs:
			it.Event = new(GYMTokenUnlocked)
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
		it.Event = new(GYMTokenUnlocked)
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
func (it *GYMTokenUnlockedIterator) Error() error {
	return it.fail
}

// Close terminates the iteration process, releasing any pending underlying
// resources.
func (it *GYMTokenUnlockedIterator) Close() error {
	it.sub.Unsubscribe()
	return nil
}

// GYMTokenUnlocked represents a Unlocked event raised by the GYMToken contract.
type GYMTokenUnlocked struct {
	Job     [32]byte
	Account common.Address
	Raw     types.Log // Blockchain specific contextual infos
}

// FilterUnlocked is a free log retrieval operation binding the contract event 0xd62595377959fcf910fa7d1267756ebc89f04296203e93852602e51aa8424e8a.
//
// Solidity: event Unlocked(bytes32 indexed job, address indexed account)
func (_GYMToken *GYMTokenFilterer) FilterUnlocked(opts *bind.FilterOpts, job [][32]byte, account []common.Address) (*GYMTokenUnlockedIterator, error) {

	var jobRule []interface{}
	for _, jobItem := range job {
		jobRule = append(jobRule, jobItem)
	}
	var accountRule []interface{}
	for _, accountItem := range account {
		accountRule = append(accountRule, accountItem)
	}

	logs, sub, err := _GYMToken.contract.FilterLogs(opts, "Unlocked", jobRule, accountRule)
	if err != nil {
		return nil, err
	}
	return &GYMTokenUnlockedIterator{contract: _GYMToken.contract, event: "Unlocked", logs: logs, sub: sub}, nil
}

// WatchUnlocked is a free log subscription operation binding the contract event 0xd62595377959fcf910fa7d1267756ebc89f04296203e93852602e51aa8424e8a.
//
// Solidity: event Unlocked(bytes32 indexed job, address indexed account)
func (_GYMToken *GYMTokenFilterer) WatchUnlocked(opts *bind.WatchOpts, sink chan<- *GYMTokenUnlocked, job [][32]byte, account []common.Address) (event.Subscription, error) {

	var jobRule []interface{}
	for _, jobItem := range job {
		jobRule = append(jobRule, jobItem)
	}
	var accountRule []interface{}
	for _, accountItem := range account {
		accountRule = append(accountRule, accountItem)
	}

	logs, sub, err := _GYMToken.contract.WatchLogs(opts, "Unlocked", jobRule, accountRule)
	if err != nil {
		return nil, err
	}
	return event.NewSubscription(func(quit <-chan struct{}) error {
		defer sub.Unsubscribe()
		for {
			select {
			case log := <-logs:
				// New log arrived, parse the event and forward to the user
				event := new(GYMTokenUnlocked)
				if err := _GYMToken.contract.UnpackLog(event, "Unlocked", log); err != nil {
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

// ParseUnlocked is a log parse operation binding the contract event 0xd62595377959fcf910fa7d1267756ebc89f04296203e93852602e51aa8424e8a.
//
// Solidity: event Unlocked(bytes32 indexed job, address indexed account)
func (_GYMToken *GYMTokenFilterer) ParseUnlocked(log types.Log) (*GYMTokenUnlocked, error) {
	event := new(GYMTokenUnlocked)
	if err := _GYMToken.contract.UnpackLog(event, "Unlocked", log); err != nil {
		return nil, err
	}
	event.Raw = log
	return event, nil
}

// GYMTokenWithdrawnIterator is returned from FilterWithdrawn and is used to iterate over the raw logs and unpacked data for Withdrawn events raised by the GYMToken contract.
type GYMTokenWithdrawnIterator struct {
	Event *GYMTokenWithdrawn // Event containing the contract specifics and raw log

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
func (it *GYMTokenWithdrawnIterator) Next() bool {
	// If the iterator failed, stop iterating
	if it.fail != nil {
		return false
	}
	// If the iterator completed, deliver directly whatever's available
	if it.done {
		select {
		case log := <-it.logs:
			it.Event = new(GYMTokenWithdrawn)
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
		it.Event = new(GYMTokenWithdrawn)
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
func (it *GYMTokenWithdrawnIterator) Error() error {
	return it.fail
}

// Close terminates the iteration process, releasing any pending underlying
// resources.
func (it *GYMTokenWithdrawnIterator) Close() error {
	it.sub.Unsubscribe()
	return nil
}

// GYMTokenWithdrawn represents a Withdrawn event raised by the GYMToken contract.
type GYMTokenWithdrawn struct {
	Account common.Address
	Amount  *big.Int
	Raw     types.Log // Blockchain specific contextual infos
}

// FilterWithdrawn is a free log retrieval operation binding the contract event 0x7084f5476618d8e60b11ef0d7d3f06914655adb8793e28ff7f018d4c76d505d5.
//
// Solidity: event Withdrawn(address indexed account, uint256 amount)
func (_GYMToken *GYMTokenFilterer) FilterWithdrawn(opts *bind.FilterOpts, account []common.Address) (*GYMTokenWithdrawnIterator, error) {

	var accountRule []interface{}
	for _, accountItem := range account {
		accountRule = append(accountRule, accountItem)
	}

	logs, sub, err := _GYMToken.contract.FilterLogs(opts, "Withdrawn", accountRule)
	if err != nil {
		return nil, err
	}
	return &GYMTokenWithdrawnIterator{contract: _GYMToken.contract, event: "Withdrawn", logs: logs, sub: sub}, nil
}

// WatchWithdrawn is a free log subscription operation binding the contract event 0x7084f5476618d8e60b11ef0d7d3f06914655adb8793e28ff7f018d4c76d505d5.
//
// Solidity: event Withdrawn(address indexed account, uint256 amount)
func (_GYMToken *GYMTokenFilterer) WatchWithdrawn(opts *bind.WatchOpts, sink chan<- *GYMTokenWithdrawn, account []common.Address) (event.Subscription, error) {

	var accountRule []interface{}
	for _, accountItem := range account {
		accountRule = append(accountRule, accountItem)
	}

	logs, sub, err := _GYMToken.contract.WatchLogs(opts, "Withdrawn", accountRule)
	if err != nil {
		return nil, err
	}
	return event.NewSubscription(func(quit <-chan struct{}) error {
		defer sub.Unsubscribe()
		for {
			select {
			case log := <-logs:
				// New log arrived, parse the event and forward to the user
				event := new(GYMTokenWithdrawn)
				if err := _GYMToken.contract.UnpackLog(event, "Withdrawn", log); err != nil {
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

// ParseWithdrawn is a log parse operation binding the contract event 0x7084f5476618d8e60b11ef0d7d3f06914655adb8793e28ff7f018d4c76d505d5.
//
// Solidity: event Withdrawn(address indexed account, uint256 amount)
func (_GYMToken *GYMTokenFilterer) ParseWithdrawn(log types.Log) (*GYMTokenWithdrawn, error) {
	event := new(GYMTokenWithdrawn)
	if err := _GYMToken.contract.UnpackLog(event, "Withdrawn", log); err != nil {
		return nil, err
	}
	event.Raw = log
	return event, nil
}
