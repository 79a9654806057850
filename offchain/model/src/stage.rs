//! One pipeline stage as miners and validators use it: checked forward, backward from a received
//! gradient, the tail's loss, gradient accumulation, the AdamW step with per-stage clipping,
//! flat parameter/gradient vectors for the butterfly merge, and safetensors checkpoints.
//!
//! Backward from an external gradient follows docs/design.md §9: the received activation is wrapped in a
//! [`Var`] so its gradient is tracked, and `(y · grad_out).sum()` is differentiated, which gives
//! every parameter `Σ grad_out · ∂y/∂θ` — measured equal to the unsplit model's gradients.

use std::collections::HashMap;
use std::path::Path;

use candle_core::backprop::GradStore;
use candle_core::{DType, Device, Tensor, Var};
use candle_nn::{VarBuilder, VarMap};

use crate::config::ModelConfig;
use crate::error::{Error, Result};
use crate::llama::{init_tensor, param_specs, ParamSpec, StageModules};
use crate::optim::{nesterov_step, AdamState, OuterSgd, OuterState};

pub use iota_protocol::optim::StepOptions;

/// What an optimizer step did.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct StepReport {
	/// L2 norm of the mean gradient before clipping.
	pub grad_norm: f64,
	/// Clipping threshold used (`f32::INFINITY` when clipping is off).
	pub clip_threshold: f32,
	/// Samples (micro-batches) the gradient averaged.
	pub samples: usize,
}

/// A forward pass whose graph is kept for [`Stage::backward`].
#[derive(Debug)]
pub struct Forward {
	output: Tensor,
	input: Option<Var>,
	stage: usize,
}

impl LossForward {
	/// The loss tensor (still attached to the graph).
	pub fn loss_tensor(&self) -> Tensor {
		self.loss.clone()
	}
}

impl Forward {
	/// The stage output `[B, T, w_out]` (detached: what goes on the wire).
	pub fn output(&self) -> Tensor {
		self.output.detach()
	}
}

/// A copy of a stage's weights as its passes read them ([`Stage::stash`], or [`Stage::stash_of`] from
/// flat weights), for a backward of a forward made at them after an inner step moved them
/// ([`Stage::backward_at`] through its kept graph, [`Stage::backward_from_input_at`] without one).
/// Cloning shares it.
#[derive(Clone, Debug)]
pub struct Stash(std::sync::Arc<Vec<Tensor>>);

/// The tail's forward pass: the loss and the graph kept for [`Stage::backward_loss`].
#[derive(Debug)]
pub struct LossForward {
	loss: Tensor,
	input: Option<Var>,
	stage: usize,
	/// Mean next-token cross-entropy in nats.
	pub value: f32,
}

/// One pipeline stage with its parameters, accumulated gradient and AdamW state.
pub struct Stage {
	cfg: ModelConfig,
	index: usize,
	dtype: DType,
	device: Device,
	specs: Vec<ParamSpec>,
	vars: Vec<Var>,
	decay: Vec<bool>,
	modules: StageModules,
	grad_sum: Option<Vec<Tensor>>,
	grad_count: usize,
	adam: AdamState,
	/// Local mode's outer optimizer state ([`Stage::use_outer_optimizer`]); `None` in sync mode.
	outer: Option<OuterState>,
	/// Mixed precision (a bf16 or f16 `dtype`): the f32 master weights (`P` values, flattening order)
	/// that the optimizer steps, hashes and checkpoints use; the vars hold their rounding in `dtype`
	/// for the forward and backward passes. `None` for f32 and f64 stages, whose vars are the weights.
	master: Option<Vec<f32>>,
	total_params: usize,
}

impl std::fmt::Debug for Stage {
	fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
		f.debug_struct("Stage")
			.field("index", &self.index)
			.field("params", &self.param_count())
			.field("dtype", &self.dtype)
			.field("accumulated", &self.grad_count)
			.field("adam_step", &self.adam.step)
			.field("outer_step", &self.outer.as_ref().map(|o| o.step))
			.finish()
	}
}

/// Flat index of the first NaN/Inf of `t`, if any.
pub(crate) fn first_non_finite(t: &Tensor) -> Result<Option<usize>> {
	let v = t.flatten_all()?.to_dtype(DType::F64)?.to_vec1::<f64>()?;
	Ok(v.iter().position(|x| !x.is_finite()))
}

/// The optimizer state a stage's merges keep identical on every replica, and so attest and checkpoint.
#[derive(Clone, Debug, PartialEq)]
enum Attested {
	/// Sync mode: the AdamW moments and step.
	Adam(AdamState),
	/// Local mode: the outer momentum and step (the inner AdamW moments stay local).
	Outer(OuterState),
}

impl Attested {
	/// The state's vectors in hash order, and its step.
	fn parts(&self) -> (Vec<&[f32]>, u64) {
		match self {
			Attested::Adam(a) => (vec![&a.m, &a.v], a.step),
			Attested::Outer(o) => (vec![&o.momentum], o.step),
		}
	}
}

/// [`Stage::state_hash`] of flat parameters and the attested optimizer state's vectors and step.
use iota_protocol::optim::state_hash as state_hash_of;

fn hex(h: &[u8; 32]) -> String {
	h.iter().map(|b| format!("{b:02x}")).collect()
}

fn shape_str(dims: &[Option<usize>]) -> String {
	let parts: Vec<String> = dims.iter().map(|d| d.map_or("?".into(), |d| d.to_string())).collect();
	format!("[{}]", parts.join(", "))
}

