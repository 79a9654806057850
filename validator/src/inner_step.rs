//! Local mode's checks (docs/design.md §10): which inner steps are challenged ([`challenged_steps`]),
//! judging one from its revealed states ([`Checker::check_inner_step`]), which passes are recomputed
//! at which revealed state ([`revealed_spot_checks`]), and whether a submitted pseudo-gradient is the
//! delta to the miner's last reported state ([`Checker::check_pseudo_gradient`]).
//!
//! ## One step
//! Judging one revealed inner step. Given a miner's revealed states
//! `k` and `k + 1`, the hashes it reported for them, and the gradient the validator recomputed for the
//! passes the pathway log puts at state `k` ([`step_gradient`]), [`judge_inner_step`] replays the step
//! ([`iota_protocol::optim::InnerState::step`], the one step function the miner applies) and compares.
//!
//! ## Tolerance
//! The replay is bit-identical when the miner's passes ran on the same kind of CPU (the
//! recomputation is bit-identical across thread counts, `crate::tolerance`), a backward through a
//! forward kept from an earlier inner step included: the miner runs it whole at that forward's
//! state (weight stashing, docs/design.md §3) and the replay recomputes it there. The honest source
//! of difference that remains is another implementation's rounding (a GPU). The check therefore
//! compares the *updates*: `Δ = W_{k+1} − W_k` as revealed with
//! `Δ' = replay − W_k`, and passes iff `‖Δ − Δ'‖₂ ≤ STEP_RTOL · ‖Δ'‖₂ + STEP_ATOL · ‖W_k‖₂ / √P`, and
//! the same for each AdamW moment. `STEP_RTOL` = 5 % is a first setting, not yet calibrated against
//! measured staleness; a state perturbed by more than that share of one step is caught.

use std::collections::BTreeMap;

use async_trait::async_trait;
use iota_model::optim::InnerState;
use iota_model::Stage;
use iota_model::StepOptions;
use iota_primitives::{ContentHash, Seed, Verdict};
use iota_protocol::codec::MergeCodec;
use iota_protocol::optim::{pseudo_gradient_deviation, PseudoGradientFinding};
use iota_protocol::selection::{inner_step_challenges, spot_checks, CheckKind, INNER_CHALLENGES};
use iota_rpc::types::StageSubmission;
use iota_rpc::{AccountId, ObjectEntry, PathwayLog};
use iota_storage::keys;
use serde::{Deserialize, Serialize};

use crate::objects::{FetchError, Objects};
use crate::recompute::{to_tensor, RecomputeError, StageInput};
use crate::spot_check::{
	CheckTarget, Checker, Inconclusive, ItemKind, KeptForward, WeightsError, WeightsRef,
	WeightsSource,
};

/// Relative tolerance on a replayed update (of its norm).
pub const STEP_RTOL: f64 = 0.05;
/// Absolute tolerance on a replayed update, as a share of the state's rms weight.
pub const STEP_ATOL: f64 = 1e-6;

/// Why an inner step fails.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", tag = "kind")]
pub enum StepFault {
	/// A revealed state does not hash to what the miner reported for it.
	HashMismatch {
		/// Which state (`k` or `k + 1`).
		state: u32,
	},
	/// The revealed states are not of `P` parameters, or state `k + 1`'s AdamW step is not `k`'s + 1.
	Shape {
		/// What is wrong.
		reason: String,
	},
	/// State `k + 1` is not state `k` moved by one step on the recomputed gradient.
	Replay {
		/// Which vector (`weights`, `m`, `v`).
		vector: String,
		/// `‖Δ − Δ'‖₂ / bound` (fails above 1).
		ratio: f64,
	},
}

/// The judgement of one inner step.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct StepJudgement {
	/// The worst ratio over weights and moments (0 for a bit-identical replay).
	pub ratio: f64,
	/// The first fault found, if any.
	pub fault: Option<StepFault>,
}

impl StepJudgement {
	/// Whether the step passes.
	pub fn passes(&self) -> bool {
		self.fault.is_none()
	}
}

/// One challenged inner step: the move of `miner`'s replica of `stage` from state `step` to
/// `step + 1`, with the hashes it reported for both.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StepTarget {
	/// Stage.
	pub stage: u16,
	/// The miner.
	pub miner: AccountId,
	/// `k`.
	pub step: u32,
	/// The reported hashes of states `k` and `k + 1`.
	pub hashes: [ContentHash; 2],
}

/// Every challenged inner step of the epoch of `log`: for each reported trail (stage, miner), the
/// steps [`inner_step_challenges`] draws from `challenge_seed` (the same pure draw the orchestrator
/// hands the miners), in the log's trail order.
pub fn challenged_steps(log: &PathwayLog, challenge_seed: &Seed) -> Vec<StepTarget> {
	let mut out = Vec::new();
	for t in &log.inner_states {
		let n = t.hashes.len() as u32;
		for k in inner_step_challenges(
			challenge_seed,
			log.epoch,
			t.stage,
			&t.miner.0,
			n,
			INNER_CHALLENGES,
		) {
			let (Some(a), Some(b)) = (t.hashes.get(k as usize), t.hashes.get(k as usize + 1))
			else {
				continue;
			};
			out.push(StepTarget {
				stage: t.stage,
				miner: t.miner.clone(),
				step: k,
				hashes: [*a, *b],
			});
		}
	}
	out
}

/// The object key of `miner`'s revealed state `step` of `stage` in `epoch` (`keys::inner_state`; the
/// miner's id in keys is its SS58 string, as the orchestrator presigns it).
///
/// # Errors
/// A run id that is not a valid key part (the spec's run was checked when loaded, so only in tests).
pub fn reveal_key(
	run: &str,
	epoch: u32,
	stage: u16,
	step: u32,
	miner: &AccountId,
) -> Result<String, Inconclusive> {
	let bad = |e: keys::KeyError| Inconclusive::BadInput(format!("key of a revealed state: {e}"));
	let run = keys::Id::new(run).map_err(bad)?;
	let who = keys::Id::new(miner.to_string()).map_err(bad)?;
	Ok(keys::inner_state(&run, u64::from(epoch), u32::from(stage), step, &who))
}

/// The revealed states of each (stage, miner) an epoch's checks may use: state index → the object
/// (key, reported hash).
pub type RevealedStates = BTreeMap<(u16, AccountId), BTreeMap<u32, ObjectEntry>>;

