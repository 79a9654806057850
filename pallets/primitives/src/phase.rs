//! Per-stage phase transitions (docs/design.md §3 step 6): what must hold for a stage to move
//! Training → WeightsUploading → Merging → Training, and the timeout fallback.
//!
//! Rules, for a stage that entered its phase at block `phase_since`, with timeout `t` blocks:
//!
//! | from | to | when | timeout fallback (now ≥ since + t) |
//! |---|---|---|---|
//! | Training | WeightsUploading | `backward_done ≥ backward_quota` | with ≥ 1 backward pass done |
//! | WeightsUploading | Merging | every active miner uploaded its gradient | with ≥ 1 gradient uploaded |
//! | Merging | Training | only by committing the merge ([`complete_merge`]) | back to WeightsUploading: the merge round restarts with the miners still present (a missing shard is reassigned, never filled from local values - ref fault) |

use crate::{Phase, StageReport};

/// What the chain knows of a stage when a transition is requested.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct StageProgress {
	/// The stage's current phase.
	pub phase: Phase,
	/// Block at which the stage entered `phase`.
	pub phase_since: u64,
	/// Backward passes per epoch before the stage merges (run config).
	pub backward_quota: u32,
	/// Miners currently holding the stage (active or leaving).
	pub members: u32,
	/// The orchestrator's report of the work done.
	pub report: StageReport,
}

/// A permitted transition.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct Transition {
	/// The phase the stage moves to.
	pub to: Phase,
	/// Whether the move happened by the timeout fallback rather than by completing the phase's work.
	pub timed_out: bool,
}

/// Why a stage may not move yet.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum PhaseRefusal {
	/// Training: fewer backward passes than the quota and the phase has not timed out.
	QuotaNotReached {
		/// Backward passes done.
		done: u32,
		/// The quota.
		quota: u32,
	},
	/// Training timed out without a single backward pass: there is nothing to merge.
	NoBackwardPasses,
	/// WeightsUploading: some miners have not uploaded and the phase has not timed out.
	GradientsMissing {
		/// Gradients uploaded.
		submitted: u32,
		/// Miners in the stage.
		expected: u32,
	},
	/// WeightsUploading timed out without a single gradient, or the stage has no miners.
	NoGradients,
	/// Merging ends only when the merge manifest is committed (or by timeout).
	MergeNotCommitted,
	/// A merge can be committed only while the stage is Merging.
	NotMerging,
}

/// The idle-member rule of the merge phases: how many of a stage's members count as having submitted
/// their gradient. `members` yields, per member, whether it ran a backward pass this epoch and whether
/// its gradient was accepted; a member that ran none has nothing to submit and counts as done (a miner
/// that got no sample, e.g. on a loaded machine), so the stage does not sit out the phase timeout waiting
/// for it. The orchestrator reports this count as `StageReport::gradients_submitted`.
pub fn gradients_accounted(members: impl IntoIterator<Item = (bool, bool)>) -> u32 {
	members
		.into_iter()
		.filter(|&(worked, submitted)| submitted || !worked)
		.fold(0u32, |n, _| n.saturating_add(1))
}

/// The next phase of a stage at block `now`, given a phase timeout of `timeout` blocks, or why it may not
/// move. Pure: the pallet calls it in `advance_phase`, the orchestrator to know when to ask.
///
/// Errors: every [`PhaseRefusal`] except `NotMerging`.
pub fn next_phase(
	progress: &StageProgress,
	now: u64,
	timeout: u64,
) -> Result<Transition, PhaseRefusal> {
	let timed_out = now >= progress.phase_since.saturating_add(timeout);
	let report = progress.report;
	match progress.phase {
		Phase::Training => {
			if report.backward_done >= progress.backward_quota {
				Ok(Transition { to: Phase::WeightsUploading, timed_out: false })
			} else if timed_out && report.backward_done > 0 {
				Ok(Transition { to: Phase::WeightsUploading, timed_out: true })
			} else if timed_out {
				Err(PhaseRefusal::NoBackwardPasses)
			} else {
				Err(PhaseRefusal::QuotaNotReached {
					done: report.backward_done,
					quota: progress.backward_quota,
				})
			}
		},
		Phase::WeightsUploading => {
			if progress.members == 0 || report.gradients_submitted == 0 && timed_out {
				Err(PhaseRefusal::NoGradients)
			} else if report.gradients_submitted >= progress.members {
				Ok(Transition { to: Phase::Merging, timed_out: false })
			} else if timed_out {
				Ok(Transition { to: Phase::Merging, timed_out: true })
			} else {
				Err(PhaseRefusal::GradientsMissing {
					submitted: report.gradients_submitted,
					expected: progress.members,
				})
			}
		},
		Phase::Merging => {
			if timed_out {
				Ok(Transition { to: Phase::WeightsUploading, timed_out: true })
			} else {
				Err(PhaseRefusal::MergeNotCommitted)
			}
		},
	}
}