impl Stage {
	/// Stage `index` of `cfg` with weights initialised deterministically from `seed`
	/// (identical on every replica and machine), computing in `dtype`: F32 for training, F64 for
	/// gradient checks, BF16 (or F16) for mixed precision, where the forward and backward passes run
	/// in `dtype` on weights rounded from f32 master weights that everything else reads and writes
	/// ([`flat_params`](Self::flat_params), the optimizer steps, hashes and checkpoints), so a bf16
	/// replica's attested state is f32 and as exact as an f32 replica's.
	///
	/// # Errors
	/// [`Error::Config`] for an invalid config or stage index; candle errors allocating tensors.
	pub fn new(
		cfg: &ModelConfig,
		index: usize,
		seed: u64,
		dtype: DType,
		device: &Device,
	) -> Result<Self> {
		let specs = param_specs(cfg, index)?;
		let varmap = VarMap::new();
		let mut vars = Vec::with_capacity(specs.len());
		let mixed = matches!(dtype, DType::BF16 | DType::F16);
		let mut master = Vec::new();
		{
			let mut data = varmap
				.data()
				.lock()
				.map_err(|_| Error::Config("var map lock poisoned".into()))?;
			for spec in &specs {
				let var = if mixed {
					let t = init_tensor(spec, seed, DType::F32, &Device::Cpu)?;
					master.extend(t.flatten_all()?.to_vec1::<f32>()?);
					Var::from_tensor(&t.to_dtype(dtype)?.to_device(device)?)?
				} else {
					Var::from_tensor(&init_tensor(spec, seed, dtype, device)?)?
				};
				data.insert(spec.name.clone(), var.clone());
				vars.push(var);
			}
		}
		let vb = VarBuilder::from_varmap(&varmap, dtype, device);
		let modules = StageModules::load(vb, cfg, index)?;
		let decay = specs
			.iter()
			.flat_map(|s| std::iter::repeat_n(s.decay, s.numel()))
			.collect::<Vec<_>>();
		let n = decay.len();
		Ok(Stage {
			cfg: cfg.clone(),
			index,
			dtype,
			device: device.clone(),
			specs,
			vars,
			decay,
			modules,
			grad_sum: None,
			grad_count: 0,
			adam: AdamState::new(n),
			outer: None,
			master: mixed.then_some(master),
			total_params: cfg.total_param_count()?,
		})
	}

	/// Stage index.
	pub fn index(&self) -> usize {
		self.index
	}
	/// The model config.
	pub fn config(&self) -> &ModelConfig {
		&self.cfg
	}
	/// Whether this stage holds the embedding and takes token ids.
	pub fn is_first(&self) -> bool {
		self.index == 0
	}
	/// Whether this stage holds the LM head and computes the loss.
	pub fn is_last(&self) -> bool {
		self.index + 1 == self.cfg.n_stages()
	}
	/// Compute dtype.
	pub fn dtype(&self) -> DType {
		self.dtype
	}
	/// Device.
	pub fn device(&self) -> &Device {
		&self.device
	}
	/// Number of trainable scalars (length of the flat vectors).
	pub fn param_count(&self) -> usize {
		self.decay.len()
	}
	/// Parameter specs in flattening order.
	pub fn specs(&self) -> &[ParamSpec] {
		&self.specs
	}
	/// Parameters as `(name, var)` in flattening order.
	pub fn params(&self) -> impl Iterator<Item = (&str, &Var)> {
		self.specs.iter().map(|s| s.name.as_str()).zip(self.vars.iter())
	}
	/// Micro-batches accumulated since the last step or [`take_gradient`](Self::take_gradient).
	pub fn accumulated(&self) -> usize {
		self.grad_count
	}
	/// AdamW state.
	pub fn adam_state(&self) -> &AdamState {
		&self.adam
	}

	/// Per-parameter weight-decay flags in flattening order (`P` values), as the optimizer step uses them.
	pub fn decay_mask(&self) -> &[bool] {
		&self.decay
	}

	/// Parameters of the whole model (every stage): the clipping budget's denominator.
	pub fn total_params(&self) -> usize {
		self.total_params
	}

	/// The replica's local-mode state (docs/design.md §10): current weights and AdamW state.
	///
	/// # Errors
	/// Candle errors reading the parameters only.
	pub fn inner_state(&self) -> Result<iota_protocol::optim::InnerState> {
		Ok(iota_protocol::optim::InnerState {
			weights: self.flat_params()?,
			adam: self.adam.clone(),
		})
	}

	/// Switch the stage to local mode (docs/design.md §3): merges then apply [`apply_outer`](Self::apply_outer)
	/// and the attested state ([`state_hash`](Self::state_hash), checkpoints) is the weights, the outer
	/// momentum and the outer step; the AdamW state becomes the inner optimizer's, kept locally and never
	/// attested. Starts the outer state at zero (call it on a fresh stage).
	pub fn use_outer_optimizer(&mut self) {
		self.outer = Some(OuterState::new(self.param_count()));
	}

	/// Put a fresh stage in the run's training mode: local mode's stages carry the outer optimizer
	/// state ([`use_outer_optimizer`](Self::use_outer_optimizer)), which their checkpoints and state
	/// hashes include, so call this before [`load_checkpoint`](Self::load_checkpoint) of a local-mode
	/// checkpoint. Sync mode leaves the stage as built. The one place that maps a run spec's
	/// `training` to a stage (miner, held-out evaluator, tests).
	pub fn train_as(&mut self, training: &crate::optim::Training) {
		if !training.is_sync() {
			self.use_outer_optimizer();
		}
	}

