//! The pathway log (docs/design.md §3 step 4, §7): for every sample of an epoch, which miner ran each stage and
//! the loss the tail reported. The orchestrator writes one log per epoch to the bucket
//! (`iota_storage::keys::pathway_log`) when the epoch's last stage has merged, and records its hash;
//! validators read it to pick spot-checks and to compute CLASP scores.
//!
//! Format: JSON ([`PathwayLog`]), records sorted by sample id.

use iota_primitives::ContentHash;
use serde::{Deserialize, Serialize};

use crate::AccountId;

/// One sample's path through the pipeline.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PathwayRecord {
	/// Sample id.
	pub sample: u64,
	/// Per stage (index = stage), the miner whose forward result was accepted.
	pub forward: Vec<AccountId>,
	/// Per stage, the miner whose backward result was accepted (the tail's equals its forward miner;
	/// differs from `forward` where a lease expired and another miner recomputed).
	pub backward: Vec<AccountId>,
	/// Per stage, the accepted forward output (activation; at the tail, the input gradient it produced).
	pub forward_outputs: Vec<ObjectEntry>,
	/// Per stage except the head, the accepted backward output (gradient w.r.t. the stage's input).
	pub backward_outputs: Vec<Option<ObjectEntry>>,
	/// Mean next-token cross-entropy the tail reported, in nats.
	pub loss: f32,
	/// Local mode: per stage, the inner step (state index in that miner's
	/// [`InnerStates::hashes`]) its accepted forward ran at. Empty in sync mode.
	#[serde(default, skip_serializing_if = "Vec::is_empty")]
	pub forward_steps: Vec<u32>,
	/// Local mode: per stage, the inner step its accepted backward ran at; the backward's parameter
	/// gradient went into that miner's inner step from state `k` to `k + 1`. Empty in sync mode.
	#[serde(default, skip_serializing_if = "Vec::is_empty")]
	pub backward_steps: Vec<u32>,
	/// Passes recomputed for the merge after the miner of the accepted one restarted before its gradient
	/// reached a merge submission (sync mode): the accepted pass above is still what the neighbouring
	/// stages used, the recomputation is what the stage's merge counted. Empty almost always.
	#[serde(default, skip_serializing_if = "Vec::is_empty")]
	pub recomputed: Vec<RecomputedPass>,
}

/// The miner whose pass of a stage the stage's merge counts for one sample: the last of the miners
/// that recomputed it there (`recomputed`, in order), else the accepted backward's miner, at the tail
/// (`tail`: the last stage, whose one pass is its forward) the accepted forward's. The one rule the
/// orchestrator routes and merges by (`State::counted_by`) and readers of the pathway log read back
/// ([`PathwayRecord::counted_by`]).
pub fn counted_pass<'a>(
	mut recomputed: impl DoubleEndedIterator<Item = &'a AccountId>,
	tail: bool,
	forward: Option<&'a AccountId>,
	backward: Option<&'a AccountId>,
) -> Option<&'a AccountId> {
	recomputed.next_back().or(if tail { forward } else { backward })
}

impl PathwayRecord {
	/// The miner whose pass of `stage` the stage's merge counted for this sample ([`counted_pass`]).
	/// `None` for a stage outside the record.
	pub fn counted_by(&self, stage: u16) -> Option<&AccountId> {
		let s = usize::from(stage);
		counted_pass(
			self.recomputed.iter().filter(|p| p.stage == stage).map(|p| &p.miner),
			s + 1 == self.forward.len(),
			self.forward.get(s),
			self.backward.get(s),
		)
	}
}

/// A pass of one stage recomputed for the merge ([`PathwayRecord::recomputed`]).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RecomputedPass {
	/// Stage.
	pub stage: u16,
	/// The miner that recomputed it (its merge submission counts it).
	pub miner: AccountId,
	/// Its output (the gradient w.r.t. the stage's input; none at the head).
	pub output: Option<ObjectEntry>,
}

