//! The single-process baseline of a run: the run's model trained in one process on exactly the samples
//! the network trained, epoch by epoch, with the run's optimizer, so the report can put the network's
//! loss beside it (issue "What the network trained, in the user's hands", item 4) and `bench-pipeline`
//! can measure the pipeline against it.
//!
//! - Samples: epoch `e` of a run with `Q` samples per epoch trained sample ids `e·Q ..< (e+1)·Q`
//!   (`RunSpec::data.locate`), `B × T` inputs and shifted targets each.
//! - Weights: the run's epoch-0 weights (`Stage::initial`: the seed's, or a continued model's initial
//!   checkpoints, hash-checked), in one [`Pipeline`] with the chosen model's cuts and wire.
//! - Optimizer: AdamW at the spec's schedule; one step per epoch in sync mode (what the network does),
//!   and in local mode one step every `accumulate` samples, the last of an epoch taking what is left:
//!   the same batch per step and the same optimizer steps per token as one replica of a network with one
//!   miner per stage, without outer steps (DiLoCo's comparison, issue 16 item 7).
//! - Held-out loss: after each epoch, on the run's held-out rows ([`iota_orchestrator::eval::mean_loss`],
//!   as the orchestrator evaluates each merged model).

use std::collections::hash_map::{Entry, HashMap};
use std::time::Instant;

use anyhow::{ensure, Context};
use candle_core::{DType, Device, Tensor};
use iota_model::{Encoding, ModelConfig, Pipeline, Stage};
use iota_rpc::RunSpec;
use iota_storage::ObjectStore;

/// One sample: inputs and targets, `[B, T]` token ids each.
pub type Sample = (Tensor, Tensor);

/// Inputs and targets (`[B, T]` each) of one sample's rows (`B` rows of `T + 1` tokens).
///
/// # Errors
/// Rows that are not whole rows of `T + 1`; tensor errors.
pub fn sample_tensors(spec: &RunSpec, rows: &[u32]) -> anyhow::Result<Sample> {
	let (b, t) = (spec.data.batch_rows as usize, spec.data.seq_len as usize);
	ensure!(rows.len() == b * (t + 1), "{} tokens are not {b} rows of {}", rows.len(), t + 1);
	let (x, y) =
		iota_protocol::sample::inputs_and_targets(rows, t).context("a sample is not whole rows")?;
	Ok((Tensor::from_vec(x, (b, t), &Device::Cpu)?, Tensor::from_vec(y, (b, t), &Device::Cpu)?))
}

/// Samples `ids` of the run, each data shard read once through `read` (given the shard's spec object,
/// it returns the bytes) and checked against the spec's BLAKE3 and vocabulary before use.
///
/// # Errors
/// A sample outside the data, `read`'s error, a shard not matching its hash, out-of-vocabulary tokens.
pub fn samples_from(
	spec: &RunSpec,
	ids: std::ops::Range<u64>,
	read: &mut dyn FnMut(&iota_rpc::SpecObject) -> anyhow::Result<Vec<u8>>,
) -> anyhow::Result<Vec<Sample>> {
	let d = &spec.data;
	let mut shards: HashMap<u32, Vec<u32>> = HashMap::new();
	let mut out = Vec::with_capacity((ids.end - ids.start) as usize);
	for id in ids {
		let loc = d.locate(id).context("the run spec's data manifest is empty")?;
		if let Entry::Vacant(v) = shards.entry(loc.shard) {
			let obj = d
				.shards
				.get(loc.shard as usize)
				.with_context(|| format!("shard {} not in the spec", loc.shard))?;
			let bytes = read(obj).with_context(|| format!("reading data shard {}", obj.key))?;
			let got = iota_primitives::ContentHash::of(&bytes);
			ensure!(
				got == obj.hash,
				"data shard {}: BLAKE3 {got}, the run spec lists {}",
				obj.key,
				obj.hash
			);
			v.insert(d.decode_shard(loc.shard, &bytes, spec.model.vocab_size)?);
		}
		let rows = d
			.sample_tokens(&shards[&loc.shard], loc)
			.with_context(|| format!("sample {id}: rows beyond its shard"))?;
		out.push(sample_tensors(spec, rows)?);
	}
	Ok(out)
}

/// [`samples_from`] the bucket `store` (the shards the samples need, fetched first).
///
/// # Errors
/// As [`samples_from`]; a shard missing from the bucket.
pub async fn load_samples(
	store: &ObjectStore,
	spec: &RunSpec,
	ids: std::ops::Range<u64>,
) -> anyhow::Result<Vec<Sample>> {
	let mut fetched: HashMap<String, Vec<u8>> = HashMap::new();
	for id in ids.clone() {
		let Some(loc) = spec.data.locate(id) else { break };
		if let Some(obj) = spec.data.shards.get(loc.shard as usize) {
			if !fetched.contains_key(&obj.key) {
				fetched.insert(obj.key.clone(), store.get(&obj.key, &obj.hash).await?.to_vec());
			}
		}
	}
	samples_from(spec, ids, &mut |obj| {
		fetched.remove(&obj.key).with_context(|| format!("{} was not fetched", obj.key))
	})
}