	/// Stage `index` of `cfg` as epoch 0 begins, in `training`'s mode ([`train_as`](Self::train_as)),
	/// f32 on `device`: the weights seeded from `seed`, or, for a run that continues an existing model
	/// (the run spec's `init`), the checkpoint `init = (bytes, state hash)` loaded only if its state
	/// hashes to that hash ([`load_checkpoint`](Self::load_checkpoint)). The one place that decides a
	/// stage's epoch-0 weights (miners, validators, evaluators).
	///
	/// # Errors
	/// As [`new`](Self::new); for `init`, as [`load_checkpoint`](Self::load_checkpoint)
	/// ([`Error::StateHashMismatch`] for a checkpoint that is not the named state).
	pub fn initial(
		cfg: &ModelConfig,
		index: usize,
		seed: u64,
		training: &crate::optim::Training,
		device: &Device,
		init: Option<(&[u8], &[u8; 32])>,
	) -> Result<Self> {
		let mut stage = Stage::new(cfg, index, seed, DType::F32, device)?;
		stage.train_as(training);
		if let Some((bytes, state)) = init {
			stage.load_checkpoint(bytes, state)?;
		}
		Ok(stage)
	}

	/// Local mode's per-inner-step state hash (docs/design.md §10): [`iota_protocol::optim::inner_state_hash`]
	/// of the current (local) weights and the inner AdamW moments and step, whatever the mode.
	///
	/// # Errors
	/// Candle errors reading the parameters only.
	pub fn inner_state_hash(&self) -> Result<[u8; 32]> {
		Ok(iota_protocol::optim::inner_state_hash(&self.flat_params()?, &self.adam))
	}

	/// Local mode's outer optimizer state (`None` in sync mode).
	pub fn outer_state(&self) -> Option<&OuterState> {
		self.outer.as_ref()
	}

	/// Local mode: put the outer optimizer state back to `state` (a snapshot of
	/// [`outer_state`](Self::outer_state) taken before a merge's step), so that a merge whose mean
	/// changed (a restarted round with other members) is applied again from the same start.
	///
	/// # Errors
	/// [`Error::Config`] in sync mode; [`Error::Length`] for a momentum that is not `P` values. Nothing
	/// changes on error.
	pub fn restore_outer_state(&mut self, state: OuterState) -> Result<()> {
		if self.outer.is_none() {
			return Err(Error::Config("restore_outer_state on a stage in sync mode".into()));
		}
		if state.momentum.len() != self.param_count() {
			return Err(Error::Length {
				what: "outer momentum".into(),
				expected: self.param_count(),
				got: state.momentum.len(),
			});
		}
		self.outer = Some(state);
		Ok(())
	}

	/// The attested optimizer state's vectors (hash order) and step.
	fn attested_parts(&self) -> (Vec<&[f32]>, u64) {
		match &self.outer {
			Some(o) => (vec![&o.momentum], o.step),
			None => (vec![&self.adam.m, &self.adam.v], self.adam.step),
		}
	}

	/// Install a parsed attested state (the kind was checked by `parse_checkpoint`).
	fn set_attested(&mut self, state: Attested) {
		match state {
			Attested::Adam(a) => self.adam = a,
			Attested::Outer(o) => self.outer = Some(o),
		}
	}
	/// Width of the activation this stage receives (`None` for the first stage, which takes tokens).
	pub fn input_width(&self) -> Option<usize> {
		(!self.is_first()).then(|| self.cfg.wire_width())
	}
	/// Width of the activation this stage sends (`None` for the last stage).
	pub fn output_width(&self) -> Option<usize> {
		(!self.is_last()).then(|| self.cfg.wire_width())
	}

	pub(crate) fn check_tokens(&self, what: &str, t: &Tensor) -> Result<(usize, usize)> {
		if t.dtype() != DType::U32 {
			return Err(Error::dtype(what, DType::U32, t.dtype()));
		}
		let (b, n) = match t.dims() {
			&[b, n] if b > 0 && n > 0 && n <= self.cfg.max_seq_len => (b, n),
			d => {
				return Err(Error::shape(
					what,
					format!("[B, T] with B ≥ 1, 1 ≤ T ≤ {}", self.cfg.max_seq_len),
					d,
				))
			},
		};
		let ids = t.flatten_all()?.to_vec1::<u32>()?;
		if let Some((index, &id)) =
			ids.iter().enumerate().find(|(_, &id)| id as usize >= self.cfg.vocab_size)
		{
			return Err(Error::TokenOutOfRange { id, index, vocab: self.cfg.vocab_size });
		}
		Ok((b, n))
	}

	fn check_activation(&self, what: &str, t: &Tensor, expect: [Option<usize>; 3]) -> Result<()> {
		if t.dtype() != self.dtype {
			return Err(Error::dtype(what, self.dtype, t.dtype()));
		}
		let dims = t.dims();
		let ok = dims.len() == 3
			&& dims.iter().zip(expect).all(|(&d, e)| d > 0 && e.is_none_or(|e| e == d))
			&& dims[1] <= self.cfg.max_seq_len;
		if !ok {
			return Err(Error::shape(what, shape_str(&expect), dims));
		}
		if let Some(index) = first_non_finite(t)? {
			return Err(Error::NonFinite { what: what.into(), index });
		}
		Ok(())
	}

