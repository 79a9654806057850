//! Spot-check verdicts and fraud slashing.

use super::*;

fn check(validator: u64, miner: u64, verdict: Verdict) -> polkadot_sdk::sp_runtime::DispatchResult {
	Iota::submit_spot_check(
		RuntimeOrigin::signed(validator),
		0,
		miner,
		verdict,
		ContentHash::of(b"evidence"),
	)
}

#[test]
fn verdicts_are_recorded_once_per_validator() {
	ExtBuilder::default()
		.with_validators(&VALIDATORS)
		.with_miners(&MINERS)
		.build_and_execute(|| {
			assert_ok!(check(11, 21, Verdict::Pass));
			System::assert_last_event(
				Event::SpotCheckSubmitted {
					epoch: 0,
					miner: 21,
					validator: 11,
					verdict: Verdict::Pass,
				}
				.into(),
			);
			assert_eq!(
				SpotChecks::<Test>::get(0, 21).into_inner(),
				vec![SpotCheck {
					validator: 11,
					verdict: Verdict::Pass,
					evidence: ContentHash::of(b"evidence")
				}]
			);
			assert_noop!(check(11, 21, Verdict::Fail), Error::<Test>::DuplicateSpotCheck);
		});
}

#[test]
fn spot_checks_refuse_bad_requests() {
	ExtBuilder::default()
		.with_validators(&VALIDATORS)
		.with_miners(&MINERS)
		.build_and_execute(|| {
			assert_noop!(check(21, 22, Verdict::Fail), Error::<Test>::NotValidator);
			assert_noop!(check(11, 99, Verdict::Fail), Error::<Test>::UnknownMiner);
			assert_noop!(
				Iota::submit_spot_check(
					RuntimeOrigin::signed(11),
					1,
					21,
					Verdict::Pass,
					ContentHash::default()
				),
				Error::<Test>::EpochNotStarted
			);
			assert_noop!(
				Iota::submit_spot_check(
					RuntimeOrigin::none(),
					0,
					21,
					Verdict::Pass,
					ContentHash::default()
				),
				DispatchError::BadOrigin
			);
			assert_ok!(Iota::deregister(RuntimeOrigin::signed(12)));
			assert_noop!(check(12, 21, Verdict::Fail), Error::<Test>::NotValidator);
		});
}

#[test]
fn a_quorum_of_fail_verdicts_burns_the_bond() {
	ExtBuilder::default()
		.with_validators(&VALIDATORS)
		.with_miners(&MINERS)
		.build_and_execute(|| {
			let issuance = Balances::total_issuance();
			let stage = Miners::<Test>::get(21).unwrap().stage;
			// One third of the stake is below the one-half quorum.
			assert_ok!(check(11, 21, Verdict::Fail));
			assert!(Miners::<Test>::get(21).is_some());
			assert_ok!(check(12, 21, Verdict::Fail));
			System::assert_last_event(
				Event::MinerSlashed { who: 21, epoch: 0, amount: BOND }.into(),
			);
			assert!(Miners::<Test>::get(21).is_none());
			assert!(!StageMembers::<Test>::get(stage).contains(&21));
			assert_eq!(held(HoldReason::MinerBond, 21), 0);
			assert_eq!(Balances::free_balance(21), INITIAL - BOND);
			assert_eq!(Balances::total_issuance(), issuance - BOND);
			assert_eq!(Slashes::<Test>::get(0, 21), Some(BOND));
			// The miner is gone: later verdicts name an unknown miner.
			assert_noop!(check(13, 21, Verdict::Fail), Error::<Test>::UnknownMiner);
		});
}

#[test]
fn pass_verdicts_do_not_count_toward_the_quorum() {
	ExtBuilder::default()
		.with_validators(&VALIDATORS)
		.with_miners(&MINERS)
		.build_and_execute(|| {
			assert_ok!(check(11, 21, Verdict::Pass));
			assert_ok!(check(12, 21, Verdict::Pass));
			assert_ok!(check(13, 21, Verdict::Fail));
			assert!(Miners::<Test>::get(21).is_some());
			assert_eq!(held(HoldReason::MinerBond, 21), BOND);
		});
}

#[test]
fn unbonding_miners_can_still_be_slashed() {
	ExtBuilder::default()
		.with_validators(&VALIDATORS)
		.with_miners(&MINERS)
		.build_and_execute(|| {
			let stage = Miners::<Test>::get(21).unwrap().stage;
			assert_ok!(Iota::deregister(RuntimeOrigin::signed(21)));
			merge_stage(stage);
			assert!(matches!(
				Miners::<Test>::get(21).unwrap().status,
				MinerStatus::Unbonding { .. }
			));
			assert_ok!(check(11, 21, Verdict::Fail));
			assert_ok!(check(12, 21, Verdict::Fail));
			assert!(Miners::<Test>::get(21).is_none());
			assert_eq!(Balances::free_balance(21), INITIAL - BOND);
		});
}
