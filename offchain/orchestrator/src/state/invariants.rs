//! What holds of a [`State`] after any sequence of events ([`State::check_invariants`]): the facts the
//! rest of the state machine reads without checking (a sample's record has a slot per stage, a shard of
//! the merge names a shard of its plan, a lease's item is not also queued), and the counters that
//! summarise a map agreeing with it. The `iota-fuzz` target `state_apply` checks them after every
//! event of random event sequences; the property test in `tests.rs` after every request.

use super::*;

/// A broken invariant of the [`State`]: which one, and what was found.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{invariant}: {found}")]
pub struct InvariantError {
	/// The invariant, in words.
	pub invariant: &'static str,
	/// What the state holds instead.
	pub found: String,
}

/// `Err` of `invariant` with `found` unless `ok`.
fn ensure(
	ok: bool,
	invariant: &'static str,
	found: impl FnOnce() -> String,
) -> Result<(), InvariantError> {
	if ok {
		Ok(())
	} else {
		Err(InvariantError { invariant, found: found() })
	}
}

impl State {
	/// Checks the state's invariants (module docs): the stages, the leases, the samples, the accepted
	/// passes, the merges and the counters. Read-only; `O(size of the state)`.
	///
	/// Errors: the first [`InvariantError`] found.
	pub fn check_invariants(&self) -> Result<(), InvariantError> {
		self.check_stages()?;
		self.check_leases()?;
		self.check_samples()?;
		self.check_accepted()?;
		self.check_counters()
	}

	/// One stage state per stage of the run; its queues hold items of its epoch or later (recomputations:
	/// of its epoch); its merge bookkeeping is of its round and names shards of its plan; commits are of
	/// earlier epochs.
	fn check_stages(&self) -> Result<(), InvariantError> {
		let stages = self.stages.len();
		ensure(
			stages == usize::from(self.cfg.stages),
			"one stage state per stage of the run",
			|| format!("{stages} stage states, {} stages", self.cfg.stages),
		)?;
		for (i, st) in self.stages.iter().enumerate() {
			let queued = st.forward_queue.iter().chain(st.backward_queue.keys());
			let stale = queued.copied().find(|n| self.epoch_of(*n) < st.epoch);
			ensure(stale.is_none(), "a queued item is of its stage's epoch or later", || {
				format!("stage {i} in epoch {} queues sample {stale:?}", st.epoch)
			})?;
			let other = st.recompute.iter().copied().find(|n| self.epoch_of(*n) != st.epoch);
			ensure(other.is_none(), "a recomputation is of its stage's epoch", || {
				format!("stage {i} in epoch {} re-lists sample {other:?}", st.epoch)
			})?;
			let m = &st.merge;
			ensure(m.round == st.round, "the merge bookkeeping is of the stage's round", || {
				format!("stage {i}: merge round {}, stage round {}", m.round, st.round)
			})?;
			ensure(
				st.backward_done <= self.cfg.backward_quota.max(1),
				"a stage's backward passes in an epoch are at most the quota",
				|| format!("stage {i}: {} of {}", st.backward_done, self.cfg.backward_quota),
			)?;
			let shards = m.plan.as_ref().map_or(0, |p| p.shards.len());
			let keys = m.copies.keys().chain(m.present.keys()).chain(m.disputed.iter());
			let unplanned = keys.copied().find(|k| *k as usize >= shards);
			ensure(unplanned.is_none(), "a shard of the merge is a shard of its plan", || {
				format!("stage {i}: shard {unplanned:?} of a plan of {shards}")
			})?;
			let both = m.disputed.iter().find(|k| m.present.contains_key(k));
			ensure(both.is_none(), "a shard is present or disputed, not both", || {
				format!("stage {i}: shard {both:?}")
			})?;
			let undisputed =
				m.disputed.iter().find(|k| m.copies.get(k).is_none_or(|c| c.len() < 2));
			ensure(undisputed.is_none(), "a disputed shard has two copies", || {
				format!("stage {i}: shard {undisputed:?}")
			})?;
			if let Some(plan) = &m.plan {
				ensure(plan.round == m.round, "the plan is of the merge's round", || {
					format!("stage {i}: plan round {}, merge round {}", plan.round, m.round)
				})?;
				let absent = plan.members.iter().find(|a| !m.submissions.contains_key(&a.0));
				ensure(absent.is_none(), "a member of the plan submitted a gradient", || {
					format!("stage {i}: {absent:?}")
				})?;
			}
		}
		let ahead = self
			.committed
			.keys()
			.find(|(s, e)| self.stages.get(usize::from(*s)).is_none_or(|st| *e >= st.epoch));
		ensure(ahead.is_none(), "a committed merge is of an epoch its stage has left", || {
			format!("(stage, epoch) {ahead:?}")
		})
	}

