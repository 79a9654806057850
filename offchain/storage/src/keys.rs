//! The bucket's key layout: the one place where object keys are spelled (no string formatting elsewhere).
//!
//! Layout version 1 ([`VERSION`]). Every key starts with `v1/runs/{run}/` and then names its writer:
//!
//! ```text
//! v1/runs/{run}/miners/{miner}/epochs/{epoch:08}/stages/{stage:03}/samples/{sample:012}/{forward|backward}
//! v1/runs/{run}/miners/{miner}/epochs/{epoch:08}/stages/{stage:03}/gradient        gradient submission
//! v1/runs/{run}/miners/{miner}/epochs/{epoch:08}/stages/{stage:03}/shards/{shard:06} reduced butterfly shard
//! v1/runs/{run}/miners/{miner}/epochs/{epoch:08}/stages/{stage:03}/checkpoint      merged stage checkpoint
//! v1/runs/{run}/orchestrator/epochs/{epoch:08}/pathways                           pathway log
//! v1/runs/{run}/orchestrator/reports/{name}                                       run report
//! ```
//!
//! Scoping (docs/design.md §7, "a miner can write only its own keys"): everything a miner writes lives under
//! [`miner_scope`]`(run, miner)`, which ends in `/`. Identifiers may only contain `[A-Za-z0-9_-]`, so no
//! identifier can contain `/` or `..`, and one miner's scope is never a prefix of another's (`ab/` is not
//! a prefix of `abc/`). The orchestrator hands out a presigned PUT only after [`writer`] of the key
//! returned that miner. Numbers are zero-padded so a listing sorts numerically; a number wider than its
//! pad is still valid, it only sorts out of order. [`parse`] accepts exactly what the builders produce.

use std::fmt;

use serde::{Deserialize, Serialize};

/// Layout version; the first path segment of every key. A new layout gets a new version, never edits this one.
pub const VERSION: &str = "v1";

/// Longest identifier (run, miner, report name), in characters. An SS58 address is 47-48.
pub const MAX_ID_LEN: usize = 64;

/// A key or key part that the layout does not allow.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum KeyError {
	/// An identifier is empty, longer than [`MAX_ID_LEN`], or holds a character outside `[A-Za-z0-9_-]`.
	#[error("invalid {what} {value:?}: expected 1..={MAX_ID_LEN} characters from [A-Za-z0-9_-]")]
	InvalidId {
		/// Which identifier: "run", "miner" or "report name".
		what: &'static str,
		/// The rejected value (cut to 80 characters).
		value: String,
	},
	/// The key does not follow layout [`VERSION`] (wrong version, shape, or non-canonical numbers).
	#[error("{key:?} is not a {VERSION} key: {reason}")]
	NotInLayout {
		/// The rejected key (cut to 200 characters).
		key: String,
		/// What did not match.
		reason: &'static str,
	},
}

/// A validated identifier: a run id, a miner id (its chain account, e.g. SS58) or a report name.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct Id(String);

impl Id {
	/// Validates `value` as an identifier.
	///
	/// # Errors
	/// [`KeyError::InvalidId`] if it is empty, longer than [`MAX_ID_LEN`] or holds a character outside
	/// `[A-Za-z0-9_-]`.
	pub fn new(value: impl Into<String>) -> Result<Self, KeyError> {
		Self::checked(value.into(), "identifier")
	}

	fn checked(value: String, what: &'static str) -> Result<Self, KeyError> {
		let ok = !value.is_empty()
			&& value.len() <= MAX_ID_LEN
			&& value.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_');
		if ok {
			Ok(Self(value))
		} else {
			Err(KeyError::InvalidId { what, value: value.chars().take(80).collect() })
		}
	}

	/// The identifier as text.
	pub fn as_str(&self) -> &str {
		&self.0
	}
}

impl TryFrom<String> for Id {
	type Error = KeyError;
	fn try_from(value: String) -> Result<Self, KeyError> {
		Self::new(value)
	}
}

impl From<Id> for String {
	fn from(id: Id) -> String {
		id.0
	}
}

