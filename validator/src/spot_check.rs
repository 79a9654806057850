//! Spot-checks (docs/design.md §3 step 7): pick (miner, sample) pairs with the chain's epoch seed, recompute the
//! stage's work from its inputs and the stage's global weights of the epoch, compare with what the miner
//! uploaded ([`crate::tolerance`]), and produce a verdict with an evidence object.
//!
//! ## Selection (anyone can recompute it)
//!
//! For each (stage, miner) in the epoch's pathway log, ordered by stage then account bytes, the candidate
//! records are those where the miner ran the stage's **forward** (`forward[s] = miner`), in sample order,
//! and, at body stages (`0 < s < tail`), those where it ran the **backward** with an output. From the
//! stream [`SeededRng`]`(`[`SELECTION_DOMAIN`]`, epoch_seed, epoch u32 LE ‖ stage u16 LE ‖ account 32
//! bytes ‖ kind u8 (0 forward, 1 backward))`, a partial Fisher–Yates shuffle (`swap(i, i + below(n − i))`)
//! draws [`FORWARD_CHECKS`] forward and [`BACKWARD_CHECKS`] backward candidates. `epoch_seed` is the
//! chain's `EpochSeeds(epoch)`.
//!
//! ## Fairness
//!
//! A check ends in a verdict only when the validator holds trustworthy inputs and weights:
//!
//! | situation | outcome |
//! |---|---|
//! | recomputation within tolerance (and, at the tail, the reported loss matches) | `Pass` |
//! | outside tolerance, wrong shape, undecodable or NaN output whose hash matches the log, wrong loss | `Fail` |
//! | the miner's output object does not exist (404) | `Fail` (missing objects count against the miner) |
//! | an **input** is missing, undecodable or refused by the model | inconclusive (the previous stage's miner is judged by its own check) |
//! | an object's bytes do not hash to what the log says | inconclusive (garbage) |
//! | orchestrator or store unreachable | inconclusive |
//! | the log's record is inconsistent | inconclusive (malformed log) |
//! | stage weights missing, or not matching the chain's manifest | inconclusive |
//!
//! Inconclusive checks are logged and counted ([`Inconclusive::kind`] is the metrics label) and never
//! turn into a verdict. Per (epoch, miner) the pallet accepts one verdict per validator, so the checks
//! are bundled ([`EvidenceBundle`]): `Fail` if any check failed, else `Pass`; the BLAKE3 of the bundle's
//! JSON goes on chain with it.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use async_trait::async_trait;
use candle_core::{DType, Device};
use iota_model::wire::{self, Decoded, Expect, Kind};
use iota_model::{Encoding, Stage};
use iota_primitives::{ContentHash, Seed, Verdict};
use iota_protocol::selection::{spot_checks, CheckKind};
use iota_rpc::{AccountId, ObjectEntry, PathwayLog, PathwayRecord, RunSpec};
use serde::{Deserialize, Serialize};

use crate::inner_step::{InnerStepEvidence, PseudoGradientEvidence};
use crate::objects::{FetchError, Objects};
use crate::recompute::{self, StageInput};
use crate::shard_audit::ShardEvidence;
use crate::tolerance::{self, Comparison};

/// Domain of the selection stream.
pub use iota_protocol::selection::SPOT_CHECK_DOMAIN as SELECTION_DOMAIN;
/// Forward items checked per (stage, miner) and epoch (fewer if it ran fewer).
pub const FORWARD_CHECKS: usize = 2;
/// Backward items checked per (stage, miner) and epoch at body stages.
pub const BACKWARD_CHECKS: usize = 1;
/// Version of the evidence JSON.
pub const EVIDENCE_VERSION: u32 = 1;

/// Which half of a work item is checked.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum ItemKind {
	/// The forward output (at the tail: loss and input gradient).
	Forward,
	/// A body stage's input gradient.
	Backward,
}

/// One drawn check.
#[derive(Clone, Debug, PartialEq)]
pub struct CheckTarget {
	/// The miner judged.
	pub miner: AccountId,
	/// Its stage.
	pub stage: u16,
	/// Sample id.
	pub sample: u64,
	/// Index of the sample's record in the log.
	pub record: usize,
	/// Forward or backward.
	pub kind: ItemKind,
}

/// (stage, account bytes, kind): one selection unit, ordered.
type UnitKey = (u16, [u8; 32], ItemKind);

/// Draws the epoch's checks from the log and the chain's epoch seed (module docs). Records whose
/// per-stage vectors are too short are skipped (a malformed log is refused before this by
/// [`PathwayLog::validate`]).
pub fn select(
	log: &PathwayLog,
	epoch_seed: &Seed,
	forward_checks: usize,
	backward_checks: usize,
) -> Vec<CheckTarget> {
	let stages = usize::from(log.stages);
	let mut candidates: BTreeMap<UnitKey, (AccountId, Vec<usize>)> = BTreeMap::new();
	for (i, r) in log.records.iter().enumerate() {
		if r.forward.len() < stages
			|| r.backward.len() < stages
			|| r.backward_outputs.len() < stages
		{
			continue;
		}
		for s in 0..stages {
			let f = &r.forward[s];
			if r.forward_outputs.get(s).is_none_or(|o| o.key.is_empty()) {
				continue;
			}
			candidates
				.entry((s as u16, f.0, ItemKind::Forward))
				.or_insert_with(|| (f.clone(), Vec::new()))
				.1
				.push(i);
			let b = &r.backward[s];
			if s > 0 && s + 1 < stages && r.backward_outputs[s].is_some() {
				candidates
					.entry((s as u16, b.0, ItemKind::Backward))
					.or_insert_with(|| (b.clone(), Vec::new()))
					.1
					.push(i);
			}
		}
	}
	let mut out = Vec::new();
	for ((stage, bytes, kind), (miner, recs)) in candidates {
		let k = match kind {
			ItemKind::Forward => forward_checks,
			ItemKind::Backward => backward_checks,
		}
		.min(recs.len());
		let kind_byte = match kind {
			ItemKind::Forward => CheckKind::Forward,
			ItemKind::Backward => CheckKind::Backward,
		};
		for i in spot_checks(epoch_seed, log.epoch, stage, &bytes, kind_byte, recs, k) {
			out.push(CheckTarget {
				miner: miner.clone(),
				stage,
				sample: log.records[i].sample,
				record: i,
				kind,
			});
		}
	}
	out
}

/// Where a stage's weights of an epoch come from.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", tag = "source")]
pub enum WeightsRef {
	/// Epoch 0: the seeded initialisation (`Stage::new(model, stage, spec.seed)`), or the run spec's
	/// initial checkpoint of the stage when the run continues an existing model (`Stage::initial`).
	Init,
	/// The stage checkpoint of epoch `e − 1` named by the chain's merge manifest, loaded only if its
	/// state hashes to the manifest's attested `state_hash` (`Stage::load_checkpoint`).
	Checkpoint {
		/// Object key.
		key: String,
		/// BLAKE3 of the object, from the chain.
		hash: ContentHash,
		/// The stage state hash every replica attested, from the chain.
		state_hash: ContentHash,
	},
	/// Local mode: the weights of a miner's revealed inner state (docs/design.md §10), an
	/// `InnerState` object the miner uploaded to its own key, used only if it hashes to the state hash
	/// the miner reported for `step`.
	Revealed {
		/// Object key (`keys::inner_state`).
		key: String,
		/// The state hash the miner reported (the object's BLAKE3).
		hash: ContentHash,
		/// The inner step `k` whose state it is.
		step: u32,
		/// A backward that ran through a forward kept from an earlier inner step: that forward's
		/// revealed state, where the whole pass ran (the miner's weight stashing) and is recomputed.
		#[serde(default, skip_serializing_if = "Option::is_none")]
		kept_forward: Option<KeptForward>,
	},
}

