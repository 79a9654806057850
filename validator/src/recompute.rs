//! Recomputing one stage's work item with the stage's global weights of the epoch (docs/design.md §3 step 7):
//! pure model code, no I/O. [`crate::spot_check`] fetches the objects and compares.
//!
//! | item | inputs | recomputed output |
//! |---|---|---|
//! | forward, head (stage 0) | tokens `[B, T]` | activation `[B, T, w]` |
//! | forward, body | activation `[B, T, w]` from stage − 1 | activation `[B, T, w]` |
//! | forward, tail | activation from stage − 1, targets `[B, T]` | loss (nats) and `∂loss/∂input` `[B, T, w]` |
//! | backward, body | activation from stage − 1, `∂L/∂output` from stage + 1 | `∂L/∂input` `[B, T, w]` |
//!
//! The head's backward has no output (token ids have no gradient) and is not checkable; the tail's
//! backward is its forward item. The stage's gradient accumulator is cleared after each recomputation,
//! so one [`Stage`] serves any number of checks.

use candle_core::{DType, Device, Tensor};
use iota_model::Stage;

/// A stage input.
#[derive(Clone, Debug, PartialEq)]
pub enum StageInput {
	/// Token ids of the head, `rows × seq_len`, row-major.
	Tokens {
		/// Ids.
		ids: Vec<u32>,
		/// Rows `B`.
		rows: usize,
	},
	/// A decoded activation `[B, T, w]`, row-major f32.
	Activation {
		/// Values.
		values: Vec<f32>,
		/// Shape `[B, T, w]`.
		shape: [usize; 3],
	},
}

/// What a recomputation produced.
#[derive(Clone, Debug, PartialEq)]
pub struct Recomputed {
	/// The output tensor's values (activation or input gradient), row-major f32.
	pub values: Vec<f32>,
	/// Its shape `[B, T, w]`.
	pub shape: [usize; 3],
	/// The tail's loss, nats.
	pub loss: Option<f32>,
}