impl fmt::Display for Id {
	fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
		f.write_str(&self.0)
	}
}

/// Which way a tensor crosses a stage boundary.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Direction {
	/// An activation, sent from stage s to stage s+1.
	Forward,
	/// A gradient with respect to an activation, sent from stage s+1 back to stage s.
	Backward,
}

impl Direction {
	fn as_str(self) -> &'static str {
		match self {
			Direction::Forward => "forward",
			Direction::Backward => "backward",
		}
	}
}

/// Who may write a key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Writer {
	/// The miner with this id (its chain account).
	Miner(Id),
	/// The validator with this id (its chain account).
	Validator(Id),
	/// The orchestrator.
	Orchestrator,
}

/// Every kind of object in the bucket, with the fields its key is built from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum ObjectKey {
	/// A compressed activation (forward) or activation gradient (backward) of one sample at one stage,
	/// written by the miner that computed it.
	Activation {
		/// Training run.
		run: Id,
		/// Epoch (optimizer step).
		epoch: u64,
		/// Pipeline stage that produced the tensor.
		stage: u32,
		/// Sample id.
		sample: u64,
		/// Forward activation or backward gradient.
		direction: Direction,
		/// Writer.
		miner: Id,
	},
	/// A miner's accumulated gradient for one epoch and stage, input to the butterfly merge.
	GradientSubmission {
		/// Training run.
		run: Id,
		/// Epoch.
		epoch: u64,
		/// Stage.
		stage: u32,
		/// Writer.
		miner: Id,
	},
	/// One butterfly shard as reduced by one member of its pair (both members write their own copy).
	ReducedShard {
		/// Training run.
		run: Id,
		/// Epoch.
		epoch: u64,
		/// Stage.
		stage: u32,
		/// Shard index.
		shard: u32,
		/// Writer.
		miner: Id,
	},
	/// The full stage state after the epoch's merge, uploaded by the replica the seed chose.
	StageCheckpoint {
		/// Training run.
		run: Id,
		/// Epoch.
		epoch: u64,
		/// Stage.
		stage: u32,
		/// Writer.
		miner: Id,
	},
	/// Local mode: a miner's revealed replica state after `step` inner steps of an epoch
	/// (`InnerState::to_bytes`; its BLAKE3 is the state hash the miner reported), uploaded when challenged.
	InnerState {
		/// Training run.
		run: Id,
		/// Epoch.
		epoch: u64,
		/// Stage.
		stage: u32,
		/// Inner step (state index).
		step: u32,
		/// Writer.
		miner: Id,
	},
	/// The orchestrator's pathway log of one epoch: `(sample_id, miner per stage, loss)`.
	PathwayLog {
		/// Training run.
		run: Id,
		/// Epoch.
		epoch: u64,
	},
	/// The run spec (model config, optimizer, data manifest) as JSON; its BLAKE3 is the on-chain
	/// `model_hash`. Written by the orchestrator.
	RunSpec {
		/// Training run.
		run: Id,
	},
	/// A stage's initial weights (epoch 0) imported from a Hugging Face folder (`prepare-data
	/// --init-from`): a stage checkpoint (`Stage::to_checkpoint`) named with its state hash in the run
	/// spec's `init`, written once by `prepare-data`.
	InitCheckpoint {
		/// Training run.
		run: Id,
		/// Stage.
		stage: u32,
	},
	/// The run's tokenizer (Hugging Face `tokenizer.json`), written once by `prepare-data`.
	Tokenizer {
		/// Training run.
		run: Id,
	},
	/// One tokenized data shard (`rows × (seq_len + 1)` little-endian u32 tokens), written once by
	/// `prepare-data`.
	DataShard {
		/// Training run.
		run: Id,
		/// Shard index.
		shard: u32,
	},
	/// The run's held-out rows (the shards' row format, from documents no shard holds), written once
	/// by `prepare-data`; the orchestrator evaluates every merged model on them.
	HeldOut {
		/// Training run.
		run: Id,
	},
	/// A validator's evidence for one verdict (inputs, outputs, recomputation), whose BLAKE3 goes on
	/// chain with the verdict.
	Evidence {
		/// Training run.
		run: Id,
		/// Writer.
		validator: Id,
		/// Epoch checked.
		epoch: u64,
		/// The miner checked.
		miner: Id,
	},
	/// A named run report, written by the orchestrator.
	RunReport {
		/// Training run.
		run: Id,
		/// Report name.
		name: Id,
	},
}