/// The revealed state a kept forward ran at ([`WeightsRef::Revealed`]).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct KeptForward {
	/// Its inner step.
	pub step: u32,
	/// The revealed object (key, reported hash).
	pub state: ObjectEntry,
}

/// Why the weights of a stage cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum WeightsError {
	/// The chain has no manifest, or the manifest has no checkpoint.
	#[error("no weights for stage {stage} of epoch {epoch}: {reason}")]
	Missing {
		/// Epoch.
		epoch: u32,
		/// Stage.
		stage: u16,
		/// Why.
		reason: String,
	},
	/// The chain's manifest is unusable (key not UTF-8, checkpoint for another stage or model).
	#[error("manifest of stage {stage} for epoch {epoch} does not match the chain/run: {reason}")]
	ManifestMismatch {
		/// Epoch.
		epoch: u32,
		/// Stage.
		stage: u16,
		/// Why.
		reason: String,
	},
	/// The chain could not be read.
	#[error("chain unavailable: {0}")]
	Unavailable(String),
}

/// Tells which weights a stage had in an epoch (from the chain's merge manifests).
#[async_trait]
pub trait WeightsSource: Send + Sync {
	/// The weights of `stage` during `epoch`: [`WeightsRef::Init`] at epoch 0, else the checkpoint of
	/// the manifest of `(epoch − 1, stage)`.
	///
	/// # Errors
	/// [`WeightsError`].
	async fn weights(&self, epoch: u32, stage: u16) -> Result<WeightsRef, WeightsError>;
}

/// Why a check ended without a verdict.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Inconclusive {
	/// Orchestrator or store unreachable.
	#[error("unavailable: {0}")]
	Unavailable(String),
	/// An object's bytes do not hash to what the log or chain says.
	#[error("garbage object: {0}")]
	Garbage(String),
	/// An input (written by another miner, or the run's data) is missing, undecodable or refused.
	#[error("bad input: {0}")]
	BadInput(String),
	/// The log's record is inconsistent for this check.
	#[error("malformed pathway log: {0}")]
	MalformedLog(String),
	/// No trustworthy stage weights.
	#[error("weights: {0}")]
	Weights(String),
	/// Local mode: an inner step's replay is off, but some of its passes may have run through a
	/// forward kept from an earlier inner step (`crate::inner_step`).
	#[error("stale passes: {0}")]
	Stale(String),
	/// Local mode: the run's merge codec leaves the pseudo-gradient check nothing to compare.
	#[error("unverifiable: {0}")]
	Unverifiable(String),
}

impl Inconclusive {
	/// A short stable label (metrics).
	pub fn kind(&self) -> &'static str {
		match self {
			Inconclusive::Unavailable(_) => "unavailable",
			Inconclusive::Garbage(_) => "garbage_object",
			Inconclusive::BadInput(_) => "bad_input",
			Inconclusive::MalformedLog(_) => "malformed_log",
			Inconclusive::Weights(_) => "weights",
			Inconclusive::Stale(_) => "stale_passes",
			Inconclusive::Unverifiable(_) => "unverifiable",
		}
	}
}

/// The evidence of one conclusive check.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CheckEvidence {
	/// Stage.
	pub stage: u16,
	/// Sample id.
	pub sample: u64,
	/// Forward or backward.
	pub kind: ItemKind,
	/// The inputs used (activation / gradient objects from the log; the data shard for tokens).
	pub inputs: Vec<ObjectEntry>,
	/// The miner's output as named in the log.
	pub output: ObjectEntry,
	/// The weights used.
	pub weights: WeightsRef,
	/// BLAKE3 of the recomputed output as little-endian f32 (`None` when nothing was recomputed).
	pub recomputed: Option<ContentHash>,
	/// The comparison (`None` when the output was missing or undecodable).
	pub comparison: Option<Comparison>,
	/// The loss the log reports (tail forward).
	pub loss_claimed: Option<f32>,
	/// The loss recomputed (tail forward).
	pub loss_recomputed: Option<f32>,
	/// The finding.
	pub verdict: Verdict,
	/// Why it failed, in words.
	pub reason: Option<String>,
}

/// The evidence object of one (epoch, miner) verdict; its BLAKE3 goes on chain.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct EvidenceBundle {
	/// [`EVIDENCE_VERSION`].
	pub version: u32,
	/// Run id.
	pub run: String,
	/// Epoch.
	pub epoch: u32,
	/// The validator (SS58).
	pub validator: String,
	/// The miner (SS58).
	pub miner: String,
	/// `Fail` if any check or shard audit failed, else `Pass`.
	pub verdict: Verdict,
	/// The spot-checks.
	pub checks: Vec<CheckEvidence>,
	/// The shard audits of copies this miner reduced ([`crate::shard_audit`]).
	#[serde(default)]
	pub shards: Vec<ShardEvidence>,
	/// Local mode: the challenged inner steps judged ([`crate::inner_step`]).
	#[serde(default, skip_serializing_if = "Vec::is_empty")]
	pub inner_steps: Vec<InnerStepEvidence>,
	/// Local mode: the submitted pseudo-gradients judged against the revealed last state.
	#[serde(default, skip_serializing_if = "Vec::is_empty")]
	pub pseudo_gradients: Vec<PseudoGradientEvidence>,
	/// Gradient submissions the orchestrator refused that break the acceptance rule by their bytes
	/// ([`crate::vector_audit`]).
	#[serde(default, skip_serializing_if = "Vec::is_empty")]
	pub vectors: Vec<crate::vector_audit::VectorEvidence>,
}

/// Everything conclusive a validator found about one miner in one epoch.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Findings {
	/// Spot-checks.
	pub checks: Vec<CheckEvidence>,
	/// Shard audits.
	pub shards: Vec<ShardEvidence>,
	/// Local mode: challenged inner steps.
	pub inner_steps: Vec<InnerStepEvidence>,
	/// Local mode: pseudo-gradient checks.
	pub pseudo_gradients: Vec<PseudoGradientEvidence>,
	/// Refused merge vectors that break the acceptance rule (always `Fail`).
	pub vectors: Vec<crate::vector_audit::VectorEvidence>,
}

impl Findings {
	/// Whether nothing was found.
	pub fn is_empty(&self) -> bool {
		self.checks.is_empty()
			&& self.shards.is_empty()
			&& self.inner_steps.is_empty()
			&& self.pseudo_gradients.is_empty()
			&& self.vectors.is_empty()
	}

	/// Whether a check of the miner's own work is among the findings (a spot-check, a challenged inner
	/// step or a pseudo-gradient), as opposed to shard audits only: a `Pass` needs one.
	pub fn has_work_check(&self) -> bool {
		!self.checks.is_empty() || !self.inner_steps.is_empty() || !self.pseudo_gradients.is_empty()
	}

