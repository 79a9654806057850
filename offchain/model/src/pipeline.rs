//! The single-process baseline: the same stages chained in one process.
//!
//! [`Pipeline::forward_backward`] drives the stage API exactly as miners do — forward each stage,
//! send the activation across the cut, loss at the tail, send each gradient back — and, when a
//! wire [`Encoding`] is set, every tensor crossing a cut really is encoded to bytes and decoded
//! (so uint8 quantisation and its straight-through backward are what is trained).
//! [`Pipeline::forward_backward_unsplit`] runs the whole model as one autograd graph: the
//! reference the stage-chaining is tested against.

use candle_core::{DType, Device, Tensor};

use crate::config::ModelConfig;
use crate::error::{Error, Result};
use crate::stage::{Stage, StepOptions, StepReport};
use crate::wire::{self, Encoding, Expect, Kind};

/// Largest wire message the in-process pipeline accepts (1 GiB).
pub const MAX_WIRE_BYTES: usize = 1 << 30;

pub use iota_protocol::optim::cosine_lr;

/// All stages of a model in one process.
pub struct Pipeline {
	cfg: ModelConfig,
	stages: Vec<Stage>,
	wire: Option<Encoding>,
	wire_bytes: u64,
}

impl Pipeline {
	/// Every stage of `cfg`, initialised from `seed` (the same weights a distributed run starts
	/// from). `wire`: `None` passes tensors across cuts directly; `Some(enc)` encodes them.
	///
	/// # Errors
	/// [`Error::Config`] for an invalid config; candle errors.
	pub fn new(
		cfg: &ModelConfig,
		seed: u64,
		dtype: DType,
		device: &Device,
		wire: Option<Encoding>,
	) -> Result<Self> {
		cfg.validate()?;
		let stages = (0..cfg.n_stages())
			.map(|s| Stage::new(cfg, s, seed, dtype, device))
			.collect::<Result<_>>()?;
		Ok(Pipeline { cfg: cfg.clone(), stages, wire, wire_bytes: 0 })
	}

	/// The config.
	pub fn config(&self) -> &ModelConfig {
		&self.cfg
	}
	/// The stages.
	pub fn stages(&self) -> &[Stage] {
		&self.stages
	}
	/// The stages, mutably.
	pub fn stages_mut(&mut self) -> &mut [Stage] {
		&mut self.stages
	}
	/// Total trainable parameters.
	pub fn param_count(&self) -> usize {
		self.stages.iter().map(Stage::param_count).sum()
	}
	/// Bytes sent across cuts so far (activations and gradients; 0 without a wire encoding).
	pub fn wire_bytes(&self) -> u64 {
		self.wire_bytes
	}

	fn cross(&mut self, t: Tensor, kind: Kind) -> Result<Tensor> {
		match self.wire {
			None => Ok(t),
			Some(enc) => {
				let bytes = wire::encode(&t, kind, enc)?;
				self.wire_bytes += bytes.len() as u64;
				let w = t.dim(candle_core::D::Minus1)?;
				wire::decode(&bytes, &Expect::btw(kind, w, MAX_WIRE_BYTES), t.dtype(), t.device())
			},
		}
	}

	/// One micro-batch through the stage API: forward every stage, loss, backward every stage;
	/// gradients are accumulated in each stage. `inputs`, `targets`: `[B, T]` u32. Returns the
	/// loss (nats/token).
	///
	/// # Errors
	/// Input errors of [`Stage::forward`] / [`Stage::forward_loss`]; wire errors.
	pub fn forward_backward(&mut self, inputs: &Tensor, targets: &Tensor) -> Result<f32> {
		let n = self.stages.len();
		let mut pending = Vec::with_capacity(n - 1);
		let mut x = inputs.clone();
		for s in 0..n - 1 {
			let f = self.stages[s].forward(&x)?;
			let out = f.output();
			pending.push(f);
			x = self.cross(out, Kind::Activation)?;
		}
		let lf = self.stages[n - 1].forward_loss(&x, targets)?;
		let loss = lf.value;
		let mut g = self.stages[n - 1].backward_loss(lf)?;
		for s in (0..n - 1).rev() {
			let grad =
				g.ok_or_else(|| Error::Config("missing input gradient between stages".into()))?;
			let grad = self.cross(grad, Kind::Gradient)?;
			let f = pending.pop().ok_or_else(|| Error::Config("forward state lost".into()))?;
			g = self.stages[s].backward(f, &grad)?;
		}
		Ok(loss)
	}

