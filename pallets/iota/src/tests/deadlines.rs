//! Deadlines on chain (`on_initialize`): overrun merges restart their round and closed scoring windows
//! finalize their epoch without any orchestrator or validator extrinsic.

use super::*;
use crate::weights::WeightInfo;
use polkadot_sdk::frame_support::traits::{Get, Hooks};

/// The block hook at `n` (the tests' `run_to` only sets the number).
fn initialize(n: u64) -> polkadot_sdk::frame_support::weights::Weight {
	run_to(n);
	<Iota as Hooks<u64>>::on_initialize(n)
}

fn phase_events() -> Vec<Event<Test>> {
	System::events()
		.into_iter()
		.filter_map(|r| match r.event {
			RuntimeEvent::Iota(e @ Event::PhaseAdvanced { .. }) => Some(e),
			_ => None,
		})
		.collect()
}

#[test]
fn an_overrun_merge_restarts_its_round_on_chain() {
	ExtBuilder::default().with_miners(&MINERS).build_and_execute(|| {
		assert_ok!(Iota::advance_phase(orch(), 0, 0, report(4, 0)));
		assert_ok!(Iota::advance_phase(orch(), 0, 0, report(4, 2)));
		System::reset_events();
		// Merging since block 1, timeout 20: still inside the deadline at 20.
		initialize(20);
		assert_eq!(Stages::<Test>::get(0).phase, Phase::Merging);
		assert!(phase_events().is_empty());
		initialize(21);
		let s = Stages::<Test>::get(0);
		assert_eq!((s.phase, s.round, s.epoch, s.phase_since), (Phase::WeightsUploading, 1, 0, 21));
		assert_eq!(
			phase_events(),
			vec![Event::PhaseAdvanced {
				stage: 0,
				epoch: 0,
				from: Phase::Merging,
				to: Phase::WeightsUploading,
				timed_out: true,
				report: StageReport::default(),
			}]
		);
		// The late commit of the abandoned round is refused; the new round runs as usual.
		assert_noop!(
			Iota::commit_merge(orch(), 0, 0, manifest(2, 1_000)),
			Error::<Test>::NotMerging
		);
		assert_ok!(Iota::advance_phase(orch(), 0, 0, report(4, 2)));
		assert_ok!(Iota::commit_merge(orch(), 0, 0, manifest(2, 1_000)));
		assert_eq!(epoch_of(0), 1);
	});
}

#[test]
fn training_and_uploading_wait_for_the_orchestrators_report() {
	ExtBuilder::default().with_miners(&MINERS).build_and_execute(|| {
		// Stage 1 in WeightsUploading, stage 0 and 2 in Training, all far past their deadline: the chain
		// knows of no backward pass or gradient, so by the primitives' rules none of them moves.
		assert_ok!(Iota::advance_phase(orch(), 1, 0, report(4, 0)));
		let before: Vec<_> = (0..3).map(Stages::<Test>::get).collect();
		System::reset_events();
		initialize(500);
		assert_eq!((0..3).map(Stages::<Test>::get).collect::<Vec<_>>(), before);
		assert!(phase_events().is_empty());
		// The orchestrator's report still moves them (timeout fallback).
		assert_ok!(Iota::advance_phase(orch(), 0, 0, report(1, 0)));
		assert_eq!(Stages::<Test>::get(0).phase, Phase::WeightsUploading);
	});
}

#[test]
fn a_closed_scoring_window_finalizes_the_epoch_as_the_call_would() {
	let run = |by_hook: bool| {
		let mut out = None;
		ExtBuilder::default()
			.with_validators(&VALIDATORS)
			.with_miners(&MINERS)
			.build_and_execute(|| {
				run_to(2);
				complete_epoch();
				for v in [11, 12, 13] {
					vote(v, 0, &[(21, 3), (22, 1), (23, 1), (24, 1), (25, 1), (26, 1)]);
				}
				reveal_votes(0);
				// Completed at 2: commits through block 6, reveals through block 8.
				initialize(8);
				assert_eq!(NextEpochToFinalize::<Test>::get(), 0);
				assert!(EmissionSplits::<Test>::get(0).is_none());
				if by_hook {
					initialize(9);
					assert_noop!(
						Iota::finalize_epoch(RuntimeOrigin::signed(1), 0),
						Error::<Test>::EpochNotNext
					);
				} else {
					run_to(9);
					assert_ok!(Iota::finalize_epoch(RuntimeOrigin::signed(1), 0));
				}
				assert_eq!(NextEpochToFinalize::<Test>::get(), 1);
				out = Some((
					EmissionSplits::<Test>::get(0).unwrap(),
					Scores::<Test>::get(0).unwrap(),
					TotalMinted::<Test>::get(),
				));
				// Nothing further is due: the next epoch has not completed.
				initialize(100);
				assert_eq!(NextEpochToFinalize::<Test>::get(), 1);
			});
		out.unwrap()
	};
	assert_eq!(run(true), run(false));
}

#[test]
fn the_hook_charges_its_work_and_stays_bounded() {
	type W = <Test as crate::Config>::WeightInfo;
	let stages = u32::from(run_config().stages);
	ExtBuilder::default()
		.with_validators(&VALIDATORS)
		.with_miners(&MINERS)
		.build_and_execute(|| {
			// Idle: the deadline scan only.
			assert_eq!(initialize(3), Iota::deadlines_weight(stages));
			// A finalization is charged as the call with the actual record counts.
			complete_epoch();
			let w = initialize(100);
			assert_eq!(w, Iota::deadlines_weight(stages).saturating_add(W::finalize_epoch(6, 3)));
			let max = <Test as crate::Config>::MaxStages::get();
			let worst = Iota::deadlines_weight(max).saturating_add(W::finalize_epoch(
				<Test as crate::Config>::MaxMiners::get(),
				<Test as crate::Config>::MaxValidators::get(),
			));
			assert!(w.all_lte(worst));
		});
	ExtBuilder::default().unconfigured().build_and_execute(|| {
		let w = initialize(50);
		let db = <<Test as polkadot_sdk::frame_system::Config>::DbWeight as Get<
			polkadot_sdk::frame_support::weights::RuntimeDbWeight,
		>>::get();
		assert_eq!(w, db.reads(1));
	});
}
