// SPDX-License-Identifier: Apache-2.0
pragma solidity 0.8.30;

import {IERC20} from "@openzeppelin/contracts/token/ERC20/IERC20.sol";
import {SafeERC20} from "@openzeppelin/contracts/token/ERC20/utils/SafeERC20.sol";
import {GYMToken} from "./GYMToken.sol";

/// @title MiningPool: the treasury that pays epoch rewards.
/// @notice Holds GYM (emissions minted to it and slashed stake) and pays
/// each epoch of a job at most once, in one transaction, on the word of an
/// authorised orchestrator (GYMToken.isOrchestrator).
contract MiningPool {
    using SafeERC20 for IERC20;

    GYMToken public immutable token;

    /// Whether (job, epoch) was paid.
    mapping(bytes32 => mapping(uint64 => bool)) public paid;

    event EpochRewardsDistributed(bytes32 indexed job, uint64 indexed epoch, uint256 workers, uint256 total);

    error NotOrchestrator(address caller);
    error EpochAlreadyPaid(bytes32 job, uint64 epoch);
    error LengthMismatch(uint256 workers, uint256 amounts);
    error PoolUnderfunded(uint256 needed, uint256 balance);
    error ZeroAddress(uint256 index);

    constructor(GYMToken token_) {
        token = token_;
    }

    /// @notice The pool's balance: what it can pay.
    function balance() external view returns (uint256) {
        return token.balanceOf(address(this));
    }

    /// @notice Pays workers[i] amounts[i] for the epoch of job (job is
    /// keccak256 of hanzod's job id). Refuses a second payment of the same
    /// job and epoch, and a total above the pool's balance (nothing is paid
    /// then).
    function distributeEpochRewards(
        bytes32 job,
        uint64 epoch,
        address[] calldata workers,
        uint256[] calldata amounts
    ) external {
        if (!token.isOrchestrator(msg.sender)) revert NotOrchestrator(msg.sender);
        if (paid[job][epoch]) revert EpochAlreadyPaid(job, epoch);
        if (workers.length != amounts.length) revert LengthMismatch(workers.length, amounts.length);
        uint256 total = 0;
        for (uint256 i = 0; i < amounts.length; i++) {
            total += amounts[i];
        }
        uint256 have = token.balanceOf(address(this));
        if (total > have) revert PoolUnderfunded(total, have);
        paid[job][epoch] = true;
        IERC20 t = IERC20(address(token));
        for (uint256 i = 0; i < workers.length; i++) {
            if (workers[i] == address(0)) revert ZeroAddress(i);
            if (amounts[i] > 0) t.safeTransfer(workers[i], amounts[i]);
        }
        emit EpochRewardsDistributed(job, epoch, workers.length, total);
    }
}
