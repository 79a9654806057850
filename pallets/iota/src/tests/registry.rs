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
	});
}

/// Eight seats (`MaxValidators`): a ninth validator must bring more stake than the smallest seat
/// holder, which is replaced and unbonds; equal stake is not enough. Unbonding records are bounded
/// too (as many as seats).
#[test]
fn a_full_validator_set_admits_only_more_stake_which_replaces_the_smallest() {
	ExtBuilder::default().build_and_execute(|| {
		// Validators 11..=18 with stakes 10 000, 10 100, ..., 10 700.
		for (i, v) in (11..19).enumerate() {
			assert_ok!(Iota::register_validator(RuntimeOrigin::signed(v), STAKE + 100 * i as u64));
		}
		assert_noop!(
			Iota::register_validator(RuntimeOrigin::signed(19), STAKE),
			Error::<Test>::StakeTooLowToReplace
		);
		assert_ok!(Iota::register_validator(RuntimeOrigin::signed(19), STAKE + 1));
		System::assert_has_event(Event::ValidatorReplaced { who: 11, by: 19 }.into());
		System::assert_last_event(Event::ValidatorRegistered { who: 19, stake: STAKE + 1 }.into());
		let replaced = Validators::<Test>::get(11).unwrap();
		assert_eq!(replaced.status, ValidatorStatus::Unbonding { until: 1 + 10 });
		assert_eq!(held(HoldReason::ValidatorStake, 11), STAKE, "unbonding keeps the stake held");
		assert_noop!(commit(11, 0, &[(21, 1)]), Error::<Test>::NotValidator);
		// The smallest seat is now 19's (10 001): 10 001 does not replace it, 10 002 does.
		assert_noop!(
			Iota::register_validator(RuntimeOrigin::signed(20), STAKE + 1),
			Error::<Test>::StakeTooLowToReplace
		);
		assert_ok!(Iota::register_validator(RuntimeOrigin::signed(20), STAKE + 2));
		System::assert_has_event(Event::ValidatorReplaced { who: 19, by: 20 }.into());
		// The replaced validator withdraws after the unbonding period.
		run_to(11);
		assert_ok!(Iota::withdraw_unbonded(RuntimeOrigin::signed(11)));
		assert_eq!(Balances::free_balance(11), INITIAL);
		// Eight seats and eight unbonding records at most: fill the unbonding side.
		for v in 30..37u64 {
			assert_ok!(Iota::register_validator(RuntimeOrigin::signed(v), STAKE + 1_000 + v));
		}
		assert_eq!(Validators::<Test>::count(), 16);
		assert_noop!(
			Iota::register_validator(RuntimeOrigin::signed(40), 10 * STAKE),
			Error::<Test>::TooManyRecords
		);
	});
}

/// A run of epochs in which validator 11 scores `paid` (an empty list: nobody reveals weights).
fn finalize_with_scores(epoch: Epoch, paid: &[u64]) {
	complete_epoch();
	if !paid.is_empty() {
		let w: Vec<(u64, u16)> = paid.iter().map(|&m| (m, 1)).collect();
		vote(11, epoch, &w);
		reveal_votes(epoch);
	}
	run_to(finalizable(epoch));
	assert_ok!(Iota::finalize_epoch(RuntimeOrigin::signed(1), epoch));
	run_to(finalizable(epoch) + 1);
}

/// `max_idle_epochs` is 2 in the tests: miner 21 never scores and is evicted at the finalization of
/// epoch 2 (registered at epoch 0); it keeps its seat until its stage's next merge, then unbonds. The
/// miners that work keep theirs, and their `last_scored` follows the finalized epochs.
#[test]
fn an_idle_miner_is_evicted_and_a_working_one_is_not() {
	ExtBuilder::default()
		.with_validators(&VALIDATORS)
		.with_miners(&MINERS)
		.build_and_execute(|| {
			let workers = [22, 23, 24, 25, 26];
			for epoch in 0..2 {
				finalize_with_scores(epoch, &workers);
				assert_eq!(Miners::<Test>::get(21).unwrap().status, MinerStatus::Active);
			}
			finalize_with_scores(2, &workers);
			let stage = Miners::<Test>::get(21).unwrap().stage;
			System::assert_has_event(Event::MinerEvicted { who: 21, stage, last_scored: 0 }.into());
			assert_eq!(Miners::<Test>::get(21).unwrap().status, MinerStatus::Leaving);
			assert!(StageMembers::<Test>::get(stage).contains(&21), "unmerged work keeps the seat");
			for m in workers {
				let info = Miners::<Test>::get(m).unwrap();
				assert_eq!((info.status, info.last_scored), (MinerStatus::Active, 2), "miner {m}");
			}
			// Its stage's next merge frees the seat; the miner unbonds.
			merge_stage(stage);
			assert!(!StageMembers::<Test>::get(stage).contains(&21));
			assert!(matches!(
				Miners::<Test>::get(21).unwrap().status,
				MinerStatus::Unbonding { last_epoch: 3, .. }
			));
		});
}

/// Epochs in which no miner scored (no validator revealed weights) judge nobody idle, and a miner
/// that registered late is counted from the run's epoch at its registration.
#[test]
fn unscored_epochs_and_late_registration_do_not_evict() {
	ExtBuilder::default()
		.with_validators(&VALIDATORS)
		.with_miners(&MINERS)
		.build_and_execute(|| {
			for epoch in 0..4 {
				finalize_with_scores(epoch, &[]);
			}
			assert!(Miners::<Test>::iter_values().all(|m| m.status == MinerStatus::Active));
			assert_ok!(Iota::register_miner(RuntimeOrigin::signed(27)));
			assert_eq!(Miners::<Test>::get(27).unwrap().last_scored, 4);
			let others = [21, 22, 23, 24, 25, 26];
			for epoch in 4..6 {
				finalize_with_scores(epoch, &others);
			}
			assert_eq!(Miners::<Test>::get(27).unwrap().status, MinerStatus::Active);
			finalize_with_scores(6, &others);
			assert_eq!(Miners::<Test>::get(27).unwrap().status, MinerStatus::Leaving);
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
		run_to(finalizable(0));
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