/// Local mode: the state hashes one miner reported for its replica of one stage in the epoch
/// (`iota_reportInnerStep`, docs/design.md §10).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct InnerStates {
	/// Stage.
	pub stage: u16,
	/// The miner.
	pub miner: AccountId,
	/// `hashes[k]`: [`iota_protocol::optim::inner_state_hash`] of its state after `k` inner steps
	/// (`hashes[0]`: the state it began the epoch with).
	pub hashes: Vec<ContentHash>,
}

/// An object named in the log.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ObjectEntry {
	/// Key.
	pub key: String,
	/// BLAKE3 of the bytes.
	pub hash: ContentHash,
}

/// The pathway log of one epoch.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PathwayLog {
	/// Run id.
	pub run: String,
	/// Epoch.
	pub epoch: u32,
	/// Number of stages (length of every record's per-stage vectors).
	pub stages: u16,
	/// Completed samples (head backward done), sorted by sample id.
	pub records: Vec<PathwayRecord>,
	/// Local mode: every (stage, miner)'s reported state hashes, sorted by stage then account. Empty in
	/// sync mode.
	#[serde(default, skip_serializing_if = "Vec::is_empty")]
	pub inner_states: Vec<InnerStates>,
}

/// Why a pathway log is refused.
#[derive(Debug, thiserror::Error)]
pub enum PathwayError {
	/// Not JSON of the right shape.
	#[error("pathway log does not parse: {0}")]
	Parse(String),
	/// A record is inconsistent.
	#[error("pathway log record {index}: {reason}")]
	Record {
		/// Record index.
		index: usize,
		/// What is wrong.
		reason: String,
	},
}

impl PathwayLog {
	/// Parses and checks a stored log: every record has one entry per stage, a finite non-negative loss,
	/// and sample ids strictly increase; in local mode (records with inner steps) every record names
	/// steps at every stage, each a state its miner reported, and no (stage, miner) is listed twice.
	///
	/// # Errors
	/// [`PathwayError`].
	pub fn from_slice(bytes: &[u8]) -> Result<Self, PathwayError> {
		let log: PathwayLog =
			serde_json::from_slice(bytes).map_err(|e| PathwayError::Parse(e.to_string()))?;
		log.validate()?;
		Ok(log)
	}

	/// The checks of [`from_slice`](Self::from_slice).
	///
	/// # Errors
	/// [`PathwayError::Record`].
	pub fn validate(&self) -> Result<(), PathwayError> {
		let s = usize::from(self.stages);
		let mut last: Option<u64> = None;
		for (index, r) in self.records.iter().enumerate() {
			let bad = |reason: String| Err(PathwayError::Record { index, reason });
			if r.forward.len() != s
				|| r.backward.len() != s
				|| r.forward_outputs.len() != s
				|| r.backward_outputs.len() != s
			{
				return bad(format!("expected {s} entries per stage"));
			}
			if !r.loss.is_finite() || r.loss < 0.0 {
				return bad(format!("loss {} is not a finite non-negative number", r.loss));
			}
			if last.is_some_and(|l| r.sample <= l) {
				return bad(format!(
					"sample {} is not after {}",
					r.sample,
					last.unwrap_or_default()
				));
			}
			last = Some(r.sample);
			let local = !r.forward_steps.is_empty() || !r.backward_steps.is_empty();
			if local {
				if r.forward_steps.len() != s || r.backward_steps.len() != s {
					return bad(format!(
						"expected {s} inner steps per stage, forward and backward"
					));
				}
				for (stage, (who, step)) in r
					.forward
					.iter()
					.zip(&r.forward_steps)
					.chain(r.backward.iter().zip(&r.backward_steps))
					.enumerate()
					.map(|(i, x)| (i % s, x))
				{
					let reported = self.reported(stage as u16, who);
					if *step as usize >= reported {
						return bad(format!(
							"stage {stage}: inner step {step} of {who}, who reported {reported} states"
						));
					}
				}
			}
		}
		let mut seen = std::collections::BTreeSet::new();
		for t in &self.inner_states {
			if usize::from(t.stage) >= s || !seen.insert((t.stage, t.miner.0)) {
				return Err(PathwayError::Record {
					index: self.records.len(),
					reason: format!(
						"inner states of stage {} and {} are out of range or listed twice",
						t.stage, t.miner
					),
				});
			}
		}
		Ok(())
	}

