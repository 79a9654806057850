//! Merging: submit the merge vector, reduce this miner's shards, assemble the mean, apply the
//! optimizer step, attest and upload the checkpoint.

use super::*;

impl Miner {
	pub(super) fn enter_merge(&mut self, epoch: u32, member: bool) {
		self.kept.clear();
		self.rebuilt = None;
		self.phase = Phase::Merging(MergeState {
			epoch,
			member,
			round: None,
			reduced: Vec::new(),
			applied: None,
			applied_to: Vec::new(),
			checkpoint: None,
			attested: false,
		});
	}

	pub(super) async fn upload_gradient(
		&mut self,
		epoch: u32,
		output: ObjectPut,
	) -> Result<Outcome> {
		if epoch != self.epoch {
			if epoch > self.epoch {
				self.phase = Phase::Unsynced;
			}
			return Err(bad(format!(
				"gradient upload for epoch {epoch}, weights held are of epoch {}",
				self.epoch
			)));
		}
		if self.local.is_some() && self.acc.count == 0 {
			self.prepare_pseudo_gradient()?;
		}
		if self.acc.count > 0 {
			// The orchestrator takes the pseudo-gradient only with the state it came from reported.
			self.report_inner_states().await?;
		}
		if let Some(Fault::SlowUpload { ms, stage }) = self.fault() {
			if stage == self.index && self.acc.count > 0 {
				tracing::warn!(stage, epoch, ms, "fault: gradient upload delayed");
				tokio::time::sleep(std::time::Duration::from_millis(ms)).await;
			}
		}
		if self.acc.count == 0 {
			tracing::info!(
				stage = self.index,
				epoch,
				"no samples this epoch: not a merge member, will apply the step"
			);
			self.enter_merge(epoch, false);
			return Ok(Outcome::Worked);
		}
		let codec = self.spec.merge_codec;
		let p = self.acc.sum.len() as u64;
		// A codec that carries error feedback in this mode sends the sum plus what earlier submissions
		// left out; the residual it leaves now is kept once this merge is committed (a restarted round
		// encodes the same sum again).
		let (bytes, next) = crate::merge::submission_with_feedback(
			&self.spec.training,
			codec,
			&self.feedback,
			&self.acc.sum,
		)?;
		self.feedback_next = next;
		let chunk_hashes = crate::merge::chunk_hashes(codec, &bytes, p);
		let size = bytes.len() as u64;
		let hash = self
			.io
			.put(&output.put, Bytes::from(bytes))
			.await
			.map_err(|e| MinerError::storage("gradient submission", e))?;
		self.metrics.bytes_up.inc_by(size);
		let submission = GradientSubmission {
			epoch,
			gradient: TensorRef {
				key: output.key,
				hash,
				size,
				shape: vec![self.stage.param_count() as u64],
			},
			chunk_hashes,
			samples: self.acc.count,
		};
		match self.orch.submit_gradient(submission).await {
			Ok(()) => {},
			// Already accepted this round (a retried call whose first answer was lost).
			Err(e) if e.code() == Some(ErrorCode::Invalid) => {
				tracing::warn!(stage = self.index, epoch, error = %e, "gradient submission refused as invalid");
			},
			Err(e) => return Err(e),
		}
		tracing::info!(
			stage = self.index,
			epoch,
			samples = self.acc.count,
			bytes = size,
			"gradient submitted"
		);
		// The sum is kept until the epoch ends: a merge round that times out restarts with fresh submissions.
		self.enter_merge(epoch, true);
		Ok(Outcome::Worked)
	}

	/// Local mode: apply the pending inner step, then make the merge vector the pseudo-gradient
	/// ([`iota_model::optim::pseudo_gradient`]: `(W_global − W_local) · samples`, so the merge's weighted
	/// mean is the sample-weighted mean delta). Prepared once per epoch, when the miner leaves training
	/// (its upload, or the stage's `Idle(Merging)`), before any outer step: a restarted round submits
	/// the same vector, while the weights may already hold a timed-out round's outer step.
	///
	/// # Errors
	/// The inner step or the pseudo-gradient is refused (NaN/Inf).
	pub(super) fn prepare_pseudo_gradient(&mut self) -> Result<()> {
		self.inner_step()?;
		let Some(l) = &self.local else { return Ok(()) };
		if l.samples == 0 {
			return Ok(());
		}
		let w = self.stage.flat_params()?;
		self.acc.sum = iota_model::optim::pseudo_gradient(&l.global, &w, l.samples)
			.map_err(iota_model::Error::from)?;
		self.acc.count = l.samples;
		if let Some(Fault::ScalePseudoGradient(f)) = self.fault() {
			self.acc.sum.iter_mut().for_each(|x| *x *= f);
		}
		Ok(())
	}