	/// Check a stage input; returns `(B, T)`.
	pub(crate) fn check_input(&self, input: &Tensor) -> Result<(usize, usize)> {
		if self.is_first() {
			self.check_tokens("stage input tokens", input)
		} else {
			self.check_activation(
				"stage input activation",
				input,
				[None, None, self.input_width()],
			)?;
			Ok((input.dim(0)?, input.dim(1)?))
		}
	}

	/// The stage's graph without input checks (used by the checked API and the unsplit model).
	pub(crate) fn forward_unchecked(&self, input: &Tensor) -> Result<Tensor> {
		self.modules.forward(input)
	}

	/// The last stage's loss graph without input checks.
	pub(crate) fn loss_unchecked(&self, input: &Tensor, targets: &Tensor) -> Result<Tensor> {
		let h = self.modules.forward(input)?;
		self.modules.loss(&h, targets)
	}

	fn wrap_input(&self, input: &Tensor) -> Result<(Tensor, Option<Var>)> {
		if self.is_first() {
			Ok((input.clone(), None))
		} else {
			let v = Var::from_tensor(&input.detach())?;
			Ok((v.as_tensor().clone(), Some(v)))
		}
	}

	/// Forward a non-final stage, keeping the graph for [`backward`](Self::backward).
	///
	/// Input: tokens `[B, T]` u32 on the first stage, else activations `[B, T, w]` in the stage
	/// dtype with `w` = [`input_width`](Self::input_width). Output: `[B, T, w_out]`.
	///
	/// # Errors
	/// [`Error::WrongStage`] on the last stage (use [`forward_loss`](Self::forward_loss));
	/// [`Error::DType`], [`Error::Shape`], [`Error::NonFinite`], [`Error::TokenOutOfRange`] for bad input.
	pub fn forward(&self, input: &Tensor) -> Result<Forward> {
		if self.is_last() {
			return Err(Error::WrongStage { stage: self.index, op: "forward", needs: "non-final" });
		}
		self.check_input(input)?;
		let (x, var) = self.wrap_input(input)?;
		let output = self.forward_unchecked(&x)?;
		Ok(Forward { output, input: var, stage: self.index })
	}

	/// Backward of a kept forward: `grad_output` (`∂L/∂output`, same shape and dtype as the
	/// output) in; parameter gradients added to the accumulator (count + 1); returns `∂L/∂input`
	/// `[B, T, w_in]`, or `None` on the first stage (token ids have no gradient).
	///
	/// # Errors
	/// [`Error::Shape`], [`Error::DType`], [`Error::NonFinite`] for a bad `grad_output`;
	/// [`Error::ForeignForward`] for a forward made by another stage.
	pub fn backward(&mut self, fwd: Forward, grad_output: &Tensor) -> Result<Option<Tensor>> {
		if fwd.stage != self.index {
			return Err(Error::ForeignForward { stage: self.index, got: fwd.stage });
		}
		let dims = fwd.output.dims().iter().map(|&d| Some(d)).collect::<Vec<_>>();
		self.check_activation(
			"gradient of stage output",
			grad_output,
			[dims[0], dims[1], dims[2]],
		)?;
		let proxy = (&fwd.output * grad_output.detach())?.sum_all()?;
		let grads = proxy.backward()?;
		self.accumulate(&grads)?;
		self.input_grad(&grads, fwd.input.as_ref())
	}

	/// The weights the stage's passes read now (its vars, in the stage dtype), copied: what a backward
	/// through a forward of these weights runs at once an inner step has moved them
	/// ([`backward_at`](Self::backward_at)). About `P` values of the stage dtype.
	///
	/// # Errors
	/// Candle errors copying a tensor.
	pub fn stash(&self) -> Result<Stash> {
		let vars = self
			.vars
			.iter()
			.map(|v| v.as_tensor().copy())
			.collect::<candle_core::Result<_>>()?;
		Ok(Stash(std::sync::Arc::new(vars)))
	}

	/// Backward of a forward kept from before an inner step, **at the weights it ran at** (weight
	/// stashing, PipeDream, Narayanan et al. 2019 §3.3): the vars hold `at` (the [`stash`](Self::stash)
	/// taken before the step) for the backward, and their own weights again after, also on error. The
	/// input gradient and the parameter gradients are then those of one forward and backward at `at`,
	/// which a validator recomputes from the state the forward ran at alone; a backward through the
	/// kept graph at the moved weights would mix the two states (activations of one, weights of the
	/// other). Otherwise as [`backward`](Self::backward).
	///
	/// # Errors
	/// As [`backward`](Self::backward); [`Error::Shape`] for a stash of another stage.
	pub fn backward_at(
		&mut self,
		fwd: Forward,
		grad_output: &Tensor,
		at: &Stash,
	) -> Result<Option<Tensor>> {
		self.at_weights(at, |s| s.backward(fwd, grad_output))
	}

	/// [`backward_from_input`](Self::backward_from_input) **at the weights `at`**: the forward is
	/// recomputed from `input` and the backward run with the vars holding `at`, and their own weights
	/// are back after, also on error. What a miner runs for a forward of an earlier inner step whose
	/// graph it no longer keeps, so the pass is still the one a validator recomputes at that state.
	///
	/// # Errors
	/// As [`backward_from_input`](Self::backward_from_input); [`Error::Shape`] for a stash of another
	/// stage.
	pub fn backward_from_input_at(
		&mut self,
		input: &Tensor,
		grad_output: &Tensor,
		at: &Stash,
	) -> Result<Option<Tensor>> {
		self.at_weights(at, |s| s.backward_from_input(input, grad_output))
	}

