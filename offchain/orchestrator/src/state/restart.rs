//! A miner that comes back under a new session (its process restarted with the same key) and what its
//! earlier process left: leases, backward items routed to it, and accepted passes whose gradient died
//! with it (docs/design.md §3 step 5).
//!
//! The same account presenting another session is proof the earlier process is gone, so nothing waits
//! for it, and its session is retired: a request of it that arrives later (sent before the restart, or
//! from a second process running the same key) is refused (`SessionSuperseded`), never taken for a
//! restart back. Its leases are released at once (their items go to anyone), and its accepted passes of the
//! stage's current epoch that reached no merge submission are
//! - re-listed for recomputation while the stage still trains in sync mode (every replica holds the same
//!   weights, so any live member, the restarted miner included, recomputes the pass from the stored input
//!   activation and output gradient; the recomputation counts for the merge, the original stays what the
//!   neighbouring stages used; [`SampleState::recomputed`]);
//! - otherwise counted as lost: once the stage left Training no pass can be added to its merge, and in
//!   local mode a pass belongs to its miner's inner-step trail (the states a validator replays), which
//!   ended with the earlier process; the restarted miner waits for the next epoch there.
//!
//! Either way the miner's accepted-pass count of the epoch is cleared, so the merge does not wait for a
//! gradient that cannot come and the manifest counts what was merged.
//!
//! A miner that dies and does not come back is found by its silence instead (sync mode, before the
//! stage merges: [`State::gone_miners`], [`Event::MinerGone`]); its passes are re-listed or counted lost
//! the same way, and it takes no more work in the epoch (its accumulated gradient is void).

use super::*;

/// How many of a miner's replaced sessions the orchestrator remembers and refuses
/// ([`State::check_session`]). A request of a process replaced longer ago than that would be taken for
/// a restart again; a new process never draws a retired session by chance (they are random 64-bit ids).
pub const RETIRED_SESSIONS: usize = 16;

impl State {
	/// The event `iota_getWork` records for `miner`'s `session`: `None` when it is the session already
	/// recorded, [`Event::SessionStarted`] for a new one.
	///
	/// # Errors
	/// `SessionSuperseded` for a session a newer one replaced (one of the last [`RETIRED_SESSIONS`]):
	/// a request of a process taken for gone, sent before its restart and arriving after it, or of a
	/// second process running the same key. Taking it for a restart back would free the new process's
	/// leases and forfeit its passes.
	pub fn check_session(
		&self,
		miner: &AccountId,
		stage: u16,
		session: u64,
		now_ms: u64,
	) -> Result<Option<Event>, Refusal> {
		let m = self.miners.get(&miner.0).map(|(_, m)| m);
		if m.is_some_and(|m| m.retired.contains(&session)) {
			return refuse(
				ErrorCode::SessionSuperseded,
				format!(
					"session {session:#x} of {miner} was replaced by a newer process of the same \
					 account; this process gets no more work"
				),
			);
		}
		let known = m.and_then(|m| m.session);
		Ok((known != Some(session)).then(|| Event::SessionStarted {
			miner: miner.clone(),
			stage,
			session,
			now_ms,
		}))
	}

	/// Restarts of `miner` seen since the run began (sessions after its first).
	pub fn restarts(&self, miner: &AccountId) -> u64 {
		self.miners.get(&miner.0).map_or(0, |(_, m)| m.restarts)
	}

	/// The miner whose pass of `stage` the merge counts for `sample`
	/// ([`iota_rpc::pathway::counted_pass`]: its last recomputation, else the accepted backward, the
	/// tail: its forward).
	pub fn counted_by(&self, sample: &SampleState, stage: u16) -> Option<AccountId> {
		let s = usize::from(stage);
		iota_rpc::pathway::counted_pass(
			sample.recomputed.iter().filter(|(st, _, _)| *st == stage).map(|(_, m, _)| m),
			stage == self.tail(),
			sample.forward.get(s).and_then(Option::as_ref).map(|(m, _)| m),
			sample.backward.get(s).and_then(Option::as_ref).map(|(m, _)| m),
		)
		.cloned()
	}