	/// During a merge: if the stage asks for gradients again (a restarted round), submit the kept sum.
	pub(super) async fn resubmit_if_asked(&mut self, m: &mut MergeState) -> Result<()> {
		if self.accumulated() == 0 {
			return Ok(());
		}
		match self.orch.get_work(self.index).await? {
			Work::UploadGradient { epoch, output } if epoch == m.epoch => {
				tracing::info!(
					stage = self.index,
					epoch,
					"the merge restarted; submitting the gradient again"
				);
				self.upload_gradient(epoch, output).await?;
				m.member = true;
				m.round = None;
				m.reduced.clear();
				// The new round commits only what its members attest (and uploads the checkpoint it asks
				// for): a step applied in the timed-out round is kept (the resubmitted sum is the same, so
				// is its mean), but its attestation and checkpoint are sent again.
				m.checkpoint = None;
				m.attested = false;
			},
			Work::Forward(ForwardWork { lease, .. })
			| Work::Backward(BackwardWork { lease, .. }) => {
				// The stage moved on while this miner was merging; hand the item back.
				let _ = self.orch.release_lease(lease).await;
			},
			Work::Idle { reason: IdleReason::Forfeited, .. } => {
				// Found silent after a round restarted (its submission went with the old round): its
				// passes were counted lost. It drops the gradient (and the error feedback of the
				// dropped submission) and follows the merge as a replica without samples.
				self.drop_forfeited("merging")?;
				m.member = false;
				m.round = None;
				m.reduced.clear();
				m.checkpoint = None;
				m.attested = false;
			},
			_ => {},
		}
		Ok(())
	}

	pub(super) async fn merge_step(&mut self, mut m: MergeState) -> Result<Outcome> {
		let view = match self.orch.get_manifest(m.epoch).await {
			Ok(v) => v,
			Err(e) if matches!(e.code(), Some(ErrorCode::Unknown | ErrorCode::WrongPhase)) => {
				// An epoch the orchestrator no longer knows, its stage past it on chain: this
				// replica missed the merge (a follower waits through a whole training phase).
				if e.code() == Some(ErrorCode::Unknown)
					&& self.chain.stage_epoch(self.index).await? > m.epoch
				{
					self.phase = Phase::Unsynced;
				}
				return Ok(Outcome::Idle(self.cfg.merge_poll));
			},
			Err(e) => return Err(e),
		};
		let outcome = match view {
			MergeView::Reducing { .. } if !m.member && self.accumulated() == 0 => {
				// A replica without samples is no member of any round: it waits for the mean instead of
				// asking for shards the orchestrator would refuse it.
				self.phase = Phase::Merging(m);
				return Ok(Outcome::Idle(self.cfg.merge_poll));
			},
			MergeView::Reducing { .. } => {
				match self.orch.get_shards(m.epoch).await {
					Ok(a) => {
						if m.round != Some(a.round) {
							m.round = Some(a.round);
							m.reduced.clear();
						}
						m.member = true;
						// Shards already accepted are not sent twice; a failure keeps the progress.
						let r = self.reduce(&a, m.epoch, &mut m.reduced).await;
						if let Err(e) = r {
							self.phase = Phase::Merging(m);
							return Err(e);
						}
					},
					// Still uploading, or this miner is not in the round (it joined late, had no samples,
					// or the round restarted and wants fresh submissions).
					Err(e)
						if matches!(e.code(), Some(ErrorCode::WrongPhase | ErrorCode::Invalid)) =>
					{
						self.resubmit_if_asked(&mut m).await?;
					},
					Err(e) => return Err(e),
				}
				self.phase = Phase::Merging(m);
				return Ok(Outcome::Idle(self.cfg.merge_poll));
			},
			MergeView::Ready { shards, samples, checkpoint } => {
				let to: Vec<ContentHash> = shards.iter().map(|s| s.object.hash).collect();
				if m.applied.is_some() && self.local.is_some() && m.applied_to != to {
					// Local mode: a restarted round with other members has another mean. The outer
					// step is a function of the epoch's start, so apply it again from there, as a
					// replica applying it for the first time does, and attest the new state.
					tracing::warn!(
						stage = self.index,
						epoch = m.epoch,
						"the merge's mean changed; applying the outer step again"
					);
					m.applied = None;
					m.checkpoint = None;
					m.attested = false;
				}
				if m.applied.is_none() {
					// Downloads and checks first; the step itself is synchronous, and recorded before the
					// next await, so it is applied exactly once whatever fails afterwards.
					m.applied = Some(self.apply_merge(m.epoch, &shards, samples).await?);
					m.applied_to = to;
					self.phase = Phase::Merging(m.clone());
				}
				if let (Some(put), None) = (checkpoint, &m.checkpoint) {
					m.checkpoint = Some(self.upload_checkpoint(put).await?);
					self.phase = Phase::Merging(m.clone());
				}
				// Only members attest (a replica's attestation would be refused).
				if !m.attested && m.member {
					let state_hash = m.applied.ok_or_else(|| bad("no state after the step"))?;
					let attest = SubmitStateHash {
						epoch: m.epoch,
						state_hash,
						checkpoint: m.checkpoint.clone(),
					};
					match self.orch.submit_state_hash(attest).await {
						Ok(()) => {},
						Err(e) if e.code() == Some(ErrorCode::Invalid) => {
							tracing::debug!(error = %e, "attestation refused as invalid (a non-member or a repeat)");
						},
						Err(e) => {
							self.phase = Phase::Merging(m);
							return Err(e);
						},
					}
					m.attested = true;
				}
				Outcome::Idle(self.cfg.merge_poll)
			},
			MergeView::Committed { state_hash } => {
				match m.applied {
					Some(h) if h == state_hash => {
						self.finish_epoch(m.epoch)?;
						return Ok(Outcome::Worked);
					},
					Some(h) => {
						tracing::error!(stage = self.index, epoch = m.epoch, ours = %h, committed = %state_hash, "this replica's state differs from the committed one; resynchronising from the checkpoint");
					},
					None => {
						tracing::warn!(
							stage = self.index,
							epoch = m.epoch,
							"the merge was committed before this miner applied it; resynchronising"
						);
					},
				}
				// Resynchronise after a poll's pause: the chain's best block may not hold the commit the
				// orchestrator acted on yet, and an immediate resync would come straight back here (the
				// floor makes it wait for the commit).
				self.resync_floor = Some((m.epoch + 1, Instant::now()));
				self.phase = Phase::Unsynced;
				return Ok(Outcome::Idle(self.cfg.merge_poll));
			},
		};
		self.phase = Phase::Merging(m);
		Ok(outcome)
	}