	/// How many state hashes `miner` reported for `stage` (0 if none, and always in sync mode).
	pub fn reported(&self, stage: u16, miner: &AccountId) -> usize {
		self.inner_states(stage, miner).map_or(0, |t| t.hashes.len())
	}

	/// The state hashes `miner` reported for `stage`, if any.
	pub fn inner_states(&self, stage: u16, miner: &AccountId) -> Option<&InnerStates> {
		self.inner_states.iter().find(|t| t.stage == stage && &t.miner == miner)
	}

	/// Local mode: the passes `miner` ran at `stage` into its inner step `step` (from state `step` to
	/// `step + 1`), in sample order: each record with the state its forward ran at when that is an
	/// earlier one (`Some(j)`, `j ≠ step`: the backward went through the forward's kept graph, docs/design.md
	/// §3), else `None`. A pass is the record's backward at a middle or head stage, and its forward at
	/// the tail (whose backward is part of the forward item); a forward another miner ran is never
	/// stale for this miner.
	pub fn passes_at(
		&self,
		stage: u16,
		miner: &AccountId,
		step: u32,
	) -> Vec<(&PathwayRecord, Option<u32>)> {
		let s = usize::from(stage);
		let tail = s + 1 == usize::from(self.stages);
		self.records
			.iter()
			.filter(|r| {
				let (who, at) = if tail {
					(r.forward.get(s), r.forward_steps.get(s))
				} else {
					(r.backward.get(s), r.backward_steps.get(s))
				};
				who == Some(miner) && at == Some(&step)
			})
			.map(|r| {
				let stale = r
					.forward_steps
					.get(s)
					.copied()
					.filter(|j| !tail && r.forward.get(s) == Some(miner) && *j != step);
				(r, stale)
			})
			.collect()
	}

	/// Local mode: the states a challenge of `miner`'s inner step `step` at `stage` reveals (docs/design.md
	/// §10): `step` and `step + 1`, and every earlier state a pass of the step ran its forward at
	/// ([`passes_at`](Self::passes_at)), without which the validator could only approximate that pass.
	/// The one rule the orchestrator presigns the reveals by and the validator judges them by.
	pub fn revealed_states(
		&self,
		stage: u16,
		miner: &AccountId,
		step: u32,
	) -> std::collections::BTreeSet<u32> {
		let mut out: std::collections::BTreeSet<u32> =
			self.passes_at(stage, miner, step).into_iter().filter_map(|(_, j)| j).collect();
		out.extend([step, step + 1]);
		out
	}

	/// JSON bytes as stored.
	pub fn to_bytes(&self) -> Vec<u8> {
		serde_json::to_vec(self).unwrap_or_default()
	}
}

#[cfg(test)]
mod tests {
	use super::*;

	fn acc(i: u8) -> AccountId {
		subxt_core::utils::AccountId32([i; 32])
	}

	fn record(sample: u64, loss: f32) -> PathwayRecord {
		let e = ObjectEntry { key: "k".into(), hash: ContentHash::of(b"k") };
		PathwayRecord {
			sample,
			forward: vec![acc(1), acc(2)],
			backward: vec![acc(1), acc(2)],
			forward_outputs: vec![e.clone(), e.clone()],
			backward_outputs: vec![None, Some(e)],
			loss,
			forward_steps: vec![],
			backward_steps: vec![],
			recomputed: vec![],
		}
	}