	/// A lease out is keyed by its id, below the next id, not also void, of its stage's current epoch
	/// and its sample's epoch, and its item is in no queue; the head issued at most its quota.
	fn check_leases(&self) -> Result<(), InvariantError> {
		for (id, l) in &self.leases {
			ensure(
				*id == l.id && l.id < self.next_lease,
				"a lease is keyed by its id, below the next id",
				|| format!("key {id}, lease {}, next {}", l.id, self.next_lease),
			)?;
			ensure(!self.expired.contains_key(id), "a lease out is not also void", || {
				format!("lease {id}")
			})?;
			let st = self.stages.get(usize::from(l.stage));
			ensure(
				st.is_some_and(|st| st.epoch == l.epoch) && self.epoch_of(l.sample) == l.epoch,
				"a lease is of its stage's epoch and its sample's",
				|| {
					let at = st.map(|s| s.epoch);
					format!(
						"lease {id}: epoch {}, sample {}, stage {} at {at:?}",
						l.epoch, l.sample, l.stage
					)
				},
			)?;
			let Some(st) = st else { continue };
			let queued = match l.kind {
				_ if l.recompute => st.recompute.contains(&l.sample),
				WorkKind::Forward => st.forward_queue.contains(&l.sample),
				WorkKind::Backward => st.backward_queue.contains_key(&l.sample),
			};
			ensure(!queued, "a leased item is not also queued", || {
				format!("lease {id}: {:?} of sample {} at stage {}", l.kind, l.sample, l.stage)
			})?;
			ensure(l.granted_ms <= self.clock_ms, "the clock is past every grant", || {
				format!("lease {id} granted at {}, clock {}", l.granted_ms, self.clock_ms)
			})?;
		}
		let head = self.stages.first().map_or(0, |h| h.epoch);
		let unissued = self.leases.values().find(|l| l.epoch > head);
		ensure(unissued.is_none(), "a lease is of an epoch the head has reached", || {
			format!("{unissued:?}, the head in epoch {head}")
		})?;
		ensure(
			self.head_issued.1 <= self.cfg.backward_quota && self.head_issued.0 <= head,
			"the head issues at most its quota of samples an epoch, in its epoch or before",
			|| {
				format!(
					"{:?} of {}, the head in epoch {head}",
					self.head_issued, self.cfg.backward_quota
				)
			},
		)
	}

	/// A sample's record is of its epoch, one the head has reached (as is every queued item), and has a
	/// slot per stage for each pass (local mode's steps: none yet, or one per stage), filled in pipeline
	/// order (a forward after the forward before it, a backward after its stage's forward and the
	/// backward after it); its recomputations name stages of the run.
	fn check_samples(&self) -> Result<(), InvariantError> {
		let stages = usize::from(self.cfg.stages);
		let head = self.stages.first().map_or(0, |h| h.epoch);
		let queued = self.stages.iter().flat_map(|st| {
			st.forward_queue
				.iter()
				.chain(st.backward_queue.keys())
				.chain(st.recompute.iter())
		});
		let unissued = self.samples.keys().chain(queued).find(|n| self.epoch_of(**n) > head);
		ensure(unissued.is_none(), "a sample is of an epoch the head has reached", || {
			format!("sample {unissued:?}, the head in epoch {head}")
		})?;
		for (n, r) in &self.samples {
			ensure(r.epoch == self.epoch_of(*n), "a sample's record is of its epoch", || {
				format!("sample {n}: epoch {}", r.epoch)
			})?;
			ensure(
				r.forward.len() == stages && r.backward.len() == stages,
				"a sample's record has a pass slot per stage",
				|| {
					format!(
						"sample {n}: {} forward, {} backward",
						r.forward.len(),
						r.backward.len()
					)
				},
			)?;
			let steps = |v: &[u32]| v.is_empty() || v.len() == stages;
			ensure(
				steps(&r.forward_steps) && steps(&r.backward_steps),
				"a sample's inner steps are none or one per stage",
				|| format!("sample {n}: {:?} {:?}", r.forward_steps, r.backward_steps),
			)?;
			let done = |v: &[Option<_>], i: usize| v.get(i).is_some_and(Option::is_some);
			let early = (0..stages).find(|&i| {
				(done(&r.forward, i) && i > 0 && !done(&r.forward, i - 1))
					|| (done(&r.backward, i)
						&& (!done(&r.forward, i) || (i + 1 < stages && !done(&r.backward, i + 1))))
			});
			ensure(early.is_none(), "a sample's passes are recorded in pipeline order", || {
				format!("sample {n}: stage {early:?}")
			})?;
			let alien = r.recomputed.iter().find(|(s, _, _)| usize::from(*s) >= stages);
			ensure(alien.is_none(), "a recomputation is of a stage of the run", || {
				format!("sample {n}: {alien:?}")
			})?;
		}
		Ok(())
	}