/// The run's held-out rows from `store`, `None` when the run has none.
///
/// # Errors
/// The object missing or not matching its hash; a wrong size or out-of-vocabulary tokens.
pub async fn load_heldout(store: &ObjectStore, spec: &RunSpec) -> anyhow::Result<Option<Vec<u32>>> {
	let Some(h) = &spec.data.heldout else { return Ok(None) };
	let bytes = store.get(&h.object.key, &h.object.hash).await?;
	Ok(Some(spec.data.decode_heldout(&bytes, spec.model.vocab_size)?))
}

/// The run's initial checkpoints (`RunSpec::init`) from `store`, one `(bytes, state hash)` per stage;
/// empty for a run with seeded weights.
///
/// # Errors
/// A checkpoint missing or not matching its hash.
pub async fn load_init(
	store: &ObjectStore,
	spec: &RunSpec,
) -> anyhow::Result<Vec<(Vec<u8>, [u8; 32])>> {
	let mut out = Vec::new();
	for i in spec.init.iter().flatten() {
		out.push((store.get(&i.checkpoint.key, &i.checkpoint.hash).await?.to_vec(), i.state.0));
	}
	Ok(out)
}

/// What the baseline trains on.
#[derive(Clone, Copy, Debug)]
pub struct Inputs<'a> {
	/// The run's initial checkpoints (`(bytes, state hash)` per stage, [`load_init`]); empty for the
	/// seed's weights.
	pub init: &'a [(Vec<u8>, [u8; 32])],
	/// The samples, whole epochs of `quota`.
	pub samples: &'a [Sample],
	/// Samples per epoch.
	pub quota: usize,
	/// Held-out rows to evaluate after each epoch.
	pub heldout: Option<&'a [u32]>,
}

/// What the baseline measured.
#[derive(Clone, Debug, PartialEq)]
pub struct Baseline {
	/// Mean training loss per epoch over its samples (nats per token), before each sample's step.
	pub losses: Vec<f32>,
	/// Held-out loss after each epoch (nats per token); empty without held-out rows.
	pub heldout: Vec<f32>,
	/// Optimizer steps taken.
	pub steps: u64,
	/// Seconds of forward, backward and step per epoch (held-out evaluation excluded).
	pub epoch_secs: Vec<f64>,
	/// Bytes the wire carried across the cuts in training (held-out evaluation excluded).
	pub wire_bytes: u64,
}

/// Trains the baseline (module docs) of `spec` with `model` (the run's, or another cut of the same
/// blocks) and `wire` across its cuts on `inputs`; `stop` is asked before each sample (an interrupted
/// run ends with an error).
///
/// # Errors
/// Samples that are not whole epochs; an initial checkpoint that is not the named state; model errors.
pub fn train(
	spec: &RunSpec,
	model: &ModelConfig,
	wire: Option<Encoding>,
	inputs: Inputs<'_>,
	stop: &dyn Fn() -> bool,
) -> anyhow::Result<Baseline> {
	let Inputs { init, samples, quota, heldout } = inputs;
	ensure!(
		quota > 0 && !samples.is_empty() && samples.len().is_multiple_of(quota),
		"{} samples are not whole epochs of {quota}",
		samples.len()
	);
	let mut p = Pipeline::new(model, spec.seed, DType::F32, &Device::Cpu, wire)?;
	if !init.is_empty() {
		ensure!(model.stages == spec.model.stages, "a continued model's baseline keeps its cuts");
		for (s, (bytes, state)) in init.iter().enumerate() {
			let st = Stage::initial(
				model,
				s,
				spec.seed,
				&spec.training,
				&Device::Cpu,
				Some((bytes, state)),
			)?;
			p.stages_mut()[s].set_flat_params(&st.flat_params()?)?;
		}
	}
	let every = spec.training.accumulate().map_or(quota, |a| a as usize);
	let mut eval_bytes = 0;
	let mut out = Baseline {
		losses: Vec::new(),
		heldout: Vec::new(),
		steps: 0,
		epoch_secs: Vec::new(),
		wire_bytes: 0,
	};
	for (e, epoch) in samples.chunks(quota).enumerate() {
		let t = Instant::now();
		let mut sum = 0.0f64;
		for (i, (x, y)) in epoch.iter().enumerate() {
			ensure!(!stop(), "interrupted in epoch {e}");
			let loss = p.forward_backward(x, y)?;
			tracing::debug!(epoch = e, sample = e * quota + i, loss, "baseline sample");
			sum += f64::from(loss);
			if (i + 1) % every == 0 || i + 1 == epoch.len() {
				p.step(&spec.step_options(e as u32))?;
				out.steps += 1;
			}
		}
		out.losses.push((sum / quota as f64) as f32);
		out.epoch_secs.push(t.elapsed().as_secs_f64());
		if let Some(rows) = heldout {
			let before = p.wire_bytes();
			out.heldout.push(iota_orchestrator::eval::mean_loss(spec, &mut p, rows)?);
			eval_bytes += p.wire_bytes() - before;
		}
		tracing::info!(
			epoch = e,
			loss = out.losses[e],
			heldout = out.heldout.get(e),
			secs = out.epoch_secs[e],
			steps = out.steps,
			"baseline epoch done"
		);
	}
	out.wire_bytes = p.wire_bytes() - eval_bytes;
	Ok(out)
}
