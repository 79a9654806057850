//! Unsynced: load the stage's attested weights before training (module docs of `crate::miner`).

use super::*;

impl Miner {
	pub(super) async fn resync(&mut self) -> Result<Outcome> {
		// Whatever this replica's last submissions left out no longer belongs to the weights it will hold.
		self.feedback = ErrorFeedback::default();
		let e = self.chain.stage_epoch(self.index).await?;
		if let Some((floor, since)) = self.resync_floor {
			if e < floor && since.elapsed() < CHAIN_LAG_WAIT {
				tracing::debug!(
					stage = self.index,
					epoch = e,
					floor,
					"the chain's best block does not show the committed merge yet; waiting"
				);
				return Ok(Outcome::Idle(self.cfg.merge_poll));
			}
			if e < floor {
				tracing::warn!(stage = self.index, epoch = e, floor, "the chain never showed the merge the orchestrator reported committed; taking the chain's view");
			}
			self.resync_floor = None;
		}
		if e == 0 {
			if let Some(init) = self.spec.init_of(self.index).cloned() {
				// A run that continues an existing model: its imported weights, hash-checked.
				if ContentHash(self.stage.state_hash()?) != init.state {
					let Some(bytes) =
						self.fetch_checked(&init.checkpoint.key, &init.checkpoint.hash, 0).await?
					else {
						return Ok(Outcome::Idle(self.cfg.resync_wait));
					};
					self.stage = fresh_stage(
						&self.spec,
						self.index,
						&self.cfg.device,
						Some((&bytes, &init.state.0)),
					)?;
				}
				tracing::info!(stage = self.index, state = %init.state, "epoch 0: the run's initial weights loaded");
			} else {
				let outer_steps = self.stage.outer_state().map_or(0, |o| o.step);
				if self.stage.adam_state().step != 0 || outer_steps != 0 {
					self.stage = fresh_stage(&self.spec, self.index, &self.cfg.device, None)?;
				}
				tracing::info!(
					stage = self.index,
					"epoch 0: weights initialised from the run seed"
				);
			}
			self.enter_training(0)?;
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
			self.enter_training(e)?;
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
		let Some(bytes) = self.fetch_checked(&key, &hash, e).await? else {
			return Ok(Outcome::Idle(self.cfg.resync_wait));
		};
		self.stage.load_checkpoint(&bytes, &c.state_hash.0)?;
		tracing::info!(stage = self.index, epoch = e, state = %c.state_hash, "loaded the attested checkpoint");
		self.enter_training(e)?;
		Ok(Outcome::Worked)
	}

	/// The bytes of the stage checkpoint at `key` (a merged checkpoint of the stage, or its initial
	/// weights), checked against `hash`, through a GET the orchestrator presigns; `None` (logged) when the
	/// orchestrator gives no GET now, so the caller retries later. `epoch` is for the log.
	///
	/// # Errors
	/// A malformed presign answer; [`MinerError::Storage`] for a failed or mismatching download.
	async fn fetch_checked(
		&mut self,
		key: &str,
		hash: &ContentHash,
		epoch: u32,
	) -> Result<Option<Vec<u8>>> {
		let get = match self.orch.presign_get(vec![key.to_owned()]).await {
			Ok(v) if v.len() == 1 => {
				v.into_iter().next().ok_or_else(|| bad("empty presign answer"))?
			},
			Ok(v) => return Err(bad(format!("presignGet answered {} URLs for one key", v.len()))),
			Err(err) => {
				tracing::warn!(stage = self.index, epoch, %key, error = %err, "no GET for the checkpoint; not training, retrying later");
				return Ok(None);
			},
		};
		let bytes = self
			.io
			.get(&get, hash)
			.await
			.map_err(|err| MinerError::storage("stage checkpoint", err))?;
		self.metrics.bytes_down.inc_by(bytes.len() as u64);
		Ok(Some(bytes.to_vec()))
	}

	/// Start training epoch `epoch` on the weights held (the stage's global weights of that epoch).
	///
	/// # Errors
	/// Reading the weights (local mode keeps them as the epoch's global weights) fails.
	pub(super) fn enter_training(&mut self, epoch: u32) -> Result<()> {
		if let Some(l) = &mut self.local {
			// The epoch just trained is challenged once it completes: answer it while training the next
			// one (or a later one, when merges went by without this replica).
			if l.reported > 0 && self.epoch < epoch {
				self.reveal_due.insert(self.epoch, Instant::now());
			}
			l.global = self.stage.flat_params()?;
			l.outer_start = self.stage.outer_state().cloned();
			l.pending.clear();
			(l.samples, l.steps, l.stale) = (0, 0, 0);
			let start = self.stage.inner_state()?;
			l.hashes = vec![start.hash()];
			l.reported = 0;
			l.sat_out = false;
			if let Some(log) = &mut self.inner_log {
				let waiting = &self.reveal_due;
				if let Err(e) = log.begin(epoch, &start, &|e| waiting.contains_key(&e)) {
					tracing::warn!(epoch, error = %e, "inner-step log: epoch not kept");
				}
			}
		}
		self.epoch = epoch;
		self.acc.clear();
		self.feedback_next = None;
		self.kept.clear();
		self.rebuilt = None;
		self.stage.zero_grad();
		self.stats = EpochStats::new();
		self.metrics.epoch.set(i64::from(epoch));
		self.phase = Phase::Training;
		Ok(())
	}

	/// Local mode: send the orchestrator the state hashes it does not have yet, in order (docs/design.md
	/// §10), before a pass at the current state or the pseudo-gradient is submitted. A refusal other than
	/// `Unavailable` means the orchestrator holds another trajectory for this epoch (the miner restarted
	/// mid-epoch): the miner sits the epoch out, taking no work until its stage moves on. No-op in sync
	/// mode.
	///
	/// # Errors
	/// The report's transport error or refusal.
	pub(super) async fn report_inner_states(&mut self) -> Result<()> {
		let Some(l) = &self.local else { return Ok(()) };
		let (epoch, from, todo) = (self.epoch, l.reported, l.hashes[l.reported..].to_vec());
		for (i, h) in todo.into_iter().enumerate() {
			let step = (from + i) as u32;
			let report = InnerStepReport { epoch, step, state_hash: ContentHash(h) };
			if let Err(e) = self.orch.report_inner_step(report).await {
				if matches!(e, MinerError::Refused { .. })
					&& e.code() != Some(ErrorCode::Unavailable)
				{
					if let Some(l) = &mut self.local {
						l.sat_out = true;
					}
					tracing::warn!(stage = self.index, epoch, step, error = %e, "inner state refused; sitting this epoch out");
				}
				return Err(e);
			}
			if let Some(l) = &mut self.local {
				l.reported = from + i + 1;
			}
		}
		Ok(())
	}

	/// Local mode: answer the challenges of the epochs trained before this one that are due and that the
	/// orchestrator has drawn: rebuild states `k` and `k + 1` of each challenged step from the inner-step
	/// log and upload them to the presigned PUTs (docs/design.md §10), one state at a time in a
	/// background task, so training goes on while a state goes up (a stage's state is tens of MB: half a
	/// minute at 20 Mbit/s). Each state goes up once; the call after an upload finished asks for fresh
	/// URLs and starts the next. Not seeded yet, or a failure: ask again in a second. Given up once the
	/// log no longer keeps the epoch (dropped for room) while none of its states is rebuilt or going up,
	/// or once the orchestrator refuses the question (it keeps no challenges of the miner's there);
	/// never after a number of epochs: the seed comes after finality, which a lagging chain can put
	/// many short epochs later.
	pub(super) async fn answer_challenges(&mut self) {
		if self.fault() == Some(Fault::IgnoreChallenges) {
			return;
		}
		let now = Instant::now();
		// One upload at a time, whichever epoch it is for: while one goes, only it is looked at.
		let due: Vec<u32> = match self.revealed.iter().find(|(_, p)| p.uploading.is_some()) {
			Some((e, _)) => vec![*e],
			None => self.reveal_due.iter().filter(|(_, at)| **at <= now).map(|(e, _)| *e).collect(),
		};
		for epoch in due {
			// States already rebuilt (or going up) no longer need the log.
			let rebuilt = self
				.revealed
				.get(&epoch)
				.is_some_and(|p| p.uploading.is_some() || !p.rebuilt.is_empty());
			if !rebuilt && !self.inner_log.as_ref().is_some_and(|l| l.keeps(epoch)) {
				tracing::warn!(
					stage = self.index,
					epoch,
					"cannot answer the challenges: the epoch's inner steps are no longer kept"
				);
				self.forget_reveal(epoch);
				continue;
			}
			match self.reveal(epoch).await {
				Ok(Reveal::Done) => self.forget_reveal(epoch),
				// A state is going up: look again on the next call, after a step of training; one
				// upload at a time (an epoch whose upload failed keeps its rebuilt states, tens of
				// MB each, until they go up or the orchestrator stops keeping its challenges).
				Ok(Reveal::Uploading) => {
					self.reveal_due.insert(epoch, now);
					break;
				},
				Ok(Reveal::NotSeeded) => {
					self.reveal_due.insert(epoch, now + Duration::from_secs(1));
				},
				Err(e @ MinerError::Refused { .. }) if e.code() != Some(ErrorCode::Unavailable) => {
					tracing::warn!(stage = self.index, epoch, error = %e, "challenges refused; not asking again");
					self.forget_reveal(epoch);
				},
				Err(e @ MinerError::BadInput(_)) => {
					// The log cannot rebuild the state (not kept, or past its bound): asking again will
					// not help.
					tracing::warn!(stage = self.index, epoch, error = %e, "cannot answer the challenges");
					self.forget_reveal(epoch);
				},
				Err(e) => {
					tracing::warn!(stage = self.index, epoch, error = %e, "answering challenges");
					self.reveal_due.insert(epoch, now + Duration::from_secs(1));
				},
			}
		}
	}

	/// Stop answering `epoch`'s challenges (answered, or given up; an upload still going is stopped).
	fn forget_reveal(&mut self, epoch: u32) {
		self.reveal_due.remove(&epoch);
		if let Some(Upload { task, .. }) = self.revealed.remove(&epoch).and_then(|p| p.uploading) {
			task.abort();
		}
	}

	/// One call of [`answer_challenges`](Self::answer_challenges) for `epoch`. While a state's upload
	/// is still going it only says so (no RPC). Otherwise it takes the finished upload's result (a
	/// failed one is returned, and the state is uploaded again through a fresh URL on a later call),
	/// then starts uploading the first state the challenges name that is not up yet (a state two
	/// challenges name, adjacent steps or a shared earlier state, goes up once), through a URL
	/// presigned just now, in a task of its own. The states not up yet are rebuilt in one replay of the
	/// inner-step log when the first of them is needed, and held (as reveal bytes) until each has gone
	/// up.
	///
	/// # Errors
	/// The orchestrator's refusal or transport error; [`MinerError::Storage`] for an upload that
	/// failed; [`MinerError::BadInput`] for a state the log cannot rebuild or that rebuilds to another
	/// hash than the one reported.
	async fn reveal(&mut self, epoch: u32) -> Result<Reveal> {
		if let Some(progress) = self.revealed.get_mut(&epoch) {
			if progress.uploading.as_ref().is_some_and(|u| !u.task.is_finished()) {
				return Ok(Reveal::Uploading);
			}
			if let Some(Upload { state, bytes, task }) = progress.uploading.take() {
				match task.await {
					Ok((Ok(_), took)) => {
						progress.rebuilt.remove(&state);
						progress.sent.insert(state);
						self.metrics.bytes_up.inc_by(bytes);
						tracing::info!(
							stage = self.index,
							epoch,
							state,
							bytes,
							ms = took.as_millis() as u64,
							"revealed a challenged state"
						);
					},
					Ok((Err(e), _)) => return Err(MinerError::storage("revealed state", e)),
					Err(e) => {
						tracing::warn!(stage = self.index, epoch, state, error = %e, "reveal upload task ended without a result; uploading again");
					},
				}
			}
		}
		let c = self.orch.get_challenges(epoch).await?;
		if !c.seeded {
			return Ok(Reveal::NotSeeded);
		}
		let named: std::collections::BTreeSet<u32> =
			c.reveals.iter().flat_map(|r| r.states.iter().map(|s| s.state)).collect();
		let progress = self.revealed.entry(epoch).or_default();
		let Some(s) = c
			.reveals
			.iter()
			.flat_map(|r| r.states.iter())
			.find(|s| !progress.sent.contains(&s.state))
		else {
			if !progress.sent.is_empty() {
				tracing::info!(
					stage = self.index,
					epoch,
					states = progress.sent.len(),
					"challenges answered"
				);
			}
			return Ok(Reveal::Done);
		};
		let k = s.state;
		if !progress.rebuilt.contains_key(&k) {
			let missing: std::collections::BTreeSet<u32> = named
				.iter()
				.copied()
				.filter(|x| !progress.sent.contains(x) && !progress.rebuilt.contains_key(x))
				.collect();
			let states = self.inner_states_at(epoch, &missing)?;
			let progress = self.revealed.entry(epoch).or_default();
			progress
				.rebuilt
				.extend(states.into_iter().map(|(x, st)| (x, Bytes::from(st.to_bytes()))));
		}
		let progress = self.revealed.entry(epoch).or_default();
		let bytes = progress
			.rebuilt
			.get(&k)
			.ok_or_else(|| bad(format!("state {k} of epoch {epoch} not rebuilt")))?
			.clone(); // (a reference count: it stays held until the upload succeeds)
		let got = ContentHash::of(&bytes);
		if got != s.hash {
			return Err(bad(format!(
				"state {k} of epoch {epoch} rebuilds to {got}, reported {}",
				s.hash
			)));
		}
		let size = bytes.len() as u64;
		let (io, put) = (self.io.clone(), s.put.put.clone());
		let task = tokio::spawn(async move {
			let started = Instant::now();
			(io.put(&put, bytes).await, started.elapsed())
		});
		let progress = self.revealed.entry(epoch).or_default();
		progress.uploading = Some(Upload { state: k, bytes: size, task });
		Ok(Reveal::Uploading)
	}

	/// The inner step the replica's state is at (0 in sync mode).
	pub(super) fn state_step(&self) -> u32 {
		self.local.as_ref().map_or(0, |l| l.steps)
	}

	/// Count an accepted item's parameter gradient (`g`, summed over `n` micro-batches): into the merge
	/// sum in sync mode; in local mode into the pending inner step, applied once `accumulate` backward
	/// passes are pending.
	///
	/// # Errors
	/// The inner step refuses the gradient (NaN/Inf, wrong length); the pending gradient is dropped then.
	pub(super) fn add_gradient(&mut self, g: &[f32], n: usize) -> Result<()> {
		match &mut self.local {
			None => self.acc.add(g, n),
			Some(l) => {
				l.pending.add(g, n);
				if l.pending.count >= l.accumulate {
					self.inner_step()?;
				}
			},
		}
		Ok(())
	}

	/// Local mode: one inner AdamW step on the mean of the pending gradients (the stage's AdamW state is
	/// the inner optimizer's; learning rate and clipping are the spec's for this epoch). No-op when
	/// nothing is pending or in sync mode.
	///
	/// # Errors
	/// As [`Stage::apply_gradient`]; the pending gradient is dropped then (its samples are not counted).
	pub(super) fn inner_step(&mut self) -> Result<()> {
		let fault = self.fault();
		let Some(l) = &mut self.local else { return Ok(()) };
		if l.pending.count == 0 {
			return Ok(());
		}
		let n = std::mem::take(&mut l.pending.count);
		let mut mean = std::mem::take(&mut l.pending.sum);
		let inv = 1.0 / n as f32;
		mean.iter_mut().for_each(|x| *x *= inv);
		if let Some(Fault::PerturbState(a)) = fault {
			if super::perturbs_state_at(self.epoch, l.steps) {
				use rand::{Rng, SeedableRng};
				let seed = (u64::from(self.epoch) << 32) | u64::from(l.steps);
				let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
				mean.iter_mut().for_each(|x| *x += rng.random_range(-a..=a));
				tracing::warn!(epoch = self.epoch, step = l.steps, "fault: inner step perturbed");
			}
		}
		// Forwards kept at the weights this step moves keep a copy of them for their backward
		// (weight stashing, `Stage::backward_at`); one copy serves them all.
		let current = l.steps;
		if self.kept.iter().any(|k| k.step == current && k.at.is_none()) {
			let at = self.stage.stash()?;
			for k in self.kept.iter_mut().filter(|k| k.step == current) {
				k.at = Some(at.clone());
			}
			// At most `max_stashes` of them: the oldest steps' go (rebuilt from the log if needed).
			let mut held: Vec<u32> =
				self.kept.iter().filter(|k| k.at.is_some()).map(|k| k.step).collect();
			held.sort_unstable();
			held.dedup();
			if let Some(&newest_dropped) = held.iter().rev().nth(self.cfg.max_stashes.max(1)) {
				for k in self.kept.iter_mut().filter(|k| k.step <= newest_dropped) {
					k.at = None;
				}
			}
		}
		let report =
			self.stage
				.apply_gradient(&mean, &self.spec.step_options(self.epoch), n as usize)?;
		if let Some(log) = &mut self.inner_log {
			if let Err(e) = log.record(self.epoch, l.steps, &mean) {
				tracing::warn!(epoch = self.epoch, step = l.steps, error = %e, "inner-step log: step not kept");
			}
		}
		l.samples += n;
		l.steps += 1;
		l.hashes.push(self.stage.inner_state_hash()?);
		self.metrics.inner_steps.inc();
		tracing::debug!(
			stage = self.index,
			epoch = self.epoch,
			step = l.steps,
			samples = n,
			grad_norm = report.grad_norm,
			"inner step"
		);
		Ok(())
	}
}

/// How far one call of the miner's reveal got for an epoch.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Reveal {
	/// The epoch's challenges are not drawn yet.
	NotSeeded,
	/// A state is going up (it may be the last one named).
	Uploading,
	/// Every state the challenges name is up.
	Done,
}

/// A revealed state going up in a task of its own.
#[derive(Debug)]
pub(super) struct Upload {
	/// Its inner step.
	state: u32,
	/// Its size (bytes).
	bytes: u64,
	/// The PUT: its answer (the hash of what was sent) and how long it took (logged: the loop's time
	/// it no longer blocks).
	task: tokio::task::JoinHandle<(
		std::result::Result<ContentHash, iota_storage::StorageError>,
		Duration,
	)>,
}

/// One epoch's reveal in progress (the miner's `revealed`).
#[derive(Debug, Default)]
pub(super) struct RevealProgress {
	/// States uploaded (by inner step).
	sent: std::collections::BTreeSet<u32>,
	/// States rebuilt and not uploaded yet: their reveal bytes (`InnerState::to_bytes`, `12·P + 8`).
	rebuilt: std::collections::BTreeMap<u32, Bytes>,
	/// The state going up now, if any (it stays in `rebuilt` until its PUT succeeded).
	uploading: Option<Upload>,
}
