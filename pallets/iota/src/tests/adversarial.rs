//! Attacks by miners, validators and callers that the pallet must withstand (review findings).

use super::*;

fn check(validator: u64, epoch: Epoch, miner: u64, verdict: Verdict) -> polkadot_sdk::sp_runtime::DispatchResult {
	Iota::submit_spot_check(RuntimeOrigin::signed(validator), epoch, miner, verdict, ContentHash::of(b"evidence"))
}

/// A miner slashed for fraud in epoch 0 that registers again (with a fresh bond) must not lose the new
/// bond to one more `Fail` verdict on the same, already punished epoch 0.
#[test]
fn one_fraud_is_slashed_once() {
	ExtBuilder::default().with_validators(&VALIDATORS).with_miners(&MINERS).build_and_execute(|| {
		assert_ok!(check(11, 0, 21, Verdict::Fail));
		assert_ok!(check(12, 0, 21, Verdict::Fail));
		assert!(Miners::<Test>::get(21).is_none());
		assert_eq!(Slashes::<Test>::get(0, 21), Some(BOND));
		// The miner comes back with a new bond.
		assert_ok!(Iota::register_miner(RuntimeOrigin::signed(21)));
		assert_eq!(held(HoldReason::MinerBond, 21), BOND);
		// A third validator (one third of the stake, below quorum on its own) adds its verdict on epoch 0.
		assert_ok!(check(13, 0, 21, Verdict::Fail));
		assert!(Miners::<Test>::get(21).is_some(), "the new bond was slashed for the old fraud");
		assert_eq!(held(HoldReason::MinerBond, 21), BOND);
		assert_eq!(Slashes::<Test>::get(0, 21), Some(BOND));
	});
}

/// The slash quorum is a fraction of stake: `Fail` stake must reach `total · quorum` exactly, not its
/// floor. Here validator 11 holds 5 000 of 10 001 (just under one half) and must not slash alone.
#[test]
fn slash_quorum_is_not_rounded_down() {
	ExtBuilder::default()
		.with_validators(&[(11, 5_000), (12, 5_001)])
		.with_miners(&MINERS)
		.build_and_execute(|| {
			assert_ok!(check(11, 0, 21, Verdict::Fail));
			assert!(Miners::<Test>::get(21).is_some(), "a stake minority slashed the miner");
			assert_eq!(held(HoldReason::MinerBond, 21), BOND);
			// With the second validator the quorum is reached.
			assert_ok!(check(12, 0, 21, Verdict::Fail));
			assert!(Miners::<Test>::get(21).is_none());
		});
}

/// Weights are taken until the scoring window closes (`EpochCompleted`'s promise), not until someone
/// happens to call `finalize_epoch`: otherwise a validator can read every other vote after the window
/// and front-run the finalization with a copied vector.
#[test]
fn weights_after_the_scoring_window_are_refused() {
	ExtBuilder::default().with_validators(&VALIDATORS).with_miners(&MINERS).build_and_execute(|| {
		complete_epoch();
		let completed = EpochCompletedAt::<Test>::get(0).unwrap();
		assert_ok!(Iota::set_weights(RuntimeOrigin::signed(11), 0, weights(&[(21, 1)]), 1));
		run_to(completed + 5);
		assert_noop!(
			Iota::set_weights(RuntimeOrigin::signed(12), 0, weights(&[(21, 1)]), 1),
			Error::<Test>::EpochNotScorable
		);
		assert_ok!(Iota::finalize_epoch(RuntimeOrigin::signed(1), 0));
		assert_eq!(EmissionSplits::<Test>::get(0).unwrap().validators.into_inner(), vec![(11, 200_000)]);
	});
}

/// Validators that set weights and then left (their records withdrawn) do not count, however many of
/// them churned through the epoch; finalization reads only the current validators' vectors.
#[test]
fn churned_validators_do_not_vote() {
	ExtBuilder::default()
		.with_config(|c| c.unbonding_period = 0)
		.with_validators(&VALIDATORS)
		.with_miners(&MINERS)
		.build_and_execute(|| {
			complete_epoch();
			// More voters than MaxValidators (8) pass through the epoch, one at a time.
			for v in 40..50u64 {
				assert_ok!(Iota::register_validator(RuntimeOrigin::signed(v), STAKE));
				assert_ok!(Iota::set_weights(RuntimeOrigin::signed(v), 0, weights(&[(22, 1)]), 1));
				assert_ok!(Iota::deregister(RuntimeOrigin::signed(v)));
				assert_ok!(Iota::withdraw_unbonded(RuntimeOrigin::signed(v)));
			}
			assert_ok!(Iota::set_weights(RuntimeOrigin::signed(11), 0, weights(&[(21, 1)]), 1));
			run_to(6);
			assert_ok!(Iota::finalize_epoch(RuntimeOrigin::signed(1), 0));
			let split = EmissionSplits::<Test>::get(0).unwrap();
			assert_eq!(split.miners.into_inner(), vec![(21, 800_000)]);
			assert_eq!(split.validators.into_inner(), vec![(11, 200_000)]);
		});
}

/// Weights are accepted only inside the scoring window, so a zero window would let no one score and
/// no epoch would ever pay: such a config is refused.
#[test]
fn a_zero_scoring_window_is_refused() {
	ExtBuilder::default().build_and_execute(|| {
		let mut cfg = run_config();
		cfg.scoring_window = 0;
		assert_noop!(Iota::set_run_config(RuntimeOrigin::root(), cfg), Error::<Test>::InvalidRunConfig);
	});
}
