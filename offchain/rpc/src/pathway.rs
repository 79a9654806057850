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
	/// and sample ids strictly increase.
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
		}
		Ok(())
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
		}
	}

	#[test]
	fn round_trip_and_checks() {
		let log = PathwayLog {
			run: "r".into(),
			epoch: 3,
			stages: 2,
			records: vec![record(1, 2.5), record(4, 2.0)],
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