	pub(super) fn finish_epoch(&mut self, epoch: u32) -> Result<()> {
		let secs = self.stats.started.elapsed().as_secs_f64().max(1e-9);
		let tokens = (self.stats.forwards + self.stats.backwards) * self.spec.tokens_per_sample();
		let loss = (self.stats.loss_n > 0).then(|| self.stats.loss_sum / self.stats.loss_n as f64);
		self.metrics.merges.inc();
		if let Some(next) = self.feedback_next.take() {
			self.feedback = next;
		}
		let loss = loss.map_or_else(|| "-".to_string(), |l| format!("{l:.4}"));
		let (inner, stale) = self.local.as_ref().map_or((0, 0), |l| (l.steps, l.stale));
		tracing::info!(
			stage = self.index,
			epoch,
			forwards = self.stats.forwards,
			backwards = self.stats.backwards,
			inner_steps = inner,
			stale_backwards = stale,
			tokens_per_s = format!("{:.0}", tokens as f64 / secs),
			loss,
			"epoch merged"
		);
		self.enter_training(epoch + 1)
	}

	/// Whether `key` is a reduced shard of this run, stage and `epoch`.
	pub(super) fn is_own_shard_key(&self, key: &str, epoch: u32) -> bool {
		matches!(
			keys::parse(key),
			Ok(ObjectKey::ReducedShard { run, epoch: e, stage, .. })
				if run == self.run_id && e == u64::from(epoch) && stage == u32::from(self.index)
		)
	}

