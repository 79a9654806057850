//! Time accounting: where each stage's epoch goes ([`StageTime`]: training, merge, chain wait, idle),
//! folded from the timestamps the events already carry, so a replay after a restart rebuilds the same
//! figures. Instants are ms since the Unix epoch on the orchestrator's clock.
//!
//! A stage's epoch runs from entering it (the previous merge's commit seen or predicted, or its first
//! lease of the first epoch the orchestrator saw) to its commit seen or predicted:
//! - `training`: Training-phase time with at least one of the stage's leases out (a union, so two miners
//!   working at once count once);
//! - `chain_wait`: the time the stage could not go on for the chain: for a call whose effect the driver
//!   predicted, from the call becoming due to the pool's acceptance ([`Event::ChainPredicted`]); for any
//!   other, submission to best-block inclusion ([`Event::ChainWait`]);
//! - `merge`: the rest of `WeightsUploading` and `Merging` (gradient upload, butterfly, step);
//! - `idle`: the rest of the Training phase (pipeline bubbles, waiting for the next block).

use super::*;

/// One stage's clock in its current epoch.
#[derive(Clone, Debug, PartialEq, Default)]
pub(super) struct StageClock {
	/// When the stage entered the epoch.
	started_ms: Option<u64>,
	/// Leases of the stage's epoch out now.
	open_leases: u32,
	/// Since when at least one has been out.
	busy_since_ms: Option<u64>,
	/// Closed busy intervals, summed.
	busy_ms: u64,
	/// When the stage was seen leaving Training.
	left_training_ms: Option<u64>,
	/// When its backward quota was reached.
	pub(super) quota_ms: Option<u64>,
	/// Chain waits of extrinsics sent while it trained / while it merged.
	wait_training_ms: u64,
	wait_merge_ms: u64,
}

impl StageClock {
	/// A clock for an epoch entered at `at_ms` with `open` of its leases already out.
	pub(super) fn entered(at_ms: u64, open: u32) -> Self {
		Self {
			started_ms: Some(at_ms),
			open_leases: open,
			busy_since_ms: (open > 0).then_some(at_ms),
			..Default::default()
		}
	}

	/// A lease of the epoch went out at `at_ms`.
	pub(super) fn lease_out(&mut self, at_ms: u64) {
		if self.open_leases == 0 {
			self.busy_since_ms = Some(at_ms);
		}
		self.open_leases += 1;
	}

	/// A lease of the epoch came back (completed, released or expired) at `at_ms`.
	pub(super) fn lease_in(&mut self, at_ms: u64) {
		if self.open_leases == 0 {
			return;
		}
		self.open_leases -= 1;
		if self.open_leases == 0 {
			if let Some(since) = self.busy_since_ms.take() {
				self.busy_ms += at_ms.saturating_sub(since);
			}
		}
	}

	fn busy_until(&self, at_ms: u64) -> u64 {
		self.busy_ms + self.busy_since_ms.map_or(0, |s| at_ms.saturating_sub(s))
	}

	/// When merge uploads first opened in the epoch (the backward quota reached, or the stage seen
	/// leaving Training, whichever came first), ms since the Unix epoch.
	pub(super) fn uploads_opened_ms(&self) -> Option<u64> {
		[self.quota_ms, self.left_training_ms].into_iter().flatten().min()
	}

	/// The stage was seen leaving Training at `at_ms` (the first time counts).
	pub(super) fn left_training(&mut self, at_ms: u64) {
		if self.left_training_ms.is_none() {
			let busy = self.busy_until(at_ms);
			self.busy_ms = busy;
			self.busy_since_ms = None;
			self.open_leases = 0;
			self.left_training_ms = Some(at_ms);
		}
	}

	/// An extrinsic carrying a call of this stage waited `ms` for inclusion, sent while the stage was
	/// `training` (else merging).
	pub(super) fn chain_wait(&mut self, ms: u64, training: bool) {
		if training {
			self.wait_training_ms += ms;
		} else {
			self.wait_merge_ms += ms;
		}
	}

