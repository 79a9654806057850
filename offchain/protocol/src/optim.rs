//! AdamW, gradient clipping and the learning-rate schedule as plain Rust over flat `f32` vectors.
//!
//! Follows Loshchilov & Hutter 2019, "Decoupled Weight Decay Regularization" (arXiv 1711.05101),
//! with PyTorch's `torch.optim.AdamW` bias correction. docs/design.md §3 step 6: the step is one pure
//! function with no fused kernels and a fixed operation order (Rust never contracts `a*b+c`
//! into an FMA without being asked), so every replica that applies the same averaged gradient to
//! the same state gets bit-identical weights, on CPU or GPU miners alike.

use serde::{Deserialize, Serialize};

/// Why an optimizer step was refused (nothing was changed).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum OptimError {
	/// A flat vector had the wrong length.
	#[error("{what}: expected length {expected}, got {got}")]
	Length {
		/// Which vector.
		what: String,
		/// Expected length.
		expected: usize,
		/// Length that came.
		got: usize,
	},
	/// The gradient holds NaN or ±Inf.
	#[error("{what}: non-finite value (NaN or Inf) at flat index {index}")]
	NonFinite {
		/// Which vector.
		what: String,
		/// Flat index of the first offending element.
		index: usize,
	},
}

type Result<T> = std::result::Result<T, OptimError>;

/// AdamW hyper-parameters.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct AdamW {
	/// Learning rate (per step).
	pub lr: f32,
	/// First-moment decay β₁.
	pub beta1: f32,
	/// Second-moment decay β₂.
	pub beta2: f32,
	/// Denominator ε.
	pub eps: f32,
	/// Decoupled weight decay λ (applied as `θ -= lr·λ·θ` to decayed parameters).
	pub weight_decay: f32,
}

impl Default for AdamW {
	/// `lr 3e-4, β (0.9, 0.95), ε 1e-8, λ 0.1` (the usual LLM pretraining setting).
	fn default() -> Self {
		AdamW { lr: 3e-4, beta1: 0.9, beta2: 0.95, eps: 1e-8, weight_decay: 0.1 }
	}
}

/// AdamW moments and step count of one stage (flat, in the stage's parameter order).
#[derive(Clone, Debug, PartialEq)]
pub struct AdamState {
	/// First moments.
	pub m: Vec<f32>,
	/// Second moments.
	pub v: Vec<f32>,
	/// Steps taken so far.
	pub step: u64,
}

impl AdamState {
	/// Zero state for `n` parameters.
	pub fn new(n: usize) -> Self {
		AdamState { m: vec![0.0; n], v: vec![0.0; n], step: 0 }
	}
}

/// L2 norm of `g`, summed in f64 in index order (deterministic).
pub fn l2_norm(g: &[f32]) -> f64 {
	g.iter().map(|&x| (x as f64) * (x as f64)).sum::<f64>().sqrt()
}

/// Per-stage clipping threshold `max_norm · sqrt(stage_params / total_params)`: the share of a
/// global norm budget a stage gets if gradient energy were spread evenly over parameters.
pub fn stage_clip_norm(max_norm: f32, stage_params: usize, total_params: usize) -> f32 {
	(max_norm as f64 * (stage_params as f64 / total_params.max(1) as f64).sqrt()) as f32
}

/// Scale `g` in place so its L2 norm is at most `threshold`; returns the norm before clipping.
pub fn clip_in_place(g: &mut [f32], threshold: f32) -> f64 {
	let norm = l2_norm(g);
	if norm > threshold as f64 && norm > 0.0 {
		let s = (threshold as f64 / norm) as f32;
		for x in g.iter_mut() {
			*x *= s;
		}
	}
	norm
}

/// One AdamW step over flat vectors: parameters `p`, gradient `g`, per-element decay flags
/// `decay` and state `st` (all the same length). Increments `st.step`.
///
/// # Errors
/// [`OptimError::Length`] when lengths differ; [`OptimError::NonFinite`] if `g` holds NaN/Inf (the step is
/// refused and nothing is changed).
pub fn adamw_step(
	p: &mut [f32],
	g: &[f32],
	decay: &[bool],
	st: &mut AdamState,
	hp: &AdamW,
) -> Result<()> {
	let n = p.len();
	for (what, len) in [
		("gradient", g.len()),
		("decay mask", decay.len()),
		("adam m", st.m.len()),
		("adam v", st.v.len()),
	] {
		if len != n {
			return Err(OptimError::Length { what: what.into(), expected: n, got: len });
		}
	}
	if let Some(index) = g.iter().position(|x| !x.is_finite()) {
		return Err(OptimError::NonFinite { what: "gradient".into(), index });
	}
	st.step += 1;
	let t = st.step as i32;
	let bc1 = 1.0 - hp.beta1.powi(t);
	let bc2 = 1.0 - hp.beta2.powi(t);
	let step_size = hp.lr / bc1;
	let bc2_sqrt = bc2.sqrt();
	for i in 0..n {
		if decay[i] {
			p[i] -= hp.lr * hp.weight_decay * p[i];
		}
		st.m[i] = hp.beta1 * st.m[i] + (1.0 - hp.beta1) * g[i];
		st.v[i] = hp.beta2 * st.v[i] + (1.0 - hp.beta2) * g[i] * g[i];
		let denom = st.v[i].sqrt() / bc2_sqrt + hp.eps;
		p[i] -= step_size * st.m[i] / denom;
	}
	Ok(())
}