	/// Whether any finding is a `Fail`.
	pub fn failed(&self) -> bool {
		let fail = |v: &Verdict| *v == Verdict::Fail;
		self.checks.iter().any(|c| fail(&c.verdict))
			|| self.shards.iter().any(|c| fail(&c.verdict))
			|| self.inner_steps.iter().any(|c| fail(&c.verdict))
			|| self.pseudo_gradients.iter().any(|c| fail(&c.verdict))
			|| self.vectors.iter().any(|c| fail(&c.verdict))
	}
}

impl EvidenceBundle {
	/// Bundles the conclusive findings about one miner. `None` when there are none.
	pub fn new(
		run: &str,
		epoch: u32,
		validator: &AccountId,
		miner: &AccountId,
		findings: Findings,
	) -> Option<Self> {
		if findings.is_empty() {
			return None;
		}
		let verdict = if findings.failed() { Verdict::Fail } else { Verdict::Pass };
		let Findings { checks, shards, inner_steps, pseudo_gradients, vectors } = findings;
		Some(Self {
			version: EVIDENCE_VERSION,
			run: run.into(),
			epoch,
			validator: validator.to_string(),
			miner: miner.to_string(),
			verdict,
			checks,
			shards,
			inner_steps,
			pseudo_gradients,
			vectors,
		})
	}

	/// The JSON bytes stored in the bucket.
	pub fn to_bytes(&self) -> Vec<u8> {
		serde_json::to_vec(self).unwrap_or_default()
	}

	/// BLAKE3 of [`to_bytes`](Self::to_bytes): the `evidence` of `submit_spot_check`.
	pub fn hash(&self) -> ContentHash {
		ContentHash::of(&self.to_bytes())
	}
}

/// The outcome of one check.
#[derive(Clone, Debug, PartialEq)]
pub enum CheckOutcome {
	/// A verdict with its evidence.
	Judged(Box<CheckEvidence>),
	/// No verdict.
	Inconclusive(Inconclusive),
}

/// Runs spot-checks for one run: holds the spec, decoded data shards and the stages loaded per
/// (epoch, stage). Computation is synchronous candle code in f32, on the CPU unless
/// [`with_device`](Checker::with_device) names another device.
pub struct Checker {
	spec: RunSpec,
	device: Device,
	encoding: Encoding,
	stages: HashMap<(u32, u16), Stage>,
	/// Local mode: one stage per index whose weights are set to each revealed state in turn, with the
	/// state hash it holds.
	scratch: HashMap<u16, (Option<ContentHash>, Stage)>,
	shards: HashMap<u32, Arc<Vec<u32>>>,
	max_message_bytes: usize,
	times: CheckTimes,
}

/// Where a validator's inner-step checks spent their time: wall time summed over the steps
/// replayed in full since the last [`Checker::take_times`] (a step that ends early, not revealed
/// or malformed, is not counted), logged with each try at an epoch so an operator sees what
/// judging costs.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CheckTimes {
	/// Inner steps replayed in full.
	pub steps: u32,
	/// Fetching the revealed states (download, BLAKE3 against the report, decode; for a step 0,
	/// also the epoch's global weights it is compared with).
	pub states: std::time::Duration,
	/// Fetching and decoding the replayed passes' inputs (tokens, activations, gradients).
	pub inputs: std::time::Duration,
	/// Loading state k into the checker's stage, recomputing the passes' gradient there and
	/// replaying the AdamW step.
	pub compute: std::time::Duration,
}

type Step<T> = Result<T, Inconclusive>;

fn fetch_input(e: FetchError) -> Inconclusive {
	match e {
		FetchError::NotFound { key } => Inconclusive::BadInput(format!("input {key} is missing")),
		FetchError::HashMismatch { key, expected } => {
			Inconclusive::Garbage(format!("{key} does not hash to {expected}"))
		},
		FetchError::Unavailable { key, reason } => {
			Inconclusive::Unavailable(format!("{key}: {reason}"))
		},
	}
}

impl Checker {
	/// A checker for `spec` (already checked against the chain's `model_hash`).
	///
	/// # Errors
	/// [`iota_rpc::SpecError`] for an unknown wire encoding.
	pub fn new(spec: RunSpec) -> Result<Self, iota_rpc::SpecError> {
		let encoding = spec.wire_encoding()?;
		let max_message_bytes =
			iota_protocol::encoding::max_wire_bytes(spec.boundary_shape()) as usize;
		Ok(Self {
			spec,
			device: Device::Cpu,
			encoding,
			stages: HashMap::new(),
			scratch: HashMap::new(),
			shards: HashMap::new(),
			max_message_bytes,
			times: CheckTimes::default(),
		})
	}

	/// The same checker recomputing on `device` (a CUDA device for a validator with a GPU; the
	/// tolerances of [`crate::tolerance`] are the same on every device, docs/design.md §9).
	#[must_use]
	pub fn with_device(mut self, device: Device) -> Self {
		self.device = device;
		self.stages.clear();
		self.scratch.clear();
		self
	}

	/// The run spec.
	pub fn spec(&self) -> &RunSpec {
		&self.spec
	}

	/// The time the inner-step checks took since the last call, reset to zero.
	pub fn take_times(&mut self) -> CheckTimes {
		std::mem::take(&mut self.times)
	}

	/// Where the time of the inner-step checks goes (written by `inner_step`).
	pub(crate) fn times_mut(&mut self) -> &mut CheckTimes {
		&mut self.times
	}

	/// Drops stages of epochs before `epoch` (memory).
	pub fn forget_before(&mut self, epoch: u32) {
		self.stages.retain(|(e, _), _| *e >= epoch);
	}

	/// Stage `stage` holding the weights of the revealed state `hash` (local mode): `weights` are set
	/// unless the stage holds that state already.
	pub(crate) fn hold_state(
		&mut self,
		stage: u16,
		hash: ContentHash,
		weights: &[f32],
	) -> Step<&mut Stage> {
		if !self.scratch.contains_key(&stage) {
			let st = Stage::new(
				&self.spec.model,
				usize::from(stage),
				self.spec.seed,
				DType::F32,
				&self.device,
			)
			.map_err(|e| Inconclusive::Weights(format!("cannot build stage {stage}: {e}")))?;
			self.scratch.insert(stage, (None, st));
		}
		let (held, st) = self
			.scratch
			.get_mut(&stage)
			.ok_or_else(|| Inconclusive::Weights("stage cache lost an entry".into()))?;
		if *held != Some(hash) {
			*held = None;
			st.set_flat_params(weights)
				.map_err(|e| Inconclusive::BadInput(format!("revealed state {hash}: {e}")))?;
			*held = Some(hash);
		}
		Ok(st)
	}

	/// Stage `stage` holding the revealed inner state at `key` (an `InnerState` object that must hash
	/// to `hash`), fetched unless the scratch stage holds it already. A missing, garbage or malformed
	/// object is inconclusive here: the inner-step check ([`crate::inner_step`]) is what judges a reveal.
	pub(crate) async fn revealed_stage(
		&mut self,
		stage: u16,
		key: &str,
		hash: &ContentHash,
		objects: &dyn Objects,
	) -> Step<&mut Stage> {
		if self.scratch.get(&stage).is_some_and(|(held, _)| held.as_ref() == Some(hash)) {
			return self
				.scratch
				.get_mut(&stage)
				.map(|(_, st)| st)
				.ok_or_else(|| Inconclusive::Weights("stage cache lost an entry".into()));
		}
		let weights = self.revealed_weights(stage, key, hash, objects).await?;
		self.hold_state(stage, *hash, &weights)
	}