	/// The whole model as one autograd graph (no wire, no detaching at cuts): the loss tensor.
	///
	/// # Errors
	/// Bad inputs are checked by the first and last stage as in [`Stage::forward_loss`].
	pub fn loss_unsplit(&self, inputs: &Tensor, targets: &Tensor) -> Result<Tensor> {
		let n = self.stages.len();
		if n > 1 {
			self.stages[0].check_input(inputs)?;
		}
		let mut x = inputs.clone();
		for s in 0..n - 1 {
			x = self.stages[s].forward_unchecked(&x)?;
		}
		if n == 1 {
			return Ok(self.stages[0].forward_loss(inputs, targets)?.loss_tensor());
		}
		let last = &self.stages[n - 1];
		let (b, t) = last.check_tokens("targets", targets)?;
		if [b, t] != x.dims()[..2] {
			return Err(Error::shape(
				"targets",
				format!("{:?} (the input's batch and length)", &x.dims()[..2]),
				targets.dims(),
			));
		}
		last.loss_unchecked(&x, targets)
	}

	/// Forward and backward of [`loss_unsplit`](Self::loss_unsplit); parameter gradients are
	/// accumulated into every stage. Returns the loss.
	///
	/// # Errors
	/// As [`loss_unsplit`](Self::loss_unsplit).
	pub fn forward_backward_unsplit(&mut self, inputs: &Tensor, targets: &Tensor) -> Result<f32> {
		let loss = self.loss_unsplit(inputs, targets)?;
		let value = loss.to_dtype(DType::F32)?.to_scalar::<f32>()?;
		let grads = loss.backward()?;
		for s in &mut self.stages {
			s.accumulate(&grads)?;
		}
		Ok(value)
	}

	/// Loss of one batch through the stages (and the wire, if set), without gradients.
	///
	/// # Errors
	/// As [`forward_backward`](Self::forward_backward).
	pub fn eval_loss(&mut self, inputs: &Tensor, targets: &Tensor) -> Result<f32> {
		let n = self.stages.len();
		let mut x = inputs.clone();
		for s in 0..n - 1 {
			let out = self.stages[s].forward(&x)?.output();
			x = self.cross(out, Kind::Activation)?;
		}
		self.stages[n - 1].eval_loss(&x, targets)
	}

	/// Next-token logits `[B, T, V]` (f32) of tokens `[B, T]` through the stages (and the wire, if
	/// set), without gradients.
	///
	/// # Errors
	/// Bad tokens as [`Stage::forward`]; candle and wire errors.
	pub fn logits(&mut self, inputs: &Tensor) -> Result<Tensor> {
		let n = self.stages.len();
		let mut x = inputs.clone();
		for s in 0..n - 1 {
			let out = self.stages[s].forward(&x)?.output();
			x = self.cross(out, Kind::Activation)?;
		}
		self.stages[n - 1].logits(&x)
	}

	/// An empty KV cache per stage for [`logits_cached`](Self::logits_cached).
	pub fn new_cache(&self) -> Vec<crate::llama::KvCache> {
		self.stages.iter().map(Stage::new_cache).collect()
	}

	/// Next-token logits `[B, T, V]` (f32) of `inputs` (`[B, T]` u32), the `T` positions after the
	/// `offset` ones whose keys and values `cache` holds (from [`new_cache`](Self::new_cache) at offset
	/// 0); each cut's activations cross the wire as in [`logits`](Self::logits) (per-token codecs, so
	/// a position's activation is the same whichever call computed it). Generation only.
	///
	/// # Errors
	/// As [`Stage::infer_cached`]; wire errors.
	pub fn logits_cached(
		&mut self,
		inputs: &Tensor,
		offset: usize,
		cache: &mut [crate::llama::KvCache],
	) -> Result<Tensor> {
		if cache.len() != self.stages.len() {
			return Err(Error::Config(format!(
				"a KV cache of {} stages for a model of {}",
				cache.len(),
				self.stages.len()
			)));
		}
		let n = self.stages.len();
		let mut x = inputs.clone();
		for (s, c) in cache.iter_mut().enumerate() {
			let out = self.stages[s].infer_cached(&x, offset, c)?;
			x = if s + 1 < n { self.cross(out, Kind::Activation)? } else { out };
		}
		Ok(x)
	}

	/// Optimizer step on every stage (each with its own per-stage clipping threshold).
	///
	/// # Errors
	/// [`Error::NoGradient`] if a stage accumulated nothing.
	pub fn step(&mut self, opts: &StepOptions) -> Result<Vec<StepReport>> {
		self.stages.iter_mut().map(|s| s.step(opts)).collect()
	}

	/// Accumulate over `micro_batches` then step; returns the mean loss.
	///
	/// # Errors
	/// As [`forward_backward`](Self::forward_backward) and [`step`](Self::step); an empty
	/// micro-batch list is [`Error::Data`].
	pub fn train_step(
		&mut self,
		micro_batches: &[(Tensor, Tensor)],
		opts: &StepOptions,
	) -> Result<f32> {
		if micro_batches.is_empty() {
			return Err(Error::Data("train_step needs at least one micro-batch".into()));
		}
		let mut sum = 0.0;
		for (x, y) in micro_batches {
			sum += self.forward_backward(x, y)?;
		}
		self.step(opts)?;
		Ok(sum / micro_batches.len() as f32)
	}
}
