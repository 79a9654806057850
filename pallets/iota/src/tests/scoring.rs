//! Validator weights through commit-reveal: `commit_weights` during the scoring window, `reveal_weights`
//! in the reveal window after it, with subtensor's checks on the revealed vector.

use super::*;

#[test]
fn weights_are_committed_then_revealed_for_a_complete_epoch() {
	ExtBuilder::default()
		.with_validators(&VALIDATORS)
		.with_miners(&MINERS)
		.build_and_execute(|| {
			complete_epoch();
			let w = [(21, 1), (22, 3)];
			assert_ok!(commit(11, 0, &w));
			let commitment = iota_primitives::weights_commitment(0, &11u64, &w, &salt(11, 0));
			System::assert_last_event(
				Event::WeightsCommitted { validator: 11, epoch: 0, commitment }.into(),
			);
			assert_eq!(WeightCommits::<Test>::get(0, 11), Some(commitment));
			assert_eq!(Weights::<Test>::get(0, 11), None, "nothing readable before the reveal");
			assert_eq!(Validators::<Test>::get(11).unwrap().last_weights_at, Some(1));
			// A later commitment replaces the first (after the rate limit).
			run_to(3);
			let w = [(23, 1)];
			assert_ok!(commit(11, 0, &w));
			run_to(reveal_from(0));
			assert_ok!(Iota::reveal_weights(
				RuntimeOrigin::signed(11),
				0,
				weights(&w),
				salt(11, 0),
				2
			));
			System::assert_last_event(
				Event::WeightsRevealed { validator: 11, epoch: 0, count: 1 }.into(),
			);
			assert_eq!(Weights::<Test>::get(0, 11), Some(weights(&w)));
			// The commitment stays: with the vector it records who committed and who revealed.
			assert!(WeightCommits::<Test>::contains_key(0, 11));
		});
}

#[test]
fn each_commit_check_has_its_own_error() {
	ExtBuilder::default()
		.with_validators(&VALIDATORS)
		.with_miners(&MINERS)
		.build_and_execute(|| {
			let w = [(21, 1)];
			// Wrong epoch: not complete yet.
			assert_noop!(commit(11, 0, &w), Error::<Test>::EpochNotScorable);
			complete_epoch();
			assert_noop!(commit(21, 0, &w), Error::<Test>::NotValidator);
			assert_noop!(commit(11, 1, &w), Error::<Test>::EpochNotScorable);
			assert_ok!(commit(11, 0, &w));
			run_to(2);
			assert_noop!(commit(11, 0, &w), Error::<Test>::RateLimited);
			run_to(3);
			assert_ok!(commit(11, 0, &w));
			// Late commit: the scoring window has closed.
			run_to(reveal_from(0));
			assert_noop!(commit(12, 0, &w), Error::<Test>::CommitWindowClosed);
			assert_noop!(commit(11, 0, &w), Error::<Test>::CommitWindowClosed);
		});
}

#[test]
fn each_reveal_check_has_its_own_error() {
	ExtBuilder::default()
		.with_validators(&VALIDATORS)
		.with_miners(&MINERS)
		.build_and_execute(|| {
			let w = [(21, 1), (22, 2)];
			assert_noop!(reveal(11, 0, &w), Error::<Test>::EpochNotScorable);
			complete_epoch();
			assert_ok!(commit(11, 0, &w));
			// Too early: still the commit window.
			assert_noop!(reveal(11, 0, &w), Error::<Test>::NotRevealWindow);
			run_to(reveal_from(0));
			assert_noop!(reveal(21, 0, &w), Error::<Test>::NotValidator);
			assert_noop!(reveal(11, 1, &w), Error::<Test>::EpochNotScorable);
			assert_noop!(reveal(12, 0, &w), Error::<Test>::NoCommitment);
			// Mismatched reveals: other weights, another salt, another validator's commitment.
			assert_noop!(reveal(11, 0, &[(21, 1), (22, 3)]), Error::<Test>::CommitmentMismatch);
			assert_noop!(
				Iota::reveal_weights(RuntimeOrigin::signed(11), 0, weights(&w), [0; 32], 1),
				Error::<Test>::CommitmentMismatch
			);
			assert_noop!(
				Iota::reveal_weights(RuntimeOrigin::signed(11), 0, weights(&w), salt(11, 0), 0),
				Error::<Test>::IncorrectVersionKey
			);
			assert_ok!(reveal(11, 0, &w));
			// Double reveal.
			assert_noop!(reveal(11, 0, &w), Error::<Test>::AlreadyRevealed);
			// Too late: the reveal window has passed.
			run_to(finalizable(0));
			assert_noop!(reveal(11, 0, &w), Error::<Test>::NotRevealWindow);
		});
}

