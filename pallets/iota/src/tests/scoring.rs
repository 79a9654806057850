//! Validator weights through `set_weights` (subtensor-style checks).

use super::*;

fn set(
	validator: u64,
	epoch: Epoch,
	w: &[(u64, u16)],
	version: u64,
) -> polkadot_sdk::sp_runtime::DispatchResult {
	Iota::set_weights(RuntimeOrigin::signed(validator), epoch, weights(w), version)
}

#[test]
fn weights_are_accepted_for_a_complete_epoch() {
	ExtBuilder::default()
		.with_validators(&VALIDATORS)
		.with_miners(&MINERS)
		.build_and_execute(|| {
			complete_epoch();
			assert_ok!(set(11, 0, &[(21, 1), (22, 3)], 1));
			System::assert_last_event(
				Event::WeightsSet { validator: 11, epoch: 0, count: 2 }.into(),
			);
			assert_eq!(Weights::<Test>::get(0, 11), Some(weights(&[(21, 1), (22, 3)])));
			assert_eq!(Validators::<Test>::get(11).unwrap().last_weights_at, Some(1));
			// A newer version key is fine, and a later call replaces the vector.
			run_to(3);
			assert_ok!(set(11, 0, &[(23, 1)], 2));
			assert_eq!(Weights::<Test>::get(0, 11), Some(weights(&[(23, 1)])));
		});
}

#[test]
fn each_weight_check_has_its_own_error() {
	ExtBuilder::default()
		.with_validators(&VALIDATORS)
		.with_miners(&MINERS)
		.build_and_execute(|| {
			assert_noop!(set(11, 0, &[(21, 1)], 1), Error::<Test>::EpochNotScorable);
			complete_epoch();
			assert_noop!(set(21, 0, &[(22, 1)], 1), Error::<Test>::NotValidator);
			assert_noop!(set(11, 0, &[(21, 1)], 0), Error::<Test>::IncorrectVersionKey);
			assert_noop!(set(11, 1, &[(21, 1)], 1), Error::<Test>::EpochNotScorable);
			assert_noop!(set(11, 0, &[], 1), Error::<Test>::EmptyWeights);
			let seven: Vec<(u64, u16)> = (21..28).map(|m| (m, 1)).collect();
			assert_noop!(set(11, 0, &seven, 1), Error::<Test>::TooManyWeights);
			assert_noop!(set(11, 0, &[(21, 1), (21, 2)], 1), Error::<Test>::DuplicateMiner);
			assert_noop!(set(11, 0, &[(21, 1), (99, 2)], 1), Error::<Test>::UnknownMiner);
			assert_noop!(set(11, 0, &[(21, 0), (22, 0)], 1), Error::<Test>::AllWeightsZero);
			assert_ok!(set(11, 0, &[(21, 1)], 1));
			run_to(2);
			assert_noop!(set(11, 0, &[(21, 1)], 1), Error::<Test>::RateLimited);
			run_to(3);
			assert_ok!(set(11, 0, &[(21, 1)], 1));
		});
}

#[test]
fn a_first_vector_for_a_new_epoch_is_never_rate_limited() {
	ExtBuilder::default()
		.with_validators(&VALIDATORS)
		.with_miners(&MINERS)
		.build_and_execute(|| {
			complete_epoch();
			assert_ok!(set(11, 0, &[(21, 1)], 1));
			// Epoch 1 completes in the same block: its first vector is taken at once ...
			complete_epoch();
			assert_ok!(set(11, 1, &[(22, 1)], 1));
			assert_eq!(Weights::<Test>::get(1, 11), Some(weights(&[(22, 1)])));
			// ... while replacing either vector still waits for the rate limit.
			assert_noop!(set(11, 0, &[(23, 1)], 1), Error::<Test>::RateLimited);
			assert_noop!(set(11, 1, &[(23, 1)], 1), Error::<Test>::RateLimited);
		});
}

#[test]
fn finalized_epochs_take_no_more_weights() {
	ExtBuilder::default()
		.with_validators(&VALIDATORS)
		.with_miners(&MINERS)
		.build_and_execute(|| {
			complete_epoch();
			run_to(6);
			assert_ok!(Iota::finalize_epoch(RuntimeOrigin::signed(1), 0));
			assert_noop!(set(11, 0, &[(21, 1)], 1), Error::<Test>::EpochNotScorable);
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