fn run_prefix(run: &Id) -> String {
	format!("{VERSION}/runs/{run}/")
}

/// Prefix of every key of `run` (ends in `/`); use it to list or delete a run.
pub fn run_scope(run: &Id) -> String {
	run_prefix(run)
}

/// Prefix of every key that `miner` may write in `run` (ends in `/`).
pub fn miner_scope(run: &Id, miner: &Id) -> String {
	format!("{}miners/{miner}/", run_prefix(run))
}

fn stage_dir(run: &Id, miner: &Id, epoch: u64, stage: u32) -> String {
	format!("{}epochs/{epoch:08}/stages/{stage:03}/", miner_scope(run, miner))
}

/// Key of an activation (`Forward`) or activation gradient (`Backward`) written by `miner`.
pub fn activation(
	run: &Id,
	epoch: u64,
	stage: u32,
	sample: u64,
	direction: Direction,
	miner: &Id,
) -> String {
	format!("{}samples/{sample:012}/{}", stage_dir(run, miner, epoch, stage), direction.as_str())
}

/// Key of `miner`'s accumulated gradient submission for `(epoch, stage)`.
pub fn gradient_submission(run: &Id, epoch: u64, stage: u32, miner: &Id) -> String {
	format!("{}gradient", stage_dir(run, miner, epoch, stage))
}

/// Key of shard `shard` of `(epoch, stage)` as reduced by `miner`.
pub fn reduced_shard(run: &Id, epoch: u64, stage: u32, shard: u32, miner: &Id) -> String {
	format!("{}shards/{shard:06}", stage_dir(run, miner, epoch, stage))
}

/// Key of the merged stage checkpoint of `(epoch, stage)` uploaded by `miner`.
pub fn stage_checkpoint(run: &Id, epoch: u64, stage: u32, miner: &Id) -> String {
	format!("{}checkpoint", stage_dir(run, miner, epoch, stage))
}

/// Key of `miner`'s revealed state after `step` inner steps of `(epoch, stage)` (local mode).
pub fn inner_state(run: &Id, epoch: u64, stage: u32, step: u32, miner: &Id) -> String {
	format!("{}inner/{step:06}", stage_dir(run, miner, epoch, stage))
}

/// Key of the orchestrator's pathway log for `epoch`.
pub fn pathway_log(run: &Id, epoch: u64) -> String {
	format!("{}orchestrator/epochs/{epoch:08}/pathways", run_prefix(run))
}

/// Key of the run spec of `run` (JSON; BLAKE3 is the on-chain `model_hash`).
pub fn run_spec(run: &Id) -> String {
	format!("{}orchestrator/spec.json", run_prefix(run))
}

/// Key of stage `stage`'s initial weights of `run` (a run started from a Hugging Face folder).
pub fn init_checkpoint(run: &Id, stage: u32) -> String {
	format!("{}data/init/stages/{stage:03}", run_prefix(run))
}

/// Key of the tokenizer of `run`.
pub fn tokenizer(run: &Id) -> String {
	format!("{}data/tokenizer.json", run_prefix(run))
}

/// Key of tokenized data shard `shard` of `run`.
pub fn data_shard(run: &Id, shard: u32) -> String {
	format!("{}data/shards/{shard:06}", run_prefix(run))
}

/// Key of the held-out rows of `run` (same row format as a data shard; no shard holds them).
pub fn heldout(run: &Id) -> String {
	format!("{}data/heldout", run_prefix(run))
}

/// Prefix of every key that `validator` may write in `run` (ends in `/`).
pub fn validator_scope(run: &Id, validator: &Id) -> String {
	format!("{}validators/{validator}/", run_prefix(run))
}

