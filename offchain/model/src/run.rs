//! A training run of the single-process baseline over a prepared corpus: the loop shared by
//! `iota-train` and the benches (micro-batches, cosine schedule, periodic held-out evaluation).

use std::time::Instant;

use candle_core::{DType, Device};

use crate::config::ModelConfig;
use crate::data::Corpus;
use crate::error::{Error, Result};
use crate::optim::AdamW;
use crate::pipeline::{cosine_lr, Pipeline};
use crate::plot::LossRow;
use crate::stage::StepOptions;
use crate::wire::Encoding;

/// Hyper-parameters of a run.
#[derive(Clone, Debug, PartialEq)]
pub struct RunOptions {
	/// Optimizer steps.
	pub steps: usize,
	/// Rows per micro-batch `B`.
	pub batch: usize,
	/// Micro-batches accumulated per step.
	pub micro_batches: usize,
	/// Peak learning rate.
	pub lr: f32,
	/// Linear warm-up steps.
	pub warmup: usize,
	/// Final learning rate as a fraction of the peak (cosine decay).
	pub min_lr_ratio: f32,
	/// AdamW weight decay.
	pub weight_decay: f32,
	/// Global clipping norm (per-stage share applied), `None` for no clipping.
	pub max_norm: Option<f32>,
	/// Seed of the weights.
	pub seed: u64,
	/// Evaluate held-out loss every this many steps (and at the end); 0 = only at the end.
	pub eval_every: usize,
	/// Held-out micro-batches per evaluation.
	pub eval_batches: usize,
	/// Encoding of tensors crossing cuts (`None`: passed in memory).
	pub wire: Option<Encoding>,
}

impl Default for RunOptions {
	fn default() -> Self {
		RunOptions {
			steps: 200,
			batch: 8,
			micro_batches: 1,
			lr: 1e-3,
			warmup: 20,
			min_lr_ratio: 0.1,
			weight_decay: 0.1,
			max_norm: Some(1.0),
			seed: 0,
			eval_every: 50,
			eval_batches: 4,
			wire: None,
		}
	}
}

/// What a run produced.
#[derive(Clone, Debug)]
pub struct RunLog {
	/// One row per step.
	pub rows: Vec<LossRow>,
	/// Held-out loss before training.
	pub initial_eval: f32,
	/// Held-out loss after the last step.
	pub final_eval: f32,
	/// Training tokens processed.
	pub tokens: u64,
	/// Wall-clock seconds of the training steps (evaluation excluded).
	pub train_seconds: f64,
	/// Bytes that crossed cuts in training and evaluation (0 without a wire encoding).
	pub wire_bytes: u64,
}

/// Mean held-out loss over `n` fixed batches of `batch` rows (sample ids `0 .. n·batch`).
///
/// # Errors
/// As [`Pipeline::eval_loss`].
pub fn eval(
	p: &mut Pipeline,
	corpus: &Corpus,
	batch: usize,
	n: usize,
	device: &Device,
) -> Result<f32> {
	let mut sum = 0.0;
	for k in 0..n.max(1) {
		let ids: Vec<u64> = (0..batch as u64).map(|i| (k * batch) as u64 + i).collect();
		let (x, y) = corpus.heldout.batch(&ids, device)?;
		sum += p.eval_loss(&x, &y)?;
	}
	Ok(sum / n.max(1) as f32)
}