/// Spot-checks of local-mode passes at the states they ran at (docs/design.md §10): for each
/// (stage, miner) with revealed states, the candidate records are those where the miner ran the
/// stage's forward at a revealed state (`forward_steps[s]`) and, at body stages, those where it ran
/// the backward with an output at a revealed state (`backward_steps[s]`): a backward rerouted from
/// another miner's forward is recomputed there; one through the miner's own forward kept from an
/// earlier state needs that state revealed too, and is recomputed wholly there, as the miner ran it
/// with the weights it stashed for it. Up to `forward_checks` and
/// `backward_checks` are drawn per (stage, miner, kind) with [`spot_checks`] from the
/// **challenge** seed (the passes' states were unknown before it). Each target comes with the
/// revealed state it is recomputed at.
pub fn revealed_spot_checks(
	log: &PathwayLog,
	challenge_seed: &Seed,
	revealed: &RevealedStates,
	forward_checks: usize,
	backward_checks: usize,
) -> Vec<(CheckTarget, WeightsRef)> {
	let stages = usize::from(log.stages);
	let mut out = Vec::new();
	for ((stage, miner), states) in revealed {
		let s = usize::from(*stage);
		if s >= stages {
			continue;
		}
		let at = |step: u32, kept: Option<u32>| -> Option<WeightsRef> {
			let e = states.get(&step)?;
			let kept_forward = match kept {
				Some(j) => Some(KeptForward { step: j, state: states.get(&j)?.clone() }),
				None => None,
			};
			Some(WeightsRef::Revealed { key: e.key.clone(), hash: e.hash, step, kept_forward })
		};
		for kind in [ItemKind::Forward, ItemKind::Backward] {
			let mut found: BTreeMap<usize, WeightsRef> = BTreeMap::new();
			for (i, r) in log.records.iter().enumerate() {
				let w = match kind {
					ItemKind::Forward => (r.forward.get(s) == Some(miner)
						&& r.forward_outputs.get(s).is_some_and(|o| !o.key.is_empty()))
					.then(|| at(*r.forward_steps.get(s)?, None))
					.flatten(),
					ItemKind::Backward => (s > 0
						&& s + 1 < stages && r.backward.get(s) == Some(miner)
						&& r.backward_outputs.get(s).is_some_and(Option::is_some))
					.then(|| {
						let k = *r.backward_steps.get(s)?;
						let own = r.forward.get(s) == Some(miner);
						let j = if own { *r.forward_steps.get(s)? } else { k };
						at(k, (j != k).then_some(j))
					})
					.flatten(),
				};
				if let Some(w) = w {
					found.insert(i, w);
				}
			}
			let (k, byte) = match kind {
				ItemKind::Forward => (forward_checks, CheckKind::Forward),
				ItemKind::Backward => (backward_checks, CheckKind::Backward),
			};
			let candidates: Vec<usize> = found.keys().copied().collect();
			let k = k.min(candidates.len());
			for i in spot_checks(challenge_seed, log.epoch, *stage, &miner.0, byte, candidates, k) {
				let Some(w) = found.get(&i) else { continue };
				out.push((
					CheckTarget {
						miner: miner.clone(),
						stage: *stage,
						sample: log.records[i].sample,
						record: i,
						kind,
					},
					w.clone(),
				));
			}
		}
	}
	out
}

/// A [`WeightsSource`] that names one revealed state for every (epoch, stage): how a spot-check is
/// pointed at the state its pass ran at.
pub struct RevealedWeights(pub WeightsRef);

#[async_trait]
impl WeightsSource for RevealedWeights {
	async fn weights(&self, _epoch: u32, _stage: u16) -> Result<WeightsRef, WeightsError> {
		Ok(self.0.clone())
	}
}

/// The evidence of one pseudo-gradient check (docs/design.md §10).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PseudoGradientEvidence {
	/// Stage.
	pub stage: u16,
	/// The submitted merge vector (key, hash).
	pub submission: ObjectEntry,
	/// The sample count it was submitted with.
	pub samples: u32,
	/// The miner's last reported state, revealed (key, hash).
	pub last_state: ObjectEntry,
	/// The epoch's global weights of the stage.
	pub weights: WeightsRef,
	/// The comparison ([`pseudo_gradient_deviation`]); `None` when the submission did not decode.
	pub finding: Option<PseudoGradientFinding>,
	/// The finding.
	pub verdict: Verdict,
	/// Why it failed, in words.
	pub reason: Option<String>,
}

/// The evidence of one judged inner step.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct InnerStepEvidence {
	/// Stage.
	pub stage: u16,
	/// `k`.
	pub step: u32,
	/// The revealed states `k` and `k + 1` (key, reported hash).
	pub states: Vec<ObjectEntry>,
	/// Passes the pathway log puts at state `k` (backward passes; the tail's forward items).
	pub passes: u32,
	/// Of them, passes whose forward ran at an earlier state: the miner ran the backward through that
	/// forward's kept graph at the earlier state's weights (stashed).
	pub stale_passes: u32,
	/// Of those, passes recomputed exactly so, the earlier state being revealed too (another
	/// challenged step's). A replay that is off while some stale pass could not be recomputed so is
	/// inconclusive, not a `Fail`.
	#[serde(default)]
	pub stale_replayed: u32,
	/// Whether state `k`'s weights were compared with the epoch's global weights (`k = 0` only).
	pub start_checked: bool,
	/// The replay ([`judge_inner_step`]); `None` when the reveal itself failed.
	pub judgement: Option<StepJudgement>,
	/// The finding.
	pub verdict: Verdict,
	/// Why it failed, in words.
	pub reason: Option<String>,
}

/// The outcome of one inner-step check.
#[derive(Clone, Debug, PartialEq)]
pub enum StepOutcome {
	/// A verdict with its evidence.
	Judged(Box<InnerStepEvidence>),
	/// State `k` or `k + 1` is not in the bucket (yet): the daemon waits until the reveal deadline,
	/// then fails the miner ([`not_revealed`]).
	NotRevealed {
		/// The missing object's key.
		key: String,
	},
	/// No verdict.
	Inconclusive(Inconclusive),
}

/// The `Fail` evidence of a challenged step whose states were not revealed by the deadline.
pub fn not_revealed(t: &StepTarget, run: &str, epoch: u32) -> InnerStepEvidence {
	let states = (0..2)
		.map(|i| ObjectEntry {
			key: reveal_key(run, epoch, t.stage, t.step + i, &t.miner).unwrap_or_default(),
			hash: t.hashes[i as usize],
		})
		.collect();
	let mut ev = InnerStepEvidence::failing(t, states);
	ev.reason = Some(format!(
		"states {} and {} of the challenged step were not revealed by the deadline",
		t.step,
		t.step + 1
	));
	ev
}