/// Key of `validator`'s evidence about `miner` in `epoch`.
pub fn evidence(run: &Id, validator: &Id, epoch: u64, miner: &Id) -> String {
	format!("{}epochs/{epoch:08}/evidence/{miner}", validator_scope(run, validator))
}

/// Key of the run report `name`.
pub fn run_report(run: &Id, name: &Id) -> String {
	format!("{}orchestrator/reports/{name}", run_prefix(run))
}

impl ObjectKey {
	/// The key string for this object (the builders above, chosen by variant).
	pub fn to_key(&self) -> String {
		match self {
			ObjectKey::Activation { run, epoch, stage, sample, direction, miner } => {
				activation(run, *epoch, *stage, *sample, *direction, miner)
			},
			ObjectKey::GradientSubmission { run, epoch, stage, miner } => {
				gradient_submission(run, *epoch, *stage, miner)
			},
			ObjectKey::ReducedShard { run, epoch, stage, shard, miner } => {
				reduced_shard(run, *epoch, *stage, *shard, miner)
			},
			ObjectKey::StageCheckpoint { run, epoch, stage, miner } => {
				stage_checkpoint(run, *epoch, *stage, miner)
			},
			ObjectKey::InnerState { run, epoch, stage, step, miner } => {
				inner_state(run, *epoch, *stage, *step, miner)
			},
			ObjectKey::PathwayLog { run, epoch } => pathway_log(run, *epoch),
			ObjectKey::RunSpec { run } => run_spec(run),
			ObjectKey::InitCheckpoint { run, stage } => init_checkpoint(run, *stage),
			ObjectKey::Tokenizer { run } => tokenizer(run),
			ObjectKey::DataShard { run, shard } => data_shard(run, *shard),
			ObjectKey::HeldOut { run } => heldout(run),
			ObjectKey::Evidence { run, validator, epoch, miner } => {
				evidence(run, validator, *epoch, miner)
			},
			ObjectKey::RunReport { run, name } => run_report(run, name),
		}
	}

	/// Who may write this object.
	pub fn writer(&self) -> Writer {
		match self {
			ObjectKey::Activation { miner, .. }
			| ObjectKey::GradientSubmission { miner, .. }
			| ObjectKey::ReducedShard { miner, .. }
			| ObjectKey::StageCheckpoint { miner, .. }
			| ObjectKey::InnerState { miner, .. } => Writer::Miner(miner.clone()),
			ObjectKey::Evidence { validator, .. } => Writer::Validator(validator.clone()),
			ObjectKey::PathwayLog { .. }
			| ObjectKey::RunReport { .. }
			| ObjectKey::RunSpec { .. }
			| ObjectKey::Tokenizer { .. }
			| ObjectKey::InitCheckpoint { .. }
			| ObjectKey::DataShard { .. }
			| ObjectKey::HeldOut { .. } => Writer::Orchestrator,
		}
	}
}

