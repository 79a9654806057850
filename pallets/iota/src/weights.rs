//! Weights for `pallet_iota`, measured by `iota-node benchmark pallet` (FRAME benchmarking CLI 64.0.0).
//!
//! DATE: 2026-11-30, STEPS: `10`, REPEAT: `5`, LOW RANGE: `[]`,
//! HIGH RANGE: `[]`, WORST CASE MAP SIZE: `1000000`
//! CPU: `AMD EPYC`, WASM-EXECUTION: `Compiled`, CHAIN: `None`, DB CACHE: 1024
//!
//! Measured on the 2-core development machine with a debug-built node: the runtime is the release WASM
//! blob, but the host functions it calls (storage, trie, hashing) run unoptimised, so these weights are
//! conservative (several times what a release node on reference hardware measures). Regenerate with the
//! command below (run from the repository root, `iota-node` on PATH) before a production launch:
//!
//! ```sh
//! cargo build -p iota-node --features runtime-benchmarks    # with SKIP_WASM_BUILD unset
//! cp "$CARGO_TARGET_DIR"/debug/wbuild/iota-runtime/iota_runtime.compact.compressed.wasm target/
//! iota-node benchmark pallet --runtime target/iota_runtime.compact.compressed.wasm --genesis-builder none \
//!     --pallet pallet_iota --extrinsic '*' --steps 10 --repeat 5 \
//!     --template node/frame-weight-template.hbs --output pallets/iota/src/weights.rs
//! ```
//!
//! `--genesis-builder none`: the benchmarks set up their own state (the dev preset's genesis validators
//! would take validator slots the worst cases need).
//!
//! Components: `s` stages, `m` members of a merge (or miners paid), `v` validators, `w` weight entries.

// Executed command:
// iota-node
// benchmark
// pallet
// --runtime
// target/iota_runtime.compact.compressed.wasm
// --genesis-builder
// none
// --pallet
// pallet_iota
// --extrinsic
// *
// --steps
// 10
// --repeat
// 5
// --template
// node/frame-weight-template.hbs
// --output
// pallets/iota/src/weights.rs

#![cfg_attr(rustfmt, rustfmt_skip)]
#![allow(unused_parens, unused_imports, missing_docs)]

use core::marker::PhantomData;
use polkadot_sdk::frame_support::{
	traits::Get,
	weights::{constants::RocksDbWeight, Weight},
};

/// Weight functions of pallet-iota's calls.
pub trait WeightInfo {
	fn register_miner(s: u32, ) -> Weight;
	fn register_validator(v: u32, ) -> Weight;
	fn deregister() -> Weight;
	fn withdraw_unbonded() -> Weight;
	fn advance_phase() -> Weight;
	fn commit_merge(m: u32, ) -> Weight;
	fn submit_spot_check(v: u32, ) -> Weight;
	fn commit_weights() -> Weight;
	fn reveal_weights(w: u32, ) -> Weight;
	fn finalize_epoch(m: u32, v: u32, ) -> Weight;
	fn set_run_config() -> Weight;
	fn set_orchestrator() -> Weight;
}