/// The vector checks run on the revealed vector (the commitment hides it): each refusal keeps the
/// commitment, so a validator whose daemon sent a bad vector cannot try another one either.
#[test]
fn each_vector_check_has_its_own_error() {
	type Case = (&'static [(u64, u16)], Error<Test>);
	let cases: [Case; 3] = [
		(&[], Error::<Test>::EmptyWeights),
		(&[(21, 1), (21, 2)], Error::<Test>::DuplicateMiner),
		(&[(21, 0), (22, 0)], Error::<Test>::AllWeightsZero),
	];
	for (w, error) in cases {
		ExtBuilder::default()
			.with_validators(&VALIDATORS)
			.with_miners(&MINERS)
			.build_and_execute(|| {
				complete_epoch();
				assert_ok!(commit(11, 0, w));
				run_to(reveal_from(0));
				assert_noop!(reveal(11, 0, w), error);
				assert!(WeightCommits::<Test>::contains_key(0, 11));
			});
	}
}

/// A miner slashed between a validator's commit and its reveal does not void the vector: its entry
/// reads as nothing at finalization, the others count.
#[test]
fn a_vector_naming_a_miner_slashed_after_the_commit_still_counts() {
	ExtBuilder::default()
		.with_validators(&VALIDATORS)
		.with_miners(&MINERS)
		.build_and_execute(|| {
			complete_epoch();
			vote(11, 0, &[(21, 1), (22, 1)]);
			for v in [11, 12] {
				assert_ok!(Iota::submit_spot_check(
					RuntimeOrigin::signed(v),
					0,
					21,
					Verdict::Fail,
					ContentHash::of(b"forged")
				));
			}
			assert!(Miners::<Test>::get(21).is_none());
			reveal_votes(0);
			run_to(finalizable(0));
			assert_ok!(Iota::finalize_epoch(RuntimeOrigin::signed(1), 0));
			let split = EmissionSplits::<Test>::get(0).unwrap();
			assert_eq!(split.miners.into_inner(), vec![(22, 800_000)]);
			assert_eq!(split.validators.into_inner(), vec![(11, 200_000)]);
		});
}

#[test]
fn a_first_commitment_for_a_new_epoch_is_never_rate_limited() {
	ExtBuilder::default()
		.with_validators(&VALIDATORS)
		.with_miners(&MINERS)
		.build_and_execute(|| {
			complete_epoch();
			assert_ok!(commit(11, 0, &[(21, 1)]));
			// Epoch 1 completes in the same block: its first commitment is taken at once ...
			complete_epoch();
			assert_ok!(commit(11, 1, &[(22, 1)]));
			assert!(WeightCommits::<Test>::contains_key(1, 11));
			// ... while replacing either still waits for the rate limit.
			assert_noop!(commit(11, 0, &[(23, 1)]), Error::<Test>::RateLimited);
			assert_noop!(commit(11, 1, &[(23, 1)]), Error::<Test>::RateLimited);
		});
}

#[test]
fn finalized_epochs_take_no_more_weights_and_pay_no_unrevealed_commitment() {
	ExtBuilder::default()
		.with_validators(&VALIDATORS)
		.with_miners(&MINERS)
		.build_and_execute(|| {
			complete_epoch();
			vote(11, 0, &[(21, 1)]);
			assert_ok!(commit(12, 0, &[(22, 1)]));
			reveal_votes(0);
			run_to(finalizable(0));
			assert_ok!(Iota::finalize_epoch(RuntimeOrigin::signed(1), 0));
			assert_eq!(WeightCommits::<Test>::iter_prefix(0).count(), 2);
			assert_noop!(commit(11, 0, &[(21, 1)]), Error::<Test>::EpochNotScorable);
			assert_noop!(reveal(12, 0, &[(22, 1)]), Error::<Test>::EpochNotScorable);
			// Validator 12 committed and never revealed: it earns nothing for the epoch.
			let split = EmissionSplits::<Test>::get(0).unwrap();
			assert_eq!(split.validators.into_inner(), vec![(11, 200_000)]);
		});
}

/// The attack commit-reveal closes: a lazy validator waits for the honest validators' vectors and
/// submits their consensus. No vector is readable while commitments are taken, and once reveals start
/// (after the scoring window) nothing more can be committed, so the copier has nothing to reveal.
#[test]
fn a_validator_cannot_copy_the_revealed_consensus() {
	ExtBuilder::default()
		.with_validators(&VALIDATORS)
		.with_miners(&MINERS)
		.build_and_execute(|| {
			complete_epoch();
			let honest = [(21, 3), (22, 1)];
			vote(11, 0, &honest);
			vote(12, 0, &honest);
			// During the commit window only hashes are on chain.
			assert_eq!(Weights::<Test>::iter_prefix(0).count(), 0);
			reveal_votes(0);
			assert_eq!(Weights::<Test>::get(0, 11), Some(weights(&honest)));
			// The copier read the consensus; it can neither commit it now nor reveal without a commit.
			assert_noop!(commit(13, 0, &honest), Error::<Test>::CommitWindowClosed);
			assert_noop!(reveal(13, 0, &honest), Error::<Test>::NoCommitment);
			run_to(finalizable(0));
			assert_ok!(Iota::finalize_epoch(RuntimeOrigin::signed(1), 0));
			let split = EmissionSplits::<Test>::get(0).unwrap();
			assert_eq!(split.validators.into_inner(), vec![(11, 100_000), (12, 100_000)]);
		});
}

#[test]
fn oversized_weight_vectors_do_not_decode() {
	use codec::Decode;
	let too_long: Vec<(u64, u16)> = (0..33).map(|m| (m, 1)).collect();
	assert!(WeightsOf::<Test>::decode(&mut &too_long.encode()[..]).is_err());
	let at_bound: Vec<(u64, u16)> = (0..32).map(|m| (m, 1)).collect();
	assert!(WeightsOf::<Test>::decode(&mut &at_bound.encode()[..]).is_ok());
}