	/// Reduce and submit the shards of `a` not in `done`, adding each accepted one to `done`.
	pub(super) async fn reduce(
		&mut self,
		a: &ShardAssignment,
		epoch: u32,
		done: &mut Vec<u32>,
	) -> Result<()> {
		let p = self.stage.param_count() as u64;
		if a.epoch != epoch || a.param_count != p {
			return Err(bad(format!(
				"shard assignment for epoch {} with P = {}, expected epoch {epoch}, P = {p}",
				a.epoch, a.param_count
			)));
		}
		let codec = self.spec.merge_codec;
		let whole = crate::merge::submission_len(codec, p);
		for s in &a.submissions {
			if s.object.size != whole {
				return Err(bad(format!(
					"submission of {} is {} bytes, expected {whole} ({p} elements in {codec})",
					s.miner, s.object.size,
				)));
			}
		}
		for task in &a.shards {
			if done.contains(&task.shard) {
				continue;
			}
			let [start, end] = task.range;
			if start >= end || end > p {
				return Err(
					crate::merge::MergeError::BadRange { start, end, param_count: p }.into()
				);
			}
			let span = chunk_span(codec, start, end, p).bytes;
			let mut spans = Vec::with_capacity(a.submissions.len());
			for s in &a.submissions {
				let b = self
					.io
					.get_range(&s.object.get, span.clone())
					.await
					.map_err(|e| MinerError::storage("submission span", e))?;
				self.metrics.bytes_down.inc_by(b.len() as u64);
				spans.push(b);
			}
			let inputs: Vec<SpanInput<'_>> = a
				.submissions
				.iter()
				.zip(&spans)
				.map(|(s, b)| SpanInput {
					samples: s.samples,
					chunk_hashes: &s.chunk_hashes,
					span: b,
				})
				.collect();
			let bytes = crate::merge::reduce_shard_bytes(codec, &inputs, start, end, p)?;
			let size = bytes.len() as u64;
			let hash = self
				.io
				.put(&task.output.put, Bytes::from(bytes))
				.await
				.map_err(|e| MinerError::storage("reduced shard", e))?;
			self.metrics.bytes_up.inc_by(size);
			let reduced =
				TensorRef { key: task.output.key.clone(), hash, size, shape: vec![end - start] };
			match self
				.orch
				.submit_shard(SubmitShard { epoch, round: a.round, shard: task.shard, reduced })
				.await
			{
				Ok(()) => tracing::debug!(
					stage = self.index,
					epoch,
					round = a.round,
					shard = task.shard,
					"shard reduced"
				),
				// Already accepted (an answer lost in a retry) or no longer ours: do not send it again.
				Err(e) if e.code() == Some(ErrorCode::Invalid) => {
					tracing::warn!(stage = self.index, epoch, shard = task.shard, error = %e, "shard refused as invalid")
				},
				Err(e) => return Err(e),
			}
			done.push(task.shard);
		}
		Ok(())
	}

	pub(super) async fn apply_merge(
		&mut self,
		epoch: u32,
		shards: &[ReducedShard],
		samples: u32,
	) -> Result<ContentHash> {
		let p = self.stage.param_count() as u64;
		if samples == 0 {
			return Err(bad("a merge of zero samples"));
		}
		let mut blobs = Vec::with_capacity(shards.len());
		for s in shards {
			if !self.is_own_shard_key(&s.object.key, epoch) {
				return Err(bad(format!(
					"reduced shard key {:?} is not of this run, stage {} and epoch {epoch}",
					s.object.key, self.index
				)));
			}
			let [start, end] = s.range;
			let expected =
				crate::merge::shard_len(self.spec.merge_codec, end.saturating_sub(start), p);
			if s.object.size != expected || end > p {
				return Err(bad(format!(
					"reduced shard {} announces {} bytes for range [{start}, {end}) of P = {p}",
					s.shard, s.object.size
				)));
			}
			let b = self
				.io
				.get(&s.object.get, &s.object.hash)
				.await
				.map_err(|e| MinerError::storage("reduced shard", e))?;
			self.metrics.bytes_down.inc_by(b.len() as u64);
			blobs.push(b);
		}
		let inputs: Vec<ShardInput<'_>> = shards
			.iter()
			.zip(&blobs)
			.map(|(s, b)| ShardInput {
				shard: s.shard,
				range: s.range,
				hash: &s.object.hash,
				bytes: b,
			})
			.collect();
		let mean = crate::merge::assemble_mean(self.spec.merge_codec, &inputs, p)?;
		match &self.local {
			None => {
				let report = self.stage.apply_gradient(
					&mean,
					&self.spec.step_options(epoch),
					samples as usize,
				)?;
				let state = ContentHash(self.stage.state_hash()?);
				tracing::info!(stage = self.index, epoch, samples, grad_norm = report.grad_norm, state = %state, "AdamW step applied");
				Ok(state)
			},
			Some(l) => {
				// From the epoch's global weights and outer state, whatever this replica's inner steps
				// (or an earlier round's step) made of them.
				if let Some(start) = &l.outer_start {
					self.stage.restore_outer_state(start.clone())?;
				}
				self.stage.apply_outer(&l.global, &mean, &l.outer)?;
				let state = ContentHash(self.stage.state_hash()?);
				let norm = iota_model::optim::l2_norm(&mean);
				tracing::info!(stage = self.index, epoch, samples, inner_steps = l.steps, pseudo_gradient_norm = norm, state = %state, "outer step applied");
				Ok(state)
			},
		}
	}

	/// Upload the stage checkpoint (after the step) where the seed-picked replica was asked to.
	pub(super) async fn upload_checkpoint(&mut self, put: ObjectPut) -> Result<TensorRef> {
		let bytes = self.stage.to_checkpoint()?;
		let size = bytes.len() as u64;
		let hash = self
			.io
			.put(&put.put, Bytes::from(bytes))
			.await
			.map_err(|e| MinerError::storage("stage checkpoint", e))?;
		self.metrics.bytes_up.inc_by(size);
		Ok(TensorRef { key: put.key, hash, size, shape: vec![size] })
	}
}