impl InnerStepEvidence {
	/// The evidence of `t` with its `states`, nothing judged yet: a `Fail` until a judgement says
	/// otherwise.
	fn failing(t: &StepTarget, states: Vec<ObjectEntry>) -> Self {
		InnerStepEvidence {
			stage: t.stage,
			step: t.step,
			states,
			passes: 0,
			stale_passes: 0,
			stale_replayed: 0,
			start_checked: false,
			judgement: None,
			verdict: Verdict::Fail,
			reason: None,
		}
	}
}

impl Checker {
	/// Check one challenged inner step of the epoch of `log` (docs/design.md §10):
	///
	/// | situation | outcome |
	/// |---|---|
	/// | state `k` or `k + 1` not in the bucket | [`StepOutcome::NotRevealed`] |
	/// | a revealed state that does not hash to the report, or is not a state of this stage | `Fail` |
	/// | state 0 whose weights are not the epoch's global weights | `Fail` |
	/// | the replay of the step on the recomputed gradient of its passes is outside [`STEP_RTOL`] | `Fail` |
	/// | the same, but some passes may have run through an earlier state's kept graph | inconclusive |
	/// | an input of a pass missing or refused, store unreachable, malformed log | inconclusive |
	/// | otherwise | `Pass` |
	///
	/// The revealed object sits at the miner's own key, written through a PUT only it was given, so a
	/// revealed state that does not hash to what the miner reported counts against it (unlike a spot
	/// check's garbage object).
	pub async fn check_inner_step(
		&mut self,
		log: &PathwayLog,
		t: &StepTarget,
		weights: &dyn WeightsSource,
		objects: &dyn Objects,
	) -> StepOutcome {
		match self.try_inner_step(log, t, weights, objects).await {
			Ok(o) => o,
			Err(i) => StepOutcome::Inconclusive(i),
		}
	}

	/// Local mode's pseudo-gradient check (docs/design.md §10): the merge vector `sub` that `sub`'s
	/// miner submitted for its stage must be the delta from the stage's global weights of the epoch
	/// (from `weights`) to the miner's last reported state (`last`, revealed, a state that hashes to
	/// the report), times its sample count, within what the run's merge codec allows
	/// ([`pseudo_gradient_deviation`]).
	///
	/// | situation | outcome |
	/// |---|---|
	/// | the submission does not decode as `P` values of the codec | `Fail` |
	/// | it differs from the expected pseudo-gradient beyond the codec's limit | `Fail` |
	/// | top-k codec (the miner's error feedback hides the delta) | inconclusive |
	/// | global weights, the revealed state or the submission unreadable | inconclusive |
	/// | otherwise | `Pass` |
	///
	/// # Errors
	/// [`Inconclusive`] as in the table.
	pub async fn check_pseudo_gradient(
		&mut self,
		epoch: u32,
		sub: &StageSubmission,
		last: &ObjectEntry,
		weights: &dyn WeightsSource,
		objects: &dyn Objects,
	) -> Result<PseudoGradientEvidence, Inconclusive> {
		let (stage, s) = (sub.stage, usize::from(sub.stage));
		let codec: MergeCodec = self.spec().merge_codec;
		let p = self
			.spec()
			.model
			.stage_param_count(s)
			.map_err(|e| Inconclusive::MalformedLog(format!("stage {s}: {e}")))?;
		let w = weights.weights(epoch, stage).await.map_err(|e| match e {
			WeightsError::Unavailable(r) => Inconclusive::Unavailable(r),
			other => Inconclusive::Weights(other.to_string()),
		})?;
		let global = self
			.stage(epoch, stage, &w, objects)
			.await?
			.flat_params()
			.map_err(|e| Inconclusive::Weights(format!("global weights of stage {s}: {e}")))?;
		let local = self
			.revealed_stage(stage, &last.key, &last.hash, objects)
			.await?
			.flat_params()
			.map_err(|e| Inconclusive::Weights(format!("revealed state {}: {e}", last.key)))?;
		let object = &sub.source.object;
		let bytes = objects.get(&object.key, &object.hash).await.map_err(|e| match e {
			FetchError::HashMismatch { key, expected } => {
				Inconclusive::Garbage(format!("{key} does not hash to {expected}"))
			},
			FetchError::NotFound { key } => {
				Inconclusive::Unavailable(format!("accepted submission {key} is gone"))
			},
			FetchError::Unavailable { key, reason } => {
				Inconclusive::Unavailable(format!("{key}: {reason}"))
			},
		})?;
		let mut ev = PseudoGradientEvidence {
			stage,
			submission: ObjectEntry { key: object.key.clone(), hash: object.hash },
			samples: sub.source.samples,
			last_state: last.clone(),
			weights: w,
			finding: None,
			verdict: Verdict::Fail,
			reason: None,
		};
		let chunk = iota_protocol::chunks::gradient_chunk_elems(p as u64);
		let submitted = match codec.decode(&bytes, p as u64, chunk) {
			Ok(v) => v,
			Err(e) => {
				ev.reason = Some(format!("the submission does not decode as {codec}: {e}"));
				return Ok(ev);
			},
		};
		let finding =
			pseudo_gradient_deviation(codec, &submitted, &global, &local, sub.source.samples)
				.map_err(|e| {
					Inconclusive::BadInput(format!("pseudo-gradient of stage {s}: {e}"))
				})?;
		ev.finding = Some(finding);
		match finding {
			PseudoGradientFinding::Matches { .. } => ev.verdict = Verdict::Pass,
			PseudoGradientFinding::Differs { ratio, limit } => {
				ev.reason = Some(format!(
					"the submitted merge vector is {ratio:.3e} (relative) from the global weights minus the last reported state, limit {limit}"
				));
			},
			PseudoGradientFinding::Unverifiable => {
				return Err(Inconclusive::Unverifiable(format!(
					"{codec} submissions carry error feedback; the delta cannot be checked"
				)))
			},
		}
		Ok(ev)
	}

