//! Local mode: judging one revealed inner step (docs/design.md §10). Given a miner's revealed states
//! `k` and `k + 1`, the hashes it reported for them, and the gradient the validator recomputed for the
//! passes the pathway log puts at state `k` ([`step_gradient`]), [`judge_inner_step`] replays the step
//! ([`iota_protocol::optim::InnerState::step`], the one step function the miner applies) and compares.
//!
//! ## Tolerance
//! The replay is bit-identical when the miner's passes ran at state `k` on the same kind of CPU
//! (the recomputation is bit-identical across thread counts, `crate::tolerance`). Two honest
//! sources of difference remain: another implementation's rounding (a GPU), and a backward through a
//! forward kept from an earlier inner step (bounded staleness, docs/design.md §3), whose activations
//! saw older weights. The check therefore compares the *updates*: `Δ = W_{k+1} − W_k` as revealed with
//! `Δ' = replay − W_k`, and passes iff `‖Δ − Δ'‖₂ ≤ STEP_RTOL · ‖Δ'‖₂ + STEP_ATOL · ‖W_k‖₂ / √P`, and
//! the same for each AdamW moment. `STEP_RTOL` = 5 % is a first setting, not yet calibrated against
//! measured staleness; a state perturbed by more than that share of one step is caught.

use iota_model::optim::InnerState;
use iota_model::Stage;
use iota_model::StepOptions;
use iota_primitives::ContentHash;
use serde::{Deserialize, Serialize};

use crate::recompute::{to_tensor, RecomputeError, StageInput};

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
	let s = stage.index();
	if passes.is_empty() {
		return Err(RecomputeError::Inputs {
			stage: s,
			reason: "an inner step of no passes".into(),
		});
	}
	stage.zero_grad();
	let r = accumulate(stage, passes);
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
) -> Result<(), RecomputeError> {
	let (dtype, device) = (stage.dtype(), stage.device().clone());
	for (input, back) in passes {
		let x = to_tensor(input, dtype, &device)?;
		if stage.is_last() {
			let y = to_tensor(back, dtype, &device)?;
			let lf = stage.forward_loss(&x, &y)?;
			stage.backward_loss(lf)?;
		} else {
			let g = to_tensor(back, dtype, &device)?;
			stage.backward_from_input(&x, &g)?;
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
}