	/// Runs `f` with the vars holding `at`, then writes the current weights back (also when `f` fails).
	fn at_weights<T>(&mut self, at: &Stash, f: impl FnOnce(&mut Self) -> Result<T>) -> Result<T> {
		if at.0.len() != self.vars.len()
			|| at.0.iter().zip(&self.vars).any(|(t, v)| t.dims() != v.dims())
		{
			return Err(Error::shape(
				"weight stash",
				"this stage's parameter shapes",
				&[at.0.len()],
			));
		}
		let now = self.stash()?;
		let r = self.set_vars(at).and_then(|()| f(self));
		let restored = self.set_vars(&now);
		let out = r?;
		restored?;
		Ok(out)
	}

	/// A [`Stash`] of the weights `flat` (`P` f32 values in [`specs`](Self::specs) order, as
	/// [`flat_params`](Self::flat_params) gives them), in the stage dtype: the weights the passes read
	/// while the vars hold `flat`. For a state rebuilt elsewhere (a local-mode miner's inner-step log),
	/// where no stash was kept.
	///
	/// # Errors
	/// [`Error::Length`] for a wrong length, [`Error::NonFinite`] for NaN/Inf.
	pub fn stash_of(&self, flat: &[f32]) -> Result<Stash> {
		Ok(Stash(std::sync::Arc::new(self.tensors_of(flat)?)))
	}

	/// `flat` (checked: `P` finite values) as the vars' tensors, in the stage dtype.
	fn tensors_of(&self, flat: &[f32]) -> Result<Vec<Tensor>> {
		if flat.len() != self.param_count() {
			return Err(Error::Length {
				what: "flat parameters".into(),
				expected: self.param_count(),
				got: flat.len(),
			});
		}
		if let Some(index) = flat.iter().position(|x| !x.is_finite()) {
			return Err(Error::NonFinite { what: "flat parameters".into(), index });
		}
		let mut off = 0;
		let mut out = Vec::with_capacity(self.specs.len());
		for spec in &self.specs {
			let n = spec.numel();
			out.push(
				Tensor::from_slice(&flat[off..off + n], spec.shape.as_slice(), &self.device)?
					.to_dtype(self.dtype)?,
			);
			off += n;
		}
		Ok(out)
	}

	/// Writes `s` into the vars (in place: graphs of earlier forwards read it too).
	fn set_vars(&self, s: &Stash) -> Result<()> {
		for (v, t) in self.vars.iter().zip(s.0.iter()) {
			v.set(t)?;
		}
		Ok(())
	}

	/// Backward without a kept graph: recompute the forward from `input`, then as
	/// [`backward`](Self::backward). Any replica of the stage can do this for a lost miner (docs/design.md §3).
	///
	/// # Errors
	/// As [`forward`](Self::forward) and [`backward`](Self::backward).
	pub fn backward_from_input(
		&mut self,
		input: &Tensor,
		grad_output: &Tensor,
	) -> Result<Option<Tensor>> {
		let fwd = self.forward(input)?;
		self.backward(fwd, grad_output)
	}

	/// Last stage: forward and mean next-token cross-entropy (nats) of `input` against
	/// `targets: [B, T]` u32, keeping the graph for [`backward_loss`](Self::backward_loss).
	///
	/// # Errors
	/// [`Error::WrongStage`] on a non-final stage; input errors as [`forward`](Self::forward);
	/// targets of the wrong dtype, a shape other than the input's `[B, T]`, or ids ≥ vocab.
	pub fn forward_loss(&self, input: &Tensor, targets: &Tensor) -> Result<LossForward> {
		if !self.is_last() {
			return Err(Error::WrongStage {
				stage: self.index,
				op: "forward_loss",
				needs: "final",
			});
		}
		let (b, t) = self.check_input(input)?;
		let (tb, tt) = self.check_tokens("targets", targets)?;
		if (tb, tt) != (b, t) {
			return Err(Error::shape(
				"targets",
				format!("[{b}, {t}] (the input's batch and length)"),
				targets.dims(),
			));
		}
		let (x, var) = self.wrap_input(input)?;
		let loss = self.loss_unchecked(&x, targets)?;
		let value = loss.to_dtype(DType::F32)?.to_scalar::<f32>()?;
		Ok(LossForward { loss, input: var, value, stage: self.index })
	}

	/// Last stage: next-token logits `[B, T, V]` (f32) of `input`, no graph kept (generation).
	///
	/// # Errors
	/// [`Error::WrongStage`] on a non-final stage; input errors as [`forward`](Self::forward).
	pub fn logits(&self, input: &Tensor) -> Result<Tensor> {
		if !self.is_last() {
			return Err(Error::WrongStage { stage: self.index, op: "logits", needs: "final" });
		}
		self.check_input(input)?;
		let h = self.modules.forward(&input.detach())?;
		Ok(self.modules.logits(&h)?.to_dtype(DType::F32)?)
	}

	/// An empty KV cache for [`infer_cached`](Self::infer_cached).
	pub fn new_cache(&self) -> crate::llama::KvCache {
		self.modules.new_cache()
	}

	/// Generation with a KV cache, no graph kept: `input` (tokens `[B, T]` u32 on the first stage,
	/// else activations `[B, T, w]`) holds the `T` positions after the `offset` ones `cache` holds;
	/// returns the stage's output `[B, T, w_out]`, or on the last stage the logits `[B, T, V]` (f32).
	/// `cache` then holds `offset + T` positions.
	///
	/// # Errors
	/// Input errors as [`forward`](Self::forward); [`Error::Config`] for a cache of another stage
	/// or length, or positions past `max_seq_len`.
	pub fn infer_cached(
		&self,
		input: &Tensor,
		offset: usize,
		cache: &mut crate::llama::KvCache,
	) -> Result<Tensor> {
		self.check_input(input)?;
		let h = self.modules.forward_cached(&input.detach(), offset, cache)?;
		if self.is_last() {
			Ok(self.modules.logits(&h)?.to_dtype(DType::F32)?)
		} else {
			Ok(h)
		}
	}

