//! # iota-primitives
//!
//! Types and **pure protocol decisions** of iota-rs, shared by the chain (`pallet-iota`) and the off-chain
//! daemons (orchestrator, miners, validators). Nothing here does I/O or touches storage: state, block
//! numbers and a 32-byte seed come in as arguments, so anyone can recompute any decision the chain made
//! (the idea is Psyche's coordinator; docs/design.md §2).
//!
//! | concept | file | what it decides |
//! |---|---|---|
//! | ids, phases, statuses, run config, content hash | [`types`] | the vocabulary |
//! | seeded randomness | [`seed`] | deterministic draws from a chain seed |
//! | stage assignment | [`stage_assignment`] | which stage a new miner holds |
//! | phase transitions | [`phase`] | when a stage moves Training → WeightsUploading → Merging → Training |
//! | butterfly shards | [`butterfly`] | which pair of miners reduces which slice of the gradient |
//! | score consensus | [`consensus`] | stake-weighted median of validator weights |
//! | emission | [`emission`] | who gets what of an epoch's pool, exactly |
//! | commit-reveal of weights | [`weights`] | when weights are committed, revealed, paid; what a commitment is |
//!
//! The crate is `no_std` (with `alloc`) so the WASM runtime can use it; the `std` feature is on by default.
//! Integer maths only: no floats, every operation checked, saturating or wrapping
//! (`clippy::arithmetic_side_effects` is denied).
#![cfg_attr(not(feature = "std"), no_std)]
#![cfg_attr(test, allow(clippy::arithmetic_side_effects))]

extern crate alloc;

pub mod butterfly;
pub mod consensus;
pub mod emission;
pub mod phase;
pub mod seed;
pub mod stage_assignment;
pub mod types;
pub mod weights;

pub use butterfly::{
	butterfly_shards, shard_count, ButterflyError, ShardDescriptor, MAX_BUTTERFLY_MEMBERS,
};
pub use consensus::{normalize_weights, slash_quorum_reached, stake_weighted_median, PPB};
pub use emission::{epoch_rewards, split_proportional, EpochRewards, ValidatorVote};
pub use phase::{
	complete_merge, gradients_accounted, next_phase, PhaseRefusal, StageProgress, Transition,
};
pub use seed::{derive_seed, Seed, SeededRng};
pub use stage_assignment::{assign_stage, AssignError};
pub use types::*;
pub use weights::{
	commit_window_end, finalizable_at, weights_commitment, weights_window, WeightsWindow,
};