	/// The passes of `miner` at `stage` that the pathway log `log` puts at its inner state `step`
	/// ([`PathwayLog::passes_at`]), with what the validator recomputes them from: (input, what flows
	/// back) as [`step_gradient`] takes them. Also returns, per pass, the earlier state its backward's
	/// kept forward ran at (`None`: the forward ran at `step` too, or by another miner, and is
	/// recomputed at `step`).
	///
	/// # Errors
	/// [`Inconclusive`] for a malformed record or an input that cannot be read.
	pub(crate) async fn passes_at(
		&mut self,
		log: &PathwayLog,
		stage: u16,
		miner: &AccountId,
		step: u32,
		objects: &dyn Objects,
	) -> Result<(Vec<(StageInput, StageInput)>, Vec<Option<u32>>), Inconclusive> {
		let (s, stages) = (usize::from(stage), usize::from(log.stages));
		let tail = s + 1 == stages;
		let malformed = |sample: u64, what: &str| {
			Inconclusive::MalformedLog(format!("sample {sample}: {what}"))
		};
		let (mut passes, mut stale) = (Vec::new(), Vec::new());
		for (r, j) in log.passes_at(stage, miner, step) {
			stale.push(j);
			let input = if s == 0 {
				self.tokens(r.sample, objects).await?.0
			} else {
				let e =
					r.forward_outputs.get(s - 1).ok_or_else(|| malformed(r.sample, "no input"))?;
				self.activation_input(e, iota_model::wire::Kind::Activation, objects).await?
			};
			let back = if tail {
				self.tokens(r.sample, objects).await?.1
			} else {
				let next = s + 1;
				let e = r
					.backward_outputs
					.get(next)
					.cloned()
					.flatten()
					.or_else(|| {
						(next + 1 == stages).then(|| r.forward_outputs.get(next).cloned()).flatten()
					})
					.ok_or_else(|| malformed(r.sample, "no gradient from the next stage"))?;
				self.activation_input(&e, iota_model::wire::Kind::Gradient, objects).await?
			};
			passes.push((input, back));
		}
		Ok((passes, stale))
	}

	async fn try_inner_step(
		&mut self,
		log: &PathwayLog,
		t: &StepTarget,
		weights: &dyn WeightsSource,
		objects: &dyn Objects,
	) -> Result<StepOutcome, Inconclusive> {
		let (epoch, s) = (log.epoch, usize::from(t.stage));
		let stages = usize::from(log.stages);
		if s >= stages || stages != self.spec().model.n_stages() {
			return Err(Inconclusive::MalformedLog(format!("stage {s} of a {stages}-stage log")));
		}
		let p = self
			.spec()
			.model
			.stage_param_count(s)
			.map_err(|e| Inconclusive::MalformedLog(format!("stage {s}: {e}")))?;
		let run = self.spec().run.clone();
		let mut ev = InnerStepEvidence::failing(t, Vec::new());
		let fail = |mut ev: InnerStepEvidence, why: String| {
			ev.reason = Some(why);
			Ok(StepOutcome::Judged(Box::new(ev)))
		};
		// The reveal: both states, each the miner's reported hash.
		let started = std::time::Instant::now();
		let mut states = Vec::new();
		for i in 0..2u32 {
			let key = reveal_key(&run, epoch, t.stage, t.step + i, &t.miner)?;
			let hash = t.hashes[i as usize];
			ev.states.push(ObjectEntry { key: key.clone(), hash });
			match fetch_revealed(objects, &key, &hash, p, s).await? {
				Revealed::State(st) => states.push(st),
				Revealed::Missing => return Ok(StepOutcome::NotRevealed { key }),
				Revealed::Bad(why) => return fail(ev, why),
			}
		}
		let (before, after) = (&states[0], &states[1]);

		// State 0 is what the epoch began with: the stage's global weights of the epoch.
		if t.step == 0 {
			match weights.weights(epoch, t.stage).await {
				Ok(w) => {
					let global =
						self.stage(epoch, t.stage, &w, objects).await?.flat_params().map_err(
							|e| Inconclusive::Weights(format!("global weights of stage {s}: {e}")),
						)?;
					ev.start_checked = true;
					if global != before.weights {
						return fail(
							ev,
							"state 0's weights are not the epoch's global weights".to_string(),
						);
					}
				},
				Err(WeightsError::Unavailable(r)) => return Err(Inconclusive::Unavailable(r)),
				Err(e) => {
					tracing::debug!(epoch, stage = s, error = %e, "state 0 not compared with the global weights")
				},
			}
		}

		// The passes the log puts at state k, with their inputs.
		let fetched = std::time::Instant::now();
		let (passes, stale) = self.passes_at(log, t.stage, &t.miner, t.step, objects).await?;
		let read = std::time::Instant::now();
		ev.stale_passes = stale.iter().flatten().count() as u32;
		// A pass through a kept forward is recomputed as the miner ran it, at the revealed state its
		// forward ran at. Each earlier state is fetched once, however many passes ran through it.
		let trail = log.inner_states.iter().find(|x| x.stage == t.stage && x.miner == t.miner);
		// The challenge reveals each such state too (`PathwayLog::revealed_states`): one missing is a
		// missing reveal, one that does not hash to its report a `Fail`.
		let mut earlier: BTreeMap<u32, Option<Vec<f32>>> = BTreeMap::new();
		for j in stale.iter().flatten() {
			if earlier.contains_key(j) {
				continue;
			}
			let w = match trail.and_then(|x| x.hashes.get(*j as usize)) {
				Some(hash) => {
					let key = reveal_key(&run, epoch, t.stage, *j, &t.miner)?;
					ev.states.push(ObjectEntry { key: key.clone(), hash: *hash });
					match fetch_revealed(objects, &key, hash, p, s).await? {
						Revealed::State(st) => Some(st.weights),
						Revealed::Missing => return Ok(StepOutcome::NotRevealed { key }),
						Revealed::Bad(why) => return fail(ev, why),
					}
				},
				None => None,
			};
			earlier.insert(*j, w);
		}
		let computing = std::time::Instant::now();
		let kept: Vec<Option<&[f32]>> = stale
			.iter()
			.map(|j| j.and_then(|j| earlier.get(&j)).and_then(|w| w.as_deref()))
			.collect();
		ev.stale_replayed = kept.iter().flatten().count() as u32;
		ev.passes = passes.len() as u32;
		if passes.is_empty() {
			return Err(Inconclusive::MalformedLog(format!(
				"no pass of {} at state {} of stage {s}",
				t.miner, t.step
			)));
		}

		// Recompute the step's gradient at state k and replay the step.
		let opts = self.spec().step_options(epoch);
		let scratch = self.hold_state(t.stage, t.hashes[0], &before.weights)?;
		let g = step_gradient_kept(scratch, &passes, &kept, &before.weights).map_err(|e| {
			Inconclusive::BadInput(format!("recomputation refused the inputs: {e}"))
		})?;
		let (decay, total) = (scratch.decay_mask().to_vec(), scratch.total_params());
		let j = judge_inner_step(before, after, t.hashes, &g, &decay, &opts, total);
		let times = self.times_mut();
		times.steps += 1;
		times.states += (fetched - started) + (computing - read);
		times.inputs += read - fetched;
		times.compute += computing.elapsed();
		ev.judgement = Some(j.clone());
		match &j.fault {
			None => {
				ev.verdict = Verdict::Pass;
				Ok(StepOutcome::Judged(Box::new(ev)))
			},
			Some(StepFault::Replay { vector, ratio }) if ev.stale_passes > ev.stale_replayed => {
				Err(Inconclusive::Stale(format!(
					"step {} of {} at stage {s}: {vector} off by {ratio:.2}x the margin, {} of {} passes through an earlier state",
					t.step, t.miner, ev.stale_passes, ev.passes
				)))
			},
			Some(f) => {
				let why = format!("{f:?}");
				fail(ev, why)
			},
		}
	}
}