	/// The weights of the revealed inner state at `key` (an `InnerState` object that must hash to
	/// `hash`) of `stage`; missing, garbage or malformed is inconclusive (as [`Self::revealed_stage`]).
	pub(crate) async fn revealed_weights(
		&self,
		stage: u16,
		key: &str,
		hash: &ContentHash,
		objects: &dyn Objects,
	) -> Step<Vec<f32>> {
		let p = self
			.spec
			.model
			.stage_param_count(usize::from(stage))
			.map_err(|e| Inconclusive::Weights(format!("stage {stage}: {e}")))?;
		let bytes = objects.get(key, hash).await.map_err(|e| match e {
			FetchError::NotFound { key } => {
				Inconclusive::Weights(format!("revealed state {key} is missing"))
			},
			other => fetch_input(other),
		})?;
		let st = iota_model::optim::InnerState::from_bytes(&bytes, p).map_err(|e| {
			Inconclusive::Weights(format!(
				"revealed state {key} is not a state of stage {stage}: {e}"
			))
		})?;
		Ok(st.weights)
	}

	pub(crate) async fn stage(
		&mut self,
		epoch: u32,
		stage: u16,
		weights: &WeightsRef,
		objects: &dyn Objects,
	) -> Step<&mut Stage> {
		if matches!(weights, WeightsRef::Revealed { .. }) {
			return Err(Inconclusive::Weights(
				"a revealed inner state is not a stage's global weights".into(),
			));
		}
		if !self.stages.contains_key(&(epoch, stage)) {
			// A run that continues an existing model starts from the spec's initial checkpoint.
			let init = match (weights, self.spec.init_of(stage)) {
				(WeightsRef::Init, Some(init)) => {
					let (key, hash) = (&init.checkpoint.key, &init.checkpoint.hash);
					let bytes = objects.get(key, hash).await.map_err(|e| match e {
						FetchError::NotFound { key } => {
							Inconclusive::Weights(format!("initial weights {key} are missing"))
						},
						other => fetch_input(other),
					})?;
					Some((bytes, init.state))
				},
				_ => None,
			};
			// Local mode's checkpoints carry the outer optimizer's state, which their attested hash
			// covers (`Stage::initial` puts the stage in the run's training mode).
			let mut st = Stage::initial(
				&self.spec.model,
				usize::from(stage),
				self.spec.seed,
				&self.spec.training,
				&self.device,
				init.as_ref().map(|(b, h)| (b.as_ref(), &h.0)),
			)
			.map_err(|e| Inconclusive::Weights(format!("stage {stage}'s initial weights: {e}")))?;
			if let WeightsRef::Checkpoint { key, hash, state_hash } = weights {
				let bytes = objects.get(key, hash).await.map_err(|e| match e {
					FetchError::NotFound { key } => {
						Inconclusive::Weights(format!("checkpoint {key} is missing"))
					},
					other => fetch_input(other),
				})?;
				st.load_checkpoint(&bytes, state_hash.as_bytes()).map_err(|e| {
					Inconclusive::Weights(format!(
						"checkpoint {key} is not the attested state of stage {stage}: {e}"
					))
				})?;
			}
			self.stages.insert((epoch, stage), st);
		}
		self.stages
			.get_mut(&(epoch, stage))
			.ok_or_else(|| Inconclusive::Weights("stage cache lost an entry".into()))
	}

	/// Inputs and targets of sample `sample` (`rows × seq_len` each) and the shard object they came from.
	pub(crate) async fn tokens(
		&mut self,
		sample: u64,
		objects: &dyn Objects,
	) -> Step<(StageInput, StageInput, ObjectEntry)> {
		let data = &self.spec.data;
		let loc = data
			.locate(sample)
			.ok_or_else(|| Inconclusive::BadInput(format!("sample {sample} has no data")))?;
		let obj = data
			.shards
			.get(loc.shard as usize)
			.ok_or_else(|| {
				Inconclusive::BadInput(format!("shard {} not in the manifest", loc.shard))
			})?
			.clone();
		let entry = ObjectEntry { key: obj.key.clone(), hash: obj.hash };
		if !self.shards.contains_key(&loc.shard) {
			let bytes = objects.get(&obj.key, &obj.hash).await.map_err(fetch_input)?;
			let tokens = data
				.decode_shard(loc.shard, &bytes, self.spec.model.vocab_size)
				.map_err(|e| Inconclusive::BadInput(e.to_string()))?;
			self.shards.insert(loc.shard, Arc::new(tokens));
		}
		let tokens = self.shards.get(&loc.shard).cloned().unwrap_or_default();
		let rows = data.sample_tokens(&tokens, loc).ok_or_else(|| {
			Inconclusive::BadInput(format!("sample {sample} lies outside shard {}", loc.shard))
		})?;
		let (inputs, targets) =
			iota_protocol::sample::inputs_and_targets(rows, data.seq_len as usize).ok_or_else(
				|| Inconclusive::BadInput(format!("sample {sample}: rows are not whole rows")),
			)?;
		let r = loc.rows as usize;
		Ok((
			StageInput::Tokens { ids: inputs, rows: r },
			StageInput::Tokens { ids: targets, rows: r },
			entry,
		))
	}

	fn decode(&self, bytes: &[u8], kind: Kind) -> Result<Decoded, iota_model::Error> {
		let w = self.spec.model.wire_width();
		let d = wire::decode_checked(bytes, &Expect::btw(kind, w, self.max_message_bytes))?;
		let [b, t, _] = self.spec.boundary_shape();
		if d.shape != [b as usize, t as usize, w] {
			return Err(iota_model::Error::Shape {
				what: "wire tensor".into(),
				expected: format!("[{b}, {t}, {w}]"),
				got: d.shape.clone(),
			});
		}
		Ok(d)
	}

	/// Decodes a tensor as `kind`, accepting the other kind tag too (the tag is informational; shape,
	/// size and finiteness are what is checked).
	fn decode_any(&self, bytes: &[u8], kind: Kind) -> Result<Decoded, iota_model::Error> {
		self.decode(bytes, kind).or_else(|e| {
			let other = if kind == Kind::Activation { Kind::Gradient } else { Kind::Activation };
			self.decode(bytes, other).map_err(|_| e)
		})
	}

	pub(crate) async fn activation_input(
		&self,
		entry: &ObjectEntry,
		kind: Kind,
		objects: &dyn Objects,
	) -> Step<StageInput> {
		let bytes = objects.get(&entry.key, &entry.hash).await.map_err(fetch_input)?;
		let d = self
			.decode_any(&bytes, kind)
			.map_err(|e| Inconclusive::BadInput(format!("input {}: {e}", entry.key)))?;
		let shape = [d.shape[0], d.shape[1], d.shape[2]];
		Ok(StageInput::Activation { values: d.values, shape })
	}

	/// Runs one check (module docs: what becomes a verdict and what stays inconclusive).
	pub async fn check(
		&mut self,
		log: &PathwayLog,
		target: &CheckTarget,
		weights: &dyn WeightsSource,
		objects: &dyn Objects,
	) -> CheckOutcome {
		match self.try_check(log, target, weights, objects).await {
			Ok(ev) => CheckOutcome::Judged(Box::new(ev)),
			Err(i) => CheckOutcome::Inconclusive(i),
		}
	}

