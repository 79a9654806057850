//! Merge manifests through `commit_merge`, and epoch completion.

use super::*;
use codec::Decode;

fn to_merging(stage: StageId) {
	let epoch = epoch_of(stage);
	assert_ok!(Iota::advance_phase(orch(), stage, epoch, report(4, 0)));
	assert_ok!(Iota::advance_phase(orch(), stage, epoch, report(4, 2)));
}

#[test]
fn commit_merge_records_the_manifest_and_starts_the_next_epoch() {
	ExtBuilder::default().with_miners(&MINERS).build_and_execute(|| {
		to_merging(2);
		run_to(7);
		assert_ok!(Iota::commit_merge(orch(), 2, 0, manifest(2, 1_000)));
		System::assert_last_event(
			Event::MergeCommitted {
				stage: 2,
				epoch: 0,
				shards: 1,
				state_hash: ContentHash::of(b"state"),
			}
			.into(),
		);
		assert_eq!(MergeManifests::<Test>::get(0, 2), Some(manifest(2, 1_000)));
		let s = Stages::<Test>::get(2);
		assert_eq!((s.phase, s.epoch, s.phase_since, s.round), (Phase::Training, 1, 7, 0));
		assert!(
			EpochSeeds::<Test>::get(1).is_some(),
			"the first stage into epoch 1 draws its seed"
		);
		assert!(EpochCompletedAt::<Test>::get(0).is_none(), "stages 0 and 1 have not merged");
	});
}

#[test]
fn an_epoch_completes_when_its_last_stage_merges() {
	ExtBuilder::default().with_miners(&MINERS).build_and_execute(|| {
		merge_stage(2);
		merge_stage(1);
		run_to(9);
		merge_stage(0);
		System::assert_last_event(Event::EpochCompleted { epoch: 0 }.into());
		assert_eq!(EpochCompletedAt::<Test>::get(0), Some(9));
		// The tail can run ahead into epoch 1 and merge again; epoch 1 completes only with every stage.
		merge_stage(2);
		assert!(EpochCompletedAt::<Test>::get(1).is_none());
	});
}

#[test]
fn commit_merge_refuses_bad_manifests() {
	ExtBuilder::default().with_miners(&MINERS).build_and_execute(|| {
		assert_noop!(
			Iota::commit_merge(orch(), 0, 0, manifest(2, 1_000)),
			Error::<Test>::NotMerging
		);
		to_merging(0);
		assert_noop!(
			Iota::commit_merge(RuntimeOrigin::signed(21), 0, 0, manifest(2, 1_000)),
			Error::<Test>::NotOrchestrator
		);
		assert_noop!(
			Iota::commit_merge(orch(), 3, 0, manifest(2, 1_000)),
			Error::<Test>::UnknownStage
		);
		assert_noop!(
			Iota::commit_merge(orch(), 0, 1, manifest(2, 1_000)),
			Error::<Test>::WrongEpoch
		);
		let mut zero = manifest(1, 1_000);
		zero.members = 0;
		assert_noop!(Iota::commit_merge(orch(), 0, 0, zero), Error::<Test>::InvalidMemberCount);
		// A stage has four seats; a merge cannot claim five.
		let mut five = manifest(1, 1_000);
		five.members = 5;
		assert_noop!(Iota::commit_merge(orch(), 0, 0, five), Error::<Test>::InvalidMemberCount);
		let mut wrong_count = manifest(3, 1_000);
		wrong_count.members = 2;
		assert_noop!(
			Iota::commit_merge(orch(), 0, 0, wrong_count),
			Error::<Test>::ShardCountMismatch
		);
		assert_noop!(
			Iota::commit_merge(orch(), 0, 0, manifest(2, 0)),
			Error::<Test>::ParamCountTooSmall
		);
		// A merge of the single miner that uploaded (timeout fallback) is valid.
		assert_ok!(Iota::commit_merge(orch(), 0, 0, manifest(1, 1_000)));
	});
}

#[test]
fn oversized_manifests_do_not_decode() {
	// MaxMinersPerStage = 4, so at most 6 shards; keys at most 96 bytes.
	#[derive(Encode)]
	struct RawManifest {
		members: u32,
		param_count: u64,
		samples: u32,
		shards: Vec<(Vec<u8>, ContentHash)>,
		state_hash: ContentHash,
		checkpoint: Option<(Vec<u8>, ContentHash)>,
	}
	let raw = |shards: usize, key_len: usize| RawManifest {
		members: 4,
		param_count: 1_000,
		samples: 1,
		shards: vec![(vec![b'k'; key_len], ContentHash::default()); shards],
		state_hash: ContentHash::default(),
		checkpoint: None,
	};
	assert!(MergeManifestOf::<Test>::decode(&mut &raw(6, 96).encode()[..]).is_ok());
	assert!(MergeManifestOf::<Test>::decode(&mut &raw(7, 1).encode()[..]).is_err());
	assert!(MergeManifestOf::<Test>::decode(&mut &raw(1, 97).encode()[..]).is_err());
}

#[test]
fn a_merge_still_commits_after_one_of_its_members_is_slashed() {
	ExtBuilder::default()
		.with_validators(&VALIDATORS)
		.with_miners(&MINERS)
		.build_and_execute(|| {
			to_merging(0);
			let members = StageMembers::<Test>::get(0);
			assert_eq!(members.len(), 2);
			// One of the round's two members is slashed while the round merges: the merge of both
			// submissions (already applied by the replicas) still commits, and the stage goes on.
			for v in [11, 12] {
				assert_ok!(Iota::submit_spot_check(
					RuntimeOrigin::signed(v),
					0,
					members[0],
					Verdict::Fail,
					ContentHash::of(b"evidence"),
				));
			}
			assert!(Miners::<Test>::get(members[0]).is_none(), "slashed");
			assert_eq!(StageMembers::<Test>::get(0).len(), 1);
			assert_ok!(Iota::commit_merge(orch(), 0, 0, manifest(2, 1_000)));
			assert_eq!(Stages::<Test>::get(0).epoch, 1);
			assert_eq!(MergeManifests::<Test>::get(0, 0).map(|m| m.members), Some(2));
		});
}