/// What a revealed state's key holds.
enum Revealed {
	/// The state, hashing to the miner's report.
	State(InnerState),
	/// Nothing (not revealed yet).
	Missing,
	/// Bytes that do not hash to the report or are not a state of the stage: why, for a `Fail`.
	Bad(String),
}

/// Fetches the revealed state at `key` that must hash to `hash` and hold `p` parameters of stage `s`.
///
/// # Errors
/// [`Inconclusive::Unavailable`] when the store cannot be read.
async fn fetch_revealed(
	objects: &dyn Objects,
	key: &str,
	hash: &ContentHash,
	p: usize,
	s: usize,
) -> Result<Revealed, Inconclusive> {
	let bytes = match objects.get(key, hash).await {
		Ok(b) => b,
		Err(FetchError::NotFound { .. }) => return Ok(Revealed::Missing),
		Err(FetchError::HashMismatch { key, .. }) => {
			return Ok(Revealed::Bad(format!(
				"revealed state {key} does not hash to the reported {hash}"
			)))
		},
		Err(FetchError::Unavailable { key, reason }) => {
			return Err(Inconclusive::Unavailable(format!("{key}: {reason}")))
		},
	};
	Ok(match InnerState::from_bytes(&bytes, p) {
		Ok(st) => Revealed::State(st),
		Err(e) => Revealed::Bad(format!("revealed state {key} is not a state of stage {s}: {e}")),
	})
}

/// The mean parameter gradient of `passes` at `stage`'s current weights: each pass is its input (tokens
/// at the head, else the input activation `[B, T, w]`) and what flows back into it (the gradient of the
/// stage's output `[B, T, w]`, or at the tail the target tokens). The mean is over passes (one
/// micro-batch each), as the miner's inner step takes it. The stage's accumulator is cleared after.
///
/// # Errors
/// [`RecomputeError`] for inputs the stage refuses or no passes (`Inputs`).
pub fn step_gradient(
	stage: &mut Stage,
	passes: &[(StageInput, StageInput)],
) -> Result<Vec<f32>, RecomputeError> {
	step_gradient_kept(stage, passes, &[], &[])
}

/// [`step_gradient`] where some passes' backward ran through a forward kept from an earlier inner step
/// (docs/design.md §3): `kept[i]` is the weights pass `i`'s forward ran at (`None`: at the step's own
/// state), `weights` the step's state `k` (which the stage must hold). Each kept pass is recomputed as
/// the miner ran it ([`crate::recompute::kept_backward`]: forward and backward at the earlier weights,
/// which the miner stashed). `kept` may be shorter than `passes` (the rest ran at state `k`). The stage
/// holds `weights` after.
///
/// # Errors
/// As [`step_gradient`].
pub fn step_gradient_kept(
	stage: &mut Stage,
	passes: &[(StageInput, StageInput)],
	kept: &[Option<&[f32]>],
	weights: &[f32],
) -> Result<Vec<f32>, RecomputeError> {
	let s = stage.index();
	if passes.is_empty() {
		return Err(RecomputeError::Inputs {
			stage: s,
			reason: "an inner step of no passes".into(),
		});
	}
	stage.zero_grad();
	let r = accumulate(stage, passes, kept, weights);
	if r.is_err() {
		stage.zero_grad();
	}
	r?;
	let (mut g, n) = stage.take_gradient()?;
	let inv = 1.0 / n.max(1) as f32;
	g.iter_mut().for_each(|x| *x *= inv);
	Ok(g)
}

fn accumulate(
	stage: &mut Stage,
	passes: &[(StageInput, StageInput)],
	kept: &[Option<&[f32]>],
	weights: &[f32],
) -> Result<(), RecomputeError> {
	let (dtype, device) = (stage.dtype(), stage.device().clone());
	for (i, (input, back)) in passes.iter().enumerate() {
		let x = to_tensor(input, dtype, &device)?;
		if stage.is_last() {
			let y = to_tensor(back, dtype, &device)?;
			let lf = stage.forward_loss(&x, &y)?;
			stage.backward_loss(lf)?;
		} else {
			let g = to_tensor(back, dtype, &device)?;
			match kept.get(i).copied().flatten() {
				Some(w) => {
					crate::recompute::kept_backward(stage, &x, &g, w, weights)?;
				},
				None => {
					stage.backward_from_input(&x, &g)?;
				},
			}
		}
	}
	Ok(())
}

/// `‖(a1 − a0) − (b1 − a0)‖₂ / (rtol·‖b1 − a0‖₂ + atol·rms(a0)·√n)` over f64 (0 when equal).
fn update_ratio(a0: &[f32], a1: &[f32], b1: &[f32]) -> f64 {
	let (mut diff, mut upd, mut base) = (0f64, 0f64, 0f64);
	for ((x0, x1), y1) in a0.iter().zip(a1).zip(b1) {
		let d = f64::from(*x1) - f64::from(*y1);
		let u = f64::from(*y1) - f64::from(*x0);
		diff += d * d;
		upd += u * u;
		base += f64::from(*x0) * f64::from(*x0);
	}
	if diff == 0.0 {
		return 0.0;
	}
	let bound = STEP_RTOL * upd.sqrt() + STEP_ATOL * base.sqrt();
	if bound > 0.0 {
		diff.sqrt() / bound
	} else {
		f64::INFINITY
	}
}