	/// Last stage: backward of the loss; parameter gradients accumulated (count + 1); returns
	/// `∂loss/∂input` `[B, T, w_in]` (`None` for a single-stage model).
	///
	/// # Errors
	/// [`Error::ForeignForward`] for a forward made by another stage; candle errors.
	pub fn backward_loss(&mut self, fwd: LossForward) -> Result<Option<Tensor>> {
		if fwd.stage != self.index {
			return Err(Error::ForeignForward { stage: self.index, got: fwd.stage });
		}
		let grads = fwd.loss.backward()?;
		self.accumulate(&grads)?;
		self.input_grad(&grads, fwd.input.as_ref())
	}

	/// Last stage: loss without gradient bookkeeping (evaluation, validators).
	///
	/// # Errors
	/// As [`forward_loss`](Self::forward_loss).
	pub fn eval_loss(&self, input: &Tensor, targets: &Tensor) -> Result<f32> {
		Ok(self.forward_loss(input, targets)?.value)
	}

	fn input_grad(&self, grads: &GradStore, input: Option<&Var>) -> Result<Option<Tensor>> {
		match input {
			None => Ok(None),
			Some(v) => match grads.get(v.as_tensor()) {
				Some(g) => Ok(Some(g.detach())),
				None => Ok(Some(v.as_tensor().zeros_like()?)),
			},
		}
	}

	/// Add this backward's parameter gradients to the accumulator (a parameter the graph did not
	/// reach contributes zero).
	pub(crate) fn accumulate(&mut self, grads: &GradStore) -> Result<()> {
		let fresh: Vec<Tensor> = self
			.vars
			.iter()
			.map(|v| match grads.get(v.as_tensor()) {
				Some(g) => Ok(g.detach()),
				None => v.as_tensor().zeros_like(),
			})
			.collect::<candle_core::Result<_>>()?;
		self.grad_sum = Some(match self.grad_sum.take() {
			None => fresh,
			Some(sum) => {
				sum.iter().zip(&fresh).map(|(a, b)| a + b).collect::<candle_core::Result<_>>()?
			},
		});
		self.grad_count += 1;
		Ok(())
	}

	/// Accumulated gradient as one flat f32 vector (sum over micro-batches, in parameter order)
	/// and the micro-batch count; the accumulator is reset. This is what a miner uploads for the
	/// butterfly merge (the merge takes the count-weighted mean).
	///
	/// # Errors
	/// [`Error::NoGradient`] if nothing was accumulated.
	pub fn take_gradient(&mut self) -> Result<(Vec<f32>, usize)> {
		let sum = self.grad_sum.take().ok_or(Error::NoGradient { stage: self.index })?;
		let count = std::mem::take(&mut self.grad_count);
		let mut flat = Vec::with_capacity(self.param_count());
		for g in &sum {
			flat.extend(g.flatten_all()?.to_dtype(DType::F32)?.to_vec1::<f32>()?);
		}
		Ok((flat, count))
	}

	/// Drop the accumulated gradient.
	pub fn zero_grad(&mut self) {
		self.grad_sum = None;
		self.grad_count = 0;
	}

	/// Parameters as one flat f32 vector in [`specs`](Self::specs) order.
	///
	/// # Errors
	/// Candle errors only.
	pub fn flat_params(&self) -> Result<Vec<f32>> {
		if let Some(master) = &self.master {
			return Ok(master.clone());
		}
		let mut flat = Vec::with_capacity(self.param_count());
		for v in &self.vars {
			flat.extend(v.flatten_all()?.to_dtype(DType::F32)?.to_vec1::<f32>()?);
		}
		Ok(flat)
	}

	/// Overwrite the parameters from a flat vector (inverse of [`flat_params`](Self::flat_params)).
	///
	/// # Errors
	/// [`Error::Length`] for a wrong length, [`Error::NonFinite`] for NaN/Inf; nothing changes then.
	pub fn set_flat_params(&mut self, flat: &[f32]) -> Result<()> {
		let tensors = self.tensors_of(flat)?;
		for (var, t) in self.vars.iter().zip(&tensors) {
			var.set(t)?;
		}
		if let Some(master) = &mut self.master {
			master.copy_from_slice(flat);
		}
		Ok(())
	}

	/// One AdamW step with an already averaged flat gradient (the butterfly's output), clipped
	/// per stage at `max_norm · sqrt(stage_params / total_params)`. Every replica that calls this
	/// with the same gradient and state ends bit-identical.
	///
	/// # Errors
	/// [`Error::Length`] or [`Error::NonFinite`] for a bad gradient (nothing changes then).
	pub fn apply_gradient(
		&mut self,
		mean_grad: &[f32],
		opts: &StepOptions,
		samples: usize,
	) -> Result<StepReport> {
		// `apply_step` refuses a gradient of the wrong length or with NaN/Inf before changing anything.
		let mut p = self.flat_params()?;
		let (grad_norm, clip_threshold) = iota_protocol::optim::apply_step(
			&mut p,
			mean_grad,
			&self.decay,
			&mut self.adam,
			opts,
			self.total_params,
		)?;
		self.set_flat_params(&p)?;
		Ok(StepReport { grad_norm, clip_threshold, samples })
	}

