//! Emission split of one epoch (docs/design.md §3 step 8): integer maths whose parts sum exactly to the pool.
//!
//! For an epoch with pool `E`, validator share `s` (ppb), miners `m` and voting validators `v` with stake
//! `S_v` and raw weights `w_vm`:
//!
//! 1. `E_val = floor(E·s / PPB)`, `E_min = E − E_val`.
//! 2. `ŵ_vm = normalize(w_v)_m` (ppb, [`normalize_weights`]); missing weights are 0.
//! 3. `c_m = median_S(ŵ_·m)` ([`stake_weighted_median`]); `ĉ = normalize(c)`.
//! 4. Agreement `a_v = PPB − min(PPB, ½·Σ_m |ŵ_vm − ĉ_m|)`: one minus the normalised L1 distance of a
//!    validator's weights from consensus, floored at 0. When there is no consensus (`c` is all zero:
//!    the validators agreed on nobody), every agreement is 0.
//! 5. Miners get `E_min` in proportion to `c_m`, validators `E_val` in proportion to `S_v · a_v`
//!    ([`split_proportional`]: floor shares, then the remainder one unit at a time to the largest
//!    fractional parts, ties to the lower index).
//! 6. A part whose weights are all zero (no validator voted, or every vote agreed on nothing) is not
//!    paid: it is reported as `unallocated` and never minted.
//!
//! So copying or careless validators earn less than those who agree with the stake-weighted consensus
//! (Yuma consensus' idea, simplified).

use crate::consensus::{normalize_weights, stake_weighted_median, PPB};
use alloc::vec::Vec;
use primitive_types::U256;

/// `floor(a·b / c)` exactly (256-bit intermediate); `None` when `c == 0` or the result exceeds `u128`.
pub fn mul_div_floor(a: u128, b: u128, c: u128) -> Option<u128> {
	let q = U256::from(a).checked_mul(U256::from(b))?.checked_div(U256::from(c))?;
	if q > U256::from(u128::MAX) {
		return None;
	}
	Some(q.low_u128())
}

/// Split `amount` in proportion to `weights`: floor shares, then the remainder (fewer units than there
/// are weights) one unit each to the largest fractional parts, ties to the lower index. The result sums
/// exactly to `amount`. `None` when every weight is zero (or there are none).
pub fn split_proportional(amount: u128, weights: &[u128]) -> Option<Vec<u128>> {
	let total = weights.iter().fold(U256::zero(), |acc, &w| acc.saturating_add(U256::from(w)));
	if total.is_zero() {
		return None;
	}
	let mut shares = Vec::with_capacity(weights.len());
	let mut remainders = Vec::with_capacity(weights.len());
	let mut paid = 0u128;
	for &w in weights {
		// amount·w < 2^256 and w ≤ total, so the quotient is ≤ amount and fits u128.
		let product = U256::from(amount).saturating_mul(U256::from(w));
		let (q, r) = product.div_mod(total);
		let share = q.low_u128();
		paid = paid.saturating_add(share);
		shares.push(share);
		remainders.push(r);
	}
	let mut leftover = amount.saturating_sub(paid);
	let mut order: Vec<usize> = (0..weights.len()).collect();
	order.sort_by(|&i, &j| remainders[j].cmp(&remainders[i]).then(i.cmp(&j)));
	for i in order {
		if leftover == 0 {
			break;
		}
		shares[i] = shares[i].saturating_add(1);
		leftover = leftover.saturating_sub(1);
	}
	Some(shares)
}

/// One validator's input to an epoch's consensus.
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct ValidatorVote {
	/// The validator's stake, in balance units.
	pub stake: u128,
	/// Raw weight per miner, by miner index; shorter vectors mean zero for the rest, longer are cut.
	pub weights: Vec<u128>,
}

/// Everything an epoch's finalization decides; `Σ miner_payouts + Σ validator_payouts + unallocated`
/// equals the pool exactly.
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct EpochRewards {
	/// Normalised consensus weight per miner, in ppb.
	pub consensus: Vec<u32>,
	/// Agreement of each validator with consensus, in ppb.
	pub agreement: Vec<u32>,
	/// Payout per miner, in balance units.
	pub miner_payouts: Vec<u128>,
	/// Payout per validator, in balance units.
	pub validator_payouts: Vec<u128>,
	/// Part of the pool nobody earned; not minted.
	pub unallocated: u128,
}

