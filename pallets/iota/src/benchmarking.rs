//! Benchmarks of every pallet-iota call and hook at its worst case (FRAME benchmarks v2). They run as unit tests
//! with `cargo test -p pallet-iota --features runtime-benchmarks`, and through the node's
//! `benchmark pallet` command to regenerate `weights.rs`.

use super::*;
use alloc::vec::Vec;
use iota_primitives::{ContentHash, MinerStatus, Phase, RunConfig, StageReport, Verdict, PPB};
use polkadot_sdk::sp_runtime::traits::Saturating;
use polkadot_sdk::{
	frame_benchmarking::v2::*,
	frame_support::{
		pallet_prelude::{BoundedVec, Get},
		traits::fungible::{Inspect, Mutate},
	},
	frame_system::{pallet_prelude::BlockNumberFor, RawOrigin},
};

fn unit<T: Config>() -> BalanceOf<T> {
	T::Currency::minimum_balance().max(1u32.into())
}

/// A run config with `stages` stages and the given slash quorum; amounts scale with the existential
/// deposit so any runtime can fund them.
fn configure<T: Config>(stages: u32, slash_quorum_ppb: u32) {
	let u = unit::<T>();
	let cfg: RunConfigOf<T> = RunConfig {
		model_hash: ContentHash::of(b"bench"),
		stages: stages.clamp(1, u32::from(u16::MAX)) as u16,
		bottleneck_width: 64,
		backward_quota: 1,
		lease_timeout_secs: 60,
		phase_timeout: 10u32.into(),
		emission_per_epoch: u.saturating_mul(1_000_000u32.into()),
		validator_share_ppb: PPB / 5,
		miner_bond: u.saturating_mul(10u32.into()),
		min_validator_stake: u.saturating_mul(100u32.into()),
		unbonding_period: 1u32.into(),
		max_idle_epochs: 1,
		scoring_window: 1u32.into(),
		reveal_window: 1u32.into(),
		weights_rate_limit: 1u32.into(),
		weights_version: 1,
		slash_quorum_ppb,
	};
	RunConfiguration::<T>::put(cfg);
	Orchestrator::<T>::put(account::<T::AccountId>("orchestrator", 0, 0));
}

fn orchestrator<T: Config>() -> RawOrigin<T::AccountId> {
	RawOrigin::Signed(account("orchestrator", 0, 0))
}

fn funded<T: Config>(name: &'static str, i: u32) -> T::AccountId {
	let who: T::AccountId = account(name, i, 0);
	T::Currency::set_balance(&who, unit::<T>().saturating_mul(10_000_000u32.into()));
	who
}

fn add_miner<T: Config>(i: u32) -> T::AccountId {
	let who = funded::<T>("miner", i);
	Pallet::<T>::register_miner(RawOrigin::Signed(who.clone()).into())
		.expect("bench miner registers");
	who
}

fn add_validator<T: Config>(i: u32) -> T::AccountId {
	let who = funded::<T>("validator", i);
	let stake = unit::<T>().saturating_mul(100u32.into());
	Pallet::<T>::register_validator(RawOrigin::Signed(who.clone()).into(), stake)
		.expect("bench validator registers");
	who
}

fn seats<T: Config>() -> u32 {
	T::MaxStages::get()
		.saturating_mul(T::MaxMinersPerStage::get())
		.min(T::MaxMiners::get())
}

fn manifest<T: Config>(members: u32) -> MergeManifestOf<T> {
	let k = iota_primitives::shard_count(members).unwrap_or(1);
	let key_len = T::MaxKeyLen::get() as usize;
	let object = |i: u32| ObjectRef {
		key: BoundedVec::truncate_from(alloc::vec![b'k'; key_len]),
		content_hash: ContentHash::of(&i.to_le_bytes()),
	};
	MergeManifest {
		members,
		param_count: 1 << 20,
		samples: 1,
		shards: BoundedVec::truncate_from((0..k).map(object).collect()),
		state_hash: ContentHash::of(b"state"),
		checkpoint: Some(object(u32::MAX)),
	}
}

#[benchmarks]
mod benchmarks {
	use super::*;

	/// Worst case: every stage has to be read for the emptiest, each stage nearly full.
	#[benchmark]
	fn register_miner(s: Linear<1, { T::MaxStages::get() }>) {
		configure::<T>(s, PPB);
		let fill = s
			.saturating_mul(T::MaxMinersPerStage::get().saturating_sub(1))
			.min(T::MaxMiners::get().saturating_sub(1));
		for i in 0..fill {
			add_miner::<T>(i);
		}
		let caller = funded::<T>("caller", 0);
		#[extrinsic_call]
		_(RawOrigin::Signed(caller.clone()));
		assert!(Miners::<T>::contains_key(&caller));
	}

