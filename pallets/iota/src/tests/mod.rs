//! Tests of pallet-iota, one file per concern. Every test runs in [`ExtBuilder::build_and_execute`],
//! which checks the pallet's invariants (`do_try_state`) at the end.

use crate::{mock::*, pallet::*, types::*, Error, Event};
use codec::Encode;
use polkadot_sdk::frame_support::{
	assert_noop, assert_ok, traits::fungible::InspectHold, BoundedVec,
};
use polkadot_sdk::sp_runtime::DispatchError;

mod adversarial;
mod config;
mod deadlines;
mod dispatch_weights;
mod epochs;
mod merge;
mod phases;
mod registry;
mod scoring;
mod spot_checks;

/// Validators of most tests: three with equal stake.
pub const VALIDATORS: [(u64, u64); 3] = [(11, STAKE), (12, STAKE), (13, STAKE)];
/// Miners of most tests: two per stage of the default three.
pub const MINERS: [u64; 6] = [21, 22, 23, 24, 25, 26];

/// Advance to block `n`.
pub fn run_to(n: u64) {
	System::set_block_number(n);
}

/// The orchestrator's origin.
pub fn orch() -> RuntimeOrigin {
	RuntimeOrigin::signed(ORCH)
}

/// A report of `backward_done` passes and `gradients_submitted` uploads.
pub fn report(backward_done: u32, gradients_submitted: u32) -> StageReport {
	StageReport { backward_done, gradients_submitted }
}

/// The current epoch of `stage`.
pub fn epoch_of(stage: StageId) -> Epoch {
	Stages::<Test>::get(stage).epoch
}

/// A well-formed manifest for a merge of `n` members over `p` elements.
pub fn manifest(n: u32, p: u64) -> MergeManifestOf<Test> {
	let k = iota_primitives::shard_count(n).unwrap();
	let shards = (0..k)
		.map(|i| ObjectRef {
			key: BoundedVec::try_from(format!("v1/run/shard/{i}").into_bytes()).unwrap(),
			content_hash: ContentHash::of(&i.to_le_bytes()),
		})
		.collect::<Vec<_>>();
	MergeManifest {
		members: n,
		param_count: p,
		samples: 4,
		shards: BoundedVec::try_from(shards).unwrap(),
		state_hash: ContentHash::of(b"state"),
		checkpoint: None,
	}
}

/// Drive `stage` from Training through its merge for its current epoch, with every member uploading.
pub fn merge_stage(stage: StageId) {
	let epoch = epoch_of(stage);
	let n = StageMembers::<Test>::decode_len(stage).unwrap_or(0) as u32;
	assert_ok!(Iota::advance_phase(orch(), stage, epoch, report(4, 0)));
	assert_ok!(Iota::advance_phase(orch(), stage, epoch, report(4, n)));
	assert_ok!(Iota::commit_merge(orch(), stage, epoch, manifest(n, 1_000)));
}

/// Merge every stage of the default run (tail first, as the pipeline drains).
pub fn complete_epoch() {
	for stage in (0..3).rev() {
		merge_stage(stage);
	}
}

/// Held balance of `who` for `reason`.
pub fn held(reason: HoldReason, who: u64) -> u64 {
	Balances::balance_on_hold(&RuntimeHoldReason::Iota(reason), &who)
}

/// Bounded weights from `(miner, weight)` pairs.
pub fn weights(w: &[(u64, u16)]) -> WeightsOf<Test> {
	BoundedVec::try_from(w.to_vec()).unwrap()
}

/// A vote committed by [`vote`] and not yet revealed: (validator, epoch, weights).
type Vote = (u64, Epoch, Vec<(u64, u16)>);

thread_local! {
	static VOTES: core::cell::RefCell<Vec<Vote>> = const { core::cell::RefCell::new(Vec::new()) };
}

/// The salt validator `v` commits with for `epoch` in these tests (distinct per validator and epoch).
pub fn salt(v: u64, epoch: Epoch) -> [u8; 32] {
	let mut s = [7u8; 32];
	s[..8].copy_from_slice(&v.to_le_bytes());
	s[8..12].copy_from_slice(&epoch.to_le_bytes());
	s
}

/// `commit_weights` by validator `v` for `w` with its test [`salt`].
pub fn commit(v: u64, epoch: Epoch, w: &[(u64, u16)]) -> polkadot_sdk::sp_runtime::DispatchResult {
	let commitment = iota_primitives::weights_commitment(epoch, &v, w, &salt(v, epoch));
	Iota::commit_weights(RuntimeOrigin::signed(v), epoch, commitment)
}

/// `reveal_weights` by validator `v` of `w` with its test [`salt`] and version key 1.
pub fn reveal(v: u64, epoch: Epoch, w: &[(u64, u16)]) -> polkadot_sdk::sp_runtime::DispatchResult {
	Iota::reveal_weights(RuntimeOrigin::signed(v), epoch, weights(w), salt(v, epoch), 1)
}

/// Commit `w` for validator `v` (must succeed) and remember it for [`reveal_votes`].
pub fn vote(v: u64, epoch: Epoch, w: &[(u64, u16)]) {
	assert_ok!(commit(v, epoch, w));
	VOTES.with(|votes| votes.borrow_mut().push((v, epoch, w.to_vec())));
}

/// First block of `epoch`'s reveal window (its scoring window has passed).
pub fn reveal_from(epoch: Epoch) -> u64 {
	EpochCompletedAt::<Test>::get(epoch).expect("epoch complete") + run_config().scoring_window
}

/// First block at which `epoch` can be finalized (its reveal window has passed).
pub fn finalizable(epoch: Epoch) -> u64 {
	reveal_from(epoch) + run_config().reveal_window
}

/// Move to `epoch`'s reveal window (if before it) and reveal every [`vote`] committed for it.
pub fn reveal_votes(epoch: Epoch) {
	if System::block_number() < reveal_from(epoch) {
		run_to(reveal_from(epoch));
	}
	let due: Vec<_> = VOTES.with(|votes| {
		let mut votes = votes.borrow_mut();
		let (due, rest) = votes.drain(..).partition(|(_, e, _)| *e == epoch);
		*votes = rest;
		due
	});
	for (v, e, w) in due {
		assert_ok!(reveal(v, e, &w));
	}
}
