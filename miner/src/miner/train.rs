//! Training: one work item per step (forward, backward, or the gradient upload that starts the
//! merge).

use super::*;

impl Miner {
	pub(super) async fn train_step(&mut self) -> Result<Outcome> {
		if self.local.as_ref().is_some_and(|l| l.sat_out) {
			// The orchestrator holds another trajectory of this epoch for this miner: take no work (its
			// items would come back to it and stall), and resynchronise once the stage has moved on.
			if self.chain.stage_epoch(self.index).await? > self.epoch {
				self.phase = Phase::Unsynced;
				return Ok(Outcome::Worked);
			}
			return Ok(Outcome::Idle(Duration::from_secs(1)));
		}
		let work = self.orch.get_work(self.index).await?;
		match work {
			Work::Idle { reason, retry_after_ms } => {
				if reason == IdleReason::Merging {
					// The stage merges and this miner missed (or had nothing for) the gradient upload.
					// Local mode fixes its merge vector now, before any outer step moves the weights: a
					// restarted round that asks for it again must get `W_global − W_local`, not a
					// difference taken from the outer-stepped weights.
					if self.local.is_some() && self.acc.count == 0 {
						self.prepare_pseudo_gradient()?;
					}
					self.enter_merge(self.epoch, false);
					return Ok(Outcome::Worked);
				}
				if reason == IdleReason::Forfeited {
					// The orchestrator re-listed or counted lost this epoch's passes after this miner
					// fell silent (paused, cut off): other members recompute them, so the gradient kept
					// here would count them twice. It sits the epoch out and follows the stage's merge
					// as a replica without samples (polling the manifest, asking for no shards).
					self.drop_forfeited("training")?;
					self.enter_merge(self.epoch, false);
					return Ok(Outcome::Worked);
				}
				Ok(Outcome::Idle(Duration::from_millis(retry_after_ms.clamp(20, 5_000))))
			},
			Work::UploadGradient { epoch, output } => self.upload_gradient(epoch, output).await,
			Work::Forward(f) => {
				self.lease = Some(f.lease);
				let r = self.forward(f).await;
				self.finish_item(r).await
			},
			Work::Backward(b) => {
				self.lease = Some(b.lease);
				let r = self.backward(b).await;
				self.finish_item(r).await
			},
		}
	}

	pub(super) async fn finish_item(&mut self, r: Result<()>) -> Result<Outcome> {
		self.stage.zero_grad();
		match r {
			Ok(()) => {
				self.lease = None;
				Ok(Outcome::Worked)
			},
			Err(e) => {
				if let Some(lease) = self.lease.take() {
					let gone = matches!(e, MinerError::LeaseExpired { .. })
						|| matches!(e.code(), Some(ErrorCode::LeaseExpired | ErrorCode::Unknown));
					if !gone {
						if let Err(re) = self.orch.release_lease(lease).await {
							tracing::debug!(lease, error = %re, "releasing a failed item's lease");
						}
					}
				}
				Err(e)
			},
		}
	}

	pub(super) fn check_item(&mut self, stage: u16, epoch: u32) -> Result<()> {
		if stage != self.index {
			return Err(bad(format!(
				"work item for stage {stage}, this miner holds stage {}",
				self.index
			)));
		}
		if epoch > self.epoch {
			// A merge went by without this miner: its weights are stale.
			self.phase = Phase::Unsynced;
			return Err(bad(format!(
				"work item of epoch {epoch}, weights held are of epoch {}; resynchronising",
				self.epoch
			)));
		}
		if epoch < self.epoch {
			return Err(bad(format!("stale work item of epoch {epoch} (now {})", self.epoch)));
		}
		Ok(())
	}

	pub(super) fn check_deadline(&self, lease: LeaseId, expires_at_ms: u64) -> Result<()> {
		let now = now_ms();
		if now.saturating_add(self.cfg.lease_margin_ms) > expires_at_ms {
			return Err(MinerError::LeaseExpired {
				lease,
				late_ms: now.saturating_sub(expires_at_ms),
			});
		}
		Ok(())
	}

