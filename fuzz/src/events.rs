//! The `state_apply` target's event sequences: bytes read as the orchestrator's [`Event`]s over a small
//! run (3 stages, a quota of 2 samples an epoch, 4 miners, 1 s leases), so that events meet the leases,
//! samples, epochs and rounds of the ones before them instead of unknown ids.
//!
//! Each step is a selector byte and two parameter bytes `a`, `b` (the selector mod 32): 0–7 a miner
//! asks for work, 8–15 a lease's result (with no lease out: work), 16 a loss, 17 a release, 18 an
//! expiry, 19 the clock moves (`b`·20 ms) and the server's expiry sweep runs, 20 a miner's session, 21
//! the sweep for silent miners or a raw `MinerGone`, 22 an accepted and 23 a refused gradient, 24–25 a
//! shard copy, 26 a resolved shard, 27 an attestation, 28–29 the chain's view of a stage, a predicted
//! one or a revert, 30–31 a merge seed, a chain wait, a challenge seed, a pathway log, a held-out loss
//! or an inner-step report. `a` mod 3 is the stage. A lease grant is what
//! [`State::plan_work`] decides for a miner and a stage (the only way the server grants one: lease ids
//! are fresh, a lease is of its stage's epoch and its item was queued), and an expiry what
//! [`State::expired_leases`] finds once the clock moves; every other event is made here, raw, naming
//! a lease out (or an unknown or void id), a stage's epoch and round (or one step off them), any phase
//! and any members. Those need not pass the server's checks: [`State::apply`] takes any of them.

use std::sync::OnceLock;

use iota_orchestrator::state::{Event, Obj, State, StateConfig, WorkPlan};
use iota_primitives::{ContentHash, Phase};
use iota_rpc::types::LeaseId;
use iota_rpc::AccountId;
use iota_storage::keys::Id;

/// Stages of the run.
pub const STAGES: u16 = 3;
/// Samples per epoch.
pub const QUOTA: u32 = 2;
/// Miners (accounts `[1; 32]` to `[4; 32]`).
const MINERS: u8 = 4;
/// Lease length, ms.
const LEASE_MS: u64 = 1_000;

/// The run's state configuration, as the orchestrator builds it from the chain's run config and the
/// spec (`main.rs`), for a run this small; `local`: local mode (`accumulate` 2), else sync mode.
pub fn config(local: bool) -> StateConfig {
	let accumulate = local.then_some(2);
	StateConfig {
		run: Id::new("fuzz").expect("id"),
		stages: STAGES,
		backward_quota: QUOTA,
		lease_ms: LEASE_MS,
		max_leases: 2,
		tokens_per_sample: 8,
		boundary_shape: [2, 4, 8],
		param_counts: vec![12, 16, 20],
		merge_codec: Default::default(),
		accumulate,
		max_in_flight: iota_orchestrator::state::default_max_in_flight(accumulate),
	}
}

/// Miner `i` (mod [`MINERS`]).
fn miner(i: u8) -> AccountId {
	AccountId::from([1 + i % MINERS; 32])
}

/// `ContentHash::of(&[b])`, the 256 of them hashed once per process rather than once per event.
fn hash(b: u8) -> ContentHash {
	static HASHES: OnceLock<Vec<ContentHash>> = OnceLock::new();
	HASHES.get_or_init(|| (0..=u8::MAX).map(|b| ContentHash::of(&[b])).collect())[usize::from(b)]
}

/// An object named by `tag` (the same tag, the same hash: agreeing shard copies).
fn obj(tag: u8) -> Obj {
	Obj { key: format!("o/{tag}"), hash: hash(tag), size: 16 + u64::from(tag) }
}

/// The members whose bits `mask` sets, in account order.
fn members(mask: u8) -> Vec<AccountId> {
	(0..MINERS).filter(|i| mask & (1 << i) != 0).map(miner).collect()
}

/// Reads bytes as events, keeping the orchestrator's clock.
pub struct Events<'a> {
	data: &'a [u8],
	now: u64,
}

impl<'a> Events<'a> {
	/// Events from `data`, the clock at 1 s.
	pub fn new(data: &'a [u8]) -> Self {
		Self { data, now: 1_000 }
	}

