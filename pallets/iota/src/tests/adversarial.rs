//! Attacks by miners, validators and callers that the pallet must withstand (review findings).

use super::*;

fn check(
	validator: u64,
	epoch: Epoch,
	miner: u64,
	verdict: Verdict,
) -> polkadot_sdk::sp_runtime::DispatchResult {
	Iota::submit_spot_check(
		RuntimeOrigin::signed(validator),
		epoch,
		miner,
		verdict,
		ContentHash::of(b"evidence"),
	)
}

/// A miner slashed for fraud in epoch 0 that registers again (with a fresh bond) must not lose the new
/// bond to one more `Fail` verdict on the same, already punished epoch 0.
#[test]
fn one_fraud_is_slashed_once() {
	ExtBuilder::default()
		.with_validators(&VALIDATORS)
		.with_miners(&MINERS)
		.build_and_execute(|| {
			assert_ok!(check(11, 0, 21, Verdict::Fail));
			assert_ok!(check(12, 0, 21, Verdict::Fail));
			assert!(Miners::<Test>::get(21).is_none());
			assert_eq!(Slashes::<Test>::get(0, 21), Some(BOND));
			// The miner comes back with a new bond.
			assert_ok!(Iota::register_miner(RuntimeOrigin::signed(21)));
			assert_eq!(held(HoldReason::MinerBond, 21), BOND);
			// A third validator (one third of the stake, below quorum on its own) adds its verdict on epoch 0.
			assert_ok!(check(13, 0, 21, Verdict::Fail));
			assert!(
				Miners::<Test>::get(21).is_some(),
				"the new bond was slashed for the old fraud"
			);
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

/// Weights are committed until the scoring window closes (`EpochCompleted`'s promise) and revealed
/// until the reveal window closes, not until someone happens to call `finalize_epoch`: otherwise a
/// validator could read every other vote after the window and front-run the finalization with a copy.
#[test]
fn weights_after_their_windows_are_refused() {
	ExtBuilder::default()
		.with_validators(&VALIDATORS)
		.with_miners(&MINERS)
		.build_and_execute(|| {
			complete_epoch();
			let completed = EpochCompletedAt::<Test>::get(0).unwrap();
			assert_ok!(commit(11, 0, &[(21, 1)]));
			assert_ok!(commit(12, 0, &[(21, 1)]));
			run_to(completed + 5);
			assert_noop!(commit(13, 0, &[(21, 1)]), Error::<Test>::CommitWindowClosed);
			assert_ok!(reveal(11, 0, &[(21, 1)]));
			run_to(completed + 7);
			assert_noop!(reveal(12, 0, &[(21, 1)]), Error::<Test>::NotRevealWindow);
			assert_ok!(Iota::finalize_epoch(RuntimeOrigin::signed(1), 0));
			assert_eq!(
				EmissionSplits::<Test>::get(0).unwrap().validators.into_inner(),
				vec![(11, 200_000)]
			);
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
				vote(v, 0, &[(22, 1)]);
				reveal_votes(0);
				assert_ok!(Iota::deregister(RuntimeOrigin::signed(v)));
				assert_ok!(Iota::withdraw_unbonded(RuntimeOrigin::signed(v)));
				run_to(1);
			}
			vote(11, 0, &[(21, 1)]);
			reveal_votes(0);
			run_to(finalizable(0));
			assert_ok!(Iota::finalize_epoch(RuntimeOrigin::signed(1), 0));
			let split = EmissionSplits::<Test>::get(0).unwrap();
			assert_eq!(split.miners.into_inner(), vec![(21, 800_000)]);
			assert_eq!(split.validators.into_inner(), vec![(11, 200_000)]);
		});
}

/// Every miner of stages 0 and 1 leaves after merging epoch 0; the stage-2 miner is slashed before its
/// merge. Epoch 0 cannot complete, so the leavers' bonds stay held (their work is never judged).
#[test]
fn leavers_keep_their_bond_while_their_epoch_cannot_complete() {
	ExtBuilder::default()
		.with_validators(&VALIDATORS)
		.with_miners(&[21, 22, 23])
		.build_and_execute(|| {
			let in_stage = |s: StageId| StageMembers::<Test>::get(s)[0];
			let tail = in_stage(2);
			assert_ok!(check(11, 0, tail, Verdict::Fail));
			assert_ok!(check(12, 0, tail, Verdict::Fail));
			for s in 0..2 {
				assert_ok!(Iota::deregister(RuntimeOrigin::signed(in_stage(s))));
			}
			let (head, mid) = (in_stage(0), in_stage(1));
			merge_stage(0);
			merge_stage(1);
			run_to(20);
			assert_noop!(
				Iota::withdraw_unbonded(RuntimeOrigin::signed(head)),
				Error::<Test>::StillUnbonding
			);
			assert_noop!(
				Iota::withdraw_unbonded(RuntimeOrigin::signed(mid)),
				Error::<Test>::StillUnbonding
			);
		});
}

/// With stages at different epochs, dropping the stage behind would leave its epoch forever incomplete
/// (so `finalize_epoch` could never pay it or any later epoch): refused even with no miners. No sequence
/// of calls reaches this state any more (see the test above), so the epochs are set directly.
#[test]
fn dropping_a_stage_mid_epoch_is_refused() {
	ExtBuilder::default().build_and_execute(|| {
		Stages::<Test>::mutate(0, |s| s.epoch = 1);
		Stages::<Test>::mutate(1, |s| s.epoch = 1);
		let mut cfg = run_config();
		cfg.stages = 2;
		assert_noop!(Iota::set_run_config(RuntimeOrigin::root(), cfg), Error::<Test>::StagesInUse);
	});
}

/// A stage added between epochs starts at the run's epoch, not at epoch 0 (which would hold back the
/// completion, and so the payout, of every later epoch until the new stage had merged them all).
#[test]
fn an_added_stage_joins_at_the_current_epoch() {
	ExtBuilder::default().with_miners(&[21, 22, 23]).build_and_execute(|| {
		for m in [21, 22, 23] {
			assert_ok!(Iota::deregister(RuntimeOrigin::signed(m)));
		}
		complete_epoch();
		run_to(20);
		assert_ok!(Iota::finalize_epoch(RuntimeOrigin::signed(1), 0));
		for m in [21, 22, 23] {
			assert_ok!(Iota::withdraw_unbonded(RuntimeOrigin::signed(m)));
		}
		let mut cfg = run_config();
		cfg.stages = 4;
		assert_ok!(Iota::set_run_config(RuntimeOrigin::root(), cfg));
		assert_eq!(
			Stages::<Test>::get(3),
			StageState { phase: Phase::Training, epoch: 1, phase_since: 20, round: 0 }
		);
	});
}