/// The phase after a merge commit: Merging → Training (and the stage's epoch advances).
///
/// Errors: [`PhaseRefusal::NotMerging`] from any other phase.
pub fn complete_merge(phase: Phase) -> Result<Phase, PhaseRefusal> {
	match phase {
		Phase::Merging => Ok(Phase::Training),
		_ => Err(PhaseRefusal::NotMerging),
	}
}

#[cfg(test)]
mod tests {
	use super::*;

	#[test]
	fn idle_members_count_as_submitted_and_workers_only_once_accepted() {
		assert_eq!(gradients_accounted([]), 0);
		assert_eq!(gradients_accounted([(true, false), (true, true), (false, false)]), 2);
		assert_eq!(gradients_accounted([(false, true)]), 1);
	}

	fn progress(phase: Phase, backward_done: u32, gradients_submitted: u32) -> StageProgress {
		StageProgress {
			phase,
			phase_since: 100,
			backward_quota: 10,
			members: 2,
			report: StageReport { backward_done, gradients_submitted },
		}
	}

	#[test]
	fn training_moves_at_quota_or_timeout_with_work() {
		let t = |done, now| next_phase(&progress(Phase::Training, done, 0), now, 50);
		assert_eq!(t(10, 101), Ok(Transition { to: Phase::WeightsUploading, timed_out: false }));
		assert_eq!(t(9, 149), Err(PhaseRefusal::QuotaNotReached { done: 9, quota: 10 }));
		assert_eq!(t(9, 150), Ok(Transition { to: Phase::WeightsUploading, timed_out: true }));
		assert_eq!(t(0, 150), Err(PhaseRefusal::NoBackwardPasses));
	}

	#[test]
	fn uploading_waits_for_every_miner_or_timeout() {
		let t = |sub, now| next_phase(&progress(Phase::WeightsUploading, 10, sub), now, 50);
		assert_eq!(t(2, 101), Ok(Transition { to: Phase::Merging, timed_out: false }));
		assert_eq!(t(1, 120), Err(PhaseRefusal::GradientsMissing { submitted: 1, expected: 2 }));
		assert_eq!(t(1, 150), Ok(Transition { to: Phase::Merging, timed_out: true }));
		assert_eq!(t(0, 150), Err(PhaseRefusal::NoGradients));
		let mut empty = progress(Phase::WeightsUploading, 10, 0);
		empty.members = 0;
		assert_eq!(next_phase(&empty, 101, 50), Err(PhaseRefusal::NoGradients));
	}

	#[test]
	fn merging_ends_by_commit_or_restarts_on_timeout() {
		let t = |now| next_phase(&progress(Phase::Merging, 10, 2), now, 50);
		assert_eq!(t(149), Err(PhaseRefusal::MergeNotCommitted));
		assert_eq!(t(150), Ok(Transition { to: Phase::WeightsUploading, timed_out: true }));
		assert_eq!(complete_merge(Phase::Merging), Ok(Phase::Training));
		assert_eq!(complete_merge(Phase::Training), Err(PhaseRefusal::NotMerging));
		assert_eq!(complete_merge(Phase::WeightsUploading), Err(PhaseRefusal::NotMerging));
	}

	#[test]
	fn timeout_saturates_instead_of_overflowing() {
		let p = StageProgress { phase_since: u64::MAX - 1, ..progress(Phase::Merging, 0, 0) };
		assert_eq!(next_phase(&p, u64::MAX - 1, 10), Err(PhaseRefusal::MergeNotCommitted));
	}
}