	/// Optimizer step on this stage's own accumulated gradient (mean over micro-batches).
	///
	/// # Errors
	/// [`Error::NoGradient`] if nothing was accumulated; as [`apply_gradient`](Self::apply_gradient).
	pub fn step(&mut self, opts: &StepOptions) -> Result<StepReport> {
		let (mut g, n) = self.take_gradient()?;
		let inv = 1.0 / n as f32;
		g.iter_mut().for_each(|x| *x *= inv);
		self.apply_gradient(&g, opts, n)
	}

	/// Local mode's merge: the weights become the outer step ([`nesterov_step`]) from the stage's global
	/// weights of the epoch `global` (`P` values, what every replica held when the epoch began) along the
	/// merged pseudo-gradient `mean_delta` (`P` values). The current (local) weights are discarded; the
	/// inner AdamW state is kept. Every replica that calls this with the same inputs and outer state ends
	/// bit-identical.
	///
	/// # Errors
	/// [`Error::Config`] in sync mode ([`use_outer_optimizer`](Self::use_outer_optimizer) not called);
	/// [`Error::Length`] / [`Error::NonFinite`] for a bad vector or result. Nothing changes on error.
	pub fn apply_outer(&mut self, global: &[f32], mean_delta: &[f32], hp: &OuterSgd) -> Result<()> {
		let Some(outer) = &self.outer else {
			return Err(Error::Config("apply_outer on a stage in sync mode".into()));
		};
		if global.len() != self.param_count() {
			return Err(Error::Length {
				what: "global weights".into(),
				expected: self.param_count(),
				got: global.len(),
			});
		}
		let mut w = global.to_vec();
		let mut st = outer.clone();
		nesterov_step(&mut w, mean_delta, &mut st, hp)?;
		self.set_flat_params(&w)?;
		self.outer = Some(st);
		Ok(())
	}

	/// Checkpoint bytes (safetensors): every parameter in f32 under its name, the AdamW moments
	/// as flat `optimizer.adam_m` / `optimizer.adam_v`, and metadata `iota.config` (JSON),
	/// `iota.stage`, `iota.adam_step`. In local mode the moments are replaced by the flat
	/// `optimizer.outer_momentum` and the step by `iota.outer_step` (the inner AdamW state stays local).
	///
	/// # Errors
	/// Candle or serialisation errors.
	pub fn to_safetensors(&self) -> Result<Vec<u8>> {
		let mut owned: Vec<(String, Vec<usize>, Vec<u8>)> = Vec::new();
		let flat = self.flat_params()?;
		let mut off = 0;
		for spec in &self.specs {
			let v = &flat[off..off + spec.numel()];
			off += spec.numel();
			owned.push((spec.name.clone(), spec.shape.clone(), iota_protocol::f32le::to_bytes(v)));
		}
		let named: Vec<(&str, &[f32])> = match &self.outer {
			Some(o) => vec![("optimizer.outer_momentum", &o.momentum)],
			None => vec![("optimizer.adam_m", &self.adam.m), ("optimizer.adam_v", &self.adam.v)],
		};
		for (name, v) in named {
			owned.push((name.into(), vec![v.len()], iota_protocol::f32le::to_bytes(v)));
		}
		let views = owned
			.iter()
			.map(|(n, s, d)| {
				safetensors::tensor::TensorView::new(safetensors::Dtype::F32, s.clone(), d)
					.map(|v| (n.clone(), v))
					.map_err(|e| Error::Checkpoint(e.to_string()))
			})
			.collect::<Result<Vec<_>>>()?;
		let step = match &self.outer {
			Some(o) => ("iota.outer_step".to_string(), o.step.to_string()),
			None => ("iota.adam_step".to_string(), self.adam.step.to_string()),
		};
		let meta = HashMap::from([
			("iota.config".to_string(), serde_json::to_string(&self.cfg)?),
			("iota.stage".to_string(), self.index.to_string()),
			step,
		]);
		safetensors::serialize(views, Some(meta)).map_err(|e| Error::Checkpoint(e.to_string()))
	}

	/// Restore parameters and AdamW state from [`to_safetensors`](Self::to_safetensors) bytes.
	/// The accumulated gradient is dropped.
	///
	/// # Errors
	/// [`Error::Checkpoint`] for unparsable bytes, another config or stage, a missing tensor or a
	/// tensor of the wrong dtype or shape; [`Error::NonFinite`] for NaN/Inf. Nothing changes on error.
	pub fn load_safetensors(&mut self, bytes: &[u8]) -> Result<()> {
		let (flat, state) = self.parse_checkpoint(bytes)?;
		self.set_flat_params(&flat)?;
		self.set_attested(state);
		self.zero_grad();
		Ok(())
	}

	/// BLAKE3 of the stage state (docs/design.md §3 step 6, the value every replica attests after a merge):
	/// the parameters as f32 little-endian in [`specs`](Self::specs) order (`param_count` values),
	/// then the AdamW first moments `m` and second moments `v` (f32 LE, same order and length), then
	/// the AdamW step count as u64 LE. In local mode ([`use_outer_optimizer`](Self::use_outer_optimizer))
	/// the moments are replaced by the outer momentum (f32 LE) and the step by the outer step (u64 LE);
	/// the inner AdamW state is local and not hashed. Two replicas have equal hashes exactly when their
	/// weights and attested optimizer state are bit-identical.
	///
	/// # Errors
	/// Candle errors reading the parameters only.
	pub fn state_hash(&self) -> Result<[u8; 32]> {
		let (state, step) = self.attested_parts();
		Ok(state_hash_of(&self.flat_params()?, &state, step))
	}