/// Judge the inner step from `before` (revealed state `k`) to `after` (revealed state `k + 1`) against
/// the `reported` hashes `[h_k, h_{k+1}]` and the recomputed `mean_grad` ([`step_gradient`]), with the
/// stage's `decay` mask, the epoch's step `opts` and the model's `total_params` (module docs).
pub fn judge_inner_step(
	before: &InnerState,
	after: &InnerState,
	reported: [ContentHash; 2],
	mean_grad: &[f32],
	decay: &[bool],
	opts: &StepOptions,
	total_params: usize,
) -> StepJudgement {
	let fail = |fault| StepJudgement { ratio: f64::INFINITY, fault: Some(fault) };
	for (i, (s, h)) in [before, after].into_iter().zip(reported).enumerate() {
		if ContentHash(s.hash()) != h {
			return fail(StepFault::HashMismatch { state: i as u32 });
		}
	}
	let p = decay.len();
	let lens = [
		&before.weights,
		&before.adam.m,
		&before.adam.v,
		&after.weights,
		&after.adam.m,
		&after.adam.v,
	];
	if lens.iter().any(|v| v.len() != p) || mean_grad.len() != p {
		return fail(StepFault::Shape {
			reason: format!("states or gradient not of {p} parameters"),
		});
	}
	if before.adam.step.checked_add(1) != Some(after.adam.step) {
		return fail(StepFault::Shape {
			reason: format!("AdamW step {} after {}", after.adam.step, before.adam.step),
		});
	}
	let mut replay = before.clone();
	if let Err(e) = replay.step(mean_grad, decay, opts, total_params) {
		return fail(StepFault::Shape { reason: format!("the replay refused the gradient: {e}") });
	}
	let mut worst = 0f64;
	for (vector, a0, a1, b1) in [
		("weights", &before.weights, &after.weights, &replay.weights),
		("m", &before.adam.m, &after.adam.m, &replay.adam.m),
		("v", &before.adam.v, &after.adam.v, &replay.adam.v),
	] {
		let ratio = update_ratio(a0, a1, b1);
		worst = worst.max(ratio);
		if ratio > 1.0 {
			return StepJudgement {
				ratio: worst,
				fault: Some(StepFault::Replay { vector: vector.into(), ratio }),
			};
		}
	}
	StepJudgement { ratio: worst, fault: None }
}

#[cfg(test)]
mod tests {
	use super::*;
	use candle_core::{DType, Device, Tensor};
	use iota_model::ModelConfig;

	/// Stage 1 (a body stage) of `tiny` and `n` passes of seeded inputs.
	fn body(n: usize) -> (Stage, Vec<(StageInput, StageInput)>) {
		let cfg = ModelConfig::tiny();
		let st = Stage::new(&cfg, 1, 7, DType::F32, &Device::Cpu).unwrap();
		let (b, t, w) = (2, 8, cfg.wire_width());
		let act = |seed: usize| StageInput::Activation {
			values: (0..b * t * w).map(|i| ((i * 31 + seed * 17) as f32 * 0.013).sin()).collect(),
			shape: [b, t, w],
		};
		(st, (0..n).map(|i| (act(2 * i), act(2 * i + 1))).collect())
	}

	/// What an honest miner does: the passes' gradients at its state, then one inner step.
	fn honest_step(
		st: &mut Stage,
		passes: &[(StageInput, StageInput)],
	) -> (InnerState, InnerState) {
		let before = st.inner_state().unwrap();
		for (x, g) in passes {
			let (
				StageInput::Activation { values: xv, shape },
				StageInput::Activation { values: gv, .. },
			) = (x, g)
			else {
				unreachable!()
			};
			let xt = Tensor::from_slice(xv, shape.as_slice(), &Device::Cpu).unwrap();
			let gt = Tensor::from_slice(gv, shape.as_slice(), &Device::Cpu).unwrap();
			st.backward_from_input(&xt, &gt).unwrap();
		}
		st.step(&StepOptions::default()).unwrap();
		(before, st.inner_state().unwrap())
	}

	#[test]
	fn an_honest_step_replays_exactly_and_tampering_fails() {
		let (mut miner, passes) = body(3);
		let (mut validator, _) = body(0);
		let (before, after) = honest_step(&mut miner, &passes);
		let hashes = [ContentHash(before.hash()), ContentHash(after.hash())];
		let (decay, total) = (validator.decay_mask().to_vec(), validator.total_params());
		let opts = StepOptions::default();
		validator.set_flat_params(&before.weights).unwrap();
		let g = step_gradient(&mut validator, &passes).unwrap();
		assert_eq!(validator.accumulated(), 0, "accumulator cleared");
		let ok = judge_inner_step(&before, &after, hashes, &g, &decay, &opts, total);
		assert!(ok.passes(), "{ok:?}");
		assert_eq!(ok.ratio, 0.0, "an honest step on the same CPU replays bit for bit");

		// Tampered weights after the step (reported as tampered, so the hashes match): 20 % of one
		// update's size on every weight.
		let mut bent = after.clone();
		for (w, w0) in bent.weights.iter_mut().zip(&before.weights) {
			*w += 0.2 * (*w - w0) + 1e-4;
		}
		let h = [hashes[0], ContentHash(bent.hash())];
		let j = judge_inner_step(&before, &bent, h, &g, &decay, &opts, total);
		assert!(
			matches!(j.fault, Some(StepFault::Replay { ref vector, .. }) if vector == "weights"),
			"{j:?}"
		);
		// A step on only some of the passes.
		let mut short = body(0).0;
		let (b2, a2) = honest_step(&mut short, &passes[..1]);
		let h = [ContentHash(b2.hash()), ContentHash(a2.hash())];
		let j = judge_inner_step(&b2, &a2, h, &g, &decay, &opts, total);
		assert!(!j.passes(), "a step that left out passes: {j:?}");
		// Moments that do not follow the gradient.
		let mut m = after.clone();
		m.adam.m.iter_mut().for_each(|x| *x *= 1.5);
		let h = [hashes[0], ContentHash(m.hash())];
		let j = judge_inner_step(&before, &m, h, &g, &decay, &opts, total);
		assert!(
			matches!(j.fault, Some(StepFault::Replay { ref vector, .. }) if vector == "m"),
			"{j:?}"
		);
		// A revealed state other than the reported one; a skipped AdamW step count; wrong lengths.
		let j = judge_inner_step(&before, &after, [hashes[1], hashes[1]], &g, &decay, &opts, total);
		assert_eq!(j.fault, Some(StepFault::HashMismatch { state: 0 }));
		let mut twice = after.clone();
		twice.adam.step += 1;
		let h = [hashes[0], ContentHash(twice.hash())];
		assert!(matches!(
			judge_inner_step(&before, &twice, h, &g, &decay, &opts, total).fault,
			Some(StepFault::Shape { .. })
		));
		assert!(matches!(
			judge_inner_step(&before, &after, hashes, &g[1..], &decay, &opts, total).fault,
			Some(StepFault::Shape { .. })
		));
		assert!(step_gradient(&mut validator, &[]).is_err());
	}