	pub(super) fn apply_session(
		&mut self,
		miner: &AccountId,
		stage: u16,
		session: u64,
		now_ms: u64,
	) {
		let m = self.miner_mut(miner, stage);
		m.last_seen_ms = m.last_seen_ms.max(now_ms);
		let before = m.session.replace(session);
		let Some(before) = before.filter(|b| *b != session) else { return };
		m.retired.retain(|s| *s != session);
		m.retired.push_back(before);
		if m.retired.len() > RETIRED_SESSIONS {
			m.retired.pop_front();
		}
		m.restarts += 1;
		// A fresh process holds no gradient of the epoch: it may work again.
		m.gone_in = None;
		// Its leases: released at once; a backward item goes to anyone (its kept activations are gone).
		let held: Vec<LeaseId> =
			self.leases.values().filter(|l| &l.miner == miner).map(|l| l.id).collect();
		for id in held {
			self.relist(id, false, true);
		}
		let Some(epoch) = self.stages.get(usize::from(stage)).map(|st| st.epoch) else { return };
		self.open_backwards_of(miner, stage);
		self.forfeit_passes(stage, epoch, miner);
	}

	/// Backward items queued at `stage` for `miner`'s forwards go to anyone (its process, and the
	/// activations it kept, are gone or sit the epoch out).
	fn open_backwards_of(&mut self, miner: &AccountId, stage: u16) {
		let s = usize::from(stage);
		let Some(st) = self.stages.get(s) else { return };
		let own: Vec<u64> = st
			.backward_queue
			.keys()
			.copied()
			.filter(|n| {
				self.samples
					.get(n)
					.and_then(|r| r.forward.get(s).cloned().flatten())
					.is_some_and(|(by, _)| &by == miner)
			})
			.collect();
		if let Some(st) = self.stages.get_mut(s) {
			for n in own {
				st.backward_queue.insert(n, BackwardItem { open: true });
			}
		}
	}

	/// Whether `miner` was found silent in `epoch` of its stage ([`Event::MinerGone`]): it takes no
	/// work there, and no item waits for it.
	pub(super) fn gone_in(&self, miner: &AccountId, epoch: u32) -> bool {
		self.miners.get(&miner.0).is_some_and(|(_, m)| m.gone_in == Some(epoch))
	}

	/// Sync mode: the [`Event::MinerGone`] due at `now_ms`. A miner is gone when its stage has not
	/// reached Merging, it holds accepted passes of the stage's epoch that reached no merge submission,
	/// it holds no lease, and it made no request for `lease_ms` counted from the latest of its last
	/// request, `since_ms` (when this orchestrator process started: liveness is not persisted, so a
	/// restarted orchestrator gives every miner a lease's length to show up) and, once the stage's
	/// uploads are open, the moment they opened (every member then gets a lease's length to ask for its
	/// upload). A live miner asks for work far more often (idle answers retry within seconds), so
	/// silence that long is a dead or cut-off process, whose gradient the merge would otherwise wait
	/// for until its phase timeout.
	///
	/// While the stage trains its passes are re-listed and recomputed by the others; once uploads are
	/// open they are counted lost (the other members' gradients may be in already, and no pass is
	/// added to a stage past its quota), and the stage moves on without waiting for it. That only once
	/// another member's gradient is in: a merge without any would hold nothing (the silent miner may
	/// have run every pass), so until then the stage waits for it as for any member.
	///
	/// A miner working on its only lease makes no request, so one that overruns that lease is taken
	/// for gone when it expires: its passes are recomputed by the others, nothing is lost, it sits the
	/// epoch out. (Measured: with a second's grace after the lease's end, the other members finished the
	/// quota first in both churn scenarios, and the dead miner's passes were awaited until the phase
	/// timeout instead.) Likewise a miner whose gradient upload takes longer than a lease after it asked
	/// for it is taken for gone (the bound a pass has too).
	///
	/// Local mode has none: a pass belongs to its miner's inner-step trail and cannot be recomputed
	/// by another member.
	pub fn gone_miners(&self, now_ms: u64, since_ms: u64) -> Vec<Event> {
		if self.local_mode() {
			return Vec::new();
		}
		let mut out = Vec::new();
		for (i, st) in self.stages.iter().enumerate() {
			let opened = if self.uploads_open(st) { st.clock.uploads_opened_ms() } else { None };
			let floor = since_ms.max(opened.unwrap_or(0));
			let stage = i as u16;
			let first = (st.epoch, stage, [0u8; 32]);
			let last = (st.epoch, stage, [u8::MAX; 32]);
			for (&(epoch, _, key), &n) in self.accepted.range(first..=last) {
				let Some((miner, m)) = self.miners.get(&key) else { continue };
				let silent = m.last_seen_ms.max(floor).saturating_add(self.cfg.lease_ms) < now_ms;
				if n > 0 && silent && self.may_be_gone(st, miner) {
					out.push(Event::MinerGone { miner: miner.clone(), stage, epoch, now_ms });
				}
			}
		}
		out
	}