	/// The stage checkpoint the merge uploads (`iota_storage::keys::stage_checkpoint`): the
	/// [`to_safetensors`](Self::to_safetensors) bytes (parameters in f32, AdamW `m`, `v` and step).
	/// Loading it with [`load_checkpoint`](Self::load_checkpoint) reproduces
	/// [`state_hash`](Self::state_hash) exactly (for an f32 stage; parameters travel as f32).
	///
	/// # Errors
	/// As [`to_safetensors`](Self::to_safetensors).
	pub fn to_checkpoint(&self) -> Result<Vec<u8>> {
		self.to_safetensors()
	}

	/// Load a stage checkpoint only if its state hashes to `expected` (the `state_hash` every replica
	/// attested in the on-chain merge manifest): the hash is computed from the parsed checkpoint
	/// before anything is applied, so unverified weights never reach the stage. The accumulated
	/// gradient is dropped on success.
	///
	/// # Errors
	/// As [`load_safetensors`](Self::load_safetensors); [`Error::StateHashMismatch`] when the
	/// checkpoint's state is not the attested one. Nothing changes on error.
	pub fn load_checkpoint(&mut self, bytes: &[u8], expected: &[u8; 32]) -> Result<()> {
		let (flat, state) = self.parse_checkpoint(bytes)?;
		let (vectors, step) = state.parts();
		let got = state_hash_of(&flat, &vectors, step);
		if &got != expected {
			return Err(Error::StateHashMismatch { expected: hex(expected), got: hex(&got) });
		}
		self.set_flat_params(&flat)?;
		self.set_attested(state);
		self.zero_grad();
		Ok(())
	}

	/// Parse and check a checkpoint for this stage: `(flat parameters, attested optimizer state)`; the
	/// state must be of this stage's mode (AdamW in sync mode, outer momentum in local mode).
	fn parse_checkpoint(&self, bytes: &[u8]) -> Result<(Vec<f32>, Attested)> {
		let ck = |m: String| Error::Checkpoint(m);
		let st = safetensors::SafeTensors::deserialize(bytes)
			.map_err(|e| ck(format!("not a safetensors file: {e}")))?;
		let (_, meta) =
			safetensors::SafeTensors::read_metadata(bytes).map_err(|e| ck(e.to_string()))?;
		let meta = meta.metadata().clone().unwrap_or_default();
		let cfg_json = meta
			.get("iota.config")
			.ok_or_else(|| ck("metadata iota.config missing".into()))?;
		let cfg: ModelConfig = serde_json::from_str(cfg_json)?;
		if cfg != self.cfg {
			return Err(ck("checkpoint was written for another model config".into()));
		}
		let stage = meta.get("iota.stage").and_then(|s| s.parse::<usize>().ok());
		if stage != Some(self.index) {
			return Err(ck(format!(
				"checkpoint is for stage {stage:?}, this is stage {}",
				self.index
			)));
		}
		let step_key = if self.outer.is_some() { "iota.outer_step" } else { "iota.adam_step" };
		let step = meta.get(step_key).and_then(|s| s.parse::<u64>().ok()).ok_or_else(|| {
			ck(format!(
				"metadata {step_key} missing or not a number (a checkpoint of the other training mode?)"
			))
		})?;
		let read = |name: &str, shape: &[usize]| -> Result<Vec<f32>> {
			let t = st.tensor(name).map_err(|_| ck(format!("tensor {name} missing")))?;
			if t.dtype() != safetensors::Dtype::F32 {
				return Err(ck(format!("{name}: expected dtype F32, got {:?}", t.dtype())));
			}
			if t.shape() != shape {
				return Err(ck(format!("{name}: expected shape {shape:?}, got {:?}", t.shape())));
			}
			// The dtype is F32, so the data is whole f32 values.
			let v = iota_protocol::f32le::from_bytes(t.data())
				.map_err(|e| ck(format!("{name}: {e}")))?;
			if let Some(index) = v.iter().position(|x| !x.is_finite()) {
				return Err(Error::NonFinite { what: format!("checkpoint tensor {name}"), index });
			}
			Ok(v)
		};
		let mut flat = Vec::with_capacity(self.param_count());
		for spec in &self.specs {
			flat.extend(read(&spec.name, &spec.shape)?);
		}
		let n = self.param_count();
		let state = if self.outer.is_some() {
			Attested::Outer(OuterState { momentum: read("optimizer.outer_momentum", &[n])?, step })
		} else {
			let m = read("optimizer.adam_m", &[n])?;
			let v = read("optimizer.adam_v", &[n])?;
			Attested::Adam(AdamState { m, v, step })
		};
		Ok((flat, state))
	}

	/// Write [`to_safetensors`](Self::to_safetensors) to `path`.
	///
	/// # Errors
	/// I/O and serialisation errors.
	pub fn save(&self, path: impl AsRef<Path>) -> Result<()> {
		Ok(std::fs::write(path, self.to_safetensors()?)?)
	}

	/// Read a checkpoint from `path` ([`load_safetensors`](Self::load_safetensors)).
	///
	/// # Errors
	/// I/O errors and those of [`load_safetensors`](Self::load_safetensors).
	pub fn load(&mut self, path: impl AsRef<Path>) -> Result<()> {
		let bytes = std::fs::read(path)?;
		self.load_safetensors(&bytes)
	}
}