	#[benchmark]
	/// Worst case: `v` validator records, every seat taken (the rest unbonding), so the caller
	/// replaces the active validator with the least stake.
	fn register_validator(
		v: Linear<1, { Pallet::<T>::max_validator_records().saturating_sub(1) }>,
	) {
		configure::<T>(1, PPB);
		let active = v.min(T::MaxValidators::get());
		for i in 0..v {
			let who = add_validator::<T>(i);
			if i < v.saturating_sub(active) {
				Pallet::<T>::deregister(RawOrigin::Signed(who).into()).expect("unbonds");
			}
		}
		let caller = funded::<T>("caller", 0);
		let stake = unit::<T>().saturating_mul(1_000u32.into());
		#[extrinsic_call]
		_(RawOrigin::Signed(caller.clone()), stake);
		assert!(Validators::<T>::contains_key(&caller));
	}

	#[benchmark]
	fn deregister() {
		configure::<T>(1, PPB);
		let miner = add_miner::<T>(0);
		#[extrinsic_call]
		_(RawOrigin::Signed(miner.clone()));
		assert_eq!(Miners::<T>::get(&miner).map(|m| m.status), Some(MinerStatus::Leaving));
	}

	#[benchmark]
	fn withdraw_unbonded() {
		configure::<T>(1, PPB);
		let miner = add_miner::<T>(0);
		Pallet::<T>::deregister(RawOrigin::Signed(miner.clone()).into()).expect("leaves");
		Pallet::<T>::advance_phase(
			orchestrator::<T>().into(),
			0,
			0,
			StageReport { backward_done: 1, gradients_submitted: 0 },
		)
		.expect("to uploading");
		Pallet::<T>::advance_phase(
			orchestrator::<T>().into(),
			0,
			0,
			StageReport { backward_done: 1, gradients_submitted: 1 },
		)
		.expect("to merging");
		Pallet::<T>::commit_merge(orchestrator::<T>().into(), 0, 0, manifest::<T>(1))
			.expect("merges");
		NextEpochToFinalize::<T>::put(1);
		polkadot_sdk::frame_system::Pallet::<T>::set_block_number(
			polkadot_sdk::frame_system::Pallet::<T>::block_number().saturating_add(10u32.into()),
		);
		#[extrinsic_call]
		_(RawOrigin::Signed(miner.clone()));
		assert!(!Miners::<T>::contains_key(&miner));
	}

	#[benchmark]
	fn advance_phase() {
		configure::<T>(1, PPB);
		add_miner::<T>(0);
		let report = StageReport { backward_done: 1, gradients_submitted: 0 };
		#[extrinsic_call]
		_(orchestrator::<T>(), 0, 0, report);
		assert_eq!(Stages::<T>::get(0).phase, Phase::WeightsUploading);
	}

	/// Worst case: `m` members all leaving (each record rewritten), the largest manifest, and the commit
	/// completes the epoch (every other stage is already past it).
	#[benchmark]
	fn commit_merge(m: Linear<1, { T::MaxMinersPerStage::get() }>) {
		configure::<T>(1, PPB);
		for i in 0..m {
			let who = add_miner::<T>(i);
			Pallet::<T>::deregister(RawOrigin::Signed(who).into()).expect("leaves");
		}
		configure::<T>(T::MaxStages::get(), PPB);
		for s in 1..T::MaxStages::get() {
			Stages::<T>::mutate(s as u16, |st| st.epoch = 1);
		}
		Stages::<T>::mutate(0, |st| st.phase = Phase::Merging);
		let manifest = manifest::<T>(m);
		#[extrinsic_call]
		_(orchestrator::<T>(), 0, 0, manifest);
		assert_eq!(Stages::<T>::get(0).epoch, 1);
		assert!(EpochCompletedAt::<T>::contains_key(0));
	}

	/// Worst case: the `v`-th `Fail` verdict reaches a 100% quorum and slashes, with every stage read to
	/// find the current epoch.
	#[benchmark]
	fn submit_spot_check(v: Linear<1, { T::MaxValidators::get() }>) {
		configure::<T>(T::MaxStages::get(), PPB);
		let miner = add_miner::<T>(0);
		let validators: Vec<T::AccountId> = (0..v).map(add_validator::<T>).collect();
		let (last, earlier) = validators.split_last().expect("v >= 1");
		for val in earlier {
			Pallet::<T>::submit_spot_check(
				RawOrigin::Signed(val.clone()).into(),
				0,
				miner.clone(),
				Verdict::Fail,
				ContentHash::default(),
			)
			.expect("verdict");
		}
		#[extrinsic_call]
		_(RawOrigin::Signed(last.clone()), 0, miner.clone(), Verdict::Fail, ContentHash::default());
		assert!(!Miners::<T>::contains_key(&miner));
	}