	/// The conditions besides its silence under which `miner` of stage `st` is taken for gone, one rule
	/// for [`gone_miners`](Self::gone_miners) (the decision) and [`apply_gone`](Self::apply_gone) (the
	/// event, re-checked): the stage is not merging, the miner holds no lease and made no merge
	/// submission, and, once the stage's uploads are open, another member's gradient is in (its passes
	/// are then lost, not recomputed: a merge of nothing would stall the stage, so until then it is
	/// awaited as any member).
	fn may_be_gone(&self, st: &StageState, miner: &AccountId) -> bool {
		st.phase != Phase::Merging
			&& !st.merge.submissions.contains_key(&miner.0)
			&& !(self.uploads_open(st) && st.merge.submissions.is_empty())
			&& self.leases_of(miner) == 0
	}

	/// [`Event::MinerGone`]: applied only while what [`gone_miners`](Self::gone_miners) saw still holds
	/// in the state (its stage in that epoch, [`may_be_gone`](Self::may_be_gone)): a request of the
	/// miner recorded between the decision and the event voids it.
	pub(super) fn apply_gone(&mut self, miner: &AccountId, stage: u16, epoch: u32) {
		let Some(st) = self.stages.get(usize::from(stage)) else { return };
		if st.epoch != epoch || !self.may_be_gone(st, miner) {
			return;
		}
		let m = self.miner_mut(miner, stage);
		m.gone += 1;
		m.gone_in = Some(epoch);
		self.open_backwards_of(miner, stage);
		self.forfeit_passes(stage, epoch, miner);
	}

	/// `miner`'s accepted passes at `stage` in `epoch` died with its process: re-listed or counted lost
	/// (module docs).
	fn forfeit_passes(&mut self, stage: u16, epoch: u32, miner: &AccountId) {
		let Some(st) = self.stages.get(usize::from(stage)) else { return };
		if st.epoch != epoch || st.merge.submissions.contains_key(&miner.0) {
			return;
		}
		let accepted = self.accepted.remove(&(epoch, stage, miner.0)).unwrap_or(0);
		if accepted == 0 {
			return;
		}
		let relist = !self.local_mode() && st.phase == Phase::Training && !self.uploads_open(st);
		let mut listed = 0u32;
		if relist {
			let q = u64::from(self.cfg.backward_quota.max(1));
			// Passes of its earlier process already re-listed (queued, or a recomputation out) are
			// counted by it until recomputed, but were forfeited then: not again.
			let pending: BTreeSet<u64> = st
				.recompute
				.iter()
				.copied()
				.chain(
					self.leases
						.values()
						.filter(|l| l.recompute && l.stage == stage)
						.map(|l| l.sample),
				)
				.collect();
			let mine: Vec<u64> = self
				.samples
				.range(u64::from(epoch) * q..u64::from(epoch + 1) * q)
				.filter(|(n, r)| {
					!pending.contains(n) && self.counted_by(r, stage).is_some_and(|m| &m == miner)
				})
				.map(|(n, _)| *n)
				.collect();
			listed = (mine.len() as u32).min(accepted);
			if let Some(st) = self.stages.get_mut(usize::from(stage)) {
				st.recompute.extend(mine.into_iter().take(listed as usize));
				st.backward_done = st.backward_done.saturating_sub(listed);
			}
		} else if let Some(t) = self.inner.get_mut(&(epoch, stage, miner.0)) {
			// Local mode: its trail ended with the earlier process.
			t.closed = true;
			t.restarted = true;
		}
		self.audits.entry(epoch).or_default().lost += accepted - listed;
	}

	/// A recomputation (lease `l`, [`Lease::recompute`]) completed: it counts for the stage's merge
	/// as `l.miner`'s pass; the sample's records stay as the neighbouring stages used them.
	pub(super) fn apply_recomputed(&mut self, l: &Lease, output: Option<Obj>, now_ms: u64) {
		let quota = self.cfg.backward_quota;
		self.count_pass(l, output.as_ref(), now_ms);
		if let Some(r) = self.samples.get_mut(&l.sample) {
			if r.pending_loss.is_some_and(|(lid, _)| lid == l.id) {
				r.pending_loss = None;
			}
			r.recomputed.push((l.stage, l.miner.clone(), output));
		}
		let Some(st) = self.stages.get_mut(usize::from(l.stage)) else { return };
		if st.epoch != l.epoch {
			return;
		}
		st.clock.lease_in(now_ms);
		st.backward_done += 1;
		if st.backward_done >= quota && st.clock.quota_ms.is_none() {
			st.clock.quota_ms = Some(now_ms);
		}
		*self.accepted.entry((l.epoch, l.stage, l.miner.0)).or_default() += 1;
		self.audits.entry(l.epoch).or_default().recomputed += 1;
	}
}
