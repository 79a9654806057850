//! Epoch finalization: consensus, emission split, payouts; and a multi-epoch run.

use super::*;

fn finalize(epoch: Epoch) -> polkadot_sdk::sp_runtime::DispatchResult {
	Iota::finalize_epoch(RuntimeOrigin::signed(1), epoch)
}

#[test]
fn finalization_waits_for_completion_and_the_scoring_window() {
	ExtBuilder::default()
		.with_validators(&VALIDATORS)
		.with_miners(&MINERS)
		.build_and_execute(|| {
			assert_noop!(finalize(1), Error::<Test>::EpochNotNext);
			assert_noop!(finalize(0), Error::<Test>::EpochNotComplete);
			run_to(2);
			complete_epoch();
			assert_noop!(finalize(0), Error::<Test>::ScoringWindowOpen);
			// Completed at 2: commits through block 6, reveals through block 8.
			run_to(6);
			assert_noop!(finalize(0), Error::<Test>::ScoringWindowOpen);
			run_to(8);
			assert_noop!(finalize(0), Error::<Test>::ScoringWindowOpen);
			run_to(9);
			assert_noop!(Iota::finalize_epoch(RuntimeOrigin::none(), 0), DispatchError::BadOrigin);
			assert_ok!(finalize(0));
			assert_eq!(NextEpochToFinalize::<Test>::get(), 1);
			assert_noop!(finalize(0), Error::<Test>::EpochNotNext);
		});
}

#[test]
fn an_epoch_nobody_scored_mints_nothing() {
	ExtBuilder::default()
		.with_validators(&VALIDATORS)
		.with_miners(&MINERS)
		.build_and_execute(|| {
			let issuance = Balances::total_issuance();
			complete_epoch();
			run_to(finalizable(0));
			assert_ok!(finalize(0));
			let split = EmissionSplits::<Test>::get(0).unwrap();
			assert_eq!(split.unallocated, 1_000_000);
			System::assert_last_event(
				Event::EpochFinalized { epoch: 0, miners_paid: 0, validators_paid: 0, split }
					.into(),
			);
			assert_eq!(Balances::total_issuance(), issuance);
			assert_eq!(TotalMinted::<Test>::get(), 0);
			assert_eq!(Scores::<Test>::get(0).map(|s| s.len()), Some(0));
		});
}

#[test]
fn weights_of_validators_that_left_do_not_count() {
	ExtBuilder::default()
		.with_validators(&VALIDATORS)
		.with_miners(&MINERS)
		.build_and_execute(|| {
			complete_epoch();
			vote(13, 0, &[(21, 1)]);
			reveal_votes(0);
			assert_ok!(Iota::deregister(RuntimeOrigin::signed(13)));
			run_to(finalizable(0));
			assert_ok!(finalize(0));
			let split = EmissionSplits::<Test>::get(0).unwrap();
			assert!(split.miners.is_empty() && split.validators.is_empty());
			assert_eq!(split.unallocated, 1_000_000);
		});
}

/// Three stages × two miners, three validators of equal stake, two epochs. Validators 11 and 12 score
/// every miner equally; validator 13 is dishonest: it gives all its weight to miner 21 and files a false
/// `Fail` verdict against miner 22. Expected figures, computed by hand from the module doc of
/// `iota_primitives::emission` (pool 1 000 000, validators' share 20%):
///
/// - honest normalised weight per miner `h = floor(10^9/6) = 166 666 666`; the stake-weighted median of
///   `(h, h, 10^9)` and of `(h, h, 0)` is `h` for every miner, so consensus is uniform;
/// - miners split 800 000 equally: 133 333 each, the 2 left over go to the first two in account order
///   (21, 22) by the largest-remainder rule (all remainders tie);
/// - agreement: honest `10^9`; dishonest `10^9 − ½((10^9 − h) + 5h) = 166 666 668`;
/// - validators split 200 000 by stake × agreement: `floor` gives 92 307, 92 307, 15 384 with 2 left,
///   which go to the two largest remainders (11 and 12): 92 308, 92 308, 15 384;
/// - a third of the stake is below the one-half slash quorum, so miner 22 keeps its bond.
#[test]
fn two_epochs_with_a_dishonest_validator_pay_exactly() {
	ExtBuilder::default()
		.with_validators(&VALIDATORS)
		.with_miners(&MINERS)
		.build_and_execute(|| {
			let issuance = Balances::total_issuance();
			let all: Vec<(u64, u16)> = MINERS.iter().map(|&m| (m, 1)).collect();
			for epoch in 0..2 {
				let start = 1 + 20 * u64::from(epoch);
				run_to(start);
				complete_epoch();
				for v in [11, 12] {
					assert_ok!(Iota::submit_spot_check(
						RuntimeOrigin::signed(v),
						epoch,
						22,
						Verdict::Pass,
						ContentHash::of(b"recomputed")
					));
					vote(v, epoch, &all);
				}
				assert_ok!(Iota::submit_spot_check(
					RuntimeOrigin::signed(13),
					epoch,
					22,
					Verdict::Fail,
					ContentHash::of(b"forged")
				));
				vote(13, epoch, &[(21, 1)]);
				reveal_votes(epoch);
				run_to(finalizable(epoch));
				assert_ok!(finalize(epoch));
				let split = EmissionSplits::<Test>::get(epoch).unwrap();
				System::assert_last_event(
					Event::EpochFinalized {
						epoch,
						miners_paid: 800_000,
						validators_paid: 200_000,
						split: split.clone(),
					}
					.into(),
				);
				assert_eq!(split.unallocated, 0);
				assert_eq!(
					split.miners.into_inner(),
					vec![
						(21, 133_334),
						(22, 133_334),
						(23, 133_333),
						(24, 133_333),
						(25, 133_333),
						(26, 133_333)
					]
				);
				assert_eq!(
					split.validators.into_inner(),
					vec![(11, 92_308), (12, 92_308), (13, 15_384)]
				);
				let scores = Scores::<Test>::get(epoch).unwrap();
				assert!(scores.iter().all(|&(_, s)| s == 166_666_666), "{scores:?}");
			}
			assert_eq!(MergeManifests::<Test>::iter().count(), 6);
			assert_eq!(Balances::total_issuance(), issuance + 2_000_000);
			assert_eq!(TotalMinted::<Test>::get(), 2_000_000);
			let expected = [
				(21, INITIAL - BOND + 266_668),
				(22, INITIAL - BOND + 266_668),
				(23, INITIAL - BOND + 266_666),
				(24, INITIAL - BOND + 266_666),
				(25, INITIAL - BOND + 266_666),
				(26, INITIAL - BOND + 266_666),
				(11, INITIAL - STAKE + 184_616),
				(12, INITIAL - STAKE + 184_616),
				(13, INITIAL - STAKE + 30_768),
			];
			for (who, free) in expected {
				assert_eq!(Balances::free_balance(who), free, "account {who}");
			}
			assert_eq!(
				held(HoldReason::MinerBond, 22),
				BOND,
				"a minority's false verdict slashes nobody"
			);
		});
}
