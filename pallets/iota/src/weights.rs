//! Weights for pallet-iota.
//!
//! The storage read/write counts below are taken from the code of each call at its worst case (the
//! components are the sizes that bound it). The `ref_time` and `proof_size` constants are conservative
//! estimates made before a node existed to run `benchmark pallet` on; regenerate this file with
//! `iota-node benchmark pallet --pallet pallet_iota --extrinsic '*' --output pallets/iota/src/weights.rs`
//! (node built with `--features runtime-benchmarks`) once the node lands. The benchmarks themselves
//! (`benchmarking.rs`) run as unit tests today.
//!
//! Components: `s` stages, `m` members of a merge, `v` validators, `w` weight entries, `m` miners.

#![allow(unused_parens, unused_imports, missing_docs)]

use core::marker::PhantomData;
use polkadot_sdk::frame_support::{
	traits::Get,
	weights::{constants::RocksDbWeight, Weight},
};

/// Weight functions of pallet-iota's calls.
pub trait WeightInfo {
	fn register_miner(s: u32) -> Weight;
	fn register_validator() -> Weight;
	fn deregister() -> Weight;
	fn withdraw_unbonded() -> Weight;
	fn advance_phase() -> Weight;
	fn commit_merge(m: u32) -> Weight;
	fn submit_spot_check(v: u32) -> Weight;
	fn set_weights(w: u32) -> Weight;
	fn finalize_epoch(m: u32, v: u32) -> Weight;
	fn set_run_config() -> Weight;
	fn set_orchestrator() -> Weight;
}

/// Weights for pallet-iota using the Substrate node and recommended hardware.
pub struct SubstrateWeight<T>(PhantomData<T>);