/// Options of one optimizer step.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct StepOptions {
	/// AdamW hyper-parameters (the learning rate of this step included).
	pub adamw: AdamW,
	/// Global clipping norm; the stage clips at `max_norm · sqrt(stage_params / total_params)`.
	/// `None` disables clipping.
	pub max_norm: Option<f32>,
}

impl Default for StepOptions {
	fn default() -> Self {
		StepOptions { adamw: AdamW::default(), max_norm: Some(1.0) }
	}
}

/// Cosine learning-rate schedule with linear warm-up: `peak · s / warmup` for `s < warmup`, then
/// cosine from `peak` to `peak · min_ratio` at `total` steps (constant after).
pub fn cosine_lr(step: usize, total: usize, warmup: usize, peak: f32, min_ratio: f32) -> f32 {
	if step < warmup {
		return peak * (step + 1) as f32 / warmup as f32;
	}
	let span = total.saturating_sub(warmup).max(1);
	let p = ((step - warmup) as f32 / span as f32).min(1.0);
	let min = peak * min_ratio;
	min + 0.5 * (peak - min) * (1.0 + (std::f32::consts::PI * p).cos())
}

#[cfg(test)]
mod tests {
	use super::*;

	#[test]
	fn first_step_moves_each_weight_by_about_lr_against_the_gradient_sign() {
		let hp = AdamW { weight_decay: 0.0, ..AdamW::default() };
		let mut p = vec![1.0f32, -2.0, 0.5];
		let g = [0.3f32, -4.0, 0.0];
		let mut st = AdamState::new(3);
		adamw_step(&mut p, &g, &[true; 3], &mut st, &hp).unwrap();
		// Bias-corrected first step: m̂/√v̂ = sign(g) (up to ε).
		assert!((p[0] - (1.0 - hp.lr)).abs() < 1e-6, "{}", p[0]);
		assert!((p[1] - (-2.0 + hp.lr)).abs() < 1e-6, "{}", p[1]);
		assert_eq!(p[2], 0.5);
		assert_eq!(st.step, 1);
	}

	#[test]
	fn weight_decay_only_on_flagged_elements() {
		let hp = AdamW { weight_decay: 0.5, lr: 0.1, ..AdamW::default() };
		let mut p = vec![1.0f32, 1.0];
		let mut st = AdamState::new(2);
		adamw_step(&mut p, &[0.0, 0.0], &[true, false], &mut st, &hp).unwrap();
		assert!((p[0] - 0.95).abs() < 1e-7);
		assert_eq!(p[1], 1.0);
	}

	#[test]
	fn bad_lengths_and_non_finite_gradients_are_refused_without_change() {
		let hp = AdamW::default();
		let mut p = vec![1.0f32; 3];
		let mut st = AdamState::new(3);
		assert!(matches!(
			adamw_step(&mut p, &[0.0; 2], &[true; 3], &mut st, &hp),
			Err(OptimError::Length { expected: 3, got: 2, .. })
		));
		assert!(matches!(
			adamw_step(&mut p, &[0.0, f32::NAN, 0.0], &[true; 3], &mut st, &hp),
			Err(OptimError::NonFinite { index: 1, .. })
		));
		assert_eq!(p, vec![1.0; 3]);
		assert_eq!(st, AdamState::new(3));
	}

	#[test]
	fn clipping_scales_to_the_stage_share_of_the_norm_budget() {
		let thr = stage_clip_norm(1.0, 25, 100);
		assert!((thr - 0.5).abs() < 1e-7);
		let mut g = vec![3.0f32, 4.0];
		let before = clip_in_place(&mut g, thr);
		assert!((before - 5.0).abs() < 1e-12);
		assert!((l2_norm(&g) - 0.5).abs() < 1e-6);
		let mut small = vec![0.1f32, 0.0];
		clip_in_place(&mut small, thr);
		assert_eq!(small, vec![0.1, 0.0]);
	}
}
