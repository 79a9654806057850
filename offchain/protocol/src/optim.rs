//! AdamW, gradient clipping, the learning-rate schedule, the training mode and local mode's outer
//! Nesterov step, as plain Rust over flat `f32` vectors.
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

/// BLAKE3 of a replica state: `params` as f32 little-endian, then each vector of `state` (f32 LE, in
/// order), then `step` as u64 LE. The attested state of a merge (docs/design.md §3 step 6: weights with
/// the AdamW moments and step in sync mode, with the outer momentum and step in local mode) and local
/// mode's per-inner-step report ([`inner_state_hash`]) are both this hash, so a miner, a joiner and a
/// validator checking a revealed state compute it the same way.
pub fn state_hash(params: &[f32], state: &[&[f32]], step: u64) -> [u8; 32] {
	let mut h = blake3::Hasher::new();
	for v in std::iter::once(params).chain(state.iter().copied()) {
		h.update(&crate::f32le::as_bytes(v));
	}
	h.update(&step.to_le_bytes());
	*h.finalize().as_bytes()
}

/// Local mode's state after an inner step (docs/design.md §10): [`state_hash`] of the replica's local
/// weights (`P` values, parameter order) with its inner AdamW moments `m`, `v` (`P` values each) and
/// step count. What a miner reports with `iota_reportInnerStep` and a validator recomputes from a
/// revealed state.
pub fn inner_state_hash(weights: &[f32], adam: &AdamState) -> [u8; 32] {
	state_hash(weights, &[&adam.m, &adam.v], adam.step)
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

/// One optimizer step of a stage on an averaged flat gradient: `mean_grad` is checked (length `P`,
/// finite), copied, clipped at [`stage_clip_norm`]`(max_norm, p.len(), total_params)` (no clipping for
/// `max_norm: None`) and applied by [`adamw_step`] to `p` with `decay` and `st`. Returns `(norm before
/// clipping, threshold)`. The step every replica applies in sync mode and a local-mode miner applies at
/// each inner step, and what a validator replays on a revealed state (docs/design.md §10): plain f32 in
/// index order, so equal inputs give bit-identical results.
///
/// # Errors
/// [`OptimError::Length`] / [`OptimError::NonFinite`] for a bad gradient or state; nothing changes then.
pub fn apply_step(
	p: &mut [f32],
	mean_grad: &[f32],
	decay: &[bool],
	st: &mut AdamState,
	opts: &StepOptions,
	total_params: usize,
) -> Result<(f64, f32)> {
	if mean_grad.len() != p.len() {
		return Err(OptimError::Length {
			what: "flat gradient".into(),
			expected: p.len(),
			got: mean_grad.len(),
		});
	}
	if let Some(index) = mean_grad.iter().position(|x| !x.is_finite()) {
		return Err(OptimError::NonFinite { what: "flat gradient".into(), index });
	}
	let mut g = mean_grad.to_vec();
	let threshold = match opts.max_norm {
		Some(m) => stage_clip_norm(m, p.len(), total_params),
		None => f32::INFINITY,
	};
	let norm = clip_in_place(&mut g, threshold);
	adamw_step(p, &g, decay, st, &opts.adamw)?;
	Ok((norm, threshold))
}

/// A local-mode replica's state between inner steps (docs/design.md §10): its weights and inner AdamW
/// state, `P` values each. [`hash`](Self::hash) is what the miner reports; [`to_bytes`](Self::to_bytes)
/// is what it reveals when challenged.
#[derive(Clone, Debug, PartialEq)]
pub struct InnerState {
	/// Weights in parameter order.
	pub weights: Vec<f32>,
	/// Inner AdamW moments and step.
	pub adam: AdamState,
}

impl InnerState {
	/// [`inner_state_hash`] of the state.
	pub fn hash(&self) -> [u8; 32] {
		inner_state_hash(&self.weights, &self.adam)
	}

	/// One inner step ([`apply_step`]) on `mean_grad`.
	///
	/// # Errors
	/// As [`apply_step`]; nothing changes on error.
	pub fn step(
		&mut self,
		mean_grad: &[f32],
		decay: &[bool],
		opts: &StepOptions,
		total_params: usize,
	) -> Result<(f64, f32)> {
		apply_step(&mut self.weights, mean_grad, decay, &mut self.adam, opts, total_params)
	}

	/// Reveal bytes: weights, `m` and `v` (f32 LE, `P` each), then the AdamW step (u64 LE): `12·P + 8`
	/// bytes, exactly the byte stream [`state_hash`] hashes, so the BLAKE3 of a revealed object *is* the
	/// state hash the miner reported.
	pub fn to_bytes(&self) -> Vec<u8> {
		let p = self.weights.len();
		let mut out = Vec::with_capacity(8 + 12 * p);
		for v in [&self.weights, &self.adam.m, &self.adam.v] {
			crate::f32le::extend(&mut out, v);
		}
		out.extend_from_slice(&self.adam.step.to_le_bytes());
		out
	}

	/// Parse [`to_bytes`](Self::to_bytes) of a stage of `p` parameters.
	///
	/// # Errors
	/// [`OptimError::Length`] for another byte length; [`OptimError::NonFinite`] for a NaN/Inf value.
	pub fn from_bytes(bytes: &[u8], p: usize) -> Result<Self> {
		let want = 8 + 12 * p;
		if bytes.len() != want {
			return Err(OptimError::Length {
				what: "revealed state bytes".into(),
				expected: want,
				got: bytes.len(),
			});
		}
		let mut step = [0u8; 8];
		step.copy_from_slice(&bytes[12 * p..]);
		let vec = |i: usize| -> Result<Vec<f32>> {
			let v = crate::f32le::from_bytes(&bytes[4 * p * i..4 * p * (i + 1)]).map_err(|_| {
				OptimError::Length { what: "revealed vector".into(), expected: p, got: 0 }
			})?;
			match v.iter().position(|x| !x.is_finite()) {
				Some(index) => Err(OptimError::NonFinite { what: "revealed state".into(), index }),
				None => Ok(v),
			}
		};
		Ok(InnerState {
			weights: vec(0)?,
			adam: AdamState { m: vec(1)?, v: vec(2)?, step: u64::from_le_bytes(step) },
		})
	}
}

/// How replicas train between merges (docs/design.md §3). Serialised in the run spec as
/// `{"mode": "sync"}` or `{"mode": "local", "accumulate": 4, "outerLr": 0.7, "outerMomentum": 0.9}`
/// (through a flat struct, not serde's internally tagged enums, which buffer numbers and then refuse
/// them when serde_json's `arbitrary_precision` is on somewhere in the build, as it is in this workspace).
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(try_from = "TrainingRepr", into = "TrainingRepr")]
pub enum Training {
	/// One optimizer step per epoch: the merge averages the epoch's gradient sums and every replica
	/// applies one AdamW step ([`adamw_step`]). Exact against the single-process trainer.
	#[default]
	Sync,
	/// Local inner AdamW steps between merges; the merge averages pseudo-gradients and every replica
	/// applies one outer step ([`nesterov_step`]). IOTA's current scheme (DiLoCo, Douillard et al. 2023,
	/// arXiv 2311.08105, Algorithm 1).
	#[serde(rename_all = "camelCase")]
	Local {
		/// Backward passes (micro-batches) per inner AdamW step (IOTA: 4).
		accumulate: u32,
		/// Outer learning rate (IOTA and DiLoCo: 0.7).
		outer_lr: f32,
		/// Outer Nesterov momentum (IOTA and DiLoCo: 0.9).
		outer_momentum: f32,
	},
}

