//! Registration, leaving and withdrawal of miners and validators.

use super::*;

#[test]
fn miners_fill_the_emptiest_stages_and_hold_their_bond() {
	ExtBuilder::default().with_miners(&MINERS).build_and_execute(|| {
		for stage in 0..3 {
			assert_eq!(StageMembers::<Test>::get(stage).len(), 2, "stage {stage}");
		}
		for m in MINERS {
			assert_eq!(held(HoldReason::MinerBond, m), BOND);
			assert_eq!(Balances::free_balance(m), INITIAL - BOND);
		}
		assert_ok!(Iota::register_miner(RuntimeOrigin::signed(27)));
		let stage = Miners::<Test>::get(27).unwrap().stage;
		System::assert_last_event(Event::MinerRegistered { who: 27, stage, bond: BOND }.into());
	});
}

#[test]
fn register_miner_refuses_bad_callers() {
	ExtBuilder::default()
		.with_validators(&VALIDATORS)
		.with_miners(&[21])
		.build_and_execute(|| {
			assert_noop!(Iota::register_miner(RuntimeOrigin::none()), DispatchError::BadOrigin);
			assert_noop!(
				Iota::register_miner(RuntimeOrigin::signed(21)),
				Error::<Test>::AlreadyRegistered
			);
			assert_noop!(
				Iota::register_miner(RuntimeOrigin::signed(11)),
				Error::<Test>::AlreadyRegistered
			);
			// Account 500 has no funds.
			assert_noop!(
				Iota::register_miner(RuntimeOrigin::signed(500)),
				Error::<Test>::InsufficientBalance
			);
		});
	ExtBuilder::default().unconfigured().build_and_execute(|| {
		assert_noop!(Iota::register_miner(RuntimeOrigin::signed(21)), Error::<Test>::NotConfigured);
	});
}

#[test]
fn full_stages_and_record_bounds_are_enforced() {
	// 3 stages × 4 seats.
	let twelve: Vec<u64> = (21..33).collect();
	ExtBuilder::default().with_miners(&twelve).build_and_execute(|| {
		assert_noop!(Iota::register_miner(RuntimeOrigin::signed(40)), Error::<Test>::AllStagesFull);
	});
	// 8 stages × 4 seats = 32 = MaxMiners: the record bound binds first once an unbonding miner keeps
	// its record.
	let thirty_two: Vec<u64> = (21..53).collect();
	ExtBuilder::default()
		.with_config(|c| c.stages = 8)
		.with_miners(&thirty_two)
		.build_and_execute(|| {
			assert_ok!(Iota::deregister(RuntimeOrigin::signed(21)));
			let stage = Miners::<Test>::get(21).unwrap().stage;
			merge_stage(stage);
			assert_noop!(
				Iota::register_miner(RuntimeOrigin::signed(60)),
				Error::<Test>::TooManyRecords
			);
		});
}

#[test]
fn validators_register_with_enough_stake() {
	ExtBuilder::default().build_and_execute(|| {
		assert_ok!(Iota::register_validator(RuntimeOrigin::signed(11), STAKE));
		System::assert_last_event(Event::ValidatorRegistered { who: 11, stake: STAKE }.into());
		assert_eq!(held(HoldReason::ValidatorStake, 11), STAKE);
		assert_noop!(
			Iota::register_validator(RuntimeOrigin::signed(11), STAKE),
			Error::<Test>::AlreadyRegistered
		);
		assert_noop!(
			Iota::register_validator(RuntimeOrigin::signed(12), 4_999),
			Error::<Test>::StakeBelowMinimum
		);
		assert_noop!(
			Iota::register_validator(RuntimeOrigin::signed(12), INITIAL + 1),
			Error::<Test>::InsufficientBalance
		);
		for v in 12..19 {
			assert_ok!(Iota::register_validator(RuntimeOrigin::signed(v), STAKE));
		}
		assert_noop!(
			Iota::register_validator(RuntimeOrigin::signed(19), STAKE),
			Error::<Test>::TooManyRecords
		);
	});
}