	#[test]
	fn local_mode_records_name_reported_states() {
		let h = ContentHash::of(b"s");
		let mut log = PathwayLog {
			run: "r".into(),
			epoch: 1,
			stages: 2,
			records: vec![record(1, 2.5)],
			inner_states: vec![
				InnerStates { stage: 0, miner: acc(1), hashes: vec![h, h, h] },
				InnerStates { stage: 1, miner: acc(2), hashes: vec![h] },
			],
		};
		log.records[0].forward_steps = vec![2, 0];
		log.records[0].backward_steps = vec![2, 0];
		assert_eq!(PathwayLog::from_slice(&log.to_bytes()).unwrap(), log);
		assert_eq!(log.reported(0, &acc(1)), 3);
		assert_eq!(log.reported(1, &acc(1)), 0);
		let mut bad = log.clone();
		bad.records[0].backward_steps[1] = 1;
		assert!(bad.validate().is_err(), "a state the miner never reported");
		let mut bad = log.clone();
		bad.records[0].forward_steps.pop();
		assert!(bad.validate().is_err(), "steps missing for a stage");
		let mut bad = log.clone();
		bad.inner_states.push(bad.inner_states[0].clone());
		assert!(bad.validate().is_err(), "listed twice");
		let mut bad = log;
		bad.inner_states[1].stage = 2;
		assert!(bad.validate().is_err(), "no such stage");
		// A sync-mode log does not mention inner steps at all.
		let sync = PathwayLog {
			run: "r".into(),
			epoch: 0,
			stages: 2,
			records: vec![record(1, 2.5)],
			inner_states: vec![],
		};
		let json = String::from_utf8(sync.to_bytes()).unwrap();
		assert!(!json.contains("Steps") && !json.contains("innerStates"), "{json}");
	}

	#[test]
	fn a_challenge_reveals_the_states_its_passes_forwards_ran_at() {
		// Stage 0 (head) of 2: miner 1's step 3 holds samples 1 (forward at state 1), 2 (forward at
		// state 3), 3 (forward by miner 9 at its state 0: rerouted, not stale for miner 1); sample 4
		// (forward at state 0) went into step 2. At the tail, a pass is the forward item and is never stale.
		let h = ContentHash::of(b"s");
		let mut records = Vec::new();
		for (sample, fwd_miner, fwd_step, bwd_step) in
			[(1u64, 1u8, 1u32, 3u32), (2, 1, 3, 3), (3, 9, 0, 3), (4, 1, 0, 2)]
		{
			let mut r = record(sample, 2.0);
			r.forward[0] = acc(fwd_miner);
			r.forward_steps = vec![fwd_step, 5];
			r.backward_steps = vec![bwd_step, 5];
			records.push(r);
		}
		let log = PathwayLog {
			run: "r".into(),
			epoch: 0,
			stages: 2,
			records,
			inner_states: vec![
				InnerStates { stage: 0, miner: acc(1), hashes: vec![h; 5] },
				InnerStates { stage: 0, miner: acc(9), hashes: vec![h; 2] },
				InnerStates { stage: 1, miner: acc(2), hashes: vec![h; 6] },
			],
		};
		let passes = log.passes_at(0, &acc(1), 3);
		let got: Vec<(u64, Option<u32>)> = passes.iter().map(|(r, j)| (r.sample, *j)).collect();
		assert_eq!(got, vec![(1, Some(1)), (2, None), (3, None)]);
		assert_eq!(
			log.revealed_states(0, &acc(1), 3).into_iter().collect::<Vec<_>>(),
			vec![1, 3, 4]
		);
		// Sample 4's forward ran at state 0, its backward at 2.
		assert_eq!(
			log.revealed_states(0, &acc(1), 2).into_iter().collect::<Vec<_>>(),
			vec![0, 2, 3]
		);
		assert_eq!(log.passes_at(1, &acc(2), 5).len(), 4, "the tail's passes are its forwards");
		assert!(log.passes_at(1, &acc(2), 5).iter().all(|(_, j)| j.is_none()));
		assert!(log.passes_at(0, &acc(7), 3).is_empty());
	}

	#[test]
	fn round_trip_and_checks() {
		let log = PathwayLog {
			run: "r".into(),
			epoch: 3,
			stages: 2,
			records: vec![record(1, 2.5), record(4, 2.0)],
			inner_states: vec![],
		};
		assert_eq!(PathwayLog::from_slice(&log.to_bytes()).unwrap(), log);
		let mut bad = log.clone();
		bad.records[1].sample = 1;
		assert!(matches!(bad.validate(), Err(PathwayError::Record { index: 1, .. })));
		let mut bad = log.clone();
		bad.records[0].loss = f32::NAN;
		assert!(bad.validate().is_err());
		let mut bad = log;
		bad.records[0].forward.pop();
		assert!(bad.validate().is_err());
		assert!(matches!(PathwayLog::from_slice(b"{"), Err(PathwayError::Parse(_))));
	}
}