/// The JSON form of [`Training`].
#[derive(Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct TrainingRepr {
	mode: TrainingMode,
	#[serde(default, skip_serializing_if = "Option::is_none")]
	accumulate: Option<u32>,
	#[serde(default, skip_serializing_if = "Option::is_none")]
	outer_lr: Option<f32>,
	#[serde(default, skip_serializing_if = "Option::is_none")]
	outer_momentum: Option<f32>,
}

#[derive(Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
enum TrainingMode {
	Sync,
	Local,
}

impl TryFrom<TrainingRepr> for Training {
	type Error = String;
	fn try_from(r: TrainingRepr) -> std::result::Result<Self, String> {
		let t = match (r.mode, r.accumulate, r.outer_lr, r.outer_momentum) {
			(TrainingMode::Sync, None, None, None) => Training::Sync,
			(TrainingMode::Sync, ..) => return Err("sync training takes no local settings".into()),
			(TrainingMode::Local, Some(accumulate), Some(outer_lr), Some(outer_momentum)) => {
				Training::Local { accumulate, outer_lr, outer_momentum }
			},
			(TrainingMode::Local, ..) => {
				return Err("local training needs accumulate, outerLr and outerMomentum".into())
			},
		};
		t.validate()?;
		Ok(t)
	}
}

impl From<Training> for TrainingRepr {
	fn from(t: Training) -> Self {
		match t {
			Training::Sync => TrainingRepr {
				mode: TrainingMode::Sync,
				accumulate: None,
				outer_lr: None,
				outer_momentum: None,
			},
			Training::Local { accumulate, outer_lr, outer_momentum } => TrainingRepr {
				mode: TrainingMode::Local,
				accumulate: Some(accumulate),
				outer_lr: Some(outer_lr),
				outer_momentum: Some(outer_momentum),
			},
		}
	}
}