/// Why a recomputation could not run (the inputs do not fit the stage).
#[derive(Debug, thiserror::Error)]
pub enum RecomputeError {
	/// The model refused an input (shape, dtype, NaN/Inf, token range) or failed.
	#[error("model: {0}")]
	Model(#[from] iota_model::Error),
	/// A candle error building tensors.
	#[error("tensor: {0}")]
	Tensor(#[from] candle_core::Error),
	/// The item's inputs do not match the stage (e.g. no targets for the tail, tokens for a body stage).
	#[error("inputs do not fit stage {stage}: {reason}")]
	Inputs {
		/// Stage.
		stage: usize,
		/// What is missing or extra.
		reason: String,
	},
	/// The stage produced no tensor where one was expected (e.g. a single-stage model's tail).
	#[error("stage {stage} has no {what} to compare")]
	NoOutput {
		/// Stage.
		stage: usize,
		/// Which output.
		what: &'static str,
	},
}

/// A stage input as a tensor of the stage's `dtype` (token ids stay u32).
pub(crate) fn to_tensor(
	input: &StageInput,
	dtype: DType,
	device: &Device,
) -> Result<Tensor, RecomputeError> {
	Ok(match input {
		StageInput::Tokens { ids, rows } => {
			let rows = (*rows).max(1);
			Tensor::from_slice(ids, (rows, ids.len() / rows), device)?
		},
		StageInput::Activation { values, shape } => {
			Tensor::from_slice(values, shape.as_slice(), device)?.to_dtype(dtype)?
		},
	})
}

fn flat3(t: &Tensor) -> Result<Recomputed, RecomputeError> {
	let dims = t.dims();
	let shape = match dims {
		&[b, n, w] => [b, n, w],
		d => {
			return Err(RecomputeError::Inputs {
				stage: 0,
				reason: format!("output of rank {}", d.len()),
			})
		},
	};
	Ok(Recomputed {
		values: t.to_dtype(DType::F32)?.flatten_all()?.to_vec1::<f32>()?,
		shape,
		loss: None,
	})
}

/// Recomputes a forward item of `stage`: the activation for a non-final stage; for the tail, the loss
/// against `targets` and the gradient with respect to the input (what the tail uploads).
///
/// # Errors
/// [`RecomputeError::Inputs`] for tokens at a body stage, an activation at the head, or a tail without
/// targets; [`RecomputeError::Model`] for inputs the model refuses.
pub fn forward(
	stage: &mut Stage,
	input: &StageInput,
	targets: Option<&StageInput>,
) -> Result<Recomputed, RecomputeError> {
	let s = stage.index();
	match (stage.is_first(), input) {
		(true, StageInput::Activation { .. }) => {
			return Err(RecomputeError::Inputs {
				stage: s,
				reason: "the head takes tokens, got an activation".into(),
			})
		},
		(false, StageInput::Tokens { .. }) => {
			return Err(RecomputeError::Inputs {
				stage: s,
				reason: "a non-head stage takes an activation, got tokens".into(),
			})
		},
		_ => {},
	}
	let x = to_tensor(input, stage.dtype(), &stage.device().clone())?;
	if !stage.is_last() {
		let out = stage.forward(&x)?.output();
		return flat3(&out);
	}
	let Some(StageInput::Tokens { ids, rows }) = targets else {
		return Err(RecomputeError::Inputs {
			stage: s,
			reason: "the tail needs target tokens".into(),
		});
	};
	let y = to_tensor(
		&StageInput::Tokens { ids: ids.clone(), rows: *rows },
		stage.dtype(),
		&stage.device().clone(),
	)?;
	let fwd = stage.forward_loss(&x, &y)?;
	let loss = fwd.value;
	let grad = stage.backward_loss(fwd);
	stage.zero_grad();
	let grad = grad?.ok_or(RecomputeError::NoOutput { stage: s, what: "input gradient" })?;
	let mut r = flat3(&grad)?;
	r.loss = Some(loss);
	Ok(r)
}

/// Recomputes a backward item of a body stage: `∂L/∂input` from the input activation and the gradient
/// of the stage's output.
///
/// # Errors
/// [`RecomputeError::Inputs`] at the head or the tail (not checkable this way) or for token inputs;
/// [`RecomputeError::Model`] for inputs the model refuses.
pub fn backward(
	stage: &mut Stage,
	input: &StageInput,
	grad_output: &StageInput,
) -> Result<Recomputed, RecomputeError> {
	body_backward(stage, input, grad_output, None)
}

/// The input gradient `[B, T, w]` of a body stage's backward that ran through a forward **kept from an
/// earlier inner step** (local mode's bounded staleness, docs/design.md §3): forward and backward at
/// `forward_weights` (the state the forward ran at), exactly as the miner runs it with the weights it
/// stashed before the step ([`Stage::backward_at`]). The stage is left holding `weights` (the state the
/// backward's step ran at) and a cleared accumulator.
///
/// # Errors
/// As [`backward`]; weight vectors of another length.
pub fn backward_through_kept(
	stage: &mut Stage,
	input: &StageInput,
	grad_output: &StageInput,
	forward_weights: &[f32],
	weights: &[f32],
) -> Result<Recomputed, RecomputeError> {
	body_backward(stage, input, grad_output, Some((forward_weights, weights)))
}

/// A body stage's input gradient from `input` and `grad_output`: forward and backward at the stage's
/// weights, or with `kept = (forward_weights, weights)` through a kept forward ([`kept_backward`]).
fn body_backward(
	stage: &mut Stage,
	input: &StageInput,
	grad_output: &StageInput,
	kept: Option<(&[f32], &[f32])>,
) -> Result<Recomputed, RecomputeError> {
	let s = stage.index();
	if stage.is_first() || stage.is_last() {
		return Err(RecomputeError::Inputs {
			stage: s,
			reason: "only body stages have a checkable backward".into(),
		});
	}
	if !matches!(input, StageInput::Activation { .. })
		|| !matches!(grad_output, StageInput::Activation { .. })
	{
		return Err(RecomputeError::Inputs {
			stage: s,
			reason: "backward takes two activations".into(),
		});
	}
	let device = stage.device().clone();
	let x = to_tensor(input, stage.dtype(), &device)?;
	let g = to_tensor(grad_output, stage.dtype(), &device)?;
	let grad = match kept {
		Some((at, weights)) => kept_backward(stage, &x, &g, at, weights),
		None => stage.backward_from_input(&x, &g).map_err(RecomputeError::from),
	};
	stage.zero_grad();
	let grad = grad?.ok_or(RecomputeError::NoOutput { stage: s, what: "input gradient" })?;
	flat3(&grad)
}

/// A backward through a forward kept from an earlier inner step, as the miner runs it
/// ([`Stage::backward_at`], weight stashing): forward and backward both at `forward_weights` (the state
/// the forward ran at; parameter gradients added to the accumulator). The stage holds `weights` (the
/// backward's own state) afterwards, also on error.
pub(crate) fn kept_backward(
	stage: &mut Stage,
	x: &Tensor,
	g: &Tensor,
	forward_weights: &[f32],
	weights: &[f32],
) -> Result<Option<Tensor>, RecomputeError> {
	let r = stage
		.set_flat_params(forward_weights)
		.and_then(|()| stage.backward_from_input(x, g));
	stage.set_flat_params(weights)?;
	Ok(r?)
}

#[cfg(test)]
mod tests {
	use super::*;
	use iota_model::ModelConfig;

	fn stages(cfg: &ModelConfig) -> Vec<Stage> {
		(0..cfg.n_stages())
			.map(|s| Stage::new(cfg, s, 7, DType::F32, &Device::Cpu).unwrap())
			.collect()
	}

	#[test]
	fn chained_recomputation_is_deterministic_and_checks_inputs() {
		let cfg = ModelConfig::tiny();
		let mut st = stages(&cfg);
		let (b, t) = (2usize, 8usize);
		let ids: Vec<u32> = (0..(b * t) as u32).map(|i| (i * 37) % cfg.vocab_size as u32).collect();
		let tokens = StageInput::Tokens { ids: ids.clone(), rows: b };
		let h0 = forward(&mut st[0], &tokens, None).unwrap();
		assert_eq!(h0.shape, [b, t, cfg.wire_width()]);
		assert_eq!(forward(&mut st[0], &tokens, None).unwrap(), h0, "bit-identical twice");
		let a0 = StageInput::Activation { values: h0.values.clone(), shape: h0.shape };
		let h1 = forward(&mut st[1], &a0, None).unwrap();
		let a1 = StageInput::Activation { values: h1.values, shape: h1.shape };
		let tail = forward(&mut st[2], &a1, Some(&tokens)).unwrap();
		assert!(tail.loss.unwrap() > 0.0);
		assert_eq!(tail.shape, [b, t, cfg.wire_width()]);
		let g = StageInput::Activation { values: tail.values.clone(), shape: tail.shape };
		let back = backward(&mut st[1], &a0, &g).unwrap();
		assert_eq!(back.shape, [b, t, cfg.wire_width()]);
		assert_eq!(
			backward(&mut st[1], &a0, &g).unwrap(),
			back,
			"accumulator cleared between checks"
		);
		assert_eq!(st[1].accumulated(), 0);

		// Inputs that do not fit.
		assert!(matches!(forward(&mut st[0], &a0, None), Err(RecomputeError::Inputs { .. })));
		assert!(matches!(forward(&mut st[1], &tokens, None), Err(RecomputeError::Inputs { .. })));
		assert!(matches!(forward(&mut st[2], &a1, None), Err(RecomputeError::Inputs { .. })));
		assert!(matches!(backward(&mut st[0], &a0, &g), Err(RecomputeError::Inputs { .. })));
		let wrong_width = StageInput::Activation { values: vec![0.0; b * t * 3], shape: [b, t, 3] };
		assert!(matches!(forward(&mut st[1], &wrong_width, None), Err(RecomputeError::Model(_))));
		let bad_token = StageInput::Tokens { ids: vec![cfg.vocab_size as u32; b * t], rows: b };
		assert!(matches!(forward(&mut st[0], &bad_token, None), Err(RecomputeError::Model(_))));
	}

	#[test]
	fn a_backward_through_a_kept_forward_is_recomputed_as_the_miner_ran_it() {
		let cfg = ModelConfig::tiny();
		let (b, t, w) = (2usize, 8usize, cfg.wire_width());
		let act = |seed: usize| StageInput::Activation {
			values: (0..b * t * w).map(|i| ((i * 31 + seed * 17) as f32 * 0.013).sin()).collect(),
			shape: [b, t, w],
		};
		let (x, g) = (act(1), act(2));
		let mut miner = Stage::new(&cfg, 1, 7, DType::F32, &Device::Cpu).unwrap();
		let earlier = miner.flat_params().unwrap();
		let later: Vec<f32> = earlier
			.iter()
			.enumerate()
			.map(|(i, v)| v + 1e-2 * ((i % 7) as f32 - 3.0))
			.collect();
		// The miner: forward at the earlier state, an inner step in between, the backward of the
		// kept graph at the stashed earlier state.
		let xt = to_tensor(&x, DType::F32, &Device::Cpu).unwrap();
		let gt = to_tensor(&g, DType::F32, &Device::Cpu).unwrap();
		let fwd = miner.forward(&xt).unwrap();
		let at = miner.stash().unwrap();
		miner.set_flat_params(&later).unwrap();
		let ran = flat3(&miner.backward_at(fwd, &gt, &at).unwrap().unwrap()).unwrap();
		assert_eq!(miner.flat_params().unwrap(), later, "the miner's weights are back after");
		let (miner_grad, _) = miner.take_gradient().unwrap();

		let mut v = Stage::new(&cfg, 1, 7, DType::F32, &Device::Cpu).unwrap();
		let kept = backward_through_kept(&mut v, &x, &g, &earlier, &later).unwrap();
		assert_eq!(kept, ran, "bit for bit");
		assert_eq!(v.flat_params().unwrap(), later, "the stage holds the backward's state after");
		assert_eq!(v.accumulated(), 0);
		// It is the pass at the earlier state; the later state gives another one.
		v.set_flat_params(&earlier).unwrap();
		assert_eq!(backward(&mut v, &x, &g).unwrap(), ran);
		v.set_flat_params(&later).unwrap();
		assert_ne!(backward(&mut v, &x, &g).unwrap(), ran);
		// And so are its parameter gradients (what the inner step's replay recomputes).
		v.set_flat_params(&later).unwrap();
		kept_backward(&mut v, &xt, &gt, &earlier, &later).unwrap();
		assert_eq!(v.take_gradient().unwrap().0, miner_grad);
		assert_eq!(v.flat_params().unwrap(), later);
	}
}