	async fn try_check(
		&mut self,
		log: &PathwayLog,
		target: &CheckTarget,
		weights: &dyn WeightsSource,
		objects: &dyn Objects,
	) -> Step<CheckEvidence> {
		let s = usize::from(target.stage);
		let stages = usize::from(log.stages);
		let record: &PathwayRecord = log
			.records
			.get(target.record)
			.filter(|r| r.sample == target.sample)
			.ok_or_else(|| {
				Inconclusive::MalformedLog(format!(
					"no record {} for sample {}",
					target.record, target.sample
				))
			})?;
		if s >= stages || stages != self.spec.model.n_stages() {
			return Err(Inconclusive::MalformedLog(format!(
				"stage {s} of a {stages}-stage log, the run has {} stages",
				self.spec.model.n_stages()
			)));
		}
		let tail = s + 1 == stages;
		let malformed =
			|what: &str| Inconclusive::MalformedLog(format!("sample {}: {what}", record.sample));
		let (output, who) = match target.kind {
			ItemKind::Forward => (record.forward_outputs.get(s).cloned(), record.forward.get(s)),
			ItemKind::Backward => {
				(record.backward_outputs.get(s).cloned().flatten(), record.backward.get(s))
			},
		};
		let output = output
			.filter(|o| !o.key.is_empty())
			.ok_or_else(|| malformed("no output entry"))?;
		if who != Some(&target.miner) {
			return Err(malformed("the target miner did not run this item"));
		}
		if target.kind == ItemKind::Backward && (s == 0 || tail) {
			return Err(malformed("only body stages have a checkable backward"));
		}

		let w = weights.weights(log.epoch, target.stage).await.map_err(|e| match e {
			WeightsError::Unavailable(r) => Inconclusive::Unavailable(r),
			other => Inconclusive::Weights(other.to_string()),
		})?;
		let mut ev = CheckEvidence {
			stage: target.stage,
			sample: record.sample,
			kind: target.kind,
			inputs: Vec::new(),
			output: output.clone(),
			weights: w.clone(),
			recomputed: None,
			comparison: None,
			loss_claimed: None,
			loss_recomputed: None,
			verdict: Verdict::Fail,
			reason: None,
		};

		// The miner's own output first: missing counts against it, garbage does not.
		let claimed_bytes = match objects.get(&output.key, &output.hash).await {
			Ok(b) => b,
			Err(FetchError::NotFound { key }) => {
				ev.reason = Some(format!("output {key} is missing"));
				return Ok(ev);
			},
			Err(FetchError::HashMismatch { key, expected }) => {
				return Err(Inconclusive::Garbage(format!("{key} does not hash to {expected}")))
			},
			Err(FetchError::Unavailable { key, reason }) => {
				return Err(Inconclusive::Unavailable(format!("{key}: {reason}")))
			},
		};

		// Inputs.
		let input = if s == 0 {
			let (inputs, _, shard) = self.tokens(record.sample, objects).await?;
			ev.inputs.push(shard);
			inputs
		} else {
			let e = record
				.forward_outputs
				.get(s - 1)
				.cloned()
				.ok_or_else(|| malformed("no input entry"))?;
			let x = self.activation_input(&e, Kind::Activation, objects).await?;
			ev.inputs.push(e);
			x
		};
		let targets = if tail && target.kind == ItemKind::Forward {
			let (_, targets, shard) = self.tokens(record.sample, objects).await?;
			if !ev.inputs.contains(&shard) {
				ev.inputs.push(shard);
			}
			Some(targets)
		} else {
			None
		};
		let grad_output = if target.kind == ItemKind::Backward {
			let next = s + 1;
			let e = record
				.backward_outputs
				.get(next)
				.cloned()
				.flatten()
				.or_else(|| {
					(next + 1 == stages)
						.then(|| record.forward_outputs.get(next).cloned())
						.flatten()
				})
				.ok_or_else(|| malformed("no gradient from the next stage"))?;
			let g = self.activation_input(&e, Kind::Gradient, objects).await?;
			ev.inputs.push(e);
			Some(g)
		} else {
			None
		};

		// The claimed output decodes (its hash matches the log, so it is the miner's own upload).
		let out_kind = if target.kind == ItemKind::Forward && !tail {
			Kind::Activation
		} else {
			Kind::Gradient
		};
		let claimed = match self.decode_any(&claimed_bytes, out_kind) {
			Ok(d) => d,
			Err(e) => {
				ev.reason = Some(format!("output {} does not decode: {e}", output.key));
				return Ok(ev);
			},
		};

		let encoding = self.encoding;
		// A backward through a kept forward: the forward's state, where the whole pass ran.
		let kept = match &w {
			WeightsRef::Revealed { kept_forward: Some(k), .. }
				if target.kind == ItemKind::Backward =>
			{
				Some(
					self.revealed_weights(target.stage, &k.state.key, &k.state.hash, objects)
						.await?,
				)
			},
			_ => None,
		};
		let stage = match &w {
			WeightsRef::Revealed { key, hash, .. } => {
				self.revealed_stage(target.stage, key, hash, objects).await?
			},
			_ => self.stage(log.epoch, target.stage, &w, objects).await?,
		};
		let recomputed = match (target.kind, &grad_output, &kept) {
			(ItemKind::Backward, Some(g), Some(at)) => {
				let weights = stage
					.flat_params()
					.map_err(|e| Inconclusive::Weights(format!("revealed state: {e}")))?;
				recompute::backward_through_kept(stage, &input, g, at, &weights)
			},
			(ItemKind::Backward, Some(g), None) => recompute::backward(stage, &input, g),
			_ => recompute::forward(stage, &input, targets.as_ref()),
		}
		.map_err(|e| Inconclusive::BadInput(format!("recomputation refused the inputs: {e}")))?;
		let le = iota_protocol::f32le::to_bytes(&recomputed.values);
		ev.recomputed = Some(ContentHash::of(&le));

		if claimed.shape != recomputed.shape {
			ev.reason = Some(format!(
				"output shape {:?}, recomputed {:?}",
				claimed.shape, recomputed.shape
			));
			return Ok(ev);
		}
		let cmp =
			tolerance::compare(&claimed.values, &recomputed.values, recomputed.shape[2], encoding)
				.map_err(|e| Inconclusive::BadInput(e.to_string()))?;
		let mut reasons = Vec::new();
		if !cmp.passes() {
			reasons.push(format!(
				"output off by {:.3}x the tolerance (max abs {:.3e}, max rel {:.3e}) at element {}",
				cmp.max_ratio, cmp.max_abs_err, cmp.max_rel_err, cmp.worst_index
			));
		}
		ev.comparison = Some(cmp);
		if let Some(loss) = recomputed.loss {
			ev.loss_claimed = Some(record.loss);
			ev.loss_recomputed = Some(loss);
			if !tolerance::loss_matches(record.loss, loss) {
				reasons.push(format!("reported loss {} but recomputed {loss}", record.loss));
			}
		}
		ev.verdict = if reasons.is_empty() { Verdict::Pass } else { Verdict::Fail };
		ev.reason = (!reasons.is_empty()).then(|| reasons.join("; "));
		Ok(ev)
	}
}

#[cfg(test)]
pub(crate) mod tests {
	use super::*;
	use crate::objects::MemoryObjects;
	use iota_model::optim::AdamW;
	use iota_model::ModelConfig;
	use iota_rpc::{DataManifest, LrSchedule, SpecObject};
	use iota_storage::keys::{self, Direction, Id};

	pub(crate) struct InitWeights;