/// Parses a key back into its fields; the inverse of the builders.
///
/// # Errors
/// [`KeyError::NotInLayout`] if the key is not one the builders of layout [`VERSION`] produce
/// (including numbers with a different zero-padding), [`KeyError::InvalidId`] for a bad identifier.
pub fn parse(key: &str) -> Result<ObjectKey, KeyError> {
	let bad = |reason| KeyError::NotInLayout { key: key.chars().take(200).collect(), reason };
	let parts: Vec<&str> = key.split('/').collect();
	let num = |s: &str| s.parse::<u64>().map_err(|_| bad("expected a decimal number"));
	let num32 = |s: &str| s.parse::<u32>().map_err(|_| bad("expected a decimal number below 2^32"));
	let parsed = match parts.as_slice() {
		[v, "runs", run, rest @ ..] if *v == VERSION => {
			let run = Id::checked((*run).to_owned(), "run")?;
			match rest {
				["miners", miner, "epochs", epoch, "stages", stage, tail @ ..] => {
					let miner = Id::checked((*miner).to_owned(), "miner")?;
					let (epoch, stage) = (num(epoch)?, num32(stage)?);
					match tail {
						["samples", sample, dir] => {
							let direction = match *dir {
								"forward" => Direction::Forward,
								"backward" => Direction::Backward,
								_ => return Err(bad("expected forward or backward")),
							};
							ObjectKey::Activation {
								run,
								epoch,
								stage,
								sample: num(sample)?,
								direction,
								miner,
							}
						},
						["gradient"] => ObjectKey::GradientSubmission { run, epoch, stage, miner },
						["shards", shard] => ObjectKey::ReducedShard {
							run,
							epoch,
							stage,
							shard: num32(shard)?,
							miner,
						},
						["checkpoint"] => ObjectKey::StageCheckpoint { run, epoch, stage, miner },
						["inner", step] => {
							ObjectKey::InnerState { run, epoch, stage, step: num32(step)?, miner }
						},
						_ => return Err(bad("unknown object under a miner's stage")),
					}
				},
				["orchestrator", "epochs", epoch, "pathways"] => {
					ObjectKey::PathwayLog { run, epoch: num(epoch)? }
				},
				["validators", validator, "epochs", epoch, "evidence", miner] => {
					ObjectKey::Evidence {
						run,
						validator: Id::checked((*validator).to_owned(), "validator")?,
						epoch: num(epoch)?,
						miner: Id::checked((*miner).to_owned(), "miner")?,
					}
				},
				["orchestrator", "spec.json"] => ObjectKey::RunSpec { run },
				["data", "tokenizer.json"] => ObjectKey::Tokenizer { run },
				["data", "shards", shard] => ObjectKey::DataShard { run, shard: num32(shard)? },
				["data", "heldout"] => ObjectKey::HeldOut { run },
				["data", "init", "stages", stage] => {
					ObjectKey::InitCheckpoint { run, stage: num32(stage)? }
				},
				["orchestrator", "reports", name] => ObjectKey::RunReport {
					run,
					name: Id::checked((*name).to_owned(), "report name")?,
				},
				_ => return Err(bad("unknown object kind")),
			}
		},
		_ => return Err(bad("expected v1/runs/{run}/...")),
	};
	if parsed.to_key() != key {
		return Err(bad("numbers are not in canonical zero-padded form"));
	}
	Ok(parsed)
}

/// Who may write `key`; what the orchestrator checks before presigning a PUT.
///
/// # Errors
/// As [`parse`].
pub fn writer(key: &str) -> Result<Writer, KeyError> {
	parse(key).map(|k| k.writer())
}

#[cfg(test)]
mod tests {
	use super::*;

	fn id(s: &str) -> Id {
		Id::new(s).unwrap()
	}

	fn all_kinds() -> Vec<ObjectKey> {
		let (run, miner) = (id("run-1"), id("5GrwvaEF5zXb26Fz9rcQpDWS57CtERHpNehXCPcNoHGKutQY"));
		vec![
			ObjectKey::Activation {
				run: run.clone(),
				epoch: 3,
				stage: 1,
				sample: 42,
				direction: Direction::Forward,
				miner: miner.clone(),
			},
			ObjectKey::Activation {
				run: run.clone(),
				epoch: 3,
				stage: 1,
				sample: 42,
				direction: Direction::Backward,
				miner: miner.clone(),
			},
			ObjectKey::GradientSubmission {
				run: run.clone(),
				epoch: 3,
				stage: 1,
				miner: miner.clone(),
			},
			ObjectKey::ReducedShard {
				run: run.clone(),
				epoch: 3,
				stage: 1,
				shard: 7,
				miner: miner.clone(),
			},
			ObjectKey::StageCheckpoint {
				run: run.clone(),
				epoch: 3,
				stage: 1,
				miner: miner.clone(),
			},
			ObjectKey::InnerState { run: run.clone(), epoch: 3, stage: 1, step: 12, miner },
			ObjectKey::PathwayLog { run: run.clone(), epoch: 3 },
			ObjectKey::RunSpec { run: run.clone() },
			ObjectKey::Evidence {
				run: run.clone(),
				validator: id("validator-1"),
				epoch: 3,
				miner: id("miner-9"),
			},
			ObjectKey::Tokenizer { run: run.clone() },
			ObjectKey::DataShard { run: run.clone(), shard: 7 },
			ObjectKey::HeldOut { run: run.clone() },
			ObjectKey::InitCheckpoint { run: run.clone(), stage: 2 },
			ObjectKey::RunReport { run, name: id("final") },
		]
	}

