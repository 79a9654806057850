//! Unsynced: load the stage's attested weights before training (module docs of `crate::miner`).

use super::*;

impl Miner {
	pub(super) async fn resync(&mut self) -> Result<Outcome> {
		// Whatever this replica's last submissions left out no longer belongs to the weights it will hold.
		self.feedback = ErrorFeedback::default();
		let e = self.chain.stage_epoch(self.index).await?;
		if e == 0 {
			if self.stage.adam_state().step != 0 {
				self.stage = Stage::new(
					&self.spec.model,
					usize::from(self.index),
					self.spec.seed,
					DType::F32,
					&self.cfg.device,
				)?;
			}
			tracing::info!(stage = self.index, "epoch 0: weights initialised from the run seed");
			self.enter_training(0);
			return Ok(Outcome::Worked);
		}
		let Some(c) = self.chain.committed(e - 1, self.index).await? else {
			tracing::warn!(
				stage = self.index,
				epoch = e,
				"no committed manifest for epoch {} yet; waiting",
				e - 1
			);
			return Ok(Outcome::Idle(self.cfg.resync_wait));
		};
		if self.epoch == e && ContentHash(self.stage.state_hash()?) == c.state_hash {
			self.enter_training(e);
			return Ok(Outcome::Worked);
		}
		let Some((key, hash)) = c.checkpoint else {
			tracing::warn!(
				stage = self.index,
				epoch = e,
				"the stage's latest manifest has no checkpoint; not training on unverified weights, waiting for the next merge to publish one"
			);
			return Ok(Outcome::Idle(self.cfg.resync_wait));
		};
		let get = match self.orch.presign_get(vec![key.clone()]).await {
			Ok(v) if v.len() == 1 => {
				v.into_iter().next().ok_or_else(|| bad("empty presign answer"))?
			},
			Ok(v) => return Err(bad(format!("presignGet answered {} URLs for one key", v.len()))),
			Err(err) => {
				tracing::warn!(stage = self.index, epoch = e, %key, error = %err, "no GET for the checkpoint; not training, retrying later");
				return Ok(Outcome::Idle(self.cfg.resync_wait));
			},
		};
		let bytes = self
			.io
			.get(&get, &hash)
			.await
			.map_err(|err| MinerError::storage("stage checkpoint", err))?;
		self.metrics.bytes_down.inc_by(bytes.len() as u64);
		self.stage.load_checkpoint(&bytes, &c.state_hash.0)?;
		tracing::info!(stage = self.index, epoch = e, state = %c.state_hash, "loaded the attested checkpoint");
		self.enter_training(e);
		Ok(Outcome::Worked)
	}

	pub(super) fn enter_training(&mut self, epoch: u32) {
		self.epoch = epoch;
		self.acc.clear();
		self.feedback_next = None;
		self.kept.clear();
		self.stage.zero_grad();
		self.stats = EpochStats::new();
		self.metrics.epoch.set(i64::from(epoch));
		self.phase = Phase::Training;
	}
}