#[test]
fn a_leaving_miner_keeps_its_seat_until_its_stage_merges_then_unbonds() {
	ExtBuilder::default().with_miners(&MINERS).build_and_execute(|| {
		let stage = Miners::<Test>::get(21).unwrap().stage;
		assert_ok!(Iota::deregister(RuntimeOrigin::signed(21)));
		System::assert_last_event(Event::MinerLeaving { who: 21, stage }.into());
		assert_noop!(Iota::deregister(RuntimeOrigin::signed(21)), Error::<Test>::AlreadyLeaving);
		assert!(StageMembers::<Test>::get(stage).contains(&21), "unmerged work keeps the seat");
		assert_noop!(
			Iota::withdraw_unbonded(RuntimeOrigin::signed(21)),
			Error::<Test>::NotUnbonding
		);

		run_to(5);
		merge_stage(stage);
		assert!(!StageMembers::<Test>::get(stage).contains(&21));
		assert_eq!(
			Miners::<Test>::get(21).unwrap().status,
			MinerStatus::Unbonding { until: 15, last_epoch: 0 }
		);
		assert_noop!(Iota::deregister(RuntimeOrigin::signed(21)), Error::<Test>::AlreadyLeaving);
		assert_noop!(
			Iota::withdraw_unbonded(RuntimeOrigin::signed(21)),
			Error::<Test>::StillUnbonding
		);

		// The period has passed, but epoch 0 - its last - is not judged yet.
		run_to(15);
		assert_noop!(
			Iota::withdraw_unbonded(RuntimeOrigin::signed(21)),
			Error::<Test>::StillUnbonding
		);
		for s in (0..3).filter(|&s| s != stage) {
			merge_stage(s);
		}
		run_to(15 + 5);
		assert_ok!(Iota::finalize_epoch(RuntimeOrigin::signed(1), 0));
		assert_ok!(Iota::withdraw_unbonded(RuntimeOrigin::signed(21)));
		System::assert_last_event(Event::Withdrawn { who: 21, amount: BOND }.into());
		assert_eq!(Balances::free_balance(21), INITIAL);
		assert!(Miners::<Test>::get(21).is_none());
		// It can come back.
		assert_ok!(Iota::register_miner(RuntimeOrigin::signed(21)));
	});
}

#[test]
fn validators_unbond_at_once_and_withdraw_after_the_period() {
	ExtBuilder::default().with_validators(&VALIDATORS).build_and_execute(|| {
		assert_ok!(Iota::deregister(RuntimeOrigin::signed(11)));
		System::assert_last_event(Event::Unbonding { who: 11, until: 11 }.into());
		assert_noop!(Iota::deregister(RuntimeOrigin::signed(11)), Error::<Test>::AlreadyLeaving);
		assert_noop!(
			Iota::withdraw_unbonded(RuntimeOrigin::signed(11)),
			Error::<Test>::StillUnbonding
		);
		assert_noop!(
			Iota::withdraw_unbonded(RuntimeOrigin::signed(12)),
			Error::<Test>::NotUnbonding
		);
		run_to(11);
		assert_ok!(Iota::withdraw_unbonded(RuntimeOrigin::signed(11)));
		assert_eq!(held(HoldReason::ValidatorStake, 11), 0);
		assert_eq!(Balances::free_balance(11), INITIAL);
	});
}

#[test]
fn strangers_cannot_leave_or_withdraw() {
	ExtBuilder::default().build_and_execute(|| {
		assert_noop!(Iota::deregister(RuntimeOrigin::signed(77)), Error::<Test>::NotRegistered);
		assert_noop!(
			Iota::withdraw_unbonded(RuntimeOrigin::signed(77)),
			Error::<Test>::NotRegistered
		);
		assert_noop!(Iota::deregister(RuntimeOrigin::root()), DispatchError::BadOrigin);
	});
}

#[test]
fn genesis_validators_are_registered_with_held_stake() {
	ExtBuilder::default().with_validators(&VALIDATORS).build_and_execute(|| {
		assert_eq!(Validators::<Test>::count(), 3);
		assert_eq!(held(HoldReason::ValidatorStake, 12), STAKE);
		assert_eq!(Orchestrator::<Test>::get(), Some(ORCH));
		assert!(EpochSeeds::<Test>::get(0).is_some());
	});
}

#[test]
fn stage_assignment_follows_the_pure_function() {
	ExtBuilder::default().with_miners(&[21, 22, 23]).build_and_execute(|| {
		// With one miner per stage every stage ties; the pallet's choice equals the primitive's on the
		// same seed, so anyone can audit it.
		let counts = [1u32, 1, 1];
		let seed = {
			use polkadot_sdk::frame_support::traits::Randomness;
			let (out, _) = TestRandomness::random(
				&(&b"iota-rs assign_stage"[..], &24u64.encode()[..]).encode(),
			);
			iota_primitives::derive_seed("iota-rs chain randomness v1", &[0; 32], &out.encode())
		};
		let expected = iota_primitives::assign_stage(&counts, 4, &seed).unwrap();
		assert_ok!(Iota::register_miner(RuntimeOrigin::signed(24)));
		assert_eq!(Miners::<Test>::get(24).unwrap().stage, expected);
	});
}
