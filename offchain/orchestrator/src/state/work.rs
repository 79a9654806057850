//! Work routing and leases: `iota_getWork`, results, losses, releases and expiry.

use super::*;

impl State {
	/// Decide `iota_getWork` for `miner` of `stage` at `now_ms` (the caller checked the registry).
	///
	/// Errors: `WrongStage` for a stage outside the run.
	pub fn plan_work(
		&self,
		miner: &AccountId,
		stage: u16,
		now_ms: u64,
	) -> Result<WorkPlan, Refusal> {
		let Some(st) = self.stages.get(usize::from(stage)) else {
			return refuse(
				ErrorCode::WrongStage,
				format!("stage {stage} is not below the run's {} stages", self.cfg.stages),
			);
		};
		// A miner found silent in this epoch has no pass to submit (they were re-listed or lost): it
		// is told so through the epoch, its stage's merge included (told `merging` it would enter the
		// merge with the gradient it kept and ask for shards of a round it is not in); it drops what
		// it accumulated and follows the merge as a replica without samples.
		if self.gone_in(miner, st.epoch) {
			return Ok(WorkPlan::Idle(IdleReason::Forfeited));
		}
		if self.uploads_open(st) {
			return Ok(if st.merge.submissions.contains_key(&miner.0) {
				WorkPlan::Idle(IdleReason::Merging)
			} else {
				WorkPlan::UploadGradient { epoch: st.epoch }
			});
		}
		if st.phase == Phase::Merging {
			return Ok(WorkPlan::Idle(IdleReason::Merging));
		}
		if self.inner_trail(st.epoch, stage, miner).is_some_and(|t| t.restarted) {
			return Ok(WorkPlan::Idle(IdleReason::Restarted));
		}
		if self.leases_of(miner) >= self.cfg.max_leases {
			return Ok(WorkPlan::Idle(IdleReason::InFlightLimit));
		}
		let epoch = st.epoch;
		let q = u64::from(self.cfg.backward_quota);
		let in_epoch = |n: u64| self.epoch_of(n) == epoch;
		let lease = |sample: u64, kind: WorkKind, fresh: bool, recompute: bool| {
			WorkPlan::Lease(Event::LeaseGranted {
				lease: Lease {
					id: self.next_lease,
					miner: miner.clone(),
					stage,
					epoch,
					sample,
					kind,
					granted_ms: now_ms,
					expires_at_ms: now_ms.saturating_add(self.cfg.lease_ms),
					output_key: self.output_key(stage, epoch, sample, kind, miner),
					recompute,
				},
				fresh,
			})
		};
		// Backward first (it drains the pipeline): own forwards, then items whose forward miner is gone.
		let mut other = None;
		for (&n, item) in st.backward_queue.iter().filter(|(n, _)| in_epoch(**n)) {
			let by = self
				.samples
				.get(&n)
				.and_then(|s| s.forward.get(usize::from(stage)).cloned().flatten())
				.map(|(m, _)| m);
			match by {
				Some(by) if &by == miner => return Ok(lease(n, WorkKind::Backward, false, false)),
				// Its forward miner is live and may take it, unless that miner restarted in local mode
				// (it sits the epoch out: its trail ended with its earlier process).
				// Nor if it was found silent in the epoch (it takes no work there).
				Some(by)
					if !item.open
						&& self.is_live(&by, stage, now_ms)
						&& !self.gone_in(&by, epoch)
						&& !self.inner_trail(epoch, stage, &by).is_some_and(|t| t.restarted) => {},
				_ => {
					if other.is_none() {
						other = Some(n);
					}
				},
			}
		}
		// Then passes of a restarted miner to recompute for the merge (the tail's pass is its forward).
		if let Some(&n) = st.recompute.iter().find(|n| in_epoch(**n)) {
			let kind = if stage == self.tail() { WorkKind::Forward } else { WorkKind::Backward };
			return Ok(lease(n, kind, false, true));
		}
		if let Some(n) = other {
			return Ok(lease(n, WorkKind::Backward, false, false));
		}
		if let Some(&n) = st.forward_queue.iter().find(|n| in_epoch(**n)) {
			return Ok(lease(n, WorkKind::Forward, false, false));
		}
		if stage == 0 {
			let issued = if self.head_issued.0 == epoch { self.head_issued.1 } else { 0 };
			if issued < self.cfg.backward_quota {
				if self
					.cfg
					.max_in_flight
					.is_some_and(|max| self.head_in_flight(miner, epoch) >= max)
				{
					return Ok(WorkPlan::Idle(IdleReason::InFlightLimit));
				}
				return Ok(lease(
					u64::from(epoch) * q + u64::from(issued),
					WorkKind::Forward,
					true,
					false,
				));
			}
			return Ok(WorkPlan::Idle(IdleReason::QuotaIssued));
		}
		Ok(WorkPlan::Idle(IdleReason::QueueEmpty))
	}

	/// Samples of `epoch` that `miner` started at the head (its forward lease there, live or
	/// accepted) and whose head backward is not done: what [`StateConfig::max_in_flight`] bounds.
	fn head_in_flight(&self, miner: &AccountId, epoch: u32) -> u32 {
		let q = u64::from(self.cfg.backward_quota);
		let first = u64::from(epoch) * q;
		let leased: std::collections::BTreeSet<u64> = self
			.leases
			.values()
			.filter(|l| l.stage == 0 && l.kind == WorkKind::Forward && &l.miner == miner)
			.map(|l| l.sample)
			.collect();
		let by_miner = |s: &SampleState| {
			s.forward.first().and_then(Option::as_ref).is_some_and(|(m, _)| m == miner)
		};
		self.samples
			.range(first..first.saturating_add(q))
			.filter(|(n, s)| !s.complete() && (leased.contains(n) || by_miner(s)))
			.count() as u32
	}

