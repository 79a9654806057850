//! Weights for `pallet_iota`, measured by `iota-node benchmark pallet` (FRAME benchmarking CLI 64.0.0).
//!
//! DATE: 2026-12-06, STEPS: `10`, REPEAT: `5`, LOW RANGE: `[]`,
//! HIGH RANGE: `[]`, WORST CASE MAP SIZE: `1000000`
//! CPU: `Intel(R) Xeon(R) Processor`, WASM-EXECUTION: `Compiled`, CHAIN: `None`, DB CACHE: 1024
//!
//! Measured on the 2-core development machine with a debug-built node: the runtime is the release WASM
//! blob, but the host functions it calls (storage, trie, hashing) run unoptimised, so these weights are
//! conservative (several times what a release node on reference hardware measures). Regenerate with the
//! command below (run from the repository root, `iota-node` on PATH) before a production launch:
//!
//! ```sh
//! # with SKIP_WASM_BUILD unset; frame-benchmarking-cli's storage-access test runtime cannot find
//! # itself in this workspace's metadata and is not needed for `benchmark pallet`: skip its WASM
//! SKIP_FRAME_STORAGE_ACCESS_TEST_RUNTIME_WASM_BUILD=1 cargo build -p iota-node --features runtime-benchmarks
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
// /tmp/iota-node-bench
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
// /tmp/weights-new.rs

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
	fn on_initialize_deadlines(s: u32, ) -> Weight;
	fn set_run_config() -> Weight;
	fn set_orchestrator() -> Weight;
}

