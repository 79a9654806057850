//! Per-stage phase transitions through `advance_phase`.

use super::*;

#[test]
fn training_moves_to_uploading_at_quota() {
	ExtBuilder::default().with_miners(&MINERS).build_and_execute(|| {
		run_to(3);
		assert_ok!(Iota::advance_phase(orch(), 0, 0, report(4, 0)));
		System::assert_last_event(
			Event::PhaseAdvanced {
				stage: 0,
				epoch: 0,
				from: Phase::Training,
				to: Phase::WeightsUploading,
				timed_out: false,
				report: report(4, 0),
			}
			.into(),
		);
		let s = Stages::<Test>::get(0);
		assert_eq!((s.phase, s.phase_since), (Phase::WeightsUploading, 3));
		// Stages move on their own: the others still train.
		assert_eq!(Stages::<Test>::get(1).phase, Phase::Training);
		assert_eq!(Stages::<Test>::get(2).phase, Phase::Training);
	});
}

#[test]
fn training_refuses_before_quota_and_falls_back_on_timeout() {
	ExtBuilder::default().with_miners(&MINERS).build_and_execute(|| {
		assert_noop!(
			Iota::advance_phase(orch(), 0, 0, report(3, 0)),
			Error::<Test>::QuotaNotReached
		);
		run_to(21);
		assert_noop!(
			Iota::advance_phase(orch(), 0, 0, report(0, 0)),
			Error::<Test>::NoBackwardPasses
		);
		assert_ok!(Iota::advance_phase(orch(), 0, 0, report(3, 0)));
		System::assert_last_event(
			Event::PhaseAdvanced {
				stage: 0,
				epoch: 0,
				from: Phase::Training,
				to: Phase::WeightsUploading,
				timed_out: true,
				report: report(3, 0),
			}
			.into(),
		);
	});
}

#[test]
fn uploading_waits_for_every_member() {
	ExtBuilder::default().with_miners(&MINERS).build_and_execute(|| {
		assert_ok!(Iota::advance_phase(orch(), 0, 0, report(4, 0)));
		assert_noop!(
			Iota::advance_phase(orch(), 0, 0, report(4, 1)),
			Error::<Test>::GradientsMissing
		);
		assert_ok!(Iota::advance_phase(orch(), 0, 0, report(4, 2)));
		assert_eq!(Stages::<Test>::get(0).phase, Phase::Merging);
	});
}

#[test]
fn uploading_times_out_with_some_gradients_but_not_with_none() {
	ExtBuilder::default().with_miners(&MINERS).build_and_execute(|| {
		assert_ok!(Iota::advance_phase(orch(), 0, 0, report(4, 0)));
		run_to(21);
		assert_noop!(Iota::advance_phase(orch(), 0, 0, report(4, 0)), Error::<Test>::NoGradients);
		assert_ok!(Iota::advance_phase(orch(), 0, 0, report(4, 1)));
		assert_eq!(Stages::<Test>::get(0).phase, Phase::Merging);
	});
}

#[test]
fn a_stage_without_miners_cannot_upload() {
	ExtBuilder::default().build_and_execute(|| {
		assert_ok!(Iota::advance_phase(orch(), 0, 0, report(4, 0)));
		assert_noop!(Iota::advance_phase(orch(), 0, 0, report(4, 0)), Error::<Test>::NoGradients);
	});
}

#[test]
fn merging_ends_only_by_commit_or_restarts_on_timeout() {
	ExtBuilder::default().with_miners(&MINERS).build_and_execute(|| {
		assert_ok!(Iota::advance_phase(orch(), 0, 0, report(4, 0)));
		assert_ok!(Iota::advance_phase(orch(), 0, 0, report(4, 2)));
		assert_noop!(
			Iota::advance_phase(orch(), 0, 0, report(4, 2)),
			Error::<Test>::MergeNotCommitted
		);
		run_to(21);
		assert_ok!(Iota::advance_phase(orch(), 0, 0, report(4, 2)));
		let s = Stages::<Test>::get(0);
		assert_eq!((s.phase, s.round, s.epoch), (Phase::WeightsUploading, 1, 0));
	});
}

#[test]
fn advance_phase_refuses_bad_requests() {
	ExtBuilder::default().with_miners(&MINERS).build_and_execute(|| {
		assert_noop!(
			Iota::advance_phase(RuntimeOrigin::signed(21), 0, 0, report(4, 0)),
			Error::<Test>::NotOrchestrator
		);
		assert_noop!(
			Iota::advance_phase(RuntimeOrigin::root(), 0, 0, report(4, 0)),
			DispatchError::BadOrigin
		);
		assert_noop!(Iota::advance_phase(orch(), 3, 0, report(4, 0)), Error::<Test>::UnknownStage);
		assert_noop!(Iota::advance_phase(orch(), 0, 1, report(4, 0)), Error::<Test>::WrongEpoch);
	});
	ExtBuilder::default().unconfigured().build_and_execute(|| {
		assert_noop!(Iota::advance_phase(orch(), 0, 0, report(4, 0)), Error::<Test>::NotConfigured);
	});
}