macro_rules! impl_weights {
	($db:expr) => {
		/// Storage: RunConfiguration, Miners, Validators, CounterForMiners, StageMembers (s), Randomness,
		/// Balances Holds + Account. Writes: Holds, Account, StageMembers, Miners, CounterForMiners.
		fn register_miner(s: u32) -> Weight {
			Weight::from_parts(60_000_000, 8_000)
				.saturating_add(Weight::from_parts(3_000_000, 2_600).saturating_mul(s.into()))
				.saturating_add($db.reads(7_u64))
				.saturating_add($db.reads((1_u64).saturating_mul(s.into())))
				.saturating_add($db.writes(5_u64))
		}
		/// Storage: RunConfiguration, Miners, Validators, CounterForValidators, Holds, Account.
		/// Writes: Holds, Account, Validators, CounterForValidators.
		fn register_validator() -> Weight {
			Weight::from_parts(55_000_000, 7_000).saturating_add($db.reads(6_u64)).saturating_add($db.writes(4_u64))
		}
		/// Storage: RunConfiguration, Miners, Validators. Writes: Miners or Validators.
		fn deregister() -> Weight {
			Weight::from_parts(30_000_000, 5_000).saturating_add($db.reads(3_u64)).saturating_add($db.writes(1_u64))
		}
		/// Storage: Miners, Validators, Holds, Account. Writes: Holds, Account, Miners/Validators + counter.
		fn withdraw_unbonded() -> Weight {
			Weight::from_parts(55_000_000, 7_000).saturating_add($db.reads(4_u64)).saturating_add($db.writes(5_u64))
		}
		/// Storage: Orchestrator, RunConfiguration, Stages, StageMembers. Writes: Stages.
		fn advance_phase() -> Weight {
			Weight::from_parts(30_000_000, 4_000).saturating_add($db.reads(4_u64)).saturating_add($db.writes(1_u64))
		}
		/// Storage: Orchestrator, RunConfiguration, Stages (all), StageMembers, Miners (per member),
		/// EpochSeeds, EpochCompletedAt, Randomness. Writes: StageMembers, Miners (leaving members),
		/// MergeManifests, Stages, EpochSeeds, EpochCompletedAt. `m` members, `m(m-1)/2` shards.
		fn commit_merge(m: u32) -> Weight {
			let shards = u64::from(m).saturating_mul(u64::from(m).saturating_sub(1)) / 2;
			Weight::from_parts(120_000_000, 20_000)
				.saturating_add(Weight::from_parts(900_000, 170).saturating_mul(shards))
				.saturating_add(Weight::from_parts(8_000_000, 2_600).saturating_mul(m.into()))
				.saturating_add($db.reads(12_u64))
				.saturating_add($db.reads((1_u64).saturating_mul(m.into())))
				.saturating_add($db.writes(6_u64))
				.saturating_add($db.writes((1_u64).saturating_mul(m.into())))
		}
		/// Storage: RunConfiguration, Validators (v, for the quorum), Miners, Stages (all), SpotChecks,
		/// Holds + Account on a slash. Writes: SpotChecks, and on a slash Holds, Account, StageMembers,
		/// Miners, counter, Slashes, TotalIssuance.
		fn submit_spot_check(v: u32) -> Weight {
			Weight::from_parts(70_000_000, 9_000)
				.saturating_add(Weight::from_parts(4_000_000, 2_600).saturating_mul(v.into()))
				.saturating_add($db.reads(24_u64))
				.saturating_add($db.reads((1_u64).saturating_mul(v.into())))
				.saturating_add($db.writes(8_u64))
		}
		/// Storage: RunConfiguration, Validators, EpochCompletedAt, NextEpochToFinalize, CounterForMiners,
		/// Miners (w). Writes: Validators, Weights.
		fn set_weights(w: u32) -> Weight {
			Weight::from_parts(45_000_000, 6_000)
				.saturating_add(Weight::from_parts(3_500_000, 2_600).saturating_mul(w.into()))
				.saturating_add($db.reads(5_u64))
				.saturating_add($db.reads((1_u64).saturating_mul(w.into())))
				.saturating_add($db.writes(2_u64))
		}
		/// Storage: RunConfiguration, NextEpochToFinalize, EpochCompletedAt, Miners (m), Weights (v),
		/// Validators (v), Account per payee. Writes: Account and TotalIssuance per payee, TotalMinted,
		/// Scores, EmissionSplits, NextEpochToFinalize.
		fn finalize_epoch(m: u32, v: u32) -> Weight {
			Weight::from_parts(80_000_000, 8_000)
				.saturating_add(Weight::from_parts(20_000_000, 2_600).saturating_mul(m.into()))
				.saturating_add(Weight::from_parts(2_000_000_u64.saturating_add(400_000_u64.saturating_mul(m.into())), 3_000).saturating_mul(v.into()))
				.saturating_add($db.reads(3_u64))
				.saturating_add($db.reads((2_u64).saturating_mul(m.into())))
				.saturating_add($db.reads((3_u64).saturating_mul(v.into())))
				.saturating_add($db.writes(4_u64))
				.saturating_add($db.writes((2_u64).saturating_mul(m.into())))
				.saturating_add($db.writes((2_u64).saturating_mul(v.into())))
		}
		/// Storage: RunConfiguration, CounterForMiners, EpochSeeds. Writes: RunConfiguration, EpochSeeds.
		fn set_run_config() -> Weight {
			Weight::from_parts(20_000_000, 2_000).saturating_add($db.reads(3_u64)).saturating_add($db.writes(2_u64))
		}
		/// Writes: Orchestrator.
		fn set_orchestrator() -> Weight {
			Weight::from_parts(10_000_000, 0).saturating_add($db.writes(1_u64))
		}
	};
}

impl<T: polkadot_sdk::frame_system::Config> WeightInfo for SubstrateWeight<T> {
	impl_weights!(T::DbWeight::get());
}

// For backwards compatibility and tests.
impl WeightInfo for () {
	impl_weights!(RocksDbWeight::get());
}