	/// Worst case: a replacement (the earlier commitment and the rate limit are read).
	#[benchmark]
	fn commit_weights() {
		configure::<T>(T::MaxStages::get(), PPB);
		let validator = add_validator::<T>(0);
		// Inside the scoring window: the epoch completed at the block the call runs in.
		polkadot_sdk::frame_system::Pallet::<T>::set_block_number(1u32.into());
		EpochCompletedAt::<T>::insert(0, BlockNumberFor::<T>::from(1u32));
		WeightCommits::<T>::insert(0, &validator, ContentHash::of(b"earlier"));
		let commitment = ContentHash::of(b"bench");
		#[extrinsic_call]
		_(RawOrigin::Signed(validator.clone()), 0, commitment);
		assert_eq!(WeightCommits::<T>::get(0, &validator), Some(commitment));
	}

	#[benchmark]
	fn reveal_weights(w: Linear<1, { T::MaxMiners::get() }>) {
		configure::<T>(T::MaxStages::get(), PPB);
		let w = w.min(seats::<T>());
		let miners: Vec<T::AccountId> = (0..w).map(add_miner::<T>).collect();
		let validator = add_validator::<T>(0);
		let weights: WeightsOf<T> =
			BoundedVec::truncate_from(miners.into_iter().map(|m| (m, 1)).collect());
		let salt = [7u8; 32];
		WeightCommits::<T>::insert(
			0,
			&validator,
			iota_primitives::weights_commitment(0, &validator, &weights[..], &salt),
		);
		// The reveal window: completed at block 1, a one-block scoring window.
		EpochCompletedAt::<T>::insert(0, BlockNumberFor::<T>::from(1u32));
		polkadot_sdk::frame_system::Pallet::<T>::set_block_number(2u32.into());
		#[extrinsic_call]
		_(RawOrigin::Signed(validator.clone()), 0, weights, salt, 1);
		assert!(Weights::<T>::contains_key(0, &validator));
	}

	/// Worst case: every validator scored every miner, all are paid.
	#[benchmark]
	fn finalize_epoch(
		m: Linear<1, { T::MaxMiners::get() }>,
		v: Linear<1, { T::MaxValidators::get() }>,
	) {
		configure::<T>(T::MaxStages::get(), PPB);
		let m = m.min(seats::<T>());
		let miners: Vec<T::AccountId> = (0..m).map(add_miner::<T>).collect();
		for i in 0..v {
			let validator = add_validator::<T>(i);
			let weights: WeightsOf<T> = BoundedVec::truncate_from(
				miners
					.iter()
					.enumerate()
					.map(|(j, who)| (who.clone(), (j as u16).saturating_add(1)))
					.collect(),
			);
			Weights::<T>::insert(0, validator, weights);
		}
		EpochCompletedAt::<T>::insert(0, BlockNumberFor::<T>::from(0u32));
		polkadot_sdk::frame_system::Pallet::<T>::set_block_number(10u32.into());
		let caller = funded::<T>("caller", 0);
		#[extrinsic_call]
		_(RawOrigin::Signed(caller), 0);
		assert!(EmissionSplits::<T>::contains_key(0));
		assert_eq!(NextEpochToFinalize::<T>::get(), 1);
	}

	/// The `on_initialize` deadlines at their worst case without a finalization (that one is charged
	/// as `finalize_epoch`): all `s` stages overran a merge and restart its round; the next epoch to
	/// finalize is read and not complete.
	#[benchmark]
	fn on_initialize_deadlines(s: Linear<1, { T::MaxStages::get() }>) {
		configure::<T>(s, PPB);
		for stage in 0..s {
			Stages::<T>::mutate(stage as u16, |st| st.phase = Phase::Merging);
		}
		polkadot_sdk::frame_system::Pallet::<T>::set_block_number(20u32.into());
		#[block]
		{
			Pallet::<T>::enforce_deadlines();
		}
		for stage in 0..s {
			let st = Stages::<T>::get(stage as u16);
			assert_eq!((st.phase, st.round), (Phase::WeightsUploading, 1));
		}
	}

	#[benchmark]
	fn set_run_config() {
		configure::<T>(1, PPB);
		let mut cfg = RunConfiguration::<T>::get().expect("configured");
		cfg.backward_quota = 128;
		#[extrinsic_call]
		_(RawOrigin::Root, cfg);
		assert_eq!(RunConfiguration::<T>::get().map(|c| c.backward_quota), Some(128));
	}

	#[benchmark]
	fn set_orchestrator() {
		let who: T::AccountId = account("new orchestrator", 0, 0);
		#[extrinsic_call]
		_(RawOrigin::Root, who.clone());
		assert_eq!(Orchestrator::<T>::get(), Some(who));
	}

	impl_benchmark_test_suite!(
		Pallet,
		crate::mock::ExtBuilder::default().build(),
		crate::mock::Test
	);
}