	/// When the stage's training ended for the "quota to next sample" figure: its quota, else the
	/// moment it left Training (a timed-out phase).
	pub(super) fn training_end_ms(&self) -> Option<u64> {
		self.quota_ms.or(self.left_training_ms)
	}

	/// The split of the epoch whose commit was seen at `commit_ms`; `first_sample_ms` (the epoch's
	/// first sample at the head) is its start where the stage was not seen entering it (the first epoch
	/// after the orchestrator started).
	pub(super) fn finish(
		&self,
		stage: u16,
		commit_ms: u64,
		first_sample_ms: Option<u64>,
	) -> StageTime {
		let start = self.started_ms.or(first_sample_ms).unwrap_or(commit_ms).min(commit_ms);
		let left = self.left_training_ms.unwrap_or(commit_ms).clamp(start, commit_ms.max(start));
		let training_ms = self.busy_until(left).min(left - start);
		let wait_training = self.wait_training_ms.min(left - start - training_ms);
		let idle_ms = left - start - training_ms - wait_training;
		let in_merge = commit_ms.saturating_sub(left);
		let wait_merge = self.wait_merge_ms.min(in_merge);
		StageTime {
			stage,
			training_ms,
			merge_ms: in_merge - wait_merge,
			chain_wait_ms: wait_training + wait_merge,
			idle_ms,
		}
	}
}

#[cfg(test)]
mod tests {
	use super::*;

	#[test]
	fn the_parts_partition_the_span() {
		// Enters at 1 000; leases 1 000–3 000 and 2 000–4 000 (union 3 000 ms), a gap, 6 000–7 000;
		// quota at 7 000; the phase change waits 500 ms and is seen at 8 000; merging until the commit
		// seen at 12 000, 1 200 ms of it waiting for two extrinsics.
		let mut c = StageClock::entered(1_000, 0);
		c.lease_out(1_000);
		c.lease_out(2_000);
		c.lease_in(3_000);
		c.lease_in(4_000);
		c.lease_out(6_000);
		c.lease_in(7_000);
		c.quota_ms = Some(7_000);
		c.chain_wait(500, true);
		c.left_training(8_000);
		c.chain_wait(700, false);
		c.chain_wait(500, false);
		let t = c.finish(2, 12_000, Some(0));
		assert_eq!(
			t,
			StageTime {
				stage: 2,
				training_ms: 4_000,
				merge_ms: 2_800,
				chain_wait_ms: 1_700,
				idle_ms: 2_500
			}
		);
		assert_eq!(t.total_ms(), 11_000);
		assert_eq!(c.training_end_ms(), Some(7_000));
	}

	#[test]
	fn a_lease_out_when_training_ends_is_cut_there_and_nothing_goes_negative() {
		let mut c = StageClock::entered(0, 1);
		c.lease_out(500);
		c.left_training(2_000); // a timeout: two leases still out
		c.lease_in(2_500); // comes back after: not counted again
		c.chain_wait(10_000, true); // longer than the phase: clamped
		c.chain_wait(10_000, false);
		let t = c.finish(0, 3_000, None);
		assert_eq!(t.training_ms, 2_000);
		assert_eq!((t.idle_ms, t.merge_ms, t.chain_wait_ms), (0, 0, 1_000));
		assert_eq!(t.total_ms(), 3_000);
		assert_eq!(c.training_end_ms(), Some(2_000));
		// The first epoch: the stage's span starts at the epoch's first sample; a commit seen before
		// anything else is an empty span.
		let mut first = StageClock::default();
		first.lease_out(4_000);
		first.lease_in(5_000);
		let t = first.finish(1, 9_000, Some(1_000));
		assert_eq!((t.training_ms, t.idle_ms, t.merge_ms), (1_000, 7_000, 0));
		assert_eq!(StageClock::default().finish(1, 5, None).total_ms(), 0);
	}
}
