//! The weight vector a validator commits to and reveals (pallet-iota `commit_weights`, `reveal_weights`)
//! from CLASP scores.
//!
//! The pallet refuses a vector that is empty, longer than the miner count, names a miner twice or a
//! miner it does not know (e.g. one slashed this epoch), or is all zeros; it then normalises what it
//! stores with [`iota_primitives::normalize_weights`] (each weight over the sum, in parts per billion)
//! before the stake-weighted median ([`iota_primitives::stake_weighted_median`]). Only relative values
//! matter, so the best score is scaled to `u16::MAX`:
//!
//! ```text
//! w_m = round(score_m / max_k score_k · 65535), raised to 1 when score_m > 0 (a positive score never
//!       becomes a zero weight); non-finite or negative scores count as 0
//! ```
//!
//! Miners not registered on chain are dropped; the vector is sorted by account bytes.

use std::collections::{BTreeMap, BTreeSet};

use iota_rpc::AccountId;

/// Why no weight vector can be built.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum WeightsError {
	/// No scored miner is registered on chain.
	#[error("no scored miner is registered on chain")]
	NoKnownMiner,
	/// Every registered miner scored zero (the pallet refuses an all-zero vector).
	#[error("every registered miner scored zero")]
	AllZero,
}

/// Builds the weight vector from per-miner scores (module docs). `registered` is the chain's
/// miner set (`IotaClient::miners`); duplicates in `scores` are summed.
///
/// # Errors
/// [`WeightsError::NoKnownMiner`], [`WeightsError::AllZero`].
pub fn weight_vector(
	scores: &[(AccountId, f64)],
	registered: &BTreeSet<AccountId>,
) -> Result<Vec<(AccountId, u16)>, WeightsError> {
	let mut sum: BTreeMap<AccountId, f64> = BTreeMap::new();
	for (m, s) in scores {
		if registered.contains(m) {
			let s = if s.is_finite() && *s > 0.0 { *s } else { 0.0 };
			*sum.entry(m.clone()).or_insert(0.0) += s;
		}
	}
	if sum.is_empty() {
		return Err(WeightsError::NoKnownMiner);
	}
	let max = sum.values().copied().fold(0.0, f64::max);
	if max <= 0.0 {
		return Err(WeightsError::AllZero);
	}
	Ok(sum
		.into_iter()
		.map(|(m, s)| {
			let w = (s / max * f64::from(u16::MAX)).round().clamp(0.0, f64::from(u16::MAX)) as u16;
			(m, if s > 0.0 { w.max(1) } else { 0 })
		})
		.collect())
}

#[cfg(test)]
mod tests {
	use super::*;
	use iota_primitives::normalize_weights;

	fn acc(i: u8) -> AccountId {
		AccountId::from([i; 32])
	}

	#[test]
	fn scaled_sorted_and_filtered() {
		let registered: BTreeSet<AccountId> = [1, 2, 3, 4].map(acc).into_iter().collect();
		let scores = vec![
			(acc(3), 10.0),
			(acc(1), 20.0),
			(acc(9), 50.0),
			(acc(2), 0.0),
			(acc(4), 1e-9),
			(acc(3), 10.0),
		];
		let w = weight_vector(&scores, &registered).unwrap();
		assert_eq!(w, vec![(acc(1), 65535), (acc(2), 0), (acc(3), 65535), (acc(4), 1)]);
		// What the pallet stores after normalisation: parts per billion, summing to at most 10^9.
		let ppb = normalize_weights(&w.iter().map(|(_, w)| u128::from(*w)).collect::<Vec<_>>());
		assert!(ppb.iter().map(|&p| u64::from(p)).sum::<u64>() <= 1_000_000_000);
		assert_eq!(ppb[0], ppb[2]);
	}

	#[test]
	fn refused_vectors() {
		let registered: BTreeSet<AccountId> = [acc(1)].into_iter().collect();
		assert_eq!(weight_vector(&[(acc(2), 1.0)], &registered), Err(WeightsError::NoKnownMiner));
		assert_eq!(weight_vector(&[], &registered), Err(WeightsError::NoKnownMiner));
		assert_eq!(weight_vector(&[(acc(1), 0.0)], &registered), Err(WeightsError::AllZero));
		assert_eq!(weight_vector(&[(acc(1), f64::NAN)], &registered), Err(WeightsError::AllZero));
		assert_eq!(weight_vector(&[(acc(1), -3.0)], &registered), Err(WeightsError::AllZero));
	}
}