impl Training {
	/// IOTA's published local setting: 4 backward passes per inner step, outer lr 0.7, momentum 0.9.
	pub const IOTA_LOCAL: Training =
		Training::Local { accumulate: 4, outer_lr: 0.7, outer_momentum: 0.9 };

	/// Whether this is [`Training::Sync`] (the spec leaves it out then, so older specs keep their hash).
	pub fn is_sync(&self) -> bool {
		matches!(self, Training::Sync)
	}

	/// The outer optimizer of local mode (`None` in sync mode).
	pub fn outer(&self) -> Option<OuterSgd> {
		match *self {
			Training::Sync => None,
			Training::Local { outer_lr, outer_momentum, .. } => {
				Some(OuterSgd { lr: outer_lr, momentum: outer_momentum })
			},
		}
	}

	/// Backward passes per inner step (`None` in sync mode).
	pub fn accumulate(&self) -> Option<u32> {
		match *self {
			Training::Sync => None,
			Training::Local { accumulate, .. } => Some(accumulate),
		}
	}

	/// Checks the local settings: `accumulate ≥ 1`, `outer_lr` finite and > 0, `outer_momentum` in `[0, 1)`.
	///
	/// # Errors
	/// A message naming the bad field.
	pub fn validate(&self) -> std::result::Result<(), String> {
		if let Training::Local { accumulate, outer_lr, outer_momentum } = *self {
			if accumulate == 0 {
				return Err("training.accumulate must be at least 1".into());
			}
			if !(outer_lr.is_finite() && outer_lr > 0.0) {
				return Err(format!("training.outerLr {outer_lr} must be finite and > 0"));
			}
			if !(0.0..1.0).contains(&outer_momentum) {
				return Err(format!("training.outerMomentum {outer_momentum} must be in [0, 1)"));
			}
		}
		Ok(())
	}
}

impl std::str::FromStr for Training {
	type Err = String;
	/// `sync`, `local` (IOTA's setting, [`Training::IOTA_LOCAL`]) or
	/// `local:ACCUMULATE[:OUTER_LR[:OUTER_MOMENTUM]]`.
	fn from_str(s: &str) -> std::result::Result<Self, String> {
		let mut parts = s.split(':');
		let t = match parts.next() {
			Some("sync") if s == "sync" => Training::Sync,
			Some("local") => {
				let (mut accumulate, mut outer_lr, mut outer_momentum) = (4u32, 0.7f32, 0.9f32);
				let bad = |what: &str, v: &str| format!("{what} {v:?} in {s:?} is not a number");
				if let Some(a) = parts.next() {
					accumulate = a.parse().map_err(|_| bad("accumulate", a))?;
				}
				if let Some(l) = parts.next() {
					outer_lr = l.parse().map_err(|_| bad("outer lr", l))?;
				}
				if let Some(m) = parts.next() {
					outer_momentum = m.parse().map_err(|_| bad("outer momentum", m))?;
				}
				if parts.next().is_some() {
					return Err(format!(
						"{s:?}: expected local:ACCUMULATE:OUTER_LR:OUTER_MOMENTUM"
					));
				}
				Training::Local { accumulate, outer_lr, outer_momentum }
			},
			_ => {
				return Err(format!(
					"unknown training mode {s:?}; expected sync, local or local:A:LR:M"
				))
			},
		};
		t.validate()?;
		Ok(t)
	}
}

impl std::fmt::Display for Training {
	fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
		match self {
			Training::Sync => write!(f, "sync"),
			Training::Local { accumulate, outer_lr, outer_momentum } => {
				write!(f, "local:{accumulate}:{outer_lr}:{outer_momentum}")
			},
		}
	}
}