	#[async_trait]
	impl WeightsSource for InitWeights {
		async fn weights(&self, _epoch: u32, _stage: u16) -> Result<WeightsRef, WeightsError> {
			Ok(WeightsRef::Init)
		}
	}

	/// Stage weights from a fixed list (index = stage).
	pub(crate) struct FixedWeights(pub Vec<WeightsRef>);

	#[async_trait]
	impl WeightsSource for FixedWeights {
		async fn weights(&self, epoch: u32, stage: u16) -> Result<WeightsRef, WeightsError> {
			self.0.get(usize::from(stage)).cloned().ok_or(WeightsError::Missing {
				epoch,
				stage,
				reason: "none".into(),
			})
		}
	}

	pub(crate) fn miner(stage: u16) -> AccountId {
		AccountId::from([stage as u8 + 1; 32])
	}

	/// A tiny-model run with one data shard and an honest epoch of `q` samples through 3 stages (one
	/// miner each), every object in `objects`. `cheat` = stage whose forward outputs get `noise`·rms added.
	pub(crate) fn honest_epoch(
		objects: &MemoryObjects,
		encoding: &str,
		q: u64,
		cheat: Option<(u16, f32)>,
	) -> (RunSpec, PathwayLog) {
		let cfg = ModelConfig::tiny();
		let (seq_len, batch_rows, rows_per_shard) = (16u32, 2u32, 8u32);
		let run = Id::new("run").unwrap();
		let tokens: Vec<u32> = (0..rows_per_shard * (seq_len + 1))
			.map(|i| (i * 31 + 7) % cfg.vocab_size as u32)
			.collect();
		let shard_key = keys::data_shard(&run, 0);
		let shard_hash =
			objects.put(&shard_key, tokens.iter().flat_map(|t| t.to_le_bytes()).collect());
		let spec = RunSpec {
			init: None,
			run: "run".into(),
			model: cfg.clone(),
			seed: 11,
			encoding: encoding.into(),
			adamw: AdamW::default(),
			lr: LrSchedule { peak: 1e-3, warmup_epochs: 1, total_epochs: 10, min_ratio: 0.1 },
			max_norm: Some(1.0),
			merge_codec: Default::default(),
			training: Default::default(),
			data: DataManifest {
				tokenizer: SpecObject { key: "t".into(), hash: ContentHash::of(b"t"), size: 1 },
				seq_len,
				batch_rows,
				rows_per_shard,
				shards: vec![SpecObject { key: shard_key, hash: shard_hash, size: 0 }],
				heldout: None,
			},
		};
		let enc = spec.wire_encoding().unwrap();
		let mut st: Vec<Stage> = (0..3)
			.map(|s| Stage::new(&cfg, s, spec.seed, DType::F32, &Device::Cpu).unwrap())
			.collect();
		stepped_stages(&mut st, &spec, objects);
		let mut checker = Checker::new(spec.clone()).unwrap();
		let mut records = Vec::new();
		for sample in 0..q {
			let rt = tokio::runtime::Builder::new_current_thread().build().unwrap();
			let (x, y, _) = rt.block_on(checker.tokens(sample, objects)).unwrap();
			let put = |s: u16,
			           dir: Direction,
			           kind: Kind,
			           values: &[f32],
			           shape: [usize; 3]|
			 -> ObjectEntry {
				let mut v = values.to_vec();
				if let Some((cs, noise)) = cheat {
					if cs == s && dir == Direction::Forward {
						let rms = (v.iter().map(|a| a * a).sum::<f32>() / v.len() as f32).sqrt();
						v.iter_mut().enumerate().for_each(|(k, a)| {
							*a += noise * rms * (((k * 7919) % 200) as f32 / 100.0 - 1.0)
						});
					}
				}
				let t =
					candle_core::Tensor::from_slice(&v, shape.as_slice(), &Device::Cpu).unwrap();
				let key = keys::activation(
					&run,
					0,
					u32::from(s),
					sample,
					dir,
					&Id::new(miner(s).to_string()).unwrap(),
				);
				let hash = objects.put(&key, wire::encode(&t, kind, enc).unwrap());
				ObjectEntry { key, hash }
			};
			let dec = |e: &ObjectEntry| {
				let d = checker
					.decode_any(
						&rt.block_on(objects.get(&e.key, &e.hash)).unwrap(),
						Kind::Activation,
					)
					.unwrap();
				StageInput::Activation {
					values: d.values,
					shape: [d.shape[0], d.shape[1], d.shape[2]],
				}
			};
			let h0 = recompute::forward(&mut st[0], &x, None).unwrap();
			let o0 = put(0, Direction::Forward, Kind::Activation, &h0.values, h0.shape);
			let i1 = dec(&o0);
			let h1 = recompute::forward(&mut st[1], &i1, None).unwrap();
			let o1 = put(1, Direction::Forward, Kind::Activation, &h1.values, h1.shape);
			let i2 = dec(&o1);
			let tail = recompute::forward(&mut st[2], &i2, Some(&y)).unwrap();
			let o2 = put(2, Direction::Backward, Kind::Gradient, &tail.values, tail.shape);
			let g2 = dec(&o2);
			let b1 = recompute::backward(&mut st[1], &i1, &g2).unwrap();
			let ob1 = put(1, Direction::Backward, Kind::Gradient, &b1.values, b1.shape);
			records.push(PathwayRecord {
				sample,
				forward: (0..3).map(miner).collect(),
				backward: (0..3).map(miner).collect(),
				forward_outputs: vec![o0, o1, o2.clone()],
				backward_outputs: vec![None, Some(ob1), Some(o2)],
				loss: tail.loss.unwrap(),
				forward_steps: vec![],
				backward_steps: vec![],
				recomputed: vec![],
			});
		}
		(spec, PathwayLog { run: "run".into(), epoch: 0, stages: 3, records, inner_states: vec![] })
	}

	/// When `STEPPED` is set for the calling test (see `checkpointed_weights_are_used_and_verified`), the
	/// stages take one AdamW step first and their checkpoints are stored as `ck{s}`.
	fn stepped_stages(st: &mut [Stage], spec: &RunSpec, objects: &MemoryObjects) {
		if !STEPPED.with(|c| c.get()) {
			return;
		}
		for (s, stage) in st.iter_mut().enumerate() {
			let g: Vec<f32> =
				(0..stage.param_count()).map(|i| 0.01 * (i as f32 * 0.1).sin()).collect();
			stage.apply_gradient(&g, &spec.step_options(0), 4).unwrap();
			let hash = objects.put(&format!("ck{s}"), stage.to_checkpoint().unwrap());
			let state = ContentHash::from_bytes(stage.state_hash().unwrap());
			CHECKPOINTS.with(|c| c.borrow_mut().push((hash, state)));
		}
	}

	thread_local! {
		static STEPPED: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
		static CHECKPOINTS: std::cell::RefCell<Vec<(ContentHash, ContentHash)>> = const { std::cell::RefCell::new(Vec::new()) };
	}

	fn all_targets(log: &PathwayLog) -> Vec<CheckTarget> {
		select(log, &[5; 32], usize::MAX, usize::MAX)
	}

	fn run_checks(
		spec: &RunSpec,
		log: &PathwayLog,
		objects: &MemoryObjects,
		targets: &[CheckTarget],
	) -> Vec<CheckOutcome> {
		let rt = tokio::runtime::Builder::new_current_thread().build().unwrap();
		let mut checker = Checker::new(spec.clone()).unwrap();
		targets
			.iter()
			.map(|t| rt.block_on(checker.check(log, t, &InitWeights, objects)))
			.collect()
	}