	#[test]
	fn every_kind_round_trips_and_is_versioned() {
		for k in all_kinds() {
			let s = k.to_key();
			assert!(s.starts_with("v1/runs/run-1/"), "{s}");
			assert_eq!(parse(&s).unwrap(), k, "{s}");
		}
	}

	#[test]
	fn layout_is_stable() {
		let (run, m) = (id("r"), id("m"));
		assert_eq!(init_checkpoint(&run, 2), "v1/runs/r/data/init/stages/002");
		assert_eq!(
			activation(&run, 3, 1, 42, Direction::Forward, &m),
			"v1/runs/r/miners/m/epochs/00000003/stages/001/samples/000000000042/forward"
		);
		assert_eq!(
			reduced_shard(&run, 3, 1, 7, &m),
			"v1/runs/r/miners/m/epochs/00000003/stages/001/shards/000007"
		);
		assert_eq!(pathway_log(&run, 3), "v1/runs/r/orchestrator/epochs/00000003/pathways");
	}

	#[test]
	fn miner_keys_are_inside_their_scope_only() {
		let run = id("r");
		let (ab, abc) = (id("ab"), id("abc"));
		let k = gradient_submission(&run, 0, 0, &abc);
		assert!(k.starts_with(&miner_scope(&run, &abc)));
		assert!(
			!k.starts_with(&miner_scope(&run, &ab)),
			"a miner id that is a prefix of another must not match"
		);
		assert_eq!(writer(&k).unwrap(), Writer::Miner(abc));
		assert_eq!(writer(&run_report(&run, &id("x"))).unwrap(), Writer::Orchestrator);
	}

	#[test]
	fn ids_that_could_escape_a_scope_are_rejected() {
		for bad in ["", "a/b", "..", ".", "a b", "é", &"x".repeat(MAX_ID_LEN + 1)] {
			assert!(matches!(Id::new(bad), Err(KeyError::InvalidId { .. })), "{bad:?}");
		}
		assert!(Id::new("x".repeat(MAX_ID_LEN)).is_ok());
	}

	#[test]
	fn keys_outside_the_layout_are_rejected() {
		for bad in [
			"",
			"v2/runs/r/orchestrator/reports/x",
			"v1/runs/r/miners/m/epochs/3/stages/001/gradient",
			"v1/runs/r/miners/m/epochs/00000003/stages/001/samples/000000000042/sideways",
			"v1/runs/r/miners/m/epochs/00000003/stages/001/gradient/extra",
			"v1/runs/r/miners/../epochs/00000003/stages/001/gradient",
			"v1/runs/r/orchestrator/epochs/x/pathways",
		] {
			assert!(parse(bad).is_err(), "{bad:?}");
		}
		assert!(matches!(
			parse("v1/runs/r/miners/a.b/epochs/00000003/stages/001/gradient"),
			Err(KeyError::InvalidId { what: "miner", .. })
		));
	}

	#[test]
	fn numbers_sort_numerically_within_their_pad() {
		let (run, m) = (id("r"), id("m"));
		let mut keys: Vec<String> = [10u64, 9, 100, 1]
			.iter()
			.map(|e| gradient_submission(&run, *e, 0, &m))
			.collect();
		keys.sort();
		let epochs: Vec<u64> = keys
			.iter()
			.map(|k| match parse(k).unwrap() {
				ObjectKey::GradientSubmission { epoch, .. } => epoch,
				other => panic!("{other:?}"),
			})
			.collect();
		assert_eq!(epochs, vec![1, 9, 10, 100]);
	}
}