/// The outer optimizer of local mode: SGD with Nesterov momentum on the pseudo-gradient.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct OuterSgd {
	/// Outer learning rate.
	pub lr: f32,
	/// Nesterov momentum μ.
	pub momentum: f32,
}

/// Outer-optimizer state of one stage in local mode: the momentum buffer (flat, the stage's parameter
/// order) and the outer steps taken. Identical on every replica after every merge; part of the attested
/// state hash.
#[derive(Clone, Debug, PartialEq)]
pub struct OuterState {
	/// Momentum buffer.
	pub momentum: Vec<f32>,
	/// Outer steps (merges) applied so far.
	pub step: u64,
}

impl OuterState {
	/// Zero state for `n` parameters.
	pub fn new(n: usize) -> Self {
		OuterState { momentum: vec![0.0; n], step: 0 }
	}
}

/// One outer step, in place: `global` (the stage's global weights before the merge, `P` values) moves
/// along the merged pseudo-gradient `delta = mean_i(W_global − W_local,i)` (`P` values) with Nesterov
/// momentum, exactly as PyTorch's `SGD(nesterov=True, dampening=0)` that DiLoCo uses:
/// `b ← μ·b + δ; W ← W − lr·(δ + μ·b)`, element by element in index order, plain f32 (no FMA), so
/// every replica ends bit-identical. Increments `st.step`.
///
/// # Errors
/// [`OptimError::Length`] when lengths differ; [`OptimError::NonFinite`] if `delta` holds NaN/Inf, or if
/// the step would make a weight non-finite (nothing is changed then).
pub fn nesterov_step(
	global: &mut [f32],
	delta: &[f32],
	st: &mut OuterState,
	hp: &OuterSgd,
) -> Result<()> {
	let n = global.len();
	for (what, len) in [("pseudo-gradient", delta.len()), ("outer momentum", st.momentum.len())] {
		if len != n {
			return Err(OptimError::Length { what: what.into(), expected: n, got: len });
		}
	}
	if let Some(index) = delta.iter().position(|x| !x.is_finite()) {
		return Err(OptimError::NonFinite { what: "pseudo-gradient".into(), index });
	}
	let (mu, lr) = (hp.momentum, hp.lr);
	let next = |m: f32, w: f32, d: f32| {
		let b = mu * m + d;
		(b, w - lr * (d + mu * b))
	};
	let bad = (0..n).position(|i| {
		let (b, w) = next(st.momentum[i], global[i], delta[i]);
		!(b.is_finite() && w.is_finite())
	});
	if let Some(index) = bad {
		return Err(OptimError::NonFinite { what: "outer step result".into(), index });
	}
	for i in 0..n {
		(st.momentum[i], global[i]) = next(st.momentum[i], global[i], delta[i]);
	}
	st.step += 1;
	Ok(())
}

/// The pseudo-gradient a replica submits in local mode, scaled by its sample count so the merge's
/// weighted mean (`Σ_i x_i / Σ_i samples_i`, [`crate::merge`]) is the sample-weighted mean of the
/// replicas' deltas: `x[j] = (global[j] − local[j]) · samples`, in f32.
///
/// # Errors
/// [`OptimError::Length`] when lengths differ; [`OptimError::NonFinite`] for a NaN/Inf result.
pub fn pseudo_gradient(global: &[f32], local: &[f32], samples: u32) -> Result<Vec<f32>> {
	if local.len() != global.len() {
		return Err(OptimError::Length {
			what: "local weights".into(),
			expected: global.len(),
			got: local.len(),
		});
	}
	let n = samples as f32;
	let out: Vec<f32> = global.iter().zip(local).map(|(g, l)| (g - l) * n).collect();
	if let Some(index) = out.iter().position(|x| !x.is_finite()) {
		return Err(OptimError::NonFinite { what: "pseudo-gradient".into(), index });
	}
	Ok(out)
}

/// Largest relative distance ([`pseudo_gradient_deviation`]) between a submitted int8 merge vector and
/// the pseudo-gradient of the miner's revealed states: int8 rounds each entry to half a step of its
/// chunk's scale (about 1 % of the vector's norm for bell-shaped chunks), and in local mode it carries
/// no error feedback ([`carries_error_feedback`](crate::merge::carries_error_feedback)), so 10 % leaves
/// an honest miner a wide margin while a vector that is not the miner's own delta (another direction,
/// another scale) is far outside it. A first setting, not yet calibrated over long runs.
pub const PSEUDO_GRADIENT_RTOL: f64 = 0.1;