	fn verdicts(outcomes: &[CheckOutcome]) -> Vec<Option<Verdict>> {
		outcomes
			.iter()
			.map(|o| match o {
				CheckOutcome::Judged(e) => Some(e.verdict),
				CheckOutcome::Inconclusive(_) => None,
			})
			.collect()
	}

	#[test]
	fn selection_is_deterministic_seeded_and_bounded() {
		let records = (0..20u64)
			.map(|s| PathwayRecord {
				sample: s,
				forward: vec![miner(0), AccountId::from([9 + (s % 2) as u8; 32]), miner(2)],
				backward: vec![miner(0), AccountId::from([9 + (s % 2) as u8; 32]), miner(2)],
				forward_outputs: vec![
					ObjectEntry { key: "k".into(), hash: ContentHash::of(b"k") };
					3
				],
				backward_outputs: vec![
					None,
					Some(ObjectEntry { key: "k".into(), hash: ContentHash::of(b"k") }),
					None,
				],
				loss: 1.0,
				forward_steps: vec![],
				backward_steps: vec![],
				recomputed: vec![],
			})
			.collect();
		let log =
			PathwayLog { run: "r".into(), epoch: 3, stages: 3, records, inner_states: vec![] };
		let a = select(&log, &[1; 32], FORWARD_CHECKS, BACKWARD_CHECKS);
		assert_eq!(
			a,
			select(&log, &[1; 32], FORWARD_CHECKS, BACKWARD_CHECKS),
			"anyone recomputes the same draw"
		);
		assert_ne!(
			a,
			select(&log, &[2; 32], FORWARD_CHECKS, BACKWARD_CHECKS),
			"another seed, another draw"
		);
		// 4 (stage, miner) forward units x 2 + 2 body backward units x 1.
		assert_eq!(a.len(), 4 * FORWARD_CHECKS + 2 * BACKWARD_CHECKS);
		for t in &a {
			let r = &log.records[t.record];
			assert_eq!(r.sample, t.sample);
			let who = if t.kind == ItemKind::Forward { &r.forward } else { &r.backward };
			assert_eq!(who[usize::from(t.stage)], t.miner);
		}
		// Distinct samples per unit.
		let mut seen = std::collections::HashSet::new();
		assert!(a.iter().all(|t| seen.insert((t.stage, t.miner.0, t.kind, t.sample))));
	}

	#[test]
	fn honest_work_passes_every_check_in_every_encoding() {
		for enc in ["f32", "bf16", "u8"] {
			let objects = MemoryObjects::default();
			let (spec, log) = honest_epoch(&objects, enc, 3, None);
			let targets = all_targets(&log);
			assert_eq!(
				targets.len(),
				3 * 3 + 3,
				"3 forward items per stage, 3 body backward items"
			);
			let out = run_checks(&spec, &log, &objects, &targets);
			for (t, o) in targets.iter().zip(&out) {
				match o {
					CheckOutcome::Judged(e) => {
						assert_eq!(e.verdict, Verdict::Pass, "{enc} {t:?}: {e:?}");
						let c = e.comparison.as_ref().unwrap();
						assert!(c.max_ratio <= 0.75, "{enc}: honest ratio {}", c.max_ratio);
					},
					other => panic!("{enc} {t:?}: {other:?}"),
				}
			}
		}
	}

	/// A run that continues an existing model: epoch 0's weights are the spec's initial checkpoints
	/// (here the weights the honest miners used, while the spec's seed is another), fetched and
	/// hash-checked; with the seed's weights the same work would fail; a missing initial checkpoint
	/// is inconclusive, never a verdict.
	#[test]
	fn epoch_zero_is_checked_at_the_runs_initial_weights() {
		let objects = MemoryObjects::default();
		let (spec, log) = honest_epoch(&objects, "f32", 2, None);
		let targets = all_targets(&log);
		let mut continued = RunSpec { seed: spec.seed + 1, ..spec.clone() };
		continued.init = Some(
			(0..3)
				.map(|s| {
					let st = Stage::initial(
						&spec.model,
						s,
						spec.seed,
						&spec.training,
						&Device::Cpu,
						None,
					)
					.unwrap();
					let key = keys::init_checkpoint(&Id::new("run").unwrap(), s as u32);
					let bytes = st.to_checkpoint().unwrap();
					let size = bytes.len() as u64;
					let hash = objects.put(&key, bytes);
					iota_rpc::InitStage {
						checkpoint: SpecObject { key, hash, size },
						state: ContentHash(st.state_hash().unwrap()),
					}
				})
				.collect(),
		);
		for o in run_checks(&continued, &log, &objects, &targets) {
			let CheckOutcome::Judged(e) = &o else { panic!("{o:?}") };
			assert_eq!(e.verdict, Verdict::Pass, "{e:?}");
		}
		let seeded = RunSpec { init: None, ..continued.clone() };
		let failed = run_checks(&seeded, &log, &objects, &targets)
			.iter()
			.filter(|o| matches!(o, CheckOutcome::Judged(e) if e.verdict == Verdict::Fail))
			.count();
		assert!(failed > 0, "the seed's weights would not have told");
		let mut gone = continued.clone();
		gone.init.as_mut().unwrap()[1].checkpoint.key = "v1/runs/run/data/init/stages/009".into();
		let out = run_checks(&gone, &log, &objects, &targets);
		for (t, o) in targets.iter().zip(&out) {
			if t.stage == 1 {
				assert!(matches!(o, CheckOutcome::Inconclusive(_)), "{t:?}: {o:?}");
			}
		}
	}

	#[test]
	fn perturbed_outputs_fail() {
		for (enc, noise) in [("f32", 0.01), ("bf16", 0.01), ("u8", 0.05)] {
			let objects = MemoryObjects::default();
			let (spec, log) = honest_epoch(&objects, enc, 2, Some((1, noise)));
			let targets = all_targets(&log);
			let out = run_checks(&spec, &log, &objects, &targets);
			for (t, o) in targets.iter().zip(&out) {
				let CheckOutcome::Judged(e) = o else { panic!("{enc} {t:?}: {o:?}") };
				let cheated = t.stage == 1 && t.kind == ItemKind::Forward;
				let expect = if cheated { Verdict::Fail } else { Verdict::Pass };
				assert_eq!(e.verdict, expect, "{enc} {t:?}: {e:?}");
			}
		}
	}