	#[test]
	fn passes_are_spot_checked_at_the_revealed_state_they_ran_at() {
		use iota_rpc::{InnerStates, PathwayRecord};
		let acct = |b: u8| AccountId::from([b; 32]);
		let entry = |k: &str| ObjectEntry { key: k.into(), hash: ContentHash::of(k.as_bytes()) };
		// Stage 1 (a body stage) of 3: miner 1 ran forward and backward of samples 0..6 at states
		// 0, 0, 1, 1, 2, 2; sample 6's forward ran at state 0 and its backward (through that forward's
		// graph) was reported at state 2; sample 7 was rerouted: miner 9 ran its forward, miner 1 its
		// backward at state 1.
		let mut records: Vec<PathwayRecord> = (0..8u64)
			.map(|i| PathwayRecord {
				sample: i,
				forward: vec![acct(0), acct(1), acct(2)],
				backward: vec![acct(0), acct(1), acct(2)],
				forward_outputs: vec![entry("f0"), entry(&format!("f1-{i}")), entry("f2")],
				backward_outputs: vec![None, Some(entry(&format!("b1-{i}"))), Some(entry("f2"))],
				loss: 1.0,
				forward_steps: vec![0, (i / 2) as u32, 0],
				backward_steps: vec![0, (i / 2) as u32, 0],
				recomputed: vec![],
			})
			.collect();
		records[6].forward_steps[1] = 0;
		records[6].backward_steps[1] = 2;
		// Sample 3's backward ran at state 2 through its forward kept from state 1.
		records[3].backward_steps[1] = 2;
		records[7].forward[1] = acct(9);
		records[7].backward_steps[1] = 1;
		let log = PathwayLog {
			run: "r".into(),
			epoch: 4,
			stages: 3,
			records,
			inner_states: vec![InnerStates {
				stage: 1,
				miner: acct(1),
				hashes: (0..4u8).map(|i| ContentHash::of(&[i])).collect(),
			}],
		};
		// States 1 and 2 revealed (the challenged step 1).
		let state =
			|k: u32| ObjectEntry { key: format!("s{k}"), hash: ContentHash::of(&[k as u8]) };
		let revealed: RevealedStates =
			[((1, acct(1)), [(1, state(1)), (2, state(2))].into_iter().collect())].into();
		let all = revealed_spot_checks(&log, &[7; 32], &revealed, usize::MAX, usize::MAX);
		let picked = |kind| {
			let mut v: Vec<(u64, u32)> = all
				.iter()
				.filter(|(t, _)| t.kind == kind)
				.map(|(t, w)| match w {
					WeightsRef::Revealed { step, .. } => (t.sample, *step),
					other => panic!("{other:?}"),
				})
				.collect();
			v.sort_unstable();
			v
		};
		// Forwards at states 1 and 2 (sample 6's forward ran at the unrevealed state 0; sample 7's
		// forward is miner 9's).
		assert_eq!(picked(ItemKind::Forward), vec![(2, 1), (3, 1), (4, 2), (5, 2)]);
		// Backwards at a revealed state: sample 3's through its forward kept from state 1 (revealed
		// too); sample 6's through state 0's forward (not revealed) is left out; sample 7's was
		// rerouted to miner 1 at state 1.
		assert_eq!(picked(ItemKind::Backward), vec![(2, 1), (3, 2), (4, 2), (5, 2), (7, 1)]);
		for (t, w) in &all {
			assert_eq!((t.stage, &t.miner), (1, &acct(1)));
			assert_eq!(log.records[t.record].sample, t.sample);
			let WeightsRef::Revealed { key, hash, step, kept_forward } = w else { unreachable!() };
			assert_eq!((key, *hash), (&state(*step).key, state(*step).hash));
			let kept = (t.kind == ItemKind::Backward && t.sample == 3)
				.then(|| KeptForward { step: 1, state: state(1) });
			assert_eq!(kept_forward, &kept, "sample {} {:?}", t.sample, t.kind);
		}
		// Bounded per kind, seeded by the challenge seed.
		let few = revealed_spot_checks(&log, &[7; 32], &revealed, 2, 1);
		assert_eq!(few.len(), 3);
		assert_eq!(few, revealed_spot_checks(&log, &[7; 32], &revealed, 2, 1));
		assert!(revealed_spot_checks(&log, &[7; 32], &RevealedStates::new(), 2, 1).is_empty());
		// The challenged steps of the trail: the drawn ones and always the last (states 2 and 3).
		let steps = challenged_steps(&log, &[7; 32]);
		assert_eq!(steps.last().map(|t| (t.step, t.hashes[1])), Some((2, ContentHash::of(&[3]))));
	}

	/// A local-mode epoch of `tiny` through 3 stages, one miner each, every pass at state 0 (the seed
	/// weights), each miner's one inner step replayed honestly from the stored passes; states revealed
	/// as the daemon expects them, except those `missing` lists (stage, state).
	fn local_epoch(
		objects: &crate::objects::MemoryObjects,
		cheat: Option<(u16, f32)>,
		missing: &[(u16, u32)],
	) -> (Checker, PathwayLog, Vec<(InnerState, InnerState)>) {
		use crate::spot_check::tests::{honest_epoch, miner};
		let (mut spec, mut log) = honest_epoch(objects, "f32", 4, cheat);
		spec.training = iota_protocol::optim::Training::Local {
			accumulate: 4,
			outer_lr: 0.7,
			outer_momentum: 0.9,
		};
		for r in &mut log.records {
			r.forward_steps = vec![0; 3];
			r.backward_steps = vec![0; 3];
		}
		let rt = tokio::runtime::Builder::new_current_thread().build().unwrap();
		let mut checker = Checker::new(spec.clone()).unwrap();
		let mut states = Vec::new();
		for s in 0..3u16 {
			let mut st =
				Stage::new(&spec.model, usize::from(s), spec.seed, DType::F32, &Device::Cpu)
					.unwrap();
			let before = st.inner_state().unwrap();
			let (passes, stale) =
				rt.block_on(checker.passes_at(&log, s, &miner(s), 0, objects)).unwrap();
			assert_eq!((passes.len(), stale.iter().flatten().count()), (4, 0));
			let g = step_gradient(&mut st, &passes).unwrap();
			let mut after = before.clone();
			after
				.step(&g, st.decay_mask(), &spec.step_options(0), st.total_params())
				.unwrap();
			log.inner_states.push(iota_rpc::InnerStates {
				stage: s,
				miner: miner(s),
				hashes: vec![ContentHash(before.hash()), ContentHash(after.hash())],
			});
			for (k, state) in [(0u32, &before), (1, &after)] {
				if !missing.contains(&(s, k)) {
					objects.put(&reveal_key("run", 0, s, k, &miner(s)).unwrap(), state.to_bytes());
				}
			}
			states.push((before, after));
		}
		(checker, log, states)
	}

