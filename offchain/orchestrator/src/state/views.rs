//! Read-only views: stage status, miner activity, epoch summaries, totals.

use super::*;

impl State {
	/// Backward passes `stage` has done this epoch (0 for a stage the run does not have).
	pub fn backward_done(&self, stage: u16) -> u32 {
		self.stage(stage).map_or(0, |s| s.backward_done)
	}

	/// Per-stage status.
	pub fn stage_status(&self) -> Vec<StageStatus> {
		self.stages
			.iter()
			.enumerate()
			.map(|(i, s)| StageStatus {
				stage: i as u16,
				epoch: s.epoch,
				phase: s.phase,
				miners: s.members.clone(),
				forward_queue: s.forward_queue.len() as u32
					+ if i == 0 && s.phase == Phase::Training {
						self.cfg.backward_quota.saturating_sub(if self.head_issued.0 == s.epoch {
							self.head_issued.1
						} else {
							0
						})
					} else {
						0
					},
				backward_queue: (s.backward_queue.len() + s.recompute.len()) as u32,
				leases: self.leases.values().filter(|l| usize::from(l.stage) == i).count() as u32,
				backward_done: s.backward_done,
				gradients_submitted: s.merge.submissions.len() as u32,
				shards_present: s.merge.present.len() as u32,
				shards_expected: s.merge.plan.as_ref().map_or(0, |p| p.shards.len() as u32),
			})
			.collect()
	}

	/// Per-miner activity (`refused` and `refusals` filled by the caller, which counts refusals outside
	/// the state).
	pub fn miner_activity(&self) -> Vec<MinerActivity> {
		self.miners
			.values()
			.map(|(a, m)| {
				let epoch = self.stages.get(usize::from(m.stage)).map_or(0, |s| s.epoch);
				MinerActivity {
					account: a.clone(),
					stage: m.stage,
					samples_this_epoch: if m.epoch == epoch { m.samples_epoch } else { 0 },
					backward_this_epoch: self.accepted_passes(epoch, m.stage, a),
					samples_total: m.samples_total,
					leases: self.leases_of(a),
					leases_expired: m.leases_expired,
					restarts: m.restarts,
					gone: m.gone,
					refused: 0,
					refusals: Default::default(),
					last_seen_ms: m.last_seen_ms,
				}
			})
			.collect()
	}

	/// Completed epochs, oldest first.
	pub fn summaries(&self) -> Vec<EpochSummary> {
		self.summaries.iter().cloned().collect()
	}

	/// Tokens trained and wire bytes accepted since the run began.
	pub fn totals(&self) -> (u64, u64) {
		(self.tokens_trained, self.wire_bytes)
	}
}
