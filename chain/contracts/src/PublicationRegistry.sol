// SPDX-License-Identifier: Apache-2.0
pragma solidity 0.8.30;

import {GYMToken} from "./GYMToken.sol";

/// @title PublicationRegistry: the on-chain record of every published
/// checkpoint.
/// @notice One record per (job, epoch): the checkpoint's IPFS CID, the
/// weights' CID, the Hugging Face Hub repo, and hanzod's Ed25519 signature
/// of its publication record with the public key that made it. Anyone can
/// read a record back and check a model against it; only an authorised
/// orchestrator writes, once.
contract PublicationRegistry {
    GYMToken public immutable token;

    struct Publication {
        string cid;
        string weightsCid;
        string hubRepo;
        bytes32 signer; // Ed25519 public key
        bytes signature; // Ed25519 signature of the publication record
        address recorder;
        uint64 recordedAt;
    }

    mapping(bytes32 => mapping(uint64 => Publication)) private _publications;

    event PublicationRecorded(
        bytes32 indexed job,
        uint64 indexed epoch,
        string cid,
        string weightsCid,
        string hubRepo,
        bytes32 signer,
        bytes signature
    );

    error NotOrchestrator(address caller);
    error AlreadyPublished(bytes32 job, uint64 epoch);
    error EmptyCID();
    error BadSignatureLength(uint256 length);

    constructor(GYMToken token_) {
        token = token_;
    }

    /// @notice Records the publication of job's epoch (job is keccak256 of
    /// hanzod's job id).
    function recordPublication(
        bytes32 job,
        uint64 epoch,
        string calldata cid,
        string calldata weightsCid,
        string calldata hubRepo,
        bytes32 signer,
        bytes calldata signature
    ) external {
        if (!token.isOrchestrator(msg.sender)) revert NotOrchestrator(msg.sender);
        if (bytes(cid).length == 0) revert EmptyCID();
        if (signature.length != 64) revert BadSignatureLength(signature.length);
        Publication storage p = _publications[job][epoch];
        if (bytes(p.cid).length != 0) revert AlreadyPublished(job, epoch);
        p.cid = cid;
        p.weightsCid = weightsCid;
        p.hubRepo = hubRepo;
        p.signer = signer;
        p.signature = signature;
        p.recorder = msg.sender;
        p.recordedAt = uint64(block.timestamp);
        emit PublicationRecorded(job, epoch, cid, weightsCid, hubRepo, signer, signature);
    }

    /// @notice The record of job's epoch (an empty cid when none).
    function publication(bytes32 job, uint64 epoch) external view returns (Publication memory) {
        return _publications[job][epoch];
    }
}
