//! Which stage a newly registered miner holds (docs/design.md §3 step 1).

use crate::{seed::SeededRng, Seed, StageId};
use alloc::vec::Vec;

/// Why no stage could be assigned.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum AssignError {
	/// The run has no stages (`miners_per_stage` is empty) or more than `StageId::MAX + 1`.
	NoStages,
	/// Every stage already holds `max_per_stage` miners.
	AllStagesFull,
}

/// The stage with the fewest miners; among equally empty stages the seed picks one uniformly, so no
/// party can steer a miner into a chosen stage without controlling the seed.
///
/// `miners_per_stage[s]` is the current member count of stage `s`; stages holding `max_per_stage` or
/// more are not eligible.
///
/// Errors: [`AssignError::NoStages`], [`AssignError::AllStagesFull`].
pub fn assign_stage(
	miners_per_stage: &[u32],
	max_per_stage: u32,
	seed: &Seed,
) -> Result<StageId, AssignError> {
	if miners_per_stage.is_empty()
		|| miners_per_stage.len() > usize::from(StageId::MAX).saturating_add(1)
	{
		return Err(AssignError::NoStages);
	}
	let fewest = miners_per_stage
		.iter()
		.copied()
		.filter(|&c| c < max_per_stage)
		.min()
		.ok_or(AssignError::AllStagesFull)?;
	let tied: Vec<StageId> = miners_per_stage
		.iter()
		.enumerate()
		.filter(|(_, &c)| c == fewest)
		.filter_map(|(s, _)| StageId::try_from(s).ok())
		.collect();
	let mut rng = SeededRng::new("iota-rs assign_stage v1", seed, &[]);
	let pick = usize::try_from(rng.below(tied.len() as u64)).unwrap_or(0);
	tied.get(pick).copied().ok_or(AssignError::NoStages)
}

#[cfg(test)]
mod tests {
	use super::*;

	#[test]
	fn picks_the_emptiest_stage() {
		assert_eq!(assign_stage(&[2, 1, 2], 8, &[0; 32]), Ok(1));
		assert_eq!(assign_stage(&[3, 3, 0], 8, &[7; 32]), Ok(2));
	}

	#[test]
	fn full_stages_are_skipped() {
		assert_eq!(assign_stage(&[1, 0], 1, &[0; 32]), Ok(1));
		assert_eq!(assign_stage(&[2, 2], 2, &[0; 32]), Err(AssignError::AllStagesFull));
		assert_eq!(assign_stage(&[], 2, &[0; 32]), Err(AssignError::NoStages));
	}

	#[test]
	fn ties_are_broken_by_the_seed() {
		let picks: alloc::collections::BTreeSet<StageId> =
			(0u8..64).map(|i| assign_stage(&[0, 0, 0, 0], 8, &[i; 32]).unwrap()).collect();
		assert_eq!(picks.len(), 4, "64 seeds should reach every tied stage");
		assert_eq!(assign_stage(&[0, 0, 0], 8, &[9; 32]), assign_stage(&[0, 0, 0], 8, &[9; 32]));
	}
}
