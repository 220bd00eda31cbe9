// SPDX-License-Identifier: Apache-2.0
pragma solidity 0.8.30;

import {ERC20} from "@openzeppelin/contracts/token/ERC20/ERC20.sol";
import {AccessControl} from "@openzeppelin/contracts/access/AccessControl.sol";
import {SafeCast} from "@openzeppelin/contracts/utils/math/SafeCast.sol";

/// @title GYMToken: the GYM token, staking in three roles, stake locks and
/// progressive slashing.
/// @notice Amounts are micro-GYM (6 decimals), the unit of hanzod's embedded
/// ledger. A staker moves tokens from its balance into stake for one role
/// (node, validator, orchestrator; minimums 10,000 / 25,000 / 50,000 GYM),
/// unbonds them (they stay slashable and are withdrawable after
/// unbondingDelay seconds) and cannot unbond while a job it belongs to is
/// not settled. An authorised orchestrator (ORCHESTRATOR_ROLE granted by the
/// admin and itself staked as an orchestrator) slashes: 5% of the slashable
/// stake on the first offence, 25% on the second, everything and a permanent
/// ban on the third. Slashed tokens go to the treasury (the MiningPool).
contract GYMToken is ERC20, AccessControl {
    bytes32 public constant MINTER_ROLE = keccak256("MINTER_ROLE");
    bytes32 public constant ORCHESTRATOR_ROLE = keccak256("ORCHESTRATOR_ROLE");

    uint8 public constant ROLE_NONE = 0;
    uint8 public constant ROLE_NODE = 1;
    uint8 public constant ROLE_VALIDATOR = 2;
    uint8 public constant ROLE_ORCHESTRATOR = 3;

    uint256 public constant NODE_MIN_STAKE = 10_000 * 1e6;
    uint256 public constant VALIDATOR_MIN_STAKE = 25_000 * 1e6;
    uint256 public constant ORCHESTRATOR_MIN_STAKE = 50_000 * 1e6;

    uint8 public constant FIRST_SLASH_PCT = 5;
    uint8 public constant SECOND_SLASH_PCT = 25;
    uint8 public constant FINAL_SLASH_PCT = 100;

    /// Stake waiting for its release time; still slashable. One slot.
    struct Unbonding {
        uint192 amount;
        uint64 releaseAt;
    }

    /// One recorded offence. Three slots.
    struct SlashRecord {
        uint8 offence;
        uint8 pct;
        uint64 at;
        uint128 amount;
        address reporter;
        bytes32 evidenceHash;
    }

    /// A staker's position: one slot, so that locking a staked member or
    /// topping up its stake rewrites a slot rather than filling new ones.
    struct Staker {
        uint128 stake;
        uint8 role;
        bool banned;
        uint32 locks;
    }

    /// Seconds between unbond and withdraw.
    uint64 public immutable unbondingDelay;

    /// Where slashed stake goes (the MiningPool that pays rewards).
    address public treasury;

    mapping(address => Staker) private _stakers;
    /// Whether the account is locked for the job.
    mapping(bytes32 => mapping(address => bool)) public lockedFor;

    mapping(address => Unbonding[]) private _unbonding;
    mapping(address => SlashRecord[]) private _slashes;

    /// The Ed25519 node key (hanzod's node id) each account has bound; zero
    /// when none.
    mapping(address => bytes32) public nodeKeyOf;

    event Staked(address indexed account, uint8 role, uint256 amount, uint256 total);
    event Unbonded(address indexed account, uint256 amount, uint64 releaseAt);
    event Withdrawn(address indexed account, uint256 amount);
    event Locked(bytes32 indexed job, address indexed account);
    event Unlocked(bytes32 indexed job, address indexed account);
    event Slashed(
        address indexed node,
        uint8 offence,
        uint8 pct,
        uint256 amount,
        address indexed reporter,
        bytes32 evidenceHash,
        bool banned
    );
    event TreasuryChanged(address treasury);
    event NodeBound(bytes32 indexed nodeKey, address indexed account, bytes signature);

    error ZeroAmount();
    error UnknownRole(uint8 role);
    error RoleMismatch(uint8 current, uint8 requested);
    error StakeBelowMinimum(uint256 stake, uint256 minimum);
    error InsufficientStake(uint256 requested, uint256 bonded);
    error StakeLocked(address account, uint32 jobs);
    error NothingToWithdraw();
    error AccountBanned(address account);
    error NotOrchestrator(address caller);
    error NothingToSlash(address account);
    error SlashPlanMismatch(uint8 requested, uint8 planned);
    error NoTreasury();
    error BadNodeBinding();

    constructor(address admin, uint64 unbondingDelay_) ERC20("Zoo Gym", "GYM") {
        _grantRole(DEFAULT_ADMIN_ROLE, admin);
        unbondingDelay = unbondingDelay_;
    }

    /// @notice micro-GYM: 1 GYM = 1,000,000 units.
    function decimals() public pure override returns (uint8) {
        return 6;
    }

    /// @notice Bonded stake of account (seed: GYMToken.stakes).
    function stakes(address account) public view returns (uint256) {
        return _stakers[account].stake;
    }

    /// @notice The role account's stake is for (ROLE_*).
    function roleOf(address account) public view returns (uint8) {
        return _stakers[account].role;
    }

    /// @notice Whether account was banned by a third offence.
    function banned(address account) public view returns (bool) {
        return _stakers[account].banned;
    }

    /// @notice How many unsettled jobs account belongs to.
    function locks(address account) public view returns (uint32) {
        return _stakers[account].locks;
    }

    modifier onlyOrchestrator() {
        if (!isOrchestrator(msg.sender)) revert NotOrchestrator(msg.sender);
        _;
    }

    /// @notice An authorised orchestrator: granted ORCHESTRATOR_ROLE, staked
    /// at least the orchestrator minimum as an orchestrator, not banned.
    function isOrchestrator(address account) public view returns (bool) {
        Staker storage s = _stakers[account];
        return hasRole(ORCHESTRATOR_ROLE, account) && s.role == ROLE_ORCHESTRATOR && s.stake >= ORCHESTRATOR_MIN_STAKE
            && !s.banned;
    }

    /// @notice The minimum stake of a role.
    function minimumStake(uint8 role) public pure returns (uint256) {
        if (role == ROLE_NODE) return NODE_MIN_STAKE;
        if (role == ROLE_VALIDATOR) return VALIDATOR_MIN_STAKE;
        if (role == ROLE_ORCHESTRATOR) return ORCHESTRATOR_MIN_STAKE;
        revert UnknownRole(role);
    }

    /// @notice Whether account may serve in role now: staked for it at
    /// least its minimum and not banned.
    function isStaked(address account, uint8 role) external view returns (bool) {
        Staker storage s = _stakers[account];
        return s.role == role && !s.banned && s.stake >= minimumStake(role);
    }

    function setTreasury(address treasury_) external onlyRole(DEFAULT_ADMIN_ROLE) {
        treasury = treasury_;
        emit TreasuryChanged(treasury_);
    }

    /// @notice Creates tokens (a deposit bridged in, or an emission into the
    /// treasury).
    function mint(address to, uint256 amount) external onlyRole(MINTER_ROLE) {
        if (amount == 0) revert ZeroAmount();
        _mint(to, amount);
    }

    /// @notice Moves amount of the caller's balance into stake for role. The
    /// resulting stake must reach the role's minimum; an account stakes for
    /// one role at a time.
    function stake(uint8 role, uint256 amount) external {
        if (amount == 0) revert ZeroAmount();
        Staker storage s = _stakers[msg.sender];
        if (s.banned) revert AccountBanned(msg.sender);
        uint256 minimum = minimumStake(role);
        uint8 current = s.role;
        uint256 bonded = s.stake;
        if (bonded > 0 && current != role) revert RoleMismatch(current, role);
        uint256 total = bonded + amount;
        if (total < minimum) revert StakeBelowMinimum(total, minimum);
        _transfer(msg.sender, address(this), amount);
        s.stake = SafeCast.toUint128(total);
        s.role = role;
        emit Staked(msg.sender, role, amount, total);
    }

    /// @notice Starts releasing amount of the caller's stake. What stays
    /// bonded must be zero or at least the role's minimum; refused while a
    /// job the caller belongs to is not settled.
    function unbond(uint256 amount) external {
        if (amount == 0) revert ZeroAmount();
        Staker storage s = _stakers[msg.sender];
        uint32 n = s.locks;
        if (n > 0) revert StakeLocked(msg.sender, n);
        uint256 bonded = s.stake;
        if (amount > bonded) revert InsufficientStake(amount, bonded);
        uint256 rest = bonded - amount;
        if (rest > 0 && !s.banned) {
            uint256 minimum = minimumStake(s.role);
            if (rest < minimum) revert StakeBelowMinimum(rest, minimum);
        }
        s.stake = uint128(rest);
        uint64 releaseAt = uint64(block.timestamp) + unbondingDelay;
        _unbonding[msg.sender].push(Unbonding(uint192(amount), releaseAt));
        emit Unbonded(msg.sender, amount, releaseAt);
    }

    /// @notice Moves every matured unbonding entry of the caller back to its
    /// balance.
    function withdraw() external returns (uint256 amount) {
        // Entries are appended in release order (the delay is fixed and block
        // time does not go back), so the matured ones are a prefix.
        Unbonding[] storage list = _unbonding[msg.sender];
        uint256 n = list.length;
        uint256 k = 0;
        while (k < n && list[k].releaseAt <= block.timestamp) {
            amount += list[k].amount;
            k++;
        }
        if (amount == 0) revert NothingToWithdraw();
        for (uint256 i = k; i < n; i++) {
            list[i - k] = list[i];
        }
        for (uint256 i = 0; i < k; i++) {
            list.pop();
        }
        _transfer(address(this), msg.sender, amount);
        emit Withdrawn(msg.sender, amount);
    }

    /// @notice The account's unbonding entries.
    function unbondingOf(address account) external view returns (Unbonding[] memory) {
        return _unbonding[account];
    }

    /// @notice Total stake the account has unbonding.
    function unbondingTotal(address account) public view returns (uint256 total) {
        Unbonding[] storage list = _unbonding[account];
        for (uint256 i = 0; i < list.length; i++) {
            total += list[i].amount;
        }
    }

    /// @notice The account's recorded offences.
    function slashesOf(address account) external view returns (SlashRecord[] memory) {
        return _slashes[account];
    }

    /// @notice Locks members' stake for job until unlock: they cannot unbond.
    /// Locking a member twice for one job is a no-op.
    function lock(bytes32 job, address[] calldata members) external onlyOrchestrator {
        for (uint256 i = 0; i < members.length; i++) {
            address m = members[i];
            if (!lockedFor[job][m]) {
                lockedFor[job][m] = true;
                _stakers[m].locks += 1;
                emit Locked(job, m);
            }
        }
    }

    /// @notice Releases members' lock for job (the job is settled).
    function unlock(bytes32 job, address[] calldata members) external onlyOrchestrator {
        for (uint256 i = 0; i < members.length; i++) {
            address m = members[i];
            if (lockedFor[job][m]) {
                lockedFor[job][m] = false;
                _stakers[m].locks -= 1;
                emit Unlocked(job, m);
            }
        }
    }

    /// @notice The percentage the next slash of account takes: 5, 25, then
    /// 100 (and a ban).
    function nextSlashPct(address account) public view returns (uint8) {
        uint256 n = _slashes[account].length;
        if (n == 0) return FIRST_SLASH_PCT;
        if (n == 1) return SECOND_SLASH_PCT;
        return FINAL_SLASH_PCT;
    }

    /// @notice Slashes node's slashable stake (bonded plus unbonding) by pct,
    /// which must be the contract's plan for its next offence (nextSlashPct),
    /// so a retried or stale slash cannot take more than intended. The amount
    /// is taken from bonded stake first, then from the unbonding entries that
    /// release last, and goes to the treasury; the third offence bans. The
    /// evidence's keccak256 is stored and emitted; the bytes stay in the
    /// transaction's calldata.
    function slash(address node, uint8 pct, address reporter, bytes calldata evidence) external onlyOrchestrator {
        if (_stakers[node].banned) revert AccountBanned(node);
        if (treasury == address(0)) revert NoTreasury();
        uint8 planned = nextSlashPct(node);
        if (pct != planned) revert SlashPlanMismatch(pct, planned);
        uint256 slashable = _stakers[node].stake + unbondingTotal(node);
        if (slashable == 0) revert NothingToSlash(node);
        uint256 amount = pct == FINAL_SLASH_PCT ? slashable : (slashable * pct) / 100;
        _take(node, amount);

        uint8 offence = uint8(_slashes[node].length + 1);
        bytes32 evidenceHash = keccak256(evidence);
        bool ban = pct == FINAL_SLASH_PCT;
        _slashes[node].push(SlashRecord(offence, pct, uint64(block.timestamp), SafeCast.toUint128(amount), reporter, evidenceHash));
        if (ban) _stakers[node].banned = true;
        if (amount > 0) _transfer(address(this), treasury, amount);
        emit Slashed(node, offence, pct, amount, reporter, evidenceHash, ban);
    }

    /// Removes amount from node's bonded stake, then from the unbonding
    /// entries that release last.
    function _take(address node, uint256 amount) private {
        uint256 bonded = _stakers[node].stake;
        uint256 rest = amount;
        uint256 t = rest < bonded ? rest : bonded;
        _stakers[node].stake = uint128(bonded - t);
        rest -= t;
        Unbonding[] storage list = _unbonding[node];
        for (uint256 i = list.length; i > 0 && rest > 0; i--) {
            Unbonding storage u = list[i - 1];
            t = rest < u.amount ? rest : u.amount;
            u.amount -= uint192(t);
            rest -= t;
        }
        // The entries emptied are a suffix.
        while (list.length > 0 && list[list.length - 1].amount == 0) {
            list.pop();
        }
    }

    /// @notice Binds the caller's account to an Ed25519 node key: the
    /// transaction is the account's signature, and signature is the node
    /// key's Ed25519 signature of the binding message ("zoo-gym node
    /// binding v1" || chain id || this contract || the account). The EVM has
    /// no cheap Ed25519 verification, so it is stored (in the event) and not
    /// verified here: hanzod verifies it off chain before it trusts the
    /// binding, and ignores bindings whose signature does not verify. A
    /// later call rebinds the account (the earlier key's binding lapses).
    function bindNode(bytes32 nodeKey, bytes calldata signature) external {
        if (nodeKey == bytes32(0) || signature.length != 64) revert BadNodeBinding();
        nodeKeyOf[msg.sender] = nodeKey;
        emit NodeBound(nodeKey, msg.sender, signature);
    }
}