/// The rewards of one epoch: consensus, agreement and the exact split of `pool` (see the module doc for
/// the formula). `n_miners` miners are indexed `0..n_miners`; `votes` are the validators that set weights.
pub fn epoch_rewards(
	pool: u128,
	validator_share_ppb: u32,
	n_miners: usize,
	votes: &[ValidatorVote],
) -> EpochRewards {
	let share = validator_share_ppb.min(PPB);
	let validator_part = mul_div_floor(pool, u128::from(share), u128::from(PPB)).unwrap_or(0);
	let miner_part = pool.saturating_sub(validator_part);

	let normalized: Vec<Vec<u32>> = votes
		.iter()
		.map(|v| {
			let mut w: Vec<u128> = v.weights.iter().copied().take(n_miners).collect();
			w.resize(n_miners, 0);
			normalize_weights(&w)
		})
		.collect();

	let mut column = Vec::with_capacity(votes.len());
	let raw_consensus: Vec<u128> = (0..n_miners)
		.map(|m| {
			column.clear();
			column.extend(votes.iter().zip(&normalized).map(|(v, w)| (w[m], v.stake)));
			u128::from(stake_weighted_median(&mut column).unwrap_or(0))
		})
		.collect();
	let consensus = normalize_weights(&raw_consensus);

	let no_consensus = raw_consensus.iter().all(|&c| c == 0);
	let agreement: Vec<u32> = normalized
		.iter()
		.map(|w| {
			if no_consensus {
				return 0;
			}
			let l1 = w
				.iter()
				.zip(&consensus)
				.fold(0u64, |acc, (&a, &c)| acc.saturating_add(u64::from(a.abs_diff(c))));
			let distance = u32::try_from(l1 / 2).unwrap_or(PPB).min(PPB);
			PPB.saturating_sub(distance)
		})
		.collect();

	let mut unallocated = 0u128;
	let miner_payouts = split_proportional(miner_part, &raw_consensus).unwrap_or_else(|| {
		unallocated = unallocated.saturating_add(miner_part);
		alloc::vec![0; n_miners]
	});
	let validator_weights: Vec<u128> = votes
		.iter()
		.zip(&agreement)
		.map(|(v, &a)| v.stake.saturating_mul(u128::from(a)))
		.collect();
	let validator_payouts =
		split_proportional(validator_part, &validator_weights).unwrap_or_else(|| {
			unallocated = unallocated.saturating_add(validator_part);
			alloc::vec![0; votes.len()]
		});

	EpochRewards { consensus, agreement, miner_payouts, validator_payouts, unallocated }
}

#[cfg(test)]
mod tests {
	use super::*;

	#[test]
	fn proportional_split_is_exact_with_largest_remainder() {
		assert_eq!(split_proportional(10, &[1, 1, 1]), Some(alloc::vec![4, 3, 3]));
		assert_eq!(split_proportional(10, &[1, 2]), Some(alloc::vec![3, 7]));
		assert_eq!(split_proportional(10, &[0, 0]), None);
		assert_eq!(
			split_proportional(u128::MAX, &[u128::MAX, 1]).map(|v| v.iter().sum::<u128>()),
			Some(u128::MAX)
		);
	}

	#[test]
	fn honest_majority_decides_and_the_outlier_earns_less() {
		// Three miners; two honest validators agree, a third with less stake votes only for miner 2.
		let honest = alloc::vec![1, 1, 0];
		let votes = [
			ValidatorVote { stake: 100, weights: honest.clone() },
			ValidatorVote { stake: 100, weights: honest },
			ValidatorVote { stake: 50, weights: alloc::vec![0, 0, 1] },
		];
		let r = epoch_rewards(1_000_000, 200_000_000, 3, &votes);
		assert_eq!(r.consensus, alloc::vec![500_000_000, 500_000_000, 0]);
		assert_eq!(r.miner_payouts, alloc::vec![400_000, 400_000, 0]);
		assert_eq!(r.agreement, alloc::vec![PPB, PPB, 0]);
		assert_eq!(r.validator_payouts, alloc::vec![100_000, 100_000, 0]);
		assert_eq!(r.unallocated, 0);
	}

	#[test]
	fn validators_that_agree_on_nobody_earn_nothing() {
		// Two validators of equal stake each back a different miner: every median is 0.
		let votes = [
			ValidatorVote { stake: 10, weights: alloc::vec![1, 0] },
			ValidatorVote { stake: 10, weights: alloc::vec![0, 1] },
		];
		let r = epoch_rewards(1_000, 200_000_000, 2, &votes);
		assert_eq!(r.consensus, alloc::vec![0, 0]);
		assert_eq!(r.agreement, alloc::vec![0, 0]);
		assert_eq!(r.unallocated, 1_000);
	}

	#[test]
	fn no_votes_means_nothing_is_paid() {
		let r = epoch_rewards(1_000, 100_000_000, 2, &[]);
		assert_eq!(r.unallocated, 1_000);
		assert_eq!(r.miner_payouts, alloc::vec![0, 0]);
		assert!(r.validator_payouts.is_empty());
	}
}
