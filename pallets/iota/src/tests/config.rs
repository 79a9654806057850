//! Root calls: run config and orchestrator.

use super::*;

#[test]
fn root_sets_the_run_config() {
	ExtBuilder::default().build_and_execute(|| {
		let mut cfg = run_config();
		cfg.backward_quota = 64;
		assert_noop!(
			Iota::set_run_config(RuntimeOrigin::signed(ORCH), cfg.clone()),
			DispatchError::BadOrigin
		);
		assert_ok!(Iota::set_run_config(RuntimeOrigin::root(), cfg.clone()));
		System::assert_last_event(Event::RunConfigSet.into());
		assert_eq!(RunConfiguration::<Test>::get(), Some(cfg));
	});
}

#[test]
fn invalid_run_configs_are_refused() {
	ExtBuilder::default().build_and_execute(|| {
		let bad: [fn(&mut iota_primitives::RunConfig<u64, u64>); 9] = [
			|c| c.stages = 0,
			|c| c.stages = 9,
			|c| c.backward_quota = 0,
			|c| c.validator_share_ppb = iota_primitives::PPB + 1,
			|c| c.slash_quorum_ppb = 0,
			|c| c.bottleneck_width = 0,
			// No window for weights to be revealed in: no epoch could ever pay.
			|c| c.reveal_window = 0,
			// Evicting a miner at its first epoch without a score, before it could have earned one.
			|c| c.max_idle_epochs = 0,
			|c| c.scoring_window = 0,
		];
		for f in bad {
			let mut cfg = run_config();
			f(&mut cfg);
			assert_noop!(
				Iota::set_run_config(RuntimeOrigin::root(), cfg),
				Error::<Test>::InvalidRunConfig
			);
		}
	});
}

#[test]
fn the_stage_count_is_fixed_while_miners_are_registered() {
	ExtBuilder::default().with_miners(&[21]).build_and_execute(|| {
		let mut cfg = run_config();
		cfg.stages = 4;
		assert_noop!(Iota::set_run_config(RuntimeOrigin::root(), cfg), Error::<Test>::StagesInUse);
	});
	ExtBuilder::default().build_and_execute(|| {
		let mut cfg = run_config();
		cfg.stages = 4;
		assert_ok!(Iota::set_run_config(RuntimeOrigin::root(), cfg));
	});
}

#[test]
fn an_unconfigured_chain_takes_its_config_from_root() {
	ExtBuilder::default().unconfigured().build_and_execute(|| {
		assert!(EpochSeeds::<Test>::get(0).is_none());
		assert_ok!(Iota::set_run_config(RuntimeOrigin::root(), run_config()));
		assert!(EpochSeeds::<Test>::get(0).is_some());
		assert_ok!(Iota::register_miner(RuntimeOrigin::signed(21)));
	});
}

#[test]
fn root_sets_the_orchestrator() {
	ExtBuilder::default().with_miners(&MINERS).build_and_execute(|| {
		assert_noop!(
			Iota::set_orchestrator(RuntimeOrigin::signed(ORCH), 5),
			DispatchError::BadOrigin
		);
		assert_ok!(Iota::set_orchestrator(RuntimeOrigin::root(), 5));
		System::assert_last_event(Event::OrchestratorSet { who: 5 }.into());
		assert_noop!(
			Iota::advance_phase(orch(), 0, 0, report(4, 0)),
			Error::<Test>::NotOrchestrator
		);
		assert_ok!(Iota::advance_phase(RuntimeOrigin::signed(5), 0, 0, report(4, 0)));
	});
}