	/// Accepted passes are counted only for an epoch a stage has reached, at least one per entry, and
	/// at most the quota per stage and epoch (each sample's pass counts once for the merge).
	fn check_accepted(&self) -> Result<(), InvariantError> {
		let quota = u64::from(self.cfg.backward_quota.max(1));
		// Keys are sorted by (epoch, stage): one running sum per stage and epoch.
		let mut sum: Option<((u32, u16), u64)> = None;
		for (&(epoch, stage, miner), &n) in &self.accepted {
			let at = self.stages.get(usize::from(stage)).map(|s| s.epoch);
			ensure(
				n > 0 && at.is_some_and(|e| epoch <= e),
				"accepted passes are counted for an epoch their stage has reached",
				|| {
					format!(
						"{n} of {:?} at stage {stage} in epoch {epoch}, stage at {at:?}",
						AccountId::from(miner)
					)
				},
			)?;
			let passes = match sum {
				Some((k, m)) if k == (epoch, stage) => m + u64::from(n),
				_ => u64::from(n),
			};
			sum = Some(((epoch, stage), passes));
			ensure(
				passes <= quota,
				"accepted passes of a stage in an epoch are at most the quota",
				|| format!("{passes} at stage {stage} in epoch {epoch}"),
			)?;
		}
		Ok(())
	}

	/// The run's totals agree with the epochs' audit records and the miners' counters; the epoch
	/// summaries follow each other.
	fn check_counters(&self) -> Result<(), InvariantError> {
		let completed: u64 = self.audits.values().map(|a| u64::from(a.completed)).sum();
		ensure(
			self.tokens_trained == completed * self.cfg.tokens_per_sample,
			"tokens trained are the completed samples' tokens",
			|| format!("{} tokens, {completed} samples", self.tokens_trained),
		)?;
		let wire: u64 = self.audits.values().map(|a| a.wire_bytes).sum();
		ensure(self.wire_bytes == wire, "wire bytes are the epochs' wire bytes", || {
			format!("{} total, {wire} over the epochs", self.wire_bytes)
		})?;
		let expired: u64 = self.miners.values().map(|(_, m)| m.leases_expired).sum();
		ensure(
			self.leases_expired_total == expired,
			"leases expired are the miners' expired leases",
			|| format!("{} total, {expired} over the miners", self.leases_expired_total),
		)?;
		let misfiled = self.miners.iter().find(|(k, (a, _))| **k != a.0);
		ensure(misfiled.is_none(), "a miner is keyed by its account", || format!("{misfiled:?}"))?;
		ensure(
			self.summaries.len() <= MAX_SUMMARIES && self.heldout.len() <= MAX_SUMMARIES,
			"summaries and held-out losses are bounded",
			|| {
				format!(
					"{} summaries, {} held-out losses",
					self.summaries.len(),
					self.heldout.len()
				)
			},
		)?;
		for s in &self.summaries {
			ensure(
				s.tokens == u64::from(s.samples) * self.cfg.tokens_per_sample,
				"a summary's tokens are its samples'",
				|| format!("epoch {}: {} tokens, {} samples", s.epoch, s.tokens, s.samples),
			)?;
		}
		let gap = self.summaries.iter().zip(self.summaries.iter().skip(1)).find(|(a, b)| {
			b.epoch != a.epoch + 1 || b.tokens_cumulative != a.tokens_cumulative + b.tokens
		});
		ensure(gap.is_none(), "epoch summaries follow each other", || {
			gap.map(|(a, b)| format!("epoch {} then {}", a.epoch, b.epoch))
				.unwrap_or_default()
		})
	}
}