/// Weights for pallet-iota measured on the benchmark machine, with the runtime's database weights.
pub struct SubstrateWeight<T>(PhantomData<T>);
impl<T: polkadot_sdk::frame_system::Config> WeightInfo for SubstrateWeight<T> {
	/// Storage: `Iota::RunConfiguration` (r:1 w:0)
	/// Proof: `Iota::RunConfiguration` (`max_values`: Some(1), `max_size`: Some(126), added: 621, mode: `MaxEncodedLen`)
	/// Storage: `Iota::Miners` (r:1 w:1)
	/// Proof: `Iota::Miners` (`max_values`: None, `max_size`: Some(79), added: 2554, mode: `MaxEncodedLen`)
	/// Storage: `Iota::Validators` (r:1 w:0)
	/// Proof: `Iota::Validators` (`max_values`: None, `max_size`: Some(74), added: 2549, mode: `MaxEncodedLen`)
	/// Storage: `Iota::CounterForMiners` (r:1 w:1)
	/// Proof: `Iota::CounterForMiners` (`max_values`: Some(1), `max_size`: Some(4), added: 499, mode: `MaxEncodedLen`)
	/// Storage: `Iota::StageMembers` (r:8 w:1)
	/// Proof: `Iota::StageMembers` (`max_values`: None, `max_size`: Some(267), added: 2742, mode: `MaxEncodedLen`)
	/// Storage: `RandomnessCollectiveFlip::RandomMaterial` (r:1 w:0)
	/// Proof: `RandomnessCollectiveFlip::RandomMaterial` (`max_values`: Some(1), `max_size`: Some(2594), added: 3089, mode: `MaxEncodedLen`)
	/// Storage: `System::Account` (r:1 w:1)
	/// Proof: `System::Account` (`max_values`: None, `max_size`: Some(128), added: 2603, mode: `MaxEncodedLen`)
	/// Storage: `Balances::Holds` (r:1 w:1)
	/// Proof: `Balances::Holds` (`max_values`: None, `max_size`: Some(85), added: 2560, mode: `MaxEncodedLen`)
	/// The range of component `s` is `[1, 8]`.
	fn register_miner(s: u32, ) -> Weight {
		// Proof Size summary in bytes:
		//  Measured:  `570 + s * (384 ±0)`
		//  Estimated: `4079 + s * (2742 ±0)`
		// Minimum execution time: 1_557_012_000 picoseconds.
		Weight::from_parts(1_531_029_722, 4079)
			// Standard Error: 1_920_735
			.saturating_add(Weight::from_parts(74_777_058, 0).saturating_mul(s.into()))
			.saturating_add(T::DbWeight::get().reads(7_u64))
			.saturating_add(T::DbWeight::get().reads((1_u64).saturating_mul(s.into())))
			.saturating_add(T::DbWeight::get().writes(5_u64))
			.saturating_add(Weight::from_parts(0, 2742).saturating_mul(s.into()))
	}
	/// Storage: `Iota::RunConfiguration` (r:1 w:0)
	/// Proof: `Iota::RunConfiguration` (`max_values`: Some(1), `max_size`: Some(126), added: 621, mode: `MaxEncodedLen`)
	/// Storage: `Iota::Miners` (r:1 w:0)
	/// Proof: `Iota::Miners` (`max_values`: None, `max_size`: Some(79), added: 2554, mode: `MaxEncodedLen`)
	/// Storage: `Iota::Validators` (r:1 w:1)
	/// Proof: `Iota::Validators` (`max_values`: None, `max_size`: Some(74), added: 2549, mode: `MaxEncodedLen`)
	/// Storage: `Iota::CounterForValidators` (r:1 w:1)
	/// Proof: `Iota::CounterForValidators` (`max_values`: Some(1), `max_size`: Some(4), added: 499, mode: `MaxEncodedLen`)
	/// Storage: `System::Account` (r:1 w:1)
	/// Proof: `System::Account` (`max_values`: None, `max_size`: Some(128), added: 2603, mode: `MaxEncodedLen`)
	/// Storage: `Balances::Holds` (r:1 w:1)
	/// Proof: `Balances::Holds` (`max_values`: None, `max_size`: Some(85), added: 2560, mode: `MaxEncodedLen`)
	/// The range of component `v` is `[0, 16]` (validator records read for the seat count).
	/// Measured without the seat scan; the scan (`v` reads of `Iota::Validators`) and the replaced
	/// validator's write are not yet measured: charged as `submit_spot_check`'s measured cost per
	/// validator record (the same read) and one more write.
	fn register_validator(v: u32, ) -> Weight {
		// Proof Size summary in bytes:
		//  Measured:  `849`
		//  Estimated: `3593`
		// Minimum execution time: 1_394_741_000 picoseconds.
		Weight::from_parts(1_464_024_000, 3593)
			.saturating_add(Weight::from_parts(74_089_595, 0).saturating_mul(v.into()))
			.saturating_add(T::DbWeight::get().reads(6_u64))
			.saturating_add(T::DbWeight::get().reads((1_u64).saturating_mul(v.into())))
			.saturating_add(T::DbWeight::get().writes(5_u64))
			.saturating_add(Weight::from_parts(0, 2549).saturating_mul(v.into()))
	}
	/// Storage: `Iota::RunConfiguration` (r:1 w:0)
	/// Proof: `Iota::RunConfiguration` (`max_values`: Some(1), `max_size`: Some(126), added: 621, mode: `MaxEncodedLen`)
	/// Storage: `Iota::Miners` (r:1 w:1)
	/// Proof: `Iota::Miners` (`max_values`: None, `max_size`: Some(79), added: 2554, mode: `MaxEncodedLen`)
	fn deregister() -> Weight {
		// Proof Size summary in bytes:
		//  Measured:  `322`
		//  Estimated: `3544`
		// Minimum execution time: 324_273_000 picoseconds.
		Weight::from_parts(343_532_000, 3544)
			.saturating_add(T::DbWeight::get().reads(2_u64))
			.saturating_add(T::DbWeight::get().writes(1_u64))
	}
	/// Storage: `Iota::Miners` (r:1 w:1)
	/// Proof: `Iota::Miners` (`max_values`: None, `max_size`: Some(79), added: 2554, mode: `MaxEncodedLen`)
	/// Storage: `Iota::NextEpochToFinalize` (r:1 w:0)
	/// Proof: `Iota::NextEpochToFinalize` (`max_values`: Some(1), `max_size`: Some(4), added: 499, mode: `MaxEncodedLen`)
	/// Storage: `System::Account` (r:1 w:1)
	/// Proof: `System::Account` (`max_values`: None, `max_size`: Some(128), added: 2603, mode: `MaxEncodedLen`)
	/// Storage: `Balances::Holds` (r:1 w:1)
	/// Proof: `Balances::Holds` (`max_values`: None, `max_size`: Some(85), added: 2560, mode: `MaxEncodedLen`)
	/// Storage: `Iota::CounterForMiners` (r:1 w:1)
	/// Proof: `Iota::CounterForMiners` (`max_values`: Some(1), `max_size`: Some(4), added: 499, mode: `MaxEncodedLen`)
	/// Storage: `Iota::Validators` (r:1 w:1)
	/// Proof: `Iota::Validators` (`max_values`: None, `max_size`: Some(74), added: 2549, mode: `MaxEncodedLen`)
	fn withdraw_unbonded() -> Weight {
		// Proof Size summary in bytes:
		//  Measured:  `506`
		//  Estimated: `3593`
		// Minimum execution time: 1_295_442_000 picoseconds.
		Weight::from_parts(1_356_002_000, 3593)
			.saturating_add(T::DbWeight::get().reads(6_u64))
			.saturating_add(T::DbWeight::get().writes(5_u64))
	}
	/// Storage: `Iota::Orchestrator` (r:1 w:0)
	/// Proof: `Iota::Orchestrator` (`max_values`: Some(1), `max_size`: Some(32), added: 527, mode: `MaxEncodedLen`)
	/// Storage: `Iota::RunConfiguration` (r:1 w:0)
	/// Proof: `Iota::RunConfiguration` (`max_values`: Some(1), `max_size`: Some(126), added: 621, mode: `MaxEncodedLen`)
	/// Storage: `Iota::Stages` (r:1 w:1)
	/// Proof: `Iota::Stages` (`max_values`: None, `max_size`: Some(23), added: 2498, mode: `MaxEncodedLen`)
	/// Storage: `Iota::StageMembers` (r:1 w:0)
	/// Proof: `Iota::StageMembers` (`max_values`: None, `max_size`: Some(267), added: 2742, mode: `MaxEncodedLen`)
	fn advance_phase() -> Weight {
		// Proof Size summary in bytes:
		//  Measured:  `312`
		//  Estimated: `3732`
		// Minimum execution time: 316_402_000 picoseconds.
		Weight::from_parts(338_745_000, 3732)
			.saturating_add(T::DbWeight::get().reads(4_u64))
			.saturating_add(T::DbWeight::get().writes(1_u64))
	}
	/// Storage: `Iota::Orchestrator` (r:1 w:0)
	/// Proof: `Iota::Orchestrator` (`max_values`: Some(1), `max_size`: Some(32), added: 527, mode: `MaxEncodedLen`)
	/// Storage: `Iota::RunConfiguration` (r:1 w:0)
	/// Proof: `Iota::RunConfiguration` (`max_values`: Some(1), `max_size`: Some(126), added: 621, mode: `MaxEncodedLen`)
	/// Storage: `Iota::Stages` (r:8 w:1)
	/// Proof: `Iota::Stages` (`max_values`: None, `max_size`: Some(23), added: 2498, mode: `MaxEncodedLen`)
	/// Storage: `Iota::StageMembers` (r:1 w:1)
	/// Proof: `Iota::StageMembers` (`max_values`: None, `max_size`: Some(267), added: 2742, mode: `MaxEncodedLen`)
	/// Storage: `Iota::Miners` (r:8 w:8)
	/// Proof: `Iota::Miners` (`max_values`: None, `max_size`: Some(79), added: 2554, mode: `MaxEncodedLen`)
	/// Storage: `Iota::EpochSeeds` (r:1 w:1)
	/// Proof: `Iota::EpochSeeds` (`max_values`: None, `max_size`: Some(44), added: 2519, mode: `MaxEncodedLen`)
	/// Storage: `RandomnessCollectiveFlip::RandomMaterial` (r:1 w:0)
	/// Proof: `RandomnessCollectiveFlip::RandomMaterial` (`max_values`: Some(1), `max_size`: Some(2594), added: 3089, mode: `MaxEncodedLen`)
	/// Storage: `Iota::EpochCompletedAt` (r:1 w:1)
	/// Proof: `Iota::EpochCompletedAt` (`max_values`: None, `max_size`: Some(16), added: 2491, mode: `MaxEncodedLen`)
	/// Storage: `Iota::MergeManifests` (r:0 w:1)
	/// Proof: `Iota::MergeManifests` (`max_values`: None, `max_size`: Some(4770), added: 7245, mode: `MaxEncodedLen`)
	/// The range of component `m` is `[1, 8]`.
	fn commit_merge(m: u32, ) -> Weight {
		// Proof Size summary in bytes:
		//  Measured:  `497 + m * (110 ±0)`
		//  Estimated: `20974 + m * (2554 ±0)`
		// Minimum execution time: 1_155_554_000 picoseconds.
		Weight::from_parts(990_334_766, 20974)
			// Standard Error: 587_629
			.saturating_add(Weight::from_parts(207_154_111, 0).saturating_mul(m.into()))
			.saturating_add(T::DbWeight::get().reads(14_u64))
			.saturating_add(T::DbWeight::get().reads((1_u64).saturating_mul(m.into())))
			.saturating_add(T::DbWeight::get().writes(5_u64))
			.saturating_add(T::DbWeight::get().writes((1_u64).saturating_mul(m.into())))
			.saturating_add(Weight::from_parts(0, 2554).saturating_mul(m.into()))
	}
	/// Storage: `Iota::RunConfiguration` (r:1 w:0)
	/// Proof: `Iota::RunConfiguration` (`max_values`: Some(1), `max_size`: Some(126), added: 621, mode: `MaxEncodedLen`)
	/// Storage: `Iota::Validators` (r:17 w:0)
	/// Proof: `Iota::Validators` (`max_values`: None, `max_size`: Some(74), added: 2549, mode: `MaxEncodedLen`)
	/// Storage: `Iota::Miners` (r:1 w:1)
	/// Proof: `Iota::Miners` (`max_values`: None, `max_size`: Some(79), added: 2554, mode: `MaxEncodedLen`)
	/// Storage: `Iota::Stages` (r:8 w:0)
	/// Proof: `Iota::Stages` (`max_values`: None, `max_size`: Some(23), added: 2498, mode: `MaxEncodedLen`)
	/// Storage: `Iota::SpotChecks` (r:1 w:1)
	/// Proof: `Iota::SpotChecks` (`max_values`: None, `max_size`: Some(1101), added: 3576, mode: `MaxEncodedLen`)
	/// Storage: `Iota::Slashes` (r:1 w:1)
	/// Proof: `Iota::Slashes` (`max_values`: None, `max_size`: Some(76), added: 2551, mode: `MaxEncodedLen`)
	/// Storage: `System::Account` (r:1 w:1)
	/// Proof: `System::Account` (`max_values`: None, `max_size`: Some(128), added: 2603, mode: `MaxEncodedLen`)
	/// Storage: `Balances::Holds` (r:1 w:1)
	/// Proof: `Balances::Holds` (`max_values`: None, `max_size`: Some(85), added: 2560, mode: `MaxEncodedLen`)
	/// Storage: `Iota::StageMembers` (r:1 w:1)
	/// Proof: `Iota::StageMembers` (`max_values`: None, `max_size`: Some(267), added: 2742, mode: `MaxEncodedLen`)
	/// Storage: `Iota::CounterForMiners` (r:1 w:1)
	/// Proof: `Iota::CounterForMiners` (`max_values`: Some(1), `max_size`: Some(4), added: 499, mode: `MaxEncodedLen`)
	/// The range of component `v` is `[1, 16]`.
	fn submit_spot_check(v: u32, ) -> Weight {
		// Proof Size summary in bytes:
		//  Measured:  `584 + v * (170 ±0)`
		//  Estimated: `20974 + v * (2549 ±0)`
		// Minimum execution time: 1_583_382_000 picoseconds.
		Weight::from_parts(1_598_132_163, 20974)
			// Standard Error: 405_940
			.saturating_add(Weight::from_parts(74_089_595, 0).saturating_mul(v.into()))
			.saturating_add(T::DbWeight::get().reads(17_u64))
			.saturating_add(T::DbWeight::get().reads((1_u64).saturating_mul(v.into())))
			.saturating_add(T::DbWeight::get().writes(7_u64))
			.saturating_add(Weight::from_parts(0, 2549).saturating_mul(v.into()))
	}
	/// Not yet measured (added after the last `benchmark pallet` run; the `commit_weights` benchmark
	/// exists): `set_weights`' measured fixed part, whose reads (run config, validator, completion,
	/// next epoch to finalize, the caller's earlier vector) and writes (validator, vector) are the ones
	/// this call makes, without its per-entry cost.
	/// Storage: `Iota::RunConfiguration` (r:1 w:0), `Iota::Validators` (r:1 w:1),
	/// `Iota::EpochCompletedAt` (r:1 w:0), `Iota::NextEpochToFinalize` (r:1 w:0),
	/// `Iota::WeightCommits` (r:1 w:1)
	fn commit_weights() -> Weight {
		Weight::from_parts(562_787_838, 3539)
			.saturating_add(T::DbWeight::get().reads(5_u64))
			.saturating_add(T::DbWeight::get().writes(2_u64))
	}
	/// Not yet measured (added after the last `benchmark pallet` run; the `reveal_weights` benchmark
	/// exists): `set_weights`' measured cost for `w` entries, which covers this call's checks of the
	/// vector and its write, plus one more read and write (the commitment) and the BLAKE3 of the
	/// encoded vector (taken as one more entry's cost). No miner is read per entry here.
	/// Storage: `Iota::RunConfiguration` (r:1 w:0), `Iota::Validators` (r:1 w:0),
	/// `Iota::EpochCompletedAt` (r:1 w:0), `Iota::NextEpochToFinalize` (r:1 w:0),
	/// `Iota::Weights` (r:1 w:1), `Iota::WeightCommits` (r:1 w:1)
	/// The range of component `w` is `[1, 64]`.
	fn reveal_weights(w: u32, ) -> Weight {
		Weight::from_parts(562_787_838, 3539)
			.saturating_add(Weight::from_parts(72_519_795, 0).saturating_mul(w.saturating_add(1).into()))
			.saturating_add(T::DbWeight::get().reads(6_u64))
			.saturating_add(T::DbWeight::get().writes(2_u64))
			.saturating_add(Weight::from_parts(0, 4713))
	}
	/// Storage: `Iota::RunConfiguration` (r:1 w:0)
	/// Proof: `Iota::RunConfiguration` (`max_values`: Some(1), `max_size`: Some(126), added: 621, mode: `MaxEncodedLen`)
	/// Storage: `Iota::NextEpochToFinalize` (r:1 w:1)
	/// Proof: `Iota::NextEpochToFinalize` (`max_values`: Some(1), `max_size`: Some(4), added: 499, mode: `MaxEncodedLen`)
	/// Storage: `Iota::EpochCompletedAt` (r:1 w:0)
	/// Proof: `Iota::EpochCompletedAt` (`max_values`: None, `max_size`: Some(16), added: 2491, mode: `MaxEncodedLen`)
	/// Storage: `Iota::Miners` (r:65 w:0)
	/// Proof: `Iota::Miners` (`max_values`: None, `max_size`: Some(79), added: 2554, mode: `MaxEncodedLen`)
	/// Storage: `Iota::Validators` (r:17 w:0)
	/// Proof: `Iota::Validators` (`max_values`: None, `max_size`: Some(74), added: 2549, mode: `MaxEncodedLen`)
	/// Storage: `Iota::Weights` (r:16 w:0)
	/// Proof: `Iota::Weights` (`max_values`: None, `max_size`: Some(2238), added: 4713, mode: `MaxEncodedLen`)
	/// Storage: `System::Account` (r:80 w:80)
	/// Proof: `System::Account` (`max_values`: None, `max_size`: Some(128), added: 2603, mode: `MaxEncodedLen`)
	/// Storage: `Iota::TotalMinted` (r:1 w:1)
	/// Proof: `Iota::TotalMinted` (`max_values`: Some(1), `max_size`: Some(16), added: 511, mode: `MaxEncodedLen`)
	/// Storage: `Iota::Scores` (r:0 w:1)
	/// Proof: `Iota::Scores` (`max_values`: None, `max_size`: Some(2318), added: 4793, mode: `MaxEncodedLen`)
	/// Storage: `Iota::EmissionSplits` (r:0 w:1)
	/// Proof: `Iota::EmissionSplits` (`max_values`: None, `max_size`: Some(3871), added: 6346, mode: `MaxEncodedLen`)
	/// The range of component `m` is `[1, 64]`.
	/// The range of component `v` is `[1, 16]`.
	fn finalize_epoch(m: u32, v: u32, ) -> Weight {
		// Proof Size summary in bytes:
		//  Measured:  `331 + m * (193 ±0) + v * (243 ±0)`
		//  Estimated: `3544 + m * (2603 ±0) + v * (4713 ±0)`
		// Minimum execution time: 10_893_347_000 picoseconds.
		Weight::from_parts(368_960_068, 3544)
			// Standard Error: 2_021_146
			.saturating_add(Weight::from_parts(495_223_503, 0).saturating_mul(m.into()))
			// Standard Error: 8_285_296
			.saturating_add(Weight::from_parts(618_010_741, 0).saturating_mul(v.into()))
			.saturating_add(T::DbWeight::get().reads(6_u64))
			.saturating_add(T::DbWeight::get().reads((2_u64).saturating_mul(m.into())))
			.saturating_add(T::DbWeight::get().reads((3_u64).saturating_mul(v.into())))
			.saturating_add(T::DbWeight::get().writes(4_u64))
			.saturating_add(T::DbWeight::get().writes((1_u64).saturating_mul(m.into())))
			.saturating_add(T::DbWeight::get().writes((1_u64).saturating_mul(v.into())))
			// Not yet measured: each miner's record written back (`last_scored` or eviction).
			.saturating_add(T::DbWeight::get().writes((1_u64).saturating_mul(m.into())))
			.saturating_add(Weight::from_parts(0, 2603).saturating_mul(m.into()))
			.saturating_add(Weight::from_parts(0, 4713).saturating_mul(v.into()))
	}
	/// Storage: `Iota::RunConfiguration` (r:1 w:1)
	/// Proof: `Iota::RunConfiguration` (`max_values`: Some(1), `max_size`: Some(126), added: 621, mode: `MaxEncodedLen`)
	/// Storage: `Iota::EpochSeeds` (r:1 w:1)
	/// Proof: `Iota::EpochSeeds` (`max_values`: None, `max_size`: Some(44), added: 2519, mode: `MaxEncodedLen`)
	fn set_run_config() -> Weight {
		// Proof Size summary in bytes:
		//  Measured:  `115`
		//  Estimated: `3509`
		// Minimum execution time: 203_653_000 picoseconds.
		Weight::from_parts(211_846_000, 3509)
			.saturating_add(T::DbWeight::get().reads(2_u64))
			.saturating_add(T::DbWeight::get().writes(2_u64))
	}
	/// Storage: `Iota::Orchestrator` (r:0 w:1)
	/// Proof: `Iota::Orchestrator` (`max_values`: Some(1), `max_size`: Some(32), added: 527, mode: `MaxEncodedLen`)
	fn set_orchestrator() -> Weight {
		// Proof Size summary in bytes:
		//  Measured:  `0`
		//  Estimated: `0`
		// Minimum execution time: 92_699_000 picoseconds.
		Weight::from_parts(97_455_000, 0)
			.saturating_add(T::DbWeight::get().writes(1_u64))
	}
}