/// How a submitted merge vector compares with the pseudo-gradient its miner's reported states imply.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", tag = "finding")]
pub enum PseudoGradientFinding {
	/// Within the codec's limit: `ratio = ‖submitted − expected‖ / ‖expected‖`.
	Matches {
		/// The relative distance.
		ratio: f64,
	},
	/// Outside it (for `f32`, any difference at all: the vector is exact).
	Differs {
		/// The relative distance (`inf` when the expected vector is zero and the submitted one not).
		ratio: f64,
		/// The codec's limit.
		limit: f64,
	},
	/// Top-k keeps a few entries and carries the rest in the miner's error feedback, which never
	/// travels: the submitted vector says too little about this epoch's delta to be judged.
	Unverifiable,
}

/// Local mode's pseudo-gradient check (docs/design.md §10): the merge vector a miner submitted,
/// decoded (`submitted`, `P` values), against `pseudo_gradient(global, last, samples)`, the delta from
/// the epoch's global weights to the miner's last reported state with the sample count it submitted.
/// `f32` must match bit for bit (no feedback, no rounding); `int8` within [`PSEUDO_GRADIENT_RTOL`] of the
/// expected norm; top-k is [`PseudoGradientFinding::Unverifiable`].
///
/// # Errors
/// [`OptimError::Length`] when the three vectors differ in length; [`OptimError::NonFinite`] when the
/// expected pseudo-gradient is not finite (not a state an honest replica reaches).
pub fn pseudo_gradient_deviation(
	codec: crate::codec::MergeCodec,
	submitted: &[f32],
	global: &[f32],
	last: &[f32],
	samples: u32,
) -> Result<PseudoGradientFinding> {
	use crate::codec::MergeCodec;
	let expected = pseudo_gradient(global, last, samples)?;
	if submitted.len() != expected.len() {
		return Err(OptimError::Length {
			what: "submitted merge vector".into(),
			expected: expected.len(),
			got: submitted.len(),
		});
	}
	let limit = match codec {
		MergeCodec::TopK { .. } => return Ok(PseudoGradientFinding::Unverifiable),
		MergeCodec::F32 => 0.0,
		MergeCodec::Int8 => PSEUDO_GRADIENT_RTOL,
	};
	let diff: f64 = submitted
		.iter()
		.zip(&expected)
		.map(|(a, b)| {
			let d = f64::from(*a) - f64::from(*b);
			d * d
		})
		.sum::<f64>()
		.sqrt();
	let norm = l2_norm(&expected);
	let ratio = if diff == 0.0 {
		0.0
	} else if norm > 0.0 {
		diff / norm
	} else {
		f64::INFINITY
	};
	// NaN in `submitted` makes `ratio` NaN, which is never within the limit.
	let exact = codec == MergeCodec::F32
		&& submitted.iter().zip(&expected).all(|(a, b)| a.to_bits() == b.to_bits());
	Ok(if exact || (limit > 0.0 && ratio <= limit) {
		PseudoGradientFinding::Matches { ratio }
	} else {
		PseudoGradientFinding::Differs { ratio, limit }
	})
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

	#[test]
	fn nesterov_matches_the_torch_formula_and_refuses_bad_input_unchanged() {
		let hp = OuterSgd { lr: 0.7, momentum: 0.9 };
		let mut w = vec![1.0f32, -1.0];
		let mut st = OuterState::new(2);
		nesterov_step(&mut w, &[0.1, -0.2], &mut st, &hp).unwrap();
		// b = δ; W − lr·(δ + μ·δ) = W − 0.7·1.9·δ
		assert_eq!(st.momentum, vec![0.1, -0.2]);
		assert!((w[0] - (1.0 - 0.7 * 1.9 * 0.1)).abs() < 1e-6, "{}", w[0]);
		assert!((w[1] - (-1.0 + 0.7 * 1.9 * 0.2)).abs() < 1e-6, "{}", w[1]);
		nesterov_step(&mut w, &[0.0, 0.0], &mut st, &hp).unwrap();
		// b = 0.9·b; W − 0.7·(0 + 0.9·b)
		assert!((st.momentum[0] - 0.09).abs() < 1e-7);
		assert_eq!(st.step, 2);
		let (w0, st0) = (w.clone(), st.clone());
		assert!(matches!(
			nesterov_step(&mut w, &[0.0; 3], &mut st, &hp),
			Err(OptimError::Length { expected: 2, got: 3, .. })
		));
		assert!(matches!(
			nesterov_step(&mut w, &[f32::INFINITY, 0.0], &mut st, &hp),
			Err(OptimError::NonFinite { index: 0, .. })
		));
		assert!(matches!(
			nesterov_step(&mut w, &[0.0, f32::MAX], &mut st, &hp),
			Err(OptimError::NonFinite { index: 1, .. })
		));
		assert_eq!((w, st), (w0, st0));
	}

	#[test]
	fn a_plain_outer_step_of_lr_one_lands_on_the_mean_of_the_replicas() {
		// lr 1, μ 0: W ← W − δ = mean of the local weights (DiLoCo's reduction to weight averaging).
		let global = vec![1.0f32, 2.0, 3.0];
		let locals = [vec![0.5f32, 2.5, 3.0], vec![1.5f32, 1.0, 2.0]];
		let samples = [1u32, 3];
		let subs: Vec<Vec<f32>> = locals
			.iter()
			.zip(samples)
			.map(|(l, n)| pseudo_gradient(&global, l, n).unwrap())
			.collect();
		let total: u32 = samples.iter().sum();
		let mean: Vec<f32> =
			(0..3).map(|j| subs.iter().map(|s| s[j]).sum::<f32>() / total as f32).collect();
		let mut w = global.clone();
		nesterov_step(&mut w, &mean, &mut OuterState::new(3), &OuterSgd { lr: 1.0, momentum: 0.0 })
			.unwrap();
		for j in 0..3 {
			let want = (locals[0][j] + 3.0 * locals[1][j]) / 4.0;
			assert!((w[j] - want).abs() < 1e-6, "{j}: {} vs {want}", w[j]);
		}
		assert!(matches!(pseudo_gradient(&global, &[0.0; 2], 1), Err(OptimError::Length { .. })));
		assert!(matches!(
			pseudo_gradient(&[f32::MAX], &[-f32::MAX], 1),
			Err(OptimError::NonFinite { .. })
		));
	}

	#[test]
	fn state_hashes_cover_every_weight_moment_and_the_step() {
		let w = vec![0.5f32, -1.0, 2.0];
		let mut adam = AdamState::new(3);
		adam.m[1] = 0.25;
		let h = inner_state_hash(&w, &adam);
		assert_eq!(h, state_hash(&w, &[&adam.m, &adam.v], 0));
		assert_eq!(h, inner_state_hash(&w.clone(), &adam.clone()));
		let mut w2 = w.clone();
		w2[2] = f32::from_bits(w2[2].to_bits() + 1);
		assert_ne!(h, inner_state_hash(&w2, &adam), "one ulp of a weight");
		let mut a2 = adam.clone();
		a2.v[0] = 1e-30;
		assert_ne!(h, inner_state_hash(&w, &a2), "a second moment");
		a2 = adam.clone();
		a2.step = 1;
		assert_ne!(h, inner_state_hash(&w, &a2), "the step");
		// The byte stream is the f32 LE vectors then the step: a chunk boundary moves nothing.
		let long: Vec<f32> = (0..40_000).map(|i| i as f32).collect();
		let mut bytes = crate::f32le::to_bytes(&long);
		bytes.extend_from_slice(&7u64.to_le_bytes());
		assert_eq!(state_hash(&long, &[], 7), *blake3::hash(&bytes).as_bytes());
	}

	#[test]
	fn a_replayed_inner_step_is_bit_identical_and_reveal_bytes_round_trip() {
		let n = 1000;
		let mut a = InnerState {
			weights: (0..n).map(|i| (i as f32 * 0.37).sin()).collect(),
			adam: AdamState::new(n),
		};
		let decay: Vec<bool> = (0..n).map(|i| i % 3 != 0).collect();
		let opts = StepOptions::default();
		let g: Vec<f32> = (0..n).map(|i| (i as f32 * 0.11).cos() * 3.0).collect();
		let mut b = a.clone();
		let (norm, thr) = a.step(&g, &decay, &opts, 4 * n).unwrap();
		assert!(norm > f64::from(thr), "the gradient was clipped");
		b.step(&g, &decay, &opts, 4 * n).unwrap();
		assert_eq!(a.hash(), b.hash(), "the same step twice is bit-identical");
		assert_eq!(a.adam.step, 1);
		let bytes = a.to_bytes();
		assert_eq!(bytes.len(), 8 + 12 * n);
		assert_eq!(
			*blake3::hash(&bytes).as_bytes(),
			a.hash(),
			"the object's hash is the state hash"
		);
		assert_eq!(InnerState::from_bytes(&bytes, n).unwrap(), a);
		assert!(matches!(InnerState::from_bytes(&bytes, n + 1), Err(OptimError::Length { .. })));
		assert!(matches!(InnerState::from_bytes(&bytes[1..], n), Err(OptimError::Length { .. })));
		let mut nan = bytes.clone();
		nan[4 * n + 4..4 * n + 8].copy_from_slice(&f32::NAN.to_le_bytes());
		assert!(matches!(
			InnerState::from_bytes(&nan, n),
			Err(OptimError::NonFinite { index: 1, .. })
		));
		let before = a.clone();
		assert!(a.step(&g[1..], &decay, &opts, n).is_err());
		let mut inf = g.clone();
		inf[5] = f32::INFINITY;
		assert!(a.step(&inf, &decay, &opts, n).is_err());
		assert_eq!(a, before, "a refused step changes nothing");
	}

	#[test]
	fn training_modes_parse_print_and_validate() {
		assert_eq!("sync".parse::<Training>().unwrap(), Training::Sync);
		assert_eq!("local".parse::<Training>().unwrap(), Training::IOTA_LOCAL);
		let t: Training = "local:8:0.5:0.8".parse().unwrap();
		assert_eq!(t, Training::Local { accumulate: 8, outer_lr: 0.5, outer_momentum: 0.8 });
		assert_eq!(t.to_string().parse::<Training>().unwrap(), t);
		for bad in
			["", "syncx", "local:0", "local:4:-1", "local:4:0.7:1.0", "local:x", "local:1:1:0:9"]
		{
			assert!(bad.parse::<Training>().is_err(), "{bad:?}");
		}
		let json = serde_json::to_string(&Training::IOTA_LOCAL).unwrap();
		assert_eq!(json, r#"{"mode":"local","accumulate":4,"outerLr":0.7,"outerMomentum":0.9}"#);
		assert_eq!(serde_json::from_str::<Training>(&json).unwrap(), Training::IOTA_LOCAL);
		assert_eq!(serde_json::from_str::<Training>(r#"{"mode":"sync"}"#).unwrap(), Training::Sync);
		assert_eq!(serde_json::to_string(&Training::Sync).unwrap(), r#"{"mode":"sync"}"#);
		for bad in [
			r#"{"mode":"local","accumulate":4,"outerLr":0.7}"#,
			r#"{"mode":"local","accumulate":0,"outerLr":0.7,"outerMomentum":0.9}"#,
			r#"{"mode":"sync","accumulate":4}"#,
			r#"{"mode":"fast"}"#,
			r#"{"mode":"local","accumulate":4,"outerLr":0.7,"outerMomentum":0.9,"h":1}"#,
		] {
			assert!(serde_json::from_str::<Training>(bad).is_err(), "{bad}");
		}
		assert!(Training::Sync.is_sync() && Training::Sync.outer().is_none());
	}

	#[test]
	fn a_submitted_pseudo_gradient_is_judged_against_the_revealed_last_state() {
		use crate::chunks::gradient_chunk_elems;
		use crate::codec::{ErrorFeedback, MergeCodec};
		let n = 3000;
		let global: Vec<f32> = (0..n).map(|i| ((i * 37 % 101) as f32 - 50.0) * 0.01).collect();
		let step = |e: usize| -> Vec<f32> {
			global
				.iter()
				.enumerate()
				.map(|(i, g)| {
					// Bell-shaped steps (a sum of four hashed uniforms), as a trained delta is.
					let bell: f32 = (0..4u64)
						.map(|k| {
							let mut x = (i as u64 * 4 + k) ^ ((e as u64) << 40);
							x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
							x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
							((x ^ (x >> 31)) >> 40) as f32 / (1u64 << 24) as f32
						})
						.sum::<f32>() - 2.0;
					g - 1e-3 * bell
				})
				.collect()
		};
		let (last, samples) = (step(1), 8);
		let honest = pseudo_gradient(&global, &last, samples).unwrap();
		let chunk = gradient_chunk_elems(n as u64);
		let decoded = |codec: MergeCodec, fb: &ErrorFeedback, x: &[f32]| {
			let (bytes, next) = fb.encode(codec, x, chunk).unwrap();
			(codec.decode(&bytes, n as u64, chunk).unwrap(), next)
		};
		let judge = |codec, sub: &[f32]| {
			pseudo_gradient_deviation(codec, sub, &global, &last, samples).unwrap()
		};

		// f32: exact, and a single flipped bit is a difference.
		let (f, _) = decoded(MergeCodec::F32, &ErrorFeedback::default(), &honest);
		assert_eq!(judge(MergeCodec::F32, &f), PseudoGradientFinding::Matches { ratio: 0.0 });
		let mut off = f.clone();
		off[17] = f32::from_bits(off[17].to_bits() ^ 1);
		assert!(matches!(judge(MergeCodec::F32, &off), PseudoGradientFinding::Differs { .. }));

		// int8 in local mode carries no error feedback: the residual of an earlier epoch with thirty
		// times the samples (about 1 % of that vector's norm) would alone be some 30 % of this one's,
		// past the limit for an honest miner, since the validator cannot see it.
		let local = Training::Local { accumulate: 2, outer_lr: 0.7, outer_momentum: 0.9 };
		let earlier = pseudo_gradient(&global, &step(2), samples * 30).unwrap();
		let (_, carried) = decoded(MergeCodec::Int8, &ErrorFeedback::default(), &earlier);
		assert!(matches!(
			judge(MergeCodec::Int8, &decoded(MergeCodec::Int8, &carried, &honest).0),
			PseudoGradientFinding::Differs { .. }
		));
		let submit = |training: &Training, fb: &ErrorFeedback, x: &[f32]| {
			crate::merge::submission_with_feedback(training, MergeCodec::Int8, fb, x).unwrap()
		};
		let (_, kept) = submit(&local, &ErrorFeedback::default(), &earlier);
		assert!(kept.is_none(), "local int8 keeps no feedback");
		let (bytes, _) = submit(&local, &carried, &honest);
		let q = MergeCodec::Int8.decode(&bytes, n as u64, chunk).unwrap();
		match judge(MergeCodec::Int8, &q) {
			PseudoGradientFinding::Matches { ratio } => {
				assert!(ratio > 0.0 && ratio < 0.05, "{ratio}")
			},
			other => panic!("honest int8 vector judged {other:?}"),
		}
		// Sync mode and top-k keep theirs.
		assert!(submit(&Training::Sync, &ErrorFeedback::default(), &earlier).1.is_some());
		assert!(crate::merge::carries_error_feedback(&local, MergeCodec::TopK { per_mille: 16 }));
		assert!(!crate::merge::carries_error_feedback(&Training::Sync, MergeCodec::F32));
		// Another delta, a rescaled one, a wrong sample count and a NaN are not the miner's own.
		for bad in [
			decoded(MergeCodec::Int8, &ErrorFeedback::default(), &earlier).0,
			honest.iter().map(|x| x * 1.5).collect(),
			pseudo_gradient(&global, &last, samples * 2).unwrap(),
			{
				let mut v = q.clone();
				v[3] = f32::NAN;
				v
			},
		] {
			assert!(
				matches!(judge(MergeCodec::Int8, &bad), PseudoGradientFinding::Differs { .. }),
				"{:?}",
				judge(MergeCodec::Int8, &bad)
			);
		}
		assert_eq!(
			judge(MergeCodec::TopK { per_mille: 16 }, &q),
			PseudoGradientFinding::Unverifiable
		);
		assert!(matches!(
			pseudo_gradient_deviation(MergeCodec::F32, &f[1..], &global, &last, samples),
			Err(OptimError::Length { .. })
		));
		// A zero delta submitted as zero matches; anything else against it is infinitely off.
		let zero = vec![0.0; n];
		assert!(matches!(
			pseudo_gradient_deviation(MergeCodec::Int8, &zero, &global, &global, samples),
			Ok(PseudoGradientFinding::Matches { .. })
		));
		assert!(matches!(
			pseudo_gradient_deviation(MergeCodec::Int8, &q, &global, &global, samples),
			Ok(PseudoGradientFinding::Differs { ratio, .. }) if ratio.is_infinite()
		));
	}
}