	pub(super) fn boundary(&self) -> [usize; 3] {
		let [b, t, w] = self.spec.boundary_shape();
		[b as usize, t as usize, w as usize]
	}

	/// Largest wire message of a boundary tensor ([`iota_protocol::encoding::max_wire_bytes`]).
	pub(super) fn max_wire_bytes(&self) -> usize {
		let [b, t, w] = self.boundary();
		iota_protocol::encoding::max_wire_bytes([b as u64, t as u64, w as u64]) as usize
	}

	/// Download, hash-check and decode a boundary tensor of `kind`, requiring exactly `[B, T, w]`.
	pub(super) async fn fetch_tensor(&mut self, obj: &ObjectGet, kind: Kind) -> Result<Tensor> {
		let max = self.max_wire_bytes();
		if obj.size > max as u64 {
			return Err(bad(format!(
				"{} is {} bytes, over the {max}-byte limit for a [B, T, w] tensor",
				obj.key, obj.size
			)));
		}
		let what = if kind == Kind::Activation { "input activation" } else { "output gradient" };
		let bytes = self
			.io
			.get(&obj.get, &obj.hash)
			.await
			.map_err(|e| MinerError::storage(what, e))?;
		self.metrics.bytes_down.inc_by(bytes.len() as u64);
		let [b, t, w] = self.boundary();
		let mut expect = Expect::btw(kind, w, max);
		expect.shape = vec![Some(b), Some(t), Some(w)];
		// In the stage's compute dtype (bf16 under mixed precision), on its device.
		Ok(wire::decode(&bytes, &expect, self.stage.dtype(), &self.cfg.device)?)
	}

	/// Encode (refusing NaN/Inf), upload and describe a boundary tensor.
	pub(super) async fn upload_tensor(
		&mut self,
		t: &Tensor,
		kind: Kind,
		put: &ObjectPut,
	) -> Result<TensorRef> {
		let bytes = wire::encode(t, kind, self.encoding)?;
		let size = bytes.len() as u64;
		let what = if kind == Kind::Activation { "output activation" } else { "input gradient" };
		let hash = self
			.io
			.put(&put.put, Bytes::from(bytes))
			.await
			.map_err(|e| MinerError::storage(what, e))?;
		self.metrics.bytes_up.inc_by(size);
		Ok(TensorRef {
			key: put.key.clone(),
			hash,
			size,
			shape: t.dims().iter().map(|&d| d as u64).collect(),
		})
	}

	pub(super) async fn tokens(
		&mut self,
		sample: u64,
		data: Option<&DataSlice>,
	) -> Result<(Tensor, Tensor)> {
		let slice = data.ok_or_else(|| {
			bad(format!("sample {sample}: no data slice for a stage that reads tokens"))
		})?;
		let before = self.data.downloaded;
		let r = self
			.data
			.sample(&self.spec, self.io.as_ref(), sample, slice, &self.cfg.device)
			.await;
		self.metrics.bytes_down.inc_by(self.data.downloaded - before);
		r
	}

	pub(super) async fn stage_input(
		&mut self,
		sample: u64,
		input: Option<&ObjectGet>,
		data: Option<&DataSlice>,
	) -> Result<Tensor> {
		if self.stage.is_first() {
			Ok(self.tokens(sample, data).await?.0)
		} else {
			let input =
				input.ok_or_else(|| bad(format!("sample {sample}: no input activation")))?;
			self.fetch_tensor(input, Kind::Activation).await
		}
	}