/// Weights for pallet-iota measured on the benchmark machine, with the runtime's database weights.
pub struct SubstrateWeight<T>(PhantomData<T>);
impl<T: polkadot_sdk::frame_system::Config> WeightInfo for SubstrateWeight<T> {
	/// Storage: `Iota::RunConfiguration` (r:1 w:0)
	/// Proof: `Iota::RunConfiguration` (`max_values`: Some(1), `max_size`: Some(134), added: 629, mode: `MaxEncodedLen`)
	/// Storage: `Iota::Miners` (r:1 w:1)
	/// Proof: `Iota::Miners` (`max_values`: None, `max_size`: Some(83), added: 2558, mode: `MaxEncodedLen`)
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
	/// Storage: `Iota::Stages` (r:8 w:0)
	/// Proof: `Iota::Stages` (`max_values`: None, `max_size`: Some(23), added: 2498, mode: `MaxEncodedLen`)
	/// The range of component `s` is `[1, 8]`.
	fn register_miner(s: u32, ) -> Weight {
		// Proof Size summary in bytes:
		//  Measured:  `578 + s * (384 ±0)`
		//  Estimated: `4079 + s * (2742 ±0)`
		// Minimum execution time: 1_491_942_000 picoseconds.
		Weight::from_parts(1_545_816_885, 4079)
			// Standard Error: 6_263_526
			.saturating_add(Weight::from_parts(80_102_592, 0).saturating_mul(s.into()))
			.saturating_add(T::DbWeight::get().reads(7_u64))
			.saturating_add(T::DbWeight::get().reads((2_u64).saturating_mul(s.into())))
			.saturating_add(T::DbWeight::get().writes(5_u64))
			.saturating_add(Weight::from_parts(0, 2742).saturating_mul(s.into()))
	}
	/// Storage: `Iota::RunConfiguration` (r:1 w:0)
	/// Proof: `Iota::RunConfiguration` (`max_values`: Some(1), `max_size`: Some(134), added: 629, mode: `MaxEncodedLen`)
	/// Storage: `Iota::Miners` (r:1 w:0)
	/// Proof: `Iota::Miners` (`max_values`: None, `max_size`: Some(83), added: 2558, mode: `MaxEncodedLen`)
	/// Storage: `Iota::Validators` (r:33 w:2)
	/// Proof: `Iota::Validators` (`max_values`: None, `max_size`: Some(74), added: 2549, mode: `MaxEncodedLen`)
	/// Storage: `Iota::CounterForValidators` (r:1 w:1)
	/// Proof: `Iota::CounterForValidators` (`max_values`: Some(1), `max_size`: Some(4), added: 499, mode: `MaxEncodedLen`)
	/// Storage: `System::Account` (r:1 w:1)
	/// Proof: `System::Account` (`max_values`: None, `max_size`: Some(128), added: 2603, mode: `MaxEncodedLen`)
	/// Storage: `Balances::Holds` (r:1 w:1)
	/// Proof: `Balances::Holds` (`max_values`: None, `max_size`: Some(85), added: 2560, mode: `MaxEncodedLen`)
	/// The range of component `v` is `[1, 31]`.
	fn register_validator(v: u32, ) -> Weight {
		// Proof Size summary in bytes:
		//  Measured:  `346 + v * (88 ±0)`
		//  Estimated: `6088 + v * (2549 ±0)`
		// Minimum execution time: 1_434_367_000 picoseconds.
		Weight::from_parts(1_349_464_306, 6088)
			// Standard Error: 425_020
			.saturating_add(Weight::from_parts(105_633_990, 0).saturating_mul(v.into()))
			.saturating_add(T::DbWeight::get().reads(7_u64))
			.saturating_add(T::DbWeight::get().reads((1_u64).saturating_mul(v.into())))
			.saturating_add(T::DbWeight::get().writes(4_u64))
			.saturating_add(Weight::from_parts(0, 2549).saturating_mul(v.into()))
	}
	/// Storage: `Iota::RunConfiguration` (r:1 w:0)
	/// Proof: `Iota::RunConfiguration` (`max_values`: Some(1), `max_size`: Some(134), added: 629, mode: `MaxEncodedLen`)
	/// Storage: `Iota::Miners` (r:1 w:1)
	/// Proof: `Iota::Miners` (`max_values`: None, `max_size`: Some(83), added: 2558, mode: `MaxEncodedLen`)
	fn deregister() -> Weight {
		// Proof Size summary in bytes:
		//  Measured:  `334`
		//  Estimated: `3548`
		// Minimum execution time: 353_977_000 picoseconds.
		Weight::from_parts(366_207_000, 3548)
			.saturating_add(T::DbWeight::get().reads(2_u64))
			.saturating_add(T::DbWeight::get().writes(1_u64))
	}
	/// Storage: `Iota::Miners` (r:1 w:1)
	/// Proof: `Iota::Miners` (`max_values`: None, `max_size`: Some(83), added: 2558, mode: `MaxEncodedLen`)
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
		//  Measured:  `512`
		//  Estimated: `3593`
		// Minimum execution time: 1_255_981_000 picoseconds.
		Weight::from_parts(1_341_454_000, 3593)
			.saturating_add(T::DbWeight::get().reads(6_u64))
			.saturating_add(T::DbWeight::get().writes(5_u64))
	}
	/// Storage: `Iota::Orchestrator` (r:1 w:0)
	/// Proof: `Iota::Orchestrator` (`max_values`: Some(1), `max_size`: Some(32), added: 527, mode: `MaxEncodedLen`)
	/// Storage: `Iota::RunConfiguration` (r:1 w:0)
	/// Proof: `Iota::RunConfiguration` (`max_values`: Some(1), `max_size`: Some(134), added: 629, mode: `MaxEncodedLen`)
	/// Storage: `Iota::Stages` (r:1 w:1)
	/// Proof: `Iota::Stages` (`max_values`: None, `max_size`: Some(23), added: 2498, mode: `MaxEncodedLen`)
	/// Storage: `Iota::StageMembers` (r:1 w:0)
	/// Proof: `Iota::StageMembers` (`max_values`: None, `max_size`: Some(267), added: 2742, mode: `MaxEncodedLen`)
	fn advance_phase() -> Weight {
		// Proof Size summary in bytes:
		//  Measured:  `320`
		//  Estimated: `3732`
		// Minimum execution time: 354_869_000 picoseconds.
		Weight::from_parts(369_628_000, 3732)
			.saturating_add(T::DbWeight::get().reads(4_u64))
			.saturating_add(T::DbWeight::get().writes(1_u64))
	}
	/// Storage: `Iota::Orchestrator` (r:1 w:0)
	/// Proof: `Iota::Orchestrator` (`max_values`: Some(1), `max_size`: Some(32), added: 527, mode: `MaxEncodedLen`)
	/// Storage: `Iota::RunConfiguration` (r:1 w:0)
	/// Proof: `Iota::RunConfiguration` (`max_values`: Some(1), `max_size`: Some(134), added: 629, mode: `MaxEncodedLen`)
	/// Storage: `Iota::Stages` (r:8 w:1)
	/// Proof: `Iota::Stages` (`max_values`: None, `max_size`: Some(23), added: 2498, mode: `MaxEncodedLen`)
	/// Storage: `Iota::StageMembers` (r:1 w:1)
	/// Proof: `Iota::StageMembers` (`max_values`: None, `max_size`: Some(267), added: 2742, mode: `MaxEncodedLen`)
	/// Storage: `Iota::Miners` (r:8 w:8)
	/// Proof: `Iota::Miners` (`max_values`: None, `max_size`: Some(83), added: 2558, mode: `MaxEncodedLen`)
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
		//  Measured:  `505 + m * (114 ±0)`
		//  Estimated: `20974 + m * (2558 ±0)`
		// Minimum execution time: 1_168_179_000 picoseconds.
		Weight::from_parts(1_019_491_685, 20974)
			// Standard Error: 793_753
			.saturating_add(Weight::from_parts(204_979_985, 0).saturating_mul(m.into()))
			.saturating_add(T::DbWeight::get().reads(14_u64))
			.saturating_add(T::DbWeight::get().reads((1_u64).saturating_mul(m.into())))
			.saturating_add(T::DbWeight::get().writes(5_u64))
			.saturating_add(T::DbWeight::get().writes((1_u64).saturating_mul(m.into())))
			.saturating_add(Weight::from_parts(0, 2558).saturating_mul(m.into()))
	}
	/// Storage: `Iota::RunConfiguration` (r:1 w:0)
	/// Proof: `Iota::RunConfiguration` (`max_values`: Some(1), `max_size`: Some(134), added: 629, mode: `MaxEncodedLen`)
	/// Storage: `Iota::Validators` (r:17 w:0)
	/// Proof: `Iota::Validators` (`max_values`: None, `max_size`: Some(74), added: 2549, mode: `MaxEncodedLen`)
	/// Storage: `Iota::Miners` (r:1 w:1)
	/// Proof: `Iota::Miners` (`max_values`: None, `max_size`: Some(83), added: 2558, mode: `MaxEncodedLen`)
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
		//  Measured:  `596 + v * (170 ±0)`
		//  Estimated: `20974 + v * (2549 ±0)`
		// Minimum execution time: 1_525_342_000 picoseconds.
		Weight::from_parts(1_556_978_337, 20974)
			// Standard Error: 500_515
			.saturating_add(Weight::from_parts(99_116_980, 0).saturating_mul(v.into()))
			.saturating_add(T::DbWeight::get().reads(17_u64))
			.saturating_add(T::DbWeight::get().reads((1_u64).saturating_mul(v.into())))
			.saturating_add(T::DbWeight::get().writes(7_u64))
			.saturating_add(Weight::from_parts(0, 2549).saturating_mul(v.into()))
	}
	/// Storage: `Iota::RunConfiguration` (r:1 w:0)
	/// Proof: `Iota::RunConfiguration` (`max_values`: Some(1), `max_size`: Some(134), added: 629, mode: `MaxEncodedLen`)
	/// Storage: `Iota::Validators` (r:1 w:1)
	/// Proof: `Iota::Validators` (`max_values`: None, `max_size`: Some(74), added: 2549, mode: `MaxEncodedLen`)
	/// Storage: `Iota::EpochCompletedAt` (r:1 w:0)
	/// Proof: `Iota::EpochCompletedAt` (`max_values`: None, `max_size`: Some(16), added: 2491, mode: `MaxEncodedLen`)
	/// Storage: `Iota::NextEpochToFinalize` (r:1 w:0)
	/// Proof: `Iota::NextEpochToFinalize` (`max_values`: Some(1), `max_size`: Some(4), added: 499, mode: `MaxEncodedLen`)
	/// Storage: `Iota::WeightCommits` (r:1 w:1)
	/// Proof: `Iota::WeightCommits` (`max_values`: None, `max_size`: Some(92), added: 2567, mode: `MaxEncodedLen`)
	fn commit_weights() -> Weight {
		// Proof Size summary in bytes:
		//  Measured:  `439`
		//  Estimated: `3557`
		// Minimum execution time: 530_161_000 picoseconds.
		Weight::from_parts(576_142_000, 3557)
			.saturating_add(T::DbWeight::get().reads(5_u64))
			.saturating_add(T::DbWeight::get().writes(2_u64))
	}
	/// Storage: `Iota::RunConfiguration` (r:1 w:0)
	/// Proof: `Iota::RunConfiguration` (`max_values`: Some(1), `max_size`: Some(134), added: 629, mode: `MaxEncodedLen`)
	/// Storage: `Iota::Validators` (r:1 w:0)
	/// Proof: `Iota::Validators` (`max_values`: None, `max_size`: Some(74), added: 2549, mode: `MaxEncodedLen`)
	/// Storage: `Iota::EpochCompletedAt` (r:1 w:0)
	/// Proof: `Iota::EpochCompletedAt` (`max_values`: None, `max_size`: Some(16), added: 2491, mode: `MaxEncodedLen`)
	/// Storage: `Iota::NextEpochToFinalize` (r:1 w:0)
	/// Proof: `Iota::NextEpochToFinalize` (`max_values`: Some(1), `max_size`: Some(4), added: 499, mode: `MaxEncodedLen`)
	/// Storage: `Iota::Weights` (r:1 w:1)
	/// Proof: `Iota::Weights` (`max_values`: None, `max_size`: Some(2238), added: 4713, mode: `MaxEncodedLen`)
	/// Storage: `Iota::WeightCommits` (r:1 w:0)
	/// Proof: `Iota::WeightCommits` (`max_values`: None, `max_size`: Some(92), added: 2567, mode: `MaxEncodedLen`)
	/// The range of component `w` is `[1, 64]`.
	fn reveal_weights(w: u32, ) -> Weight {
		// Proof Size summary in bytes:
		//  Measured:  `535`
		//  Estimated: `5703`
		// Minimum execution time: 584_472_000 picoseconds.
		Weight::from_parts(608_040_980, 5703)
			// Standard Error: 464_093
			.saturating_add(Weight::from_parts(2_219_720, 0).saturating_mul(w.into()))
			.saturating_add(T::DbWeight::get().reads(6_u64))
			.saturating_add(T::DbWeight::get().writes(1_u64))
	}
	/// Storage: `Iota::RunConfiguration` (r:1 w:0)
	/// Proof: `Iota::RunConfiguration` (`max_values`: Some(1), `max_size`: Some(134), added: 629, mode: `MaxEncodedLen`)
	/// Storage: `Iota::NextEpochToFinalize` (r:1 w:1)
	/// Proof: `Iota::NextEpochToFinalize` (`max_values`: Some(1), `max_size`: Some(4), added: 499, mode: `MaxEncodedLen`)
	/// Storage: `Iota::EpochCompletedAt` (r:1 w:0)
	/// Proof: `Iota::EpochCompletedAt` (`max_values`: None, `max_size`: Some(16), added: 2491, mode: `MaxEncodedLen`)
	/// Storage: `Iota::Miners` (r:65 w:0)
	/// Proof: `Iota::Miners` (`max_values`: None, `max_size`: Some(83), added: 2558, mode: `MaxEncodedLen`)
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
		//  Measured:  `339 + m * (197 ±0) + v * (243 ±0)`
		//  Estimated: `3548 + m * (2603 ±0) + v * (4713 ±0)`
		// Minimum execution time: 10_674_307_000 picoseconds.
		Weight::from_parts(263_429_927, 3548)
			// Standard Error: 833_559
			.saturating_add(Weight::from_parts(542_463_498, 0).saturating_mul(m.into()))
			// Standard Error: 3_417_016
			.saturating_add(Weight::from_parts(618_415_150, 0).saturating_mul(v.into()))
			.saturating_add(T::DbWeight::get().reads(6_u64))
			.saturating_add(T::DbWeight::get().reads((2_u64).saturating_mul(m.into())))
			.saturating_add(T::DbWeight::get().reads((3_u64).saturating_mul(v.into())))
			.saturating_add(T::DbWeight::get().writes(4_u64))
			.saturating_add(T::DbWeight::get().writes((1_u64).saturating_mul(m.into())))
			.saturating_add(T::DbWeight::get().writes((1_u64).saturating_mul(v.into())))
			.saturating_add(Weight::from_parts(0, 2603).saturating_mul(m.into()))
			.saturating_add(Weight::from_parts(0, 4713).saturating_mul(v.into()))
	}
	/// Storage: `Iota::RunConfiguration` (r:1 w:0)
	/// Proof: `Iota::RunConfiguration` (`max_values`: Some(1), `max_size`: Some(134), added: 629, mode: `MaxEncodedLen`)
	/// Storage: `Iota::Stages` (r:8 w:8)
	/// Proof: `Iota::Stages` (`max_values`: None, `max_size`: Some(23), added: 2498, mode: `MaxEncodedLen`)
	/// Storage: `Iota::StageMembers` (r:8 w:0)
	/// Proof: `Iota::StageMembers` (`max_values`: None, `max_size`: Some(267), added: 2742, mode: `MaxEncodedLen`)
	/// Storage: `Iota::NextEpochToFinalize` (r:1 w:0)
	/// Proof: `Iota::NextEpochToFinalize` (`max_values`: Some(1), `max_size`: Some(4), added: 499, mode: `MaxEncodedLen`)
	/// Storage: `Iota::EpochCompletedAt` (r:1 w:0)
	/// Proof: `Iota::EpochCompletedAt` (`max_values`: None, `max_size`: Some(16), added: 2491, mode: `MaxEncodedLen`)
	/// The range of component `s` is `[1, 8]`.
	fn on_initialize_deadlines(s: u32, ) -> Weight {
		// Proof Size summary in bytes:
		//  Measured:  `109 + s * (27 ±0)`
		//  Estimated: `3481 + s * (2742 ±0)`
		// Minimum execution time: 226_785_000 picoseconds.
		Weight::from_parts(130_133_634, 3481)
			// Standard Error: 300_254
			.saturating_add(Weight::from_parts(121_961_690, 0).saturating_mul(s.into()))
			.saturating_add(T::DbWeight::get().reads(3_u64))
			.saturating_add(T::DbWeight::get().reads((2_u64).saturating_mul(s.into())))
			.saturating_add(T::DbWeight::get().writes((1_u64).saturating_mul(s.into())))
			.saturating_add(Weight::from_parts(0, 2742).saturating_mul(s.into()))
	}
	/// Storage: `Iota::RunConfiguration` (r:1 w:1)
	/// Proof: `Iota::RunConfiguration` (`max_values`: Some(1), `max_size`: Some(134), added: 629, mode: `MaxEncodedLen`)
	/// Storage: `Iota::EpochSeeds` (r:1 w:1)
	/// Proof: `Iota::EpochSeeds` (`max_values`: None, `max_size`: Some(44), added: 2519, mode: `MaxEncodedLen`)
	fn set_run_config() -> Weight {
		// Proof Size summary in bytes:
		//  Measured:  `123`
		//  Estimated: `3509`
		// Minimum execution time: 194_919_000 picoseconds.
		Weight::from_parts(212_533_000, 3509)
			.saturating_add(T::DbWeight::get().reads(2_u64))
			.saturating_add(T::DbWeight::get().writes(2_u64))
	}
	/// Storage: `Iota::Orchestrator` (r:0 w:1)
	/// Proof: `Iota::Orchestrator` (`max_values`: Some(1), `max_size`: Some(32), added: 527, mode: `MaxEncodedLen`)
	fn set_orchestrator() -> Weight {
		// Proof Size summary in bytes:
		//  Measured:  `0`
		//  Estimated: `0`
		// Minimum execution time: 89_311_000 picoseconds.
		Weight::from_parts(98_816_000, 0)
			.saturating_add(T::DbWeight::get().writes(1_u64))
	}
}