	#[test]
	fn the_daemons_local_checks_pass_honest_reveals_and_catch_what_is_missing_or_perturbed() {
		use crate::objects::MemoryObjects;
		use crate::spot_check::tests::{miner, InitWeights};
		use crate::spot_check::CheckOutcome;
		let rt = tokio::runtime::Builder::new_current_thread().build().unwrap();
		let seed = [9; 32];
		let objects = MemoryObjects::default();
		let (mut checker, log, states) = local_epoch(&objects, None, &[(2, 1)]);

		// Each trail's one step is challenged (the last); stages 0 and 1 replay bit for bit, stage 2's
		// state 1 is missing.
		let targets = challenged_steps(&log, &seed);
		assert_eq!(
			targets.iter().map(|t| (t.stage, t.step)).collect::<Vec<_>>(),
			[(0, 0), (1, 0), (2, 0)]
		);
		let mut revealed = RevealedStates::new();
		for t in &targets {
			match rt.block_on(checker.check_inner_step(&log, t, &InitWeights, &objects)) {
				StepOutcome::Judged(ev) => {
					assert_eq!(ev.verdict, Verdict::Pass, "{ev:?}");
					assert!(ev.start_checked, "state 0 compared with the epoch's global weights");
					assert_eq!((ev.passes, ev.stale_passes), (4, 0));
					assert_eq!(ev.judgement.as_ref().map(|j| j.ratio), Some(0.0));
					let m = revealed.entry((t.stage, t.miner.clone())).or_default();
					for (i, e) in ev.states.iter().enumerate() {
						m.insert(i as u32, e.clone());
					}
				},
				StepOutcome::NotRevealed { key } => {
					assert_eq!(t.stage, 2);
					assert_eq!(key, reveal_key("run", 0, 2, 1, &miner(2)).unwrap());
					let ev = not_revealed(t, "run", 0);
					assert_eq!(ev.verdict, Verdict::Fail);
					assert_eq!(ev.states[1].key, key);
				},
				other => panic!("stage {}: {other:?}", t.stage),
			}
		}
		assert_eq!(revealed.len(), 2);

		// Passes recomputed at the revealed state they ran at: all pass.
		let checks = revealed_spot_checks(&log, &seed, &revealed, usize::MAX, usize::MAX);
		assert_eq!(checks.len(), 4 + 4 + 4, "forwards at stages 0 and 1, backwards at stage 1");
		for (t, w) in &checks {
			match rt.block_on(checker.check(&log, t, &RevealedWeights(w.clone()), &objects)) {
				CheckOutcome::Judged(ev) => {
					assert_eq!(ev.verdict, Verdict::Pass, "{ev:?}");
					assert_eq!(&ev.weights, w);
				},
				other => panic!("{t:?}: {other:?}"),
			}
		}

		// Pseudo-gradients: stage 0's own delta passes (f32: bit for bit); a rescaled one fails; a
		// submission that does not decode fails.
		let (before, after) = &states[0];
		let p = before.weights.len() as u64;
		let chunk = iota_protocol::chunks::gradient_chunk_elems(p);
		let delta =
			iota_protocol::optim::pseudo_gradient(&before.weights, &after.weights, 4).unwrap();
		let sub = |bytes: Vec<u8>, samples: u32| {
			let size = bytes.len() as u64;
			let hash = objects.put("grad-0", bytes);
			StageSubmission {
				stage: 0,
				round: 0,
				source: iota_rpc::types::SubmissionSource {
					miner: miner(0),
					samples,
					object: iota_rpc::types::ObjectGet {
						key: "grad-0".into(),
						hash,
						size,
						get: iota_storage::PresignedRequest {
							method: iota_storage::Method::Get,
							url: "http://x".into(),
							headers: vec![],
							expires_at: 0,
						},
					},
					chunk_hashes: vec![],
				},
			}
		};
		let last = revealed[&(0, miner(0))][&1].clone();
		let judge = |checker: &mut Checker, s: &StageSubmission| {
			rt.block_on(checker.check_pseudo_gradient(0, s, &last, &InitWeights, &objects))
				.unwrap()
		};
		let honest = sub(MergeCodec::F32.encode(&delta, chunk).unwrap(), 4);
		let ev = judge(&mut checker, &honest);
		assert_eq!(ev.verdict, Verdict::Pass, "{ev:?}");
		assert_eq!(ev.finding, Some(PseudoGradientFinding::Matches { ratio: 0.0 }));
		let scaled: Vec<f32> = delta.iter().map(|x| x * 1.5).collect();
		let ev = judge(&mut checker, &sub(MergeCodec::F32.encode(&scaled, chunk).unwrap(), 4));
		assert_eq!(ev.verdict, Verdict::Fail, "{ev:?}");
		let ev = judge(&mut checker, &sub(MergeCodec::F32.encode(&delta, chunk).unwrap(), 8));
		assert_eq!(ev.verdict, Verdict::Fail, "another sample count is another vector: {ev:?}");
		let ev = judge(&mut checker, &sub(vec![1, 2, 3], 4));
		assert!(ev.verdict == Verdict::Fail && ev.finding.is_none(), "{ev:?}");

		// A perturbing stage-0 miner: its forwards at the revealed states fail.
		let objects = MemoryObjects::default();
		let (mut checker, log, _) = local_epoch(&objects, Some((0, 0.5)), &[]);
		let mut revealed = RevealedStates::new();
		for t in challenged_steps(&log, &seed) {
			let StepOutcome::Judged(ev) =
				rt.block_on(checker.check_inner_step(&log, &t, &InitWeights, &objects))
			else {
				panic!("stage {} not judged", t.stage)
			};
			let m = revealed.entry((t.stage, t.miner.clone())).or_default();
			for (i, e) in ev.states.iter().enumerate() {
				m.insert(i as u32, e.clone());
			}
		}
		let fails: Vec<(u16, ItemKind)> = revealed_spot_checks(&log, &seed, &revealed, 2, 1)
			.iter()
			.filter_map(|(t, w)| {
				match rt.block_on(checker.check(&log, t, &RevealedWeights(w.clone()), &objects)) {
					CheckOutcome::Judged(ev) if ev.verdict == Verdict::Fail => {
						Some((t.stage, t.kind))
					},
					_ => None,
				}
			})
			.collect();
		assert_eq!(fails, vec![(0, ItemKind::Forward); 2], "the perturbed forwards, nothing else");
	}
}
