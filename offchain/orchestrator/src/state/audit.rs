//! The pathway log and the per-epoch audit records validators read.

use super::*;

impl State {
	/// The pathway log of `epoch` from the completed samples (sorted by sample id).
	pub fn pathway_log(&self, epoch: u32) -> PathwayLog {
		let s = usize::from(self.cfg.stages);
		let empty = ObjectEntry { key: String::new(), hash: ContentHash::of(&[]) };
		// Local mode: every record names the inner step of each stage's passes (0 where none was set).
		let local = self.local_mode();
		let steps = |v: &[u32]| -> Vec<u32> {
			if local {
				(0..s).map(|i| v.get(i).copied().unwrap_or(0)).collect()
			} else {
				Vec::new()
			}
		};
		let records = self
			.samples
			.range(u64::from(epoch) * u64::from(self.cfg.backward_quota)..)
			.take_while(|(_, r)| r.epoch == epoch)
			.filter(|(_, r)| r.complete() && r.loss.is_some())
			.filter_map(|(&sample, r)| {
				let fwd: Option<Vec<_>> =
					(0..s).map(|i| r.forward.get(i).cloned().flatten()).collect();
				let bwd: Option<Vec<_>> =
					(0..s).map(|i| r.backward.get(i).cloned().flatten()).collect();
				let (fwd, bwd) = (fwd?, bwd?);
				Some(PathwayRecord {
					sample,
					forward: fwd.iter().map(|(m, _)| m.clone()).collect(),
					backward: bwd.iter().map(|(m, _)| m.clone()).collect(),
					forward_outputs: fwd
						.iter()
						.map(|(_, o)| o.as_ref().map_or(empty.clone(), entry))
						.collect(),
					backward_outputs: bwd
						.iter()
						.enumerate()
						.map(|(i, (_, o))| if i == 0 { None } else { o.as_ref().map(entry) })
						.collect(),
					loss: r.loss.unwrap_or_default(),
					forward_steps: steps(&r.forward_steps),
					backward_steps: steps(&r.backward_steps),
					recomputed: r
						.recomputed
						.iter()
						.map(|(stage, miner, o)| iota_rpc::RecomputedPass {
							stage: *stage,
							miner: miner.clone(),
							output: o.as_ref().map(entry),
						})
						.collect(),
				})
			})
			.collect();
		let inner_states = if local { self.inner_states(epoch) } else { Vec::new() };
		PathwayLog {
			run: self.cfg.run.to_string(),
			epoch,
			stages: self.cfg.stages,
			records,
			inner_states,
		}
	}

	/// Epochs whose head merge is committed but whose pathway log is not written yet. In local mode,
	/// once every stage has left the epoch: its inner-step trails are final only then.
	pub fn pathway_due(&self) -> Vec<u32> {
		let head = if self.local_mode() {
			self.stages.iter().map(|s| s.epoch).min().unwrap_or(0)
		} else {
			self.stages.first().map_or(0, |s| s.epoch)
		};
		self.audits
			.iter()
			.filter(|(e, a)| **e < head && a.pathway_log.is_none())
			.map(|(e, _)| *e)
			.collect()
	}

	/// The audit record of `epoch`.
	pub fn audit(&self, epoch: u32) -> Option<&EpochAudit> {
		self.audits.get(&epoch)
	}
}