	pub(super) async fn forward(&mut self, f: ForwardWork) -> Result<()> {
		self.check_item(f.stage, f.epoch)?;
		self.check_deadline(f.lease, f.expires_at_ms)?;
		let input = self.stage_input(f.sample, f.input.as_ref(), f.data.as_ref()).await?;
		if self.stage.is_last() {
			let (_, targets) = self.tokens(f.sample, f.data.as_ref()).await?;
			let lf = self.stage.forward_loss(&input, &targets)?;
			let loss = lf.value;
			if !loss.is_finite() {
				return Err(MinerError::Model(iota_model::Error::NonFinite {
					what: "loss".into(),
					index: 0,
				}));
			}
			let grad_in = self
				.stage
				.backward_loss(lf)?
				.ok_or_else(|| bad("a single-stage model has no input gradient"))?;
			let (g, n) = self.stage.take_gradient()?;
			self.check_deadline(f.lease, f.expires_at_ms)?;
			self.orch.report_loss(f.lease, loss).await?;
			tracing::debug!(epoch = f.epoch, sample = f.sample, loss, "tail loss");
			let out = self.upload_tensor(&grad_in, Kind::Gradient, &f.output).await?;
			self.report_inner_states().await?;
			self.check_deadline(f.lease, f.expires_at_ms)?;
			self.orch.submit_activation(f.lease, Some(out), self.state_step()).await?;
			self.add_gradient(&g, n)?;
			self.stats.backwards += 1;
			self.stats.loss_sum += f64::from(loss);
			self.stats.loss_n += 1;
			self.metrics.loss.set(f64::from(loss));
			self.metrics.samples.with_label_values(&["tail"]).inc();
		} else {
			let fwd = self.stage.forward(&input)?;
			let out = self.perturb(fwd.output(), f.sample)?;
			let r = self.upload_tensor(&out, Kind::Activation, &f.output).await?;
			self.report_inner_states().await?;
			self.check_deadline(f.lease, f.expires_at_ms)?;
			let step = self.state_step();
			self.orch.submit_activation(f.lease, Some(r), step).await?;
			self.kept.push_back(Kept {
				epoch: f.epoch,
				sample: f.sample,
				step,
				graph: Some(fwd),
				at: None,
			});
			// The newest `max_kept` keep their graphs; an older one keeps what recomputes its pass at its
			// forward's weights (local mode; in sync mode the weights do not move within the epoch).
			if self.local.is_none() {
				while self.kept.len() > self.cfg.max_kept {
					self.kept.pop_front();
				}
			}
			let graphs = self.kept.iter().filter(|k| k.graph.is_some()).count();
			for k in self
				.kept
				.iter_mut()
				.filter(|k| k.graph.is_some())
				.take(graphs.saturating_sub(self.cfg.max_kept))
			{
				k.graph = None;
			}
			self.stats.forwards += 1;
			self.metrics.samples.with_label_values(&["forward"]).inc();
		}
		Ok(())
	}

	#[cfg(feature = "fault-injection")]
	pub(super) fn perturb(&self, t: Tensor, sample: u64) -> Result<Tensor> {
		use rand::{Rng, SeedableRng};
		let Some(Fault::Perturb(a)) = self.cfg.fault else { return Ok(t) };
		let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(sample);
		let noise: Vec<f32> = (0..t.elem_count()).map(|_| rng.random_range(-a..=a)).collect();
		let noise = Tensor::from_vec(noise, t.dims(), t.device())?.to_dtype(t.dtype())?;
		Ok((t + noise)?)
	}

	#[cfg(not(feature = "fault-injection"))]
	pub(super) fn perturb(&self, t: Tensor, _sample: u64) -> Result<Tensor> {
		Ok(t)
	}

	/// The fault to inject: the configured one with the `fault-injection` feature, else none.
	pub(super) fn fault(&self) -> Option<Fault> {
		self.cfg.fault.filter(|_| cfg!(feature = "fault-injection"))
	}