	/// The next step's events, decided on `st` as it stands (none for a grant that `plan_work` does
	/// not make, or a clock step that expires nothing); `None` once the bytes run out.
	pub fn next(&mut self, st: &mut State) -> Option<Vec<Event>> {
		let [sel, a, b] = match self.data {
			[s, a, b, rest @ ..] => {
				self.data = rest;
				[*s, *a, *b]
			},
			_ => return None,
		};
		self.now += 10;
		let now = self.now;
		let stage = a % STAGES as u8;
		let s = u16::from(stage);
		let (epoch, round) = st.stage(s).map_or((0, 0), |v| (v.epoch, v.round));
		// One step off the stage's epoch or round now and then.
		let near = |cur: u32, x: u8| match x % 8 {
			6 => cur + 1,
			7 => cur.saturating_sub(1),
			_ => cur,
		};
		// Results go to leases out: with none out, a miner asks for work instead.
		let sel =
			if (8..16).contains(&(sel % 32)) && st.leases().next().is_none() { 0 } else { sel };
		let ev = match sel % 32 {
			// A miner asks for work at a stage (its own, the stage of its index, mostly).
			0..=7 => {
				let (m, s) =
					(miner(b), if b & 0x80 != 0 { s } else { u16::from(b % MINERS) % STAGES });
				st.touch(&m, s, now);
				return Some(match st.plan_work(&m, s, now) {
					Ok(WorkPlan::Lease(ev)) => vec![ev],
					_ => vec![],
				});
			},
			8..=15 => {
				let id = self.lease(st, a);
				// The output its key asks for (none where it has no key), else whatever `b` says.
				let output = match st.lease(id) {
					Some(l) if b & 0x80 == 0 => l.output_key.as_ref().map(|_| obj(b % 16)),
					_ => (b & 1 != 0).then(|| obj(b % 16)),
				};
				Event::LeaseCompleted {
					lease: id,
					output,
					now_ms: now,
					inner_step: u32::from(b >> 5 & 3),
				}
			},
			16 => Event::LossReported { lease: self.lease(st, a), loss: f32::from(b) / 16.0 },
			17 => Event::LeaseReleased { lease: self.lease(st, a) },
			18 => Event::LeaseExpired { lease: self.lease(st, a) },
			// The clock moves; the server's sweep expires what is past its deadline.
			19 => {
				self.now += u64::from(b) * 20;
				return Some(st.expired_leases(self.now));
			},
			20 => Event::SessionStarted {
				miner: miner(b),
				stage: s,
				session: u64::from(b >> 4 & 3),
				now_ms: now,
			},
			// The server's sweep for silent miners, or any miner.
			21 if b & 1 == 0 => return Some(st.gone_miners(now, 0)),
			21 => Event::MinerGone {
				miner: miner(b),
				stage: s,
				epoch: near(epoch, b >> 2),
				now_ms: now,
			},
			22 => Event::GradientAccepted {
				stage: s,
				epoch: near(epoch, b >> 2),
				round: near(round, a >> 2),
				miner: miner(b),
				object: obj(b),
				chunk_hashes: vec![hash(b)],
				samples: 1 + u32::from(b >> 5),
			},
			23 => Event::GradientRefused {
				stage: s,
				epoch: near(epoch, b >> 2),
				round,
				miner: miner(b),
				object: obj(b),
				chunk_hashes: Vec::new(),
				samples: u32::from(b >> 4),
				reason: "fuzz".into(),
			},
			24 | 25 => Event::ShardAccepted {
				stage: s,
				epoch: near(epoch, a >> 2),
				round: near(round, a >> 5),
				shard: u32::from(b % 5),
				miner: miner(b >> 3),
				object: obj(b >> 5 & 1),
			},
			26 => Event::ShardResolved {
				stage: s,
				epoch,
				round,
				shard: u32::from(b % 5),
				object: obj(2),
			},
			27 => Event::StateAttested {
				stage: s,
				epoch: near(epoch, a >> 2),
				miner: miner(b),
				state_hash: hash(b >> 6),
				checkpoint: (b & 4 != 0).then(|| obj(3)),
			},
			// The chain's view of a stage, a prediction of it, or a revert to it.
			28 | 29 => {
				let phase =
					[Phase::Training, Phase::Training, Phase::WeightsUploading, Phase::Merging]
						[usize::from(b % 4)];
				let members = members(b >> 4);
				let round = u32::from(a >> 6);
				match (a >> 2) % 4 {
					0 => Event::ChainStage {
						stage: s,
						epoch: near(epoch, b >> 2),
						phase,
						round,
						members,
						block: 1,
						now_ms: now,
					},
					1 => Event::ChainStage {
						stage: s,
						epoch: epoch + 1,
						phase,
						round,
						members,
						block: 1,
						now_ms: now,
					},
					2 => Event::ChainPredicted {
						stage: s,
						epoch: epoch + u32::from(b >> 2 & 1),
						phase,
						round,
						members,
						waited_ms: u64::from(b),
						now_ms: now,
					},
					_ => Event::ChainReverted {
						stage: s,
						epoch: epoch.saturating_sub(u32::from(b >> 2 & 1)),
						phase,
						round,
						members,
						now_ms: now,
					},
				}
			},
			_ => match a >> 2 & 7 {
				0 | 1 => Event::MergeSeed {
					stage: s,
					epoch,
					round: near(round, b),
					epoch_seed: [b >> 4; 32],
				},
				2 => Event::ChainWait {
					calls: vec![(s, epoch), (u16::from(b % STAGES as u8), epoch.saturating_sub(1))],
					submitted_ms: now.saturating_sub(u64::from(b) * 4),
					included_ms: now,
					released: if b & 1 != 0 { vec![s] } else { Vec::new() },
				},
				3 => Event::ChallengeSeed {
					epoch: epoch.saturating_sub(u32::from(b & 1)),
					seed: [b; 32],
				},
				4 => Event::PathwayWritten {
					epoch: epoch.saturating_sub(u32::from(b & 1)),
					object: obj(4),
				},
				5 => Event::HeldOutEvaluated {
					epoch: epoch.saturating_sub(u32::from(b & 1)),
					loss: f32::from(b) / 8.0,
				},
				_ => Event::InnerStepReported {
					stage: s,
					epoch: near(epoch, b),
					miner: miner(b >> 3),
					step: u32::from(b >> 5 & 3),
					state_hash: hash(b >> 7),
				},
			},
		};
		Some(vec![ev])
	}