// For tests and mocks: the same numbers with RocksDB weights.
impl WeightInfo for () {
	fn register_miner(s: u32, ) -> Weight {
		Weight::from_parts(1_531_029_722, 4079)
			.saturating_add(Weight::from_parts(74_777_058, 0).saturating_mul(s.into()))
			.saturating_add(RocksDbWeight::get().reads(7_u64))
			.saturating_add(RocksDbWeight::get().reads((1_u64).saturating_mul(s.into())))
			.saturating_add(RocksDbWeight::get().writes(5_u64))
			.saturating_add(Weight::from_parts(0, 2742).saturating_mul(s.into()))
	}
	fn register_validator(v: u32, ) -> Weight {
		Weight::from_parts(1_464_024_000, 3593)
			.saturating_add(Weight::from_parts(74_089_595, 0).saturating_mul(v.into()))
			.saturating_add(RocksDbWeight::get().reads(6_u64))
			.saturating_add(RocksDbWeight::get().reads((1_u64).saturating_mul(v.into())))
			.saturating_add(RocksDbWeight::get().writes(5_u64))
			.saturating_add(Weight::from_parts(0, 2549).saturating_mul(v.into()))
	}
	fn deregister() -> Weight {
		Weight::from_parts(343_532_000, 3544)
			.saturating_add(RocksDbWeight::get().reads(2_u64))
			.saturating_add(RocksDbWeight::get().writes(1_u64))
	}
	fn withdraw_unbonded() -> Weight {
		Weight::from_parts(1_356_002_000, 3593)
			.saturating_add(RocksDbWeight::get().reads(6_u64))
			.saturating_add(RocksDbWeight::get().writes(5_u64))
	}
	fn advance_phase() -> Weight {
		Weight::from_parts(338_745_000, 3732)
			.saturating_add(RocksDbWeight::get().reads(4_u64))
			.saturating_add(RocksDbWeight::get().writes(1_u64))
	}
	fn commit_merge(m: u32, ) -> Weight {
		Weight::from_parts(990_334_766, 20974)
			.saturating_add(Weight::from_parts(207_154_111, 0).saturating_mul(m.into()))
			.saturating_add(RocksDbWeight::get().reads(14_u64))
			.saturating_add(RocksDbWeight::get().reads((1_u64).saturating_mul(m.into())))
			.saturating_add(RocksDbWeight::get().writes(5_u64))
			.saturating_add(RocksDbWeight::get().writes((1_u64).saturating_mul(m.into())))
			.saturating_add(Weight::from_parts(0, 2554).saturating_mul(m.into()))
	}
	fn submit_spot_check(v: u32, ) -> Weight {
		Weight::from_parts(1_598_132_163, 20974)
			.saturating_add(Weight::from_parts(74_089_595, 0).saturating_mul(v.into()))
			.saturating_add(RocksDbWeight::get().reads(17_u64))
			.saturating_add(RocksDbWeight::get().reads((1_u64).saturating_mul(v.into())))
			.saturating_add(RocksDbWeight::get().writes(7_u64))
			.saturating_add(Weight::from_parts(0, 2549).saturating_mul(v.into()))
	}
	fn commit_weights() -> Weight {
		Weight::from_parts(562_787_838, 3539)
			.saturating_add(RocksDbWeight::get().reads(5_u64))
			.saturating_add(RocksDbWeight::get().writes(2_u64))
	}
	fn reveal_weights(w: u32, ) -> Weight {
		Weight::from_parts(562_787_838, 3539)
			.saturating_add(Weight::from_parts(72_519_795, 0).saturating_mul(w.saturating_add(1).into()))
			.saturating_add(RocksDbWeight::get().reads(6_u64))
			.saturating_add(RocksDbWeight::get().writes(2_u64))
			.saturating_add(Weight::from_parts(0, 4713))
	}
	fn finalize_epoch(m: u32, v: u32, ) -> Weight {
		Weight::from_parts(368_960_068, 3544)
			.saturating_add(Weight::from_parts(495_223_503, 0).saturating_mul(m.into()))
			.saturating_add(Weight::from_parts(618_010_741, 0).saturating_mul(v.into()))
			.saturating_add(RocksDbWeight::get().reads(6_u64))
			.saturating_add(RocksDbWeight::get().reads((2_u64).saturating_mul(m.into())))
			.saturating_add(RocksDbWeight::get().reads((3_u64).saturating_mul(v.into())))
			.saturating_add(RocksDbWeight::get().writes(4_u64))
			.saturating_add(RocksDbWeight::get().writes((1_u64).saturating_mul(m.into())))
			.saturating_add(RocksDbWeight::get().writes((1_u64).saturating_mul(v.into())))
			// Not yet measured: each miner's record written back (`last_scored` or eviction).
			.saturating_add(RocksDbWeight::get().writes((1_u64).saturating_mul(m.into())))
			.saturating_add(Weight::from_parts(0, 2603).saturating_mul(m.into()))
			.saturating_add(Weight::from_parts(0, 4713).saturating_mul(v.into()))
	}
	fn set_run_config() -> Weight {
		Weight::from_parts(211_846_000, 3509)
			.saturating_add(RocksDbWeight::get().reads(2_u64))
			.saturating_add(RocksDbWeight::get().writes(2_u64))
	}
	fn set_orchestrator() -> Weight {
		Weight::from_parts(97_455_000, 0)
			.saturating_add(RocksDbWeight::get().writes(1_u64))
	}
}