	pub(super) async fn backward(&mut self, b: BackwardWork) -> Result<()> {
		self.check_item(b.stage, b.epoch)?;
		self.check_deadline(b.lease, b.expires_at_ms)?;
		if self.stage.is_last() {
			return Err(bad("the tail runs its backward with its forward; a separate backward item is not expected"));
		}
		let kept = if b.forward_by == self.me {
			self.kept
				.iter()
				.position(|k| k.epoch == b.epoch && k.sample == b.sample)
				.and_then(|i| self.kept.remove(i))
		} else {
			None
		};
		// A failed item's lease is released and the item comes back to this miner: its forward's
		// record goes back (without the graph, which the pass may have used), so the retry still runs
		// at the forward's weights.
		let record = kept.as_ref().map(|k| Kept {
			epoch: k.epoch,
			sample: k.sample,
			step: k.step,
			graph: None,
			at: k.at.clone(),
		});
		let r = self.backward_pass(&b, kept).await;
		if r.is_err() {
			if let Some(k) = record {
				self.kept.push_front(k);
			}
		}
		r
	}

	/// [`backward`](Self::backward) once the forward's record (`kept`, if this miner ran it and still
	/// has it) is taken.
	async fn backward_pass(&mut self, b: &BackwardWork, kept: Option<Kept>) -> Result<()> {
		let grad_out = self.fetch_tensor(&b.grad_output, Kind::Gradient).await?;
		let grad_in = match kept {
			Some(k) => {
				// Bounded staleness (docs/design.md §3): a forward of an earlier inner step's weights has
				// its backward run at those weights too (weight stashing), kept graph or not.
				let stale = self.local.as_ref().is_some_and(|l| l.steps != k.step);
				let at = match k.at {
					Some(at) => Some(at),
					None if stale => match self.weights_at(k.epoch, k.step) {
						Ok(at) => Some(at),
						// No later state of the epoch can be revealed either then (the log keeps none
						// past a missing step), so its challenges fail whatever this pass: it runs at
						// the current weights rather than hold up its stage's quota.
						Err(e) => {
							tracing::warn!(stage = self.index, epoch = k.epoch, step = k.step, error = %e, "cannot rebuild the weights of a forward's inner step; its backward runs at the current weights");
							None
						},
					},
					None => None,
				};
				let graph = k.graph.is_some();
				let grad_in = match (k.graph, &at) {
					(Some(fwd), Some(at)) => self.stage.backward_at(fwd, &grad_out, at)?,
					(Some(fwd), None) => self.stage.backward(fwd, &grad_out)?,
					(None, at) => {
						let input =
							self.stage_input(b.sample, b.input.as_ref(), b.data.as_ref()).await?;
						match at {
							Some(at) => self.stage.backward_from_input_at(&input, &grad_out, at)?,
							None => self.stage.backward_from_input(&input, &grad_out)?,
						}
					},
				};
				if let Some(l) = self.local.as_mut().filter(|_| stale) {
					l.stale += 1;
					self.metrics.stale_backwards.inc();
					tracing::debug!(
						stage = self.index,
						sample = b.sample,
						forward_step = k.step,
						now = l.steps,
						graph,
						"backward through a forward of an earlier inner step"
					);
				}
				grad_in
			},
			None => {
				let input = self.stage_input(b.sample, b.input.as_ref(), b.data.as_ref()).await?;
				self.stage.backward_from_input(&input, &grad_out)?
			},
		};
		let (g, n) = self.stage.take_gradient()?;
		let output = match (self.stage.is_first(), &b.output, grad_in) {
			(true, _, _) => None,
			(false, Some(put), Some(gi)) => {
				Some(self.upload_tensor(&gi, Kind::Gradient, put).await?)
			},
			(false, None, _) => {
				return Err(bad(format!("sample {}: no PUT for the input gradient", b.sample)))
			},
			(false, Some(_), None) => return Err(bad("no input gradient from a non-head stage")),
		};
		self.report_inner_states().await?;
		self.check_deadline(b.lease, b.expires_at_ms)?;
		self.orch.submit_activation(b.lease, output, self.state_step()).await?;
		self.add_gradient(&g, n)?;
		self.stats.backwards += 1;
		self.metrics.samples.with_label_values(&["backward"]).inc();
		Ok(())
	}
}