	/// The lease `id` if `miner` holds it and it is live at `now_ms`.
	///
	/// Errors: `LeaseExpired` (expired, re-listed or dropped), `Unknown`, `Invalid` (another miner's).
	pub fn check_lease(
		&self,
		miner: &AccountId,
		id: LeaseId,
		now_ms: u64,
	) -> Result<&Lease, Refusal> {
		let Some(l) = self.leases.get(&id) else {
			return match self.expired.get(&id) {
				Some(holder) if holder == miner => refuse(
					ErrorCode::LeaseExpired,
					format!("lease {id} expired and its item was re-listed"),
				),
				Some(_) => refuse(ErrorCode::Invalid, format!("lease {id} is not yours")),
				None => refuse(ErrorCode::Unknown, format!("no lease {id}")),
			};
		};
		if &l.miner != miner {
			return refuse(ErrorCode::Invalid, format!("lease {id} is held by another miner"));
		}
		if now_ms > l.expires_at_ms {
			return refuse(
				ErrorCode::LeaseExpired,
				format!("lease {id} expired at {} ms (now {now_ms} ms)", l.expires_at_ms),
			);
		}
		Ok(l)
	}

	/// Check `iota_submitActivation`'s claims against the lease (before the object itself is verified).
	/// Returns the lease.
	///
	/// Errors: as [`check_lease`](Self::check_lease); `WrongPhase` (the stage left `Training`: its
	/// gradients are being merged, so a late pass could not count); `Invalid` (output missing, unexpected,
	/// other key, tail without a reported loss; local mode's inner-step rules, `inner`); `ShapeMismatch`
	/// (shape or size not `[B, T, width]`).
	pub fn check_submit(
		&self,
		miner: &AccountId,
		id: LeaseId,
		output: Option<&TensorRef>,
		inner_step: u32,
		now_ms: u64,
		max_bytes: u64,
	) -> Result<&Lease, Refusal> {
		let l = self.check_lease(miner, id, now_ms)?;
		self.check_pass_step(l, inner_step)?;
		if self
			.stages
			.get(usize::from(l.stage))
			.is_none_or(|s| s.phase != Phase::Training || s.epoch != l.epoch)
		{
			return refuse(
				ErrorCode::WrongPhase,
				format!(
					"stage {} left Training in epoch {}; lease {id} cannot count",
					l.stage, l.epoch
				),
			);
		}
		match (&l.output_key, output) {
			(None, None) => {},
			(None, Some(_)) => {
				return refuse(ErrorCode::Invalid, "this lease has no output to submit")
			},
			(Some(k), None) => {
				return refuse(ErrorCode::Invalid, format!("lease {id} needs its output at {k}"))
			},
			(Some(k), Some(t)) => {
				if &t.key != k {
					return refuse(
						ErrorCode::Invalid,
						format!("output key {:?} is not the lease's key {k:?}", t.key),
					);
				}
				if t.shape != self.cfg.boundary_shape {
					return refuse(
						ErrorCode::ShapeMismatch,
						format!("shape {:?}, expected {:?}", t.shape, self.cfg.boundary_shape),
					);
				}
				if t.size == 0 || t.size > max_bytes {
					return refuse(
						ErrorCode::ShapeMismatch,
						format!("size {} bytes, expected 1..={max_bytes}", t.size),
					);
				}
			},
		}
		if l.kind == WorkKind::Forward && l.stage == self.tail() {
			let reported = self
				.samples
				.get(&l.sample)
				.and_then(|s| s.pending_loss)
				.is_some_and(|(lid, _)| lid == id);
			if !reported {
				return refuse(
					ErrorCode::Invalid,
					format!("report the loss of lease {id} before submitting it"),
				);
			}
		}
		Ok(l)
	}

	/// Check `iota_reportLoss`.
	///
	/// Errors: as [`check_lease`](Self::check_lease); `WrongStage` (not a tail forward lease); `Invalid`
	/// (NaN/Inf or negative, reported twice).
	pub fn check_loss(
		&self,
		miner: &AccountId,
		id: LeaseId,
		loss: f32,
		now_ms: u64,
	) -> Result<Event, Refusal> {
		let l = self.check_lease(miner, id, now_ms)?;
		if l.stage != self.tail() || l.kind != WorkKind::Forward {
			return refuse(
				ErrorCode::WrongStage,
				format!("lease {id} is not a tail forward lease"),
			);
		}
		if !loss.is_finite() || loss < 0.0 {
			return refuse(
				ErrorCode::Invalid,
				format!("loss {loss} is not a finite non-negative number"),
			);
		}
		if self
			.samples
			.get(&l.sample)
			.and_then(|s| s.pending_loss)
			.is_some_and(|(lid, _)| lid == id)
		{
			return refuse(ErrorCode::Invalid, format!("loss of lease {id} was already reported"));
		}
		Ok(Event::LossReported { lease: id, loss })
	}

	/// Check `iota_releaseLease`.
	///
	/// Errors: `Unknown`, `Invalid` (another miner's), `LeaseExpired`.
	pub fn check_release(
		&self,
		miner: &AccountId,
		id: LeaseId,
		now_ms: u64,
	) -> Result<Event, Refusal> {
		self.check_lease(miner, id, now_ms)?;
		Ok(Event::LeaseReleased { lease: id })
	}

	/// Leases past their deadline at `now_ms`, as events.
	pub fn expired_leases(&self, now_ms: u64) -> Vec<Event> {
		self.leases
			.values()
			.filter(|l| now_ms > l.expires_at_ms)
			.map(|l| Event::LeaseExpired { lease: l.id })
			.collect()
	}
}
