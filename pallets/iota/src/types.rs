//! Records kept by pallet-iota (non-pallet data types; docs/design.md §4).

use codec::{Decode, DecodeWithMemTracking, Encode, MaxEncodedLen};
pub use iota_primitives::{
	ContentHash, Epoch, MinerStatus, Phase, RunConfig, StageId, StageReport, ValidatorStatus,
	Verdict, WeightValue,
};
use polkadot_sdk::frame_support::{
	pallet_prelude::{BoundedVec, Get},
	CloneNoBound, DebugNoBound, EqNoBound, PartialEqNoBound,
};
use scale_info::TypeInfo;

/// A miner's registration.
#[derive(Clone, PartialEq, Eq, Debug, Encode, Decode, MaxEncodedLen, TypeInfo)]
pub struct MinerInfo<Balance, BlockNumber> {
	/// The stage the miner holds (assigned by [`iota_primitives::assign_stage`]).
	pub stage: StageId,
	/// Bond held under [`crate::HoldReason::MinerBond`], in balance units.
	pub bond: Balance,
	/// Lifecycle state.
	pub status: MinerStatus<BlockNumber>,
	/// Block of registration.
	pub registered_at: BlockNumber,
	/// The last finalized epoch in which the miner had a consensus score above zero, or the run's
	/// epoch when it registered (eviction counts idle epochs from here; `RunConfig::max_idle_epochs`).
	pub last_scored: crate::Epoch,
}

/// A validator's registration.
#[derive(Clone, PartialEq, Eq, Debug, Encode, Decode, MaxEncodedLen, TypeInfo)]
pub struct ValidatorInfo<Balance, BlockNumber> {
	/// Stake held under [`crate::HoldReason::ValidatorStake`], in balance units; weights consensus and the
	/// validators' emission are weighted by it.
	pub stake: Balance,
	/// Lifecycle state.
	pub status: ValidatorStatus<BlockNumber>,
	/// Block of the validator's last accepted `commit_weights` (rate limit).
	pub last_weights_at: Option<BlockNumber>,
}

/// Where one stage is in its epoch (per stage, never global - ref fault).
#[derive(Clone, PartialEq, Eq, Debug, Default, Encode, Decode, MaxEncodedLen, TypeInfo)]
pub struct StageState<BlockNumber> {
	/// Current phase.
	pub phase: Phase,
	/// The stage's epoch: merges committed so far.
	pub epoch: Epoch,
	/// Block at which `phase` began (phase timeouts count from here).
	pub phase_since: BlockNumber,
	/// Merge round within the epoch: starts at 0, +1 each time a merge times out and restarts.
	pub round: u32,
}

/// An object in the bucket: its key and BLAKE3 hash.
///
/// The hash field is `content_hash`, not `hash`: polkadot.js gives every decoded struct a `hash` getter
/// (the blake2 of its encoding) that would hide a field of that name (`@polkadot/api` returned the
/// codec's hash for `ObjectRef.hash` and the stored BLAKE3 under `hash_`).
#[derive(
	CloneNoBound,
	PartialEqNoBound,
	EqNoBound,
	DebugNoBound,
	Encode,
	Decode,
	DecodeWithMemTracking,
	MaxEncodedLen,
	TypeInfo,
)]
#[scale_info(skip_type_params(MaxKeyLen))]
pub struct ObjectRef<MaxKeyLen: Get<u32>> {
	/// S3 key (UTF-8, from iota-storage's key layout), at most `MaxKeyLen` bytes.
	pub key: BoundedVec<u8, MaxKeyLen>,
	/// BLAKE3 of the object's bytes.
	pub content_hash: ContentHash,
}

/// The canonical result of one stage's merge in one epoch, committed by the orchestrator.
///
/// Shard `k` covers [`iota_primitives::butterfly::shard_range`]`(k, K, param_count)`; `K` follows from
/// `members` ([`iota_primitives::shard_count`]).
#[derive(
	CloneNoBound,
	PartialEqNoBound,
	EqNoBound,
	DebugNoBound,
	Encode,
	Decode,
	DecodeWithMemTracking,
	MaxEncodedLen,
	TypeInfo,
)]
#[scale_info(skip_type_params(MaxShards, MaxKeyLen))]
pub struct MergeManifest<MaxShards: Get<u32>, MaxKeyLen: Get<u32>> {
	/// Miners whose gradients were averaged (the butterfly's `n`).
	pub members: u32,
	/// Length `P` of the stage's flattened gradient vector, in f32 elements.
	pub param_count: u64,
	/// Samples merged (sum of the submitted sample counts).
	pub samples: u32,
	/// Reduced shards in shard order.
	pub shards: BoundedVec<ObjectRef<MaxKeyLen>, MaxShards>,
	/// BLAKE3 of the stage state after the AdamW step (weights + moments + step), which every replica
	/// attested.
	pub state_hash: ContentHash,
	/// The full stage checkpoint uploaded this epoch, if any.
	pub checkpoint: Option<ObjectRef<MaxKeyLen>>,
}

/// One validator's verdict on one miner's work in one epoch.
#[derive(Clone, PartialEq, Eq, Debug, Encode, Decode, MaxEncodedLen, TypeInfo)]
pub struct SpotCheck<AccountId> {
	/// The validator that recomputed.
	pub validator: AccountId,
	/// What it found.
	pub verdict: Verdict,
	/// BLAKE3 of the evidence object (inputs, outputs, recomputation) in the bucket.
	pub evidence: ContentHash,
}

/// Who was paid what for one epoch. Amounts are what was actually minted.
#[derive(
	CloneNoBound,
	PartialEqNoBound,
	EqNoBound,
	DebugNoBound,
	Encode,
	Decode,
	DecodeWithMemTracking,
	MaxEncodedLen,
	TypeInfo,
)]
#[scale_info(skip_type_params(MaxMiners, MaxValidators))]
pub struct EmissionSplit<AccountId, Balance, MaxMiners: Get<u32>, MaxValidators: Get<u32>>
where
	AccountId: Clone + PartialEq + Eq + core::fmt::Debug,
	Balance: Clone + PartialEq + Eq + core::fmt::Debug,
{
	/// Payout per miner with a non-zero consensus score.
	pub miners: BoundedVec<(AccountId, Balance), MaxMiners>,
	/// Payout per validator that set weights and agreed with consensus at all.
	pub validators: BoundedVec<(AccountId, Balance), MaxValidators>,
	/// Part of the pool nobody earned (not minted).
	pub unallocated: Balance,
}

/// `n(n-1)/2` for `n = MaxMinersPerStage` (at least 1): the most shards one merge can have.
pub struct MaxShardsFor<N>(core::marker::PhantomData<N>);

impl<N: Get<u32>> Get<u32> for MaxShardsFor<N> {
	fn get() -> u32 {
		let n = N::get().min(iota_primitives::MAX_BUTTERFLY_MEMBERS);
		iota_primitives::shard_count(n).unwrap_or(1)
	}
}
