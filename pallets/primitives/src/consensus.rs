//! Score consensus: the stake-weighted median of validators' weights per miner (docs/design.md §3 step 8).
//!
//! Each validator's weight vector is first normalised to sum to [`PPB`] (parts per billion), so a
//! validator's scale does not matter, only its relative judgement. The consensus weight of a miner is the
//! lower stake-weighted median of the validators' normalised weights for that miner: the smallest value
//! `v` such that validators voting `≤ v` hold at least half of the voting stake. A coalition holding less
//! than half the stake therefore cannot move a miner's consensus outside the range of honest votes.

use alloc::vec::Vec;
use primitive_types::U256;

/// One, in parts per billion: the fixed-point unit of weights, shares and agreement.
pub const PPB: u32 = 1_000_000_000;

/// Normalise raw weights to parts per billion (floor); all zeros when the weights sum to zero.
/// The result sums to at most [`PPB`] and at least `PPB - len`.
pub fn normalize_weights(weights: &[u128]) -> Vec<u32> {
	// The sum in 256 bits: a saturated u128 sum would give every huge weight a full PPB.
	let total = weights.iter().fold(U256::zero(), |acc, &w| acc.saturating_add(U256::from(w)));
	weights
		.iter()
		.map(|&w| {
			// w ≤ total, so the quotient is at most PPB.
			U256::from(w)
				.saturating_mul(U256::from(PPB))
				.checked_div(total)
				.and_then(|v| u32::try_from(v).ok())
				.unwrap_or(0)
		})
		.collect()
}

/// The slash quorum: whether validators holding `failing` of the `total` active validator stake, all
/// with a `Fail` verdict on a miner in one epoch, reach `quorum_ppb` (parts per billion of the stake).
/// Exact: `floor(failing · PPB / total) ≥ quorum_ppb`, never rounded in the miner's disfavour for an
/// integer quorum. `false` with no stake at all. The pallet slashes on it; anyone can predict it.
pub fn slash_quorum_reached(failing: u128, total: u128, quorum_ppb: u32) -> bool {
	crate::emission::mul_div_floor(failing, u128::from(PPB), total)
		.is_some_and(|share| share >= u128::from(quorum_ppb))
}

/// Lower stake-weighted median of `(value, stake)` votes; `None` when there are no votes or no stake.
/// Votes with zero stake do not count. Sorts `votes` in place.
pub fn stake_weighted_median(votes: &mut [(u32, u128)]) -> Option<u32> {
	votes.sort_unstable();
	let total = votes.iter().fold(0u128, |acc, &(_, s)| acc.saturating_add(s));
	if total == 0 {
		return None;
	}
	let mut below = 0u128;
	for &(value, stake) in votes.iter() {
		below = below.saturating_add(stake);
		// 2·below ≥ total, written so it cannot overflow.
		if below >= total.saturating_sub(below) {
			return Some(value);
		}
	}
	votes.last().map(|&(v, _)| v)
}

#[cfg(test)]
mod tests {
	use super::*;

	#[test]
	fn slash_quorum_is_exact_at_the_boundary() {
		assert!(slash_quorum_reached(1, 2, PPB / 2));
		assert!(!slash_quorum_reached(499_999_999, 1_000_000_000, PPB / 2));
		assert!(slash_quorum_reached(u128::MAX, u128::MAX, PPB));
		assert!(!slash_quorum_reached(0, 0, 1));
		assert!(slash_quorum_reached(1, 3, 333_333_333));
		assert!(!slash_quorum_reached(1, 3, 333_333_334));
	}

	#[test]
	fn median_examples() {
		assert_eq!(stake_weighted_median(&mut []), None);
		assert_eq!(stake_weighted_median(&mut [(5, 0)]), None);
		assert_eq!(stake_weighted_median(&mut [(5, 1)]), Some(5));
		assert_eq!(stake_weighted_median(&mut [(1, 1), (9, 1), (5, 1)]), Some(5));
		// The big staker decides.
		assert_eq!(stake_weighted_median(&mut [(1, 10), (9, 1), (5, 1)]), Some(1));
		// Exactly half: the lower value.
		assert_eq!(stake_weighted_median(&mut [(1, 1), (9, 1)]), Some(1));
	}

	#[test]
	fn normalisation() {
		assert_eq!(normalize_weights(&[1, 1]), alloc::vec![500_000_000, 500_000_000]);
		assert_eq!(normalize_weights(&[0, 0]), alloc::vec![0, 0]);
		assert_eq!(normalize_weights(&[u128::MAX, 0]), alloc::vec![PPB, 0]);
		assert_eq!(normalize_weights(&[1, 2]), alloc::vec![333_333_333, 666_666_666]);
	}
}
