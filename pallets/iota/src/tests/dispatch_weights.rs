//! Every call's dispatch weight comes from `WeightInfo`, and the weights are sane.

use super::*;
use crate::weights::WeightInfo;
use polkadot_sdk::frame_support::{dispatch::GetDispatchInfo, traits::Get, weights::Weight};

type W = ();
type MaxStages = <Test as crate::Config>::MaxStages;
type MaxMiners = <Test as crate::Config>::MaxMiners;
type MaxValidators = <Test as crate::Config>::MaxValidators;

fn weight_of(call: crate::Call<Test>) -> Weight {
	call.get_dispatch_info().call_weight
}

#[test]
fn dispatch_weights_come_from_weight_info() {
	let cfg = run_config();
	let m = manifest(3, 100);
	let w = weights(&[(21, 1), (22, 1)]);
	let cases: Vec<(crate::Call<Test>, Weight)> = vec![
		(crate::Call::register_miner {}, W::register_miner(MaxStages::get())),
		(
			crate::Call::register_validator { stake: 1 },
			W::register_validator(2 * <MaxValidators as Get<u32>>::get()),
		),
		(crate::Call::deregister {}, W::deregister()),
		(crate::Call::withdraw_unbonded {}, W::withdraw_unbonded()),
		(
			crate::Call::advance_phase { stage: 0, epoch: 0, report: report(1, 1) },
			W::advance_phase(),
		),
		(
			crate::Call::commit_merge { stage: 0, epoch: 0, manifest: m },
			W::commit_merge(<Test as crate::Config>::MaxMinersPerStage::get()),
		),
		(
			crate::Call::submit_spot_check {
				epoch: 0,
				miner: 1,
				verdict: Verdict::Pass,
				evidence: ContentHash::default(),
			},
			W::submit_spot_check(2 * <MaxValidators as Get<u32>>::get()),
		),
		(
			crate::Call::commit_weights { epoch: 0, commitment: ContentHash::default() },
			W::commit_weights(),
		),
		(
			crate::Call::reveal_weights { epoch: 0, weights: w, salt: [0; 32], version_key: 1 },
			W::reveal_weights(2),
		),
		(
			crate::Call::finalize_epoch { epoch: 0 },
			W::finalize_epoch(MaxMiners::get(), 2 * <MaxValidators as Get<u32>>::get()),
		),
		(crate::Call::set_run_config { config: cfg }, W::set_run_config()),
		(crate::Call::set_orchestrator { who: 1 }, W::set_orchestrator()),
	];
	for (call, expected) in cases {
		assert_eq!(weight_of(call.clone()), expected, "{call:?}");
	}
}

#[test]
fn weights_are_sane() {
	// Every call fits comfortably in a 2-second block (ref time) and 5 MiB of proof.
	let limit = Weight::from_parts(2_000_000_000_000 / 4, 5 * 1024 * 1024);
	let worst = [
		W::register_miner(8),
		W::register_validator(16),
		W::commit_merge(4),
		W::submit_spot_check(16),
		W::commit_weights(),
		W::reveal_weights(32),
		W::finalize_epoch(32, 16),
	];
	for w in worst {
		assert!(w.all_lt(limit), "{w:?}");
		assert!(w.ref_time() > 0);
	}
	// The block hook at its worst (every stage overran, a finalization of the largest epoch) leaves
	// most of a block to extrinsics.
	let hook = W::advance_phase()
		.saturating_mul(u64::from(<MaxStages as Get<u32>>::get()))
		.saturating_add(W::finalize_epoch(
			<MaxMiners as Get<u32>>::get(),
			2 * <MaxValidators as Get<u32>>::get(),
		));
	assert!(hook.all_lt(limit), "{hook:?}");
	// Weights grow with their components.
	// (A reveal's proof size is the vector's bound whatever its length: no miner is read per entry.)
	assert!(W::reveal_weights(32).ref_time() > W::reveal_weights(1).ref_time());
	assert!(W::finalize_epoch(32, 8).all_gt(W::finalize_epoch(1, 1)));
	assert!(W::commit_merge(4).all_gt(W::commit_merge(1)));
	assert!(W::register_validator(16).all_gt(W::register_validator(1)));
}