	#[test]
	fn missing_output_fails_but_bad_inputs_and_outages_are_inconclusive() {
		let objects = MemoryObjects::default();
		let (spec, log) = honest_epoch(&objects, "f32", 2, None);
		let targets = all_targets(&log);
		let pick = |stage: u16, kind: ItemKind, sample: u64| {
			targets
				.iter()
				.find(|t| t.stage == stage && t.kind == kind && t.sample == sample)
				.unwrap()
				.clone()
		};
		let r0 = &log.records[0];

		// Missing output: Fail for its writer; the next stage's check of the same sample is inconclusive.
		objects.remove(&r0.forward_outputs[1].key);
		let out = run_checks(
			&spec,
			&log,
			&objects,
			&[pick(1, ItemKind::Forward, 0), pick(2, ItemKind::Forward, 0)],
		);
		assert_eq!(verdicts(&out), vec![Some(Verdict::Fail), None]);
		assert!(matches!(&out[1], CheckOutcome::Inconclusive(Inconclusive::BadInput(_))));

		// Garbage (bytes do not hash to the log's value): inconclusive for everyone.
		objects.put(&r0.forward_outputs[0].key, b"garbage".to_vec());
		let out = run_checks(&spec, &log, &objects, &[pick(0, ItemKind::Forward, 0)]);
		assert!(matches!(&out[0], CheckOutcome::Inconclusive(i) if i.kind() == "garbage_object"));

		// An undecodable output whose hash the log names is the writer's fault.
		let mut bad_log = log.clone();
		let h = objects.put("undecodable", b"not a wire message".to_vec());
		bad_log.records[1].forward_outputs[0] = ObjectEntry { key: "undecodable".into(), hash: h };
		let out = run_checks(
			&spec,
			&bad_log,
			&objects,
			&[pick(0, ItemKind::Forward, 1), pick(1, ItemKind::Forward, 1)],
		);
		assert_eq!(verdicts(&out), vec![Some(Verdict::Fail), None], "{out:?}");

		// A well-formed output of the wrong shape (hash matches the log): Fail for its writer. An input of
		// the wrong width: inconclusive for the reader.
		let mut shaped = log.clone();
		let t = candle_core::Tensor::zeros((2, 16, 3), DType::F32, &Device::Cpu).unwrap();
		let h = objects.put("narrow", wire::encode(&t, Kind::Activation, Encoding::F32).unwrap());
		shaped.records[1].forward_outputs[1] = ObjectEntry { key: "narrow".into(), hash: h };
		let out = run_checks(
			&spec,
			&shaped,
			&objects,
			&[pick(1, ItemKind::Forward, 1), pick(2, ItemKind::Forward, 1)],
		);
		assert_eq!(verdicts(&out), vec![Some(Verdict::Fail), None], "{out:?}");
		assert!(matches!(&out[1], CheckOutcome::Inconclusive(Inconclusive::BadInput(_))));

		// Wrong loss reported: Fail for the tail.
		let mut lie = log.clone();
		lie.records[1].loss += 0.5;
		let out = run_checks(&spec, &lie, &objects, &[pick(2, ItemKind::Forward, 1)]);
		assert_eq!(verdicts(&out), vec![Some(Verdict::Fail)]);

		// Malformed record: inconclusive.
		let mut broken = log.clone();
		broken.records[1].backward_outputs[1] = None;
		let out = run_checks(&spec, &broken, &objects, &[pick(1, ItemKind::Backward, 1)]);
		assert!(matches!(&out[0], CheckOutcome::Inconclusive(Inconclusive::MalformedLog(_))));

		// Unreachable store: inconclusive.
		objects.unreachable.store(true, std::sync::atomic::Ordering::Relaxed);
		let out = run_checks(&spec, &log, &objects, &[pick(1, ItemKind::Backward, 1)]);
		assert!(matches!(&out[0], CheckOutcome::Inconclusive(Inconclusive::Unavailable(_))));
	}

	#[test]
	fn checkpointed_weights_are_used_and_verified() {
		STEPPED.with(|c| c.set(true));
		let objects = MemoryObjects::default();
		let (spec, log) = honest_epoch(&objects, "f32", 1, None);
		STEPPED.with(|c| c.set(false));
		let targets = all_targets(&log);
		let rt = tokio::runtime::Builder::new_current_thread().build().unwrap();
		let fresh = |w: &dyn WeightsSource| {
			let mut checker = Checker::new(spec.clone()).unwrap();
			targets
				.iter()
				.map(|t| rt.block_on(checker.check(&log, t, w, &objects)))
				.collect::<Vec<_>>()
		};
		let stored = CHECKPOINTS.with(|c| c.borrow().clone());
		let refs = |state: &dyn Fn(usize) -> ContentHash| -> Vec<WeightsRef> {
			(0..3)
				.map(|s| WeightsRef::Checkpoint {
					key: format!("ck{s}"),
					hash: stored[s].0,
					state_hash: state(s),
				})
				.collect()
		};
		let attested: Vec<ContentHash> = stored.iter().map(|c| c.1).collect();
		// The attested checkpoints: every honest check passes.
		let good = fresh(&FixedWeights(refs(&|s| attested[s])));
		assert!(verdicts(&good).iter().all(|v| *v == Some(Verdict::Pass)), "{good:?}");
		// A checkpoint that is not the attested state: no verdict at all.
		let bad = fresh(&FixedWeights(refs(&|_| ContentHash::of(b"not attested"))));
		assert!(
			bad.iter()
				.all(|o| matches!(o, CheckOutcome::Inconclusive(Inconclusive::Weights(_)))),
			"{bad:?}"
		);
		// No manifest: no verdict either.
		let none = fresh(&FixedWeights(vec![]));
		assert!(none
			.iter()
			.all(|o| matches!(o, CheckOutcome::Inconclusive(Inconclusive::Weights(_)))));
		// With the wrong (initial) weights the stepped work would not match: the weights matter.
		let init = fresh(&InitWeights);
		assert!(verdicts(&init).contains(&Some(Verdict::Fail)));
	}

	#[test]
	fn evidence_bundle_verdict_and_hash() {
		let objects = MemoryObjects::default();
		let (spec, log) = honest_epoch(&objects, "f32", 1, None);
		let out = run_checks(&spec, &log, &objects, &all_targets(&log));
		let checks: Vec<CheckEvidence> = out
			.into_iter()
			.filter_map(|o| match o {
				CheckOutcome::Judged(e) => Some(*e),
				CheckOutcome::Inconclusive(_) => None,
			})
			.collect();
		let v = AccountId::from([42; 32]);
		assert!(EvidenceBundle::new("run", 0, &v, &miner(1), Findings::default()).is_none());
		let mut b = EvidenceBundle::new(
			"run",
			0,
			&v,
			&miner(1),
			Findings { checks: checks.clone(), ..Default::default() },
		)
		.unwrap();
		assert_eq!(b.verdict, Verdict::Pass);
		let h = b.hash();
		assert_eq!(h, ContentHash::of(&b.to_bytes()));
		let back: EvidenceBundle = serde_json::from_slice(&b.to_bytes()).unwrap();
		assert_eq!(back, b);
		b.checks[0].verdict = Verdict::Fail;
		let failed = EvidenceBundle::new(
			"run",
			0,
			&v,
			&miner(1),
			Findings { checks: b.checks.clone(), ..Default::default() },
		)
		.unwrap();
		assert_eq!(failed.verdict, Verdict::Fail);
		assert_ne!(failed.hash(), h);

		// A `Pass` needs a check of the miner's own work; shard audits alone are no such check.
		let entry = ObjectEntry { key: "k".into(), hash: ContentHash::of(b"k") };
		let shard = crate::shard_audit::ShardEvidence {
			stage: 0,
			round: 0,
			shard: 0,
			range: [0, 4],
			submissions: vec![entry.clone()],
			copy: entry,
			recomputed: ContentHash::of(b"r"),
			mismatch: false,
			verdict: Verdict::Pass,
			reason: None,
		};
		let shards_only = Findings { shards: vec![shard], ..Default::default() };
		assert!(!shards_only.has_work_check() && !shards_only.failed());
		assert!(Findings { checks, ..Default::default() }.has_work_check());
		assert!(!Findings::default().has_work_check());
	}
}