	/// A lease id by `x`: one of the leases out (where there is one, 15 times in 16), else a small id
	/// (void, unknown or not yet granted).
	fn lease(&self, st: &State, x: u8) -> LeaseId {
		let out = st.leases().count();
		match st.leases().nth(usize::from(x >> 4) % out.max(1)) {
			Some(l) if !x.is_multiple_of(16) => l.id,
			_ => 1 + LeaseId::from(x >> 4),
		}
	}
}

/// Seed inputs (mode byte, then events as the decoder reads them): a sync-mode and a local-mode epoch
/// whose samples run through every stage, after which stage 0 merges (gradient, plan, shard,
/// attestation), commits and writes the epoch's pathway log; a sample followed by expiries,
/// restarts, a silent miner and a reverted commit; and the two inputs that found bugs.
pub fn seeds() -> Vec<Vec<u8>> {
	// Events by selector (`Events::next`).
	let work = |m: u8| [0, 0, m];
	let complete = [8, 1, 1];
	let loss = [16, 1, 32];
	// One sample: forwards at stages 0, 1 and 2 (the tail's loss first), backwards at 1 and 0.
	let sample = [
		work(0),
		complete,
		work(1),
		complete,
		work(2),
		loss,
		complete,
		work(1),
		complete,
		work(0),
		complete,
	]
	.concat();
	let merge = [
		[22, 0, 0],            // miner 0's gradient at stage 0
		[28, 0, (1 << 4) | 3], // stage 0 merging, members {miner 0}
		[30, 0, 0x10],         // the epoch seed: the plan
		[24, 0, 0],            // shard 0 by miner 0
		[27, 0, 4],            // miner 0 attests, with the checkpoint
		[28, 6, 1 << 4],       // the commit: stage 0 trains epoch 1
		[30, 18, 1],           // epoch 0's pathway log
		[30, 12, 1],           // epoch 0's challenge seed
	]
	.concat();
	let epoch = |mode: u8| [vec![mode], sample.repeat(QUOTA as usize), merge.clone()].concat();
	let churn = [
		[0, 0, 0],      // a head lease
		[19, 0, 100],   // two seconds on: it expires
		[0, 0, 3],      // miner 3 takes the item
		[8, 1, 1],      // and completes it
		[0, 0, 1],      // miner 1's stage-1 forward
		[20, 1, 0x11],  // miner 1's process presents session 1
		[20, 1, 0x21],  // then session 2: a restart
		[21, 0, 0],     // the sweep for silent miners
		[28, 9, 4],     // a predicted commit: stage 0 in epoch 1
		[28, 12, 0x14], // that never lands: back to epoch 0
	]
	.concat();
	// What the target found (fixed in `State::revert_stage` and `State::forfeit_passes`): a reverted
	// head commit left the recomputation of a later sample queued at stage 1; and a miner's second
	// restart re-listed the pass another miner was recomputing instead of its new one.
	let reverted = [
		[20, 1, 0x11], // miner 1's process presents session 1
		[28, 9, 4],    // a predicted commit: stage 0 in epoch 1
		[28, 4, 0x20], // stage 1 in epoch 1 (members {miner 1})
		[28, 5, 0x40], // stage 2 in epoch 1 (members {miner 2})
	]
	.concat();
	let reverted = [
		vec![0],
		reverted,
		sample.clone(),
		vec![20, 1, 0x21], // miner 1 restarts: its pass is re-listed for recomputation
		vec![28, 12, 4],   // the head's commit never lands: back to epoch 0
	]
	.concat();
	// With a recomputation out, results go to the second lease out.
	let second: Vec<u8> = sample
		.chunks(3)
		.flat_map(|e| if e[0] == 0 { e.to_vec() } else { vec![e[0], 0x11, e[2]] })
		.collect();
	let restarted = [
		vec![0, 20, 1, 0x11], // sync mode; miner 1's process presents session 1
		sample.clone(),
		vec![20, 1, 0x21], // miner 1 restarts: its pass is re-listed
		vec![0, 1, 0x83],  // miner 3 asks at stage 1: the recomputation
		second,
		vec![20, 1, 0x31], // miner 1 restarts again
	]
	.concat();
	vec![epoch(0), epoch(1), [vec![0], sample, churn].concat(), reverted, restarted]
}