// For tests and mocks: the same numbers with RocksDB weights.
impl WeightInfo for () {
	fn register_miner(s: u32, ) -> Weight {
		Weight::from_parts(1_545_816_885, 4079)
			.saturating_add(Weight::from_parts(80_102_592, 0).saturating_mul(s.into()))
			.saturating_add(RocksDbWeight::get().reads(7_u64))
			.saturating_add(RocksDbWeight::get().reads((2_u64).saturating_mul(s.into())))
			.saturating_add(RocksDbWeight::get().writes(5_u64))
			.saturating_add(Weight::from_parts(0, 2742).saturating_mul(s.into()))
	}
	fn register_validator(v: u32, ) -> Weight {
		Weight::from_parts(1_349_464_306, 6088)
			.saturating_add(Weight::from_parts(105_633_990, 0).saturating_mul(v.into()))
			.saturating_add(RocksDbWeight::get().reads(7_u64))
			.saturating_add(RocksDbWeight::get().reads((1_u64).saturating_mul(v.into())))
			.saturating_add(RocksDbWeight::get().writes(4_u64))
			.saturating_add(Weight::from_parts(0, 2549).saturating_mul(v.into()))
	}
	fn deregister() -> Weight {
		Weight::from_parts(366_207_000, 3548)
			.saturating_add(RocksDbWeight::get().reads(2_u64))
			.saturating_add(RocksDbWeight::get().writes(1_u64))
	}
	fn withdraw_unbonded() -> Weight {
		Weight::from_parts(1_341_454_000, 3593)
			.saturating_add(RocksDbWeight::get().reads(6_u64))
			.saturating_add(RocksDbWeight::get().writes(5_u64))
	}
	fn advance_phase() -> Weight {
		Weight::from_parts(369_628_000, 3732)
			.saturating_add(RocksDbWeight::get().reads(4_u64))
			.saturating_add(RocksDbWeight::get().writes(1_u64))
	}
	fn commit_merge(m: u32, ) -> Weight {
		Weight::from_parts(1_019_491_685, 20974)
			.saturating_add(Weight::from_parts(204_979_985, 0).saturating_mul(m.into()))
			.saturating_add(RocksDbWeight::get().reads(14_u64))
			.saturating_add(RocksDbWeight::get().reads((1_u64).saturating_mul(m.into())))
			.saturating_add(RocksDbWeight::get().writes(5_u64))
			.saturating_add(RocksDbWeight::get().writes((1_u64).saturating_mul(m.into())))
			.saturating_add(Weight::from_parts(0, 2558).saturating_mul(m.into()))
	}
	fn submit_spot_check(v: u32, ) -> Weight {
		Weight::from_parts(1_556_978_337, 20974)
			.saturating_add(Weight::from_parts(99_116_980, 0).saturating_mul(v.into()))
			.saturating_add(RocksDbWeight::get().reads(17_u64))
			.saturating_add(RocksDbWeight::get().reads((1_u64).saturating_mul(v.into())))
			.saturating_add(RocksDbWeight::get().writes(7_u64))
			.saturating_add(Weight::from_parts(0, 2549).saturating_mul(v.into()))
	}
	fn commit_weights() -> Weight {
		Weight::from_parts(576_142_000, 3557)
			.saturating_add(RocksDbWeight::get().reads(5_u64))
			.saturating_add(RocksDbWeight::get().writes(2_u64))
	}
	fn reveal_weights(w: u32, ) -> Weight {
		Weight::from_parts(608_040_980, 5703)
			.saturating_add(Weight::from_parts(2_219_720, 0).saturating_mul(w.into()))
			.saturating_add(RocksDbWeight::get().reads(6_u64))
			.saturating_add(RocksDbWeight::get().writes(1_u64))
	}
	fn finalize_epoch(m: u32, v: u32, ) -> Weight {
		Weight::from_parts(263_429_927, 3548)
			.saturating_add(Weight::from_parts(542_463_498, 0).saturating_mul(m.into()))
			.saturating_add(Weight::from_parts(618_415_150, 0).saturating_mul(v.into()))
			.saturating_add(RocksDbWeight::get().reads(6_u64))
			.saturating_add(RocksDbWeight::get().reads((2_u64).saturating_mul(m.into())))
			.saturating_add(RocksDbWeight::get().reads((3_u64).saturating_mul(v.into())))
			.saturating_add(RocksDbWeight::get().writes(4_u64))
			.saturating_add(RocksDbWeight::get().writes((1_u64).saturating_mul(m.into())))
			.saturating_add(RocksDbWeight::get().writes((1_u64).saturating_mul(v.into())))
			.saturating_add(Weight::from_parts(0, 2603).saturating_mul(m.into()))
			.saturating_add(Weight::from_parts(0, 4713).saturating_mul(v.into()))
	}
	fn on_initialize_deadlines(s: u32, ) -> Weight {
		Weight::from_parts(130_133_634, 3481)
			.saturating_add(Weight::from_parts(121_961_690, 0).saturating_mul(s.into()))
			.saturating_add(RocksDbWeight::get().reads(3_u64))
			.saturating_add(RocksDbWeight::get().reads((2_u64).saturating_mul(s.into())))
			.saturating_add(RocksDbWeight::get().writes((1_u64).saturating_mul(s.into())))
			.saturating_add(Weight::from_parts(0, 2742).saturating_mul(s.into()))
	}
	fn set_run_config() -> Weight {
		Weight::from_parts(212_533_000, 3509)
			.saturating_add(RocksDbWeight::get().reads(2_u64))
			.saturating_add(RocksDbWeight::get().writes(2_u64))
	}
	fn set_orchestrator() -> Weight {
		Weight::from_parts(98_816_000, 0)
			.saturating_add(RocksDbWeight::get().writes(1_u64))
	}
}