/// Train `cfg` on `corpus.train` for `opts.steps` steps; `on_step` sees each logged row (for
/// progress bars). Sample ids are consecutive (`step · micro_batches · batch + i`), so runs with
/// the same options see the same tokens whatever the model.
///
/// # Errors
/// [`Error::Data`] if the corpus rows are longer than the model's `max_seq_len` or the
/// options are empty; errors of the pipeline.
pub fn train(
	cfg: &ModelConfig,
	corpus: &Corpus,
	opts: &RunOptions,
	device: &Device,
	mut on_step: impl FnMut(&LossRow),
) -> Result<(Pipeline, RunLog)> {
	if corpus.train.seq_len() > cfg.max_seq_len {
		return Err(Error::Data(format!(
			"rows of {} tokens exceed max_seq_len {}",
			corpus.train.seq_len(),
			cfg.max_seq_len
		)));
	}
	if opts.steps == 0 || opts.batch == 0 || opts.micro_batches == 0 {
		return Err(Error::Data("steps, batch and micro_batches must be > 0".into()));
	}
	let mut p = Pipeline::new(cfg, opts.seed, DType::F32, device, opts.wire)?;
	let initial_eval = eval(&mut p, corpus, opts.batch, opts.eval_batches, device)?;
	let per_step = (opts.batch * opts.micro_batches) as u64;
	let t = corpus.train.seq_len() as u64;
	let mut rows = Vec::with_capacity(opts.steps);
	let mut train_seconds = 0.0;
	for step in 0..opts.steps {
		let lr = cosine_lr(step, opts.steps, opts.warmup, opts.lr, opts.min_lr_ratio);
		let micro = (0..opts.micro_batches)
			.map(|m| {
				let base = step as u64 * per_step + (m * opts.batch) as u64;
				corpus
					.train
					.batch(&(base..base + opts.batch as u64).collect::<Vec<_>>(), device)
			})
			.collect::<Result<Vec<_>>>()?;
		let so = StepOptions {
			adamw: AdamW { lr, weight_decay: opts.weight_decay, ..AdamW::default() },
			max_norm: opts.max_norm,
		};
		let t0 = Instant::now();
		let loss = p.train_step(&micro, &so)?;
		train_seconds += t0.elapsed().as_secs_f64();
		let tokens = (step as u64 + 1) * per_step * t;
		let last = step + 1 == opts.steps;
		let eval_loss = if last || (opts.eval_every > 0 && (step + 1) % opts.eval_every == 0) {
			Some(eval(&mut p, corpus, opts.batch, opts.eval_batches, device)?)
		} else {
			None
		};
		let row = LossRow {
			step: step + 1,
			tokens,
			loss,
			eval_loss,
			lr,
			tokens_per_s: tokens as f64 / train_seconds,
		};
		on_step(&row);
		rows.push(row);
	}
	let final_eval = rows.last().and_then(|r| r.eval_loss).unwrap_or(f32::NAN);
	let tokens = rows.last().map_or(0, |r| r.tokens);
	let wire_bytes = p.wire_bytes();
	Ok((p, RunLog { rows, initial_eval, final_eval, tokens, train_seconds, wire_bytes }))
}

/// A model `iota-train --save-stages` kept in its run directory: `config.json` (the model config),
/// `stage{N}.safetensors` for every stage, and from `summary.json` (optional) the wire codec and the
/// tokenizer path the run used.
pub struct SavedRun {
	/// The stages, loaded, chained through `wire`.
	pub pipeline: Pipeline,
	/// The wire codec across the cuts (`None`: tensors pass as they are).
	pub wire: Option<Encoding>,
	/// The tokenizer the run recorded, if any.
	pub tokenizer: Option<std::path::PathBuf>,
}

/// Reads the run directory `dir` ([`SavedRun`]); `wire` overrides the recorded codec (`"none"`, `"f32"`,
/// `"bf16"`, `"u8"`).
///
/// # Errors
/// [`Error::Data`] naming the file that is missing or malformed (`config.json`, `summary.json`, a stage
/// file); [`Error::Config`] for an invalid config or codec; [`Error::Checkpoint`] for a stage file of
/// another stage or config.
pub fn load_saved_run(dir: &std::path::Path, wire: Option<&str>) -> Result<SavedRun> {
	let read = |name: &str| {
		let p = dir.join(name);
		std::fs::read(&p).map_err(|e| Error::Data(format!("reading {}: {e}", p.display())))
	};
	let cfg: ModelConfig = serde_json::from_slice(&read("config.json")?)
		.map_err(|e| Error::Data(format!("config.json is not a model config: {e}")))?;
	cfg.validate()?;
	let summary: serde_json::Value = match read("summary.json") {
		Ok(b) => serde_json::from_slice(&b)
			.map_err(|e| Error::Data(format!("summary.json does not parse: {e}")))?,
		Err(_) => serde_json::Value::Null,
	};
	let wire_name = wire
		.map(str::to_owned)
		.or_else(|| summary["wire"].as_str().map(str::to_owned))
		.unwrap_or_else(|| "none".into());
	let wire = match wire_name.as_str() {
		"none" => None,
		w => Some(Encoding::parse(w)?),
	};
	let mut pipeline = Pipeline::new(&cfg, 0, DType::F32, &Device::Cpu, wire)?;
	for s in pipeline.stages_mut() {
		let p = dir.join(format!("stage{}.safetensors", s.index()));
		let bytes =
			std::fs::read(&p).map_err(|e| Error::Data(format!("reading {}: {e}", p.display())))?;
		s.load_safetensors(&bytes)
			.map_err(|e| Error::Checkpoint(format!("{}: {e}", p.display())))?;
	}
	let tokenizer = summary["tokenizer"].as_str().map(std::path::PathBuf::from);
	Ok(SavedRun { pipeline, wire, tokenizer })
}
