//! Property tests of the pure protocol decisions (issue: chain core, item 2).
#![allow(clippy::arithmetic_side_effects)]

use iota_primitives::*;
use proptest::prelude::*;

proptest! {
	#![proptest_config(ProptestConfig::with_cases(256))]

	/// The split always sums exactly to the pool, whatever the stakes, weights and share.
	#[test]
	fn emission_split_sums_to_the_pool(
		pool in any::<u128>(),
		share in 0u32..=PPB,
		n_miners in 0usize..12,
		votes in prop::collection::vec((any::<u64>(), prop::collection::vec(any::<u16>(), 0..14)), 0..8),
	) {
		let votes: Vec<ValidatorVote> = votes.into_iter().map(|(stake, w)| ValidatorVote {
			stake: u128::from(stake),
			weights: w.into_iter().map(u128::from).collect(),
		}).collect();
		let r = epoch_rewards(pool, share, n_miners, &votes);
		let total = r.miner_payouts.iter().chain(&r.validator_payouts)
			.fold(r.unallocated, |a, &b| a.checked_add(b).expect("no overflow past the pool"));
		prop_assert_eq!(total, pool);
		prop_assert_eq!(r.miner_payouts.len(), n_miners);
		prop_assert_eq!(r.validator_payouts.len(), votes.len());
		prop_assert!(r.agreement.iter().all(|&a| a <= PPB));
	}

	/// Normalised weights sum to at most PPB (and, when any weight is non-zero, at least PPB - len), even
	/// when the raw weights' sum does not fit in u128.
	#[test]
	fn normalized_weights_sum_to_one(weights in prop::collection::vec(prop_oneof![any::<u128>(), Just(u128::MAX)], 0..12)) {
		let n = normalize_weights(&weights);
		prop_assert_eq!(n.len(), weights.len());
		let sum: u64 = n.iter().map(|&x| u64::from(x)).sum();
		prop_assert!(sum <= u64::from(PPB), "sum {} above PPB", sum);
		if weights.iter().any(|&w| w > 0) {
			prop_assert!(sum + weights.len() as u64 >= u64::from(PPB), "sum {} too small", sum);
		}
	}

	/// A proportional split is exact and never gives anyone more than one unit above their exact share.
	#[test]
	fn proportional_split_is_exact_and_fair(amount in any::<u64>(), weights in prop::collection::vec(any::<u32>(), 1..20)) {
		let w: Vec<u128> = weights.iter().map(|&x| u128::from(x)).collect();
		let total: u128 = w.iter().sum();
		match split_proportional(u128::from(amount), &w) {
			None => prop_assert_eq!(total, 0),
			Some(shares) => {
				prop_assert_eq!(shares.iter().sum::<u128>(), u128::from(amount));
				for (s, wi) in shares.iter().zip(&w) {
					let exact_floor = u128::from(amount) * wi / total;
					prop_assert!(*s == exact_floor || *s == exact_floor + 1);
				}
			}
		}
	}

	/// Every unordered pair owns exactly one shard, and the shards tile [0, P) with no gap or overlap.
	#[test]
	fn butterfly_pairs_and_tiling(n in 1u32..24, extra in 0u64..1_000_000, seed in any::<[u8; 32]>()) {
		let k = shard_count(n).unwrap();
		let p = u64::from(k) + extra;
		let table = butterfly_shards(n, p, &seed).unwrap();
		prop_assert_eq!(table.len() as u32, k);
		let mut next = 0u64;
		for (i, s) in table.iter().enumerate() {
			prop_assert_eq!(s.index as usize, i);
			prop_assert_eq!(s.start, next);
			prop_assert!(s.end > s.start);
			next = s.end;
		}
		prop_assert_eq!(next, p);
		let mut owners: Vec<(u32, u32)> = table.iter().map(|s| s.owners).collect();
		owners.sort_unstable();
		let expected: Vec<(u32, u32)> = if n == 1 {
			vec![(0, 0)]
		} else {
			(0..n).flat_map(|i| (i + 1..n).map(move |j| (i, j))).collect()
		};
		prop_assert_eq!(owners, expected);
	}

	/// Assignments are a function of their inputs: same seed, same answer; and the seed does matter.
	#[test]
	fn assignments_are_deterministic_in_the_seed(n in 2u32..12, seed in any::<[u8; 32]>(), counts in prop::collection::vec(0u32..4, 1..8)) {
		prop_assert_eq!(butterfly_shards(n, 10_000, &seed), butterfly_shards(n, 10_000, &seed));
		prop_assert_eq!(assign_stage(&counts, 8, &seed), assign_stage(&counts, 8, &seed));
		let stage = assign_stage(&counts, 8, &seed).unwrap();
		prop_assert_eq!(counts[stage as usize], *counts.iter().min().unwrap());
	}

	/// A coalition with at most 49% of the stake cannot move the median outside the honest range,
	/// whatever values it votes.
	#[test]
	fn median_is_robust_to_a_stake_minority(
		honest in prop::collection::vec((0u32..=PPB, 1u64..1_000_000), 1..10),
		attackers in prop::collection::vec((any::<u32>(), 1u64..1_000_000), 0..10),
	) {
		let honest_stake: u128 = honest.iter().map(|&(_, s)| u128::from(s)).sum();
		// Scale the attackers' stake down to at most 49% of the total.
		let attack_raw: u128 = attackers.iter().map(|&(_, s)| u128::from(s)).sum();
		let budget = honest_stake * 49 / 51;
		let mut votes: Vec<(u32, u128)> = honest.iter().map(|&(v, s)| (v, u128::from(s))).collect();
		for &(v, s) in &attackers {
			let scaled = (u128::from(s) * budget).checked_div(attack_raw).unwrap_or(0);
			votes.push((v, scaled));
		}
		let lo = honest.iter().map(|&(v, _)| v).min().unwrap();
		let hi = honest.iter().map(|&(v, _)| v).max().unwrap();
		let m = stake_weighted_median(&mut votes).unwrap();
		prop_assert!(lo <= m && m <= hi, "median {} outside honest range [{}, {}]", m, lo, hi);
	}
}

#[test]
fn different_seeds_give_different_butterfly_tables() {
	let a = butterfly_shards(8, 1 << 20, &[1; 32]).unwrap();
	let b = butterfly_shards(8, 1 << 20, &[2; 32]).unwrap();
	assert_ne!(a, b);
}
