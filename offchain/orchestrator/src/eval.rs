//! Held-out loss of every merged model (docs/design.md §3, "Held-out loss"; issue 16 item 6).
//!
//! The training loss the tail reports is measured on the samples the model is training on, by the
//! weights of the moment; it cannot tell a model that generalises from one that memorises, and in
//! local mode it is the loss of a replica's local weights, not of the merged model. So the
//! orchestrator (never a miner: the work stays off the critical path) evaluates each epoch's merged
//! model, assembled from every stage's checkpoint named in the chain's finalized merge manifests
//! and checked against the attested state hash, on the run's held-out rows
//! ([`iota_rpc::HeldOut`]: documents no shard holds), through the run's wire codec as the pipeline
//! sees it, and records the mean loss as [`Event::HeldOutEvaluated`]; it reaches
//! `EpochSummary::heldout_loss`, the dashboard and the devnet report.

use std::sync::Arc;
use std::time::Duration;

use candle_core::{DType, Device, Tensor};
use iota_chain::IotaClient;
use iota_model::Pipeline;
use iota_primitives::ContentHash;
use iota_rpc::{RunSpec, SpecError};
use iota_storage::StorageError;

use crate::server::Orchestrator;
use crate::state::Event;

/// Why a merged model could not be evaluated.
#[derive(Debug, thiserror::Error)]
pub enum EvalError {
	/// The spec has no held-out set, or the held-out bytes are malformed.
	#[error("run spec: {0}")]
	Spec(#[from] SpecError),
	/// A checkpoint does not load (not the attested state, wrong stage, bad bytes).
	#[error("model: {0}")]
	Model(#[from] iota_model::Error),
	/// The inputs do not fit the spec (stage count, row layout).
	#[error("{0}")]
	Input(String),
	/// A checkpoint or the held-out set could not be read.
	#[error("object store: {0}")]
	Storage(#[from] StorageError),
	/// The chain could not be read.
	#[error("chain: {0}")]
	Chain(#[from] iota_chain::Error),
}

/// Mean next-token cross-entropy (nats per token) of the model whose stage `s` is
/// `checkpoints[s] = (checkpoint bytes, attested state hash)`, over `rows`: held-out rows of
/// `seq_len + 1` tokens each, evaluated `batch_rows` at a time (the last batch may be smaller)
/// through the spec's wire encoding, in f32 on the CPU. Every batch's mean is weighted by its rows,
/// so the figure is the mean over all `rows.len() / (seq_len + 1) · seq_len` predicted tokens.
///
/// # Errors
/// [`EvalError::Input`] for a checkpoint count other than the stage count or rows that are not whole
/// rows; [`EvalError::Model`] for a checkpoint that is not the attested state
/// (`Error::StateHashMismatch`) or does not parse; [`EvalError::Spec`] for an unknown encoding.
pub fn heldout_loss(
	spec: &RunSpec,
	rows: &[u32],
	checkpoints: &[(Vec<u8>, ContentHash)],
) -> Result<f32, EvalError> {
	let mut model = merged_model(spec, checkpoints, Some(spec.wire_encoding()?))?;
	mean_loss(spec, &mut model, rows)
}

/// Mean next-token cross-entropy (nats per token) of `model` over `rows` (held-out rows of `seq_len +
/// 1` tokens each), `batch_rows` at a time, each batch's mean weighted by its rows: what
/// [`heldout_loss`] computes for a merged model, and the devnet's single-process baseline for its own.
///
/// # Errors
/// [`EvalError::Input`] for rows that are not whole rows; [`EvalError::Model`] from the forward pass.
pub fn mean_loss(spec: &RunSpec, model: &mut Pipeline, rows: &[u32]) -> Result<f32, EvalError> {
	let (t, b) = (spec.data.seq_len as usize, spec.data.batch_rows.max(1) as usize);
	let w = t + 1;
	if rows.is_empty() || !rows.len().is_multiple_of(w) {
		return Err(EvalError::Input(format!(
			"{} held-out tokens are not whole rows of {w}",
			rows.len()
		)));
	}
	let device = Device::Cpu;
	let (mut sum, mut n) = (0f64, 0usize);
	for batch in rows.chunks(b * w) {
		let r = batch.len() / w;
		let (inputs, targets) = iota_protocol::sample::inputs_and_targets(batch, t)
			.ok_or_else(|| EvalError::Input("a held-out batch is not whole rows".into()))?;
		let inputs = Tensor::from_vec(inputs, (r, t), &device).map_err(iota_model::Error::from)?;
		let targets =
			Tensor::from_vec(targets, (r, t), &device).map_err(iota_model::Error::from)?;
		let loss = model.eval_loss(&inputs, &targets)?;
		sum += f64::from(loss) * r as f64;
		n += r;
	}
	Ok((sum / n as f64) as f32)
}

/// The model whose stage `s` is `checkpoints[s] = (checkpoint bytes, attested state hash)`, in f32
/// on the CPU, with `wire` across its cuts: each stage is loaded only if its state hashes to the
/// attested hash (`Stage::load_checkpoint`).
///
/// # Errors
/// [`EvalError::Input`] for a checkpoint count other than the stage count; [`EvalError::Model`] for a
/// checkpoint that is not the attested state (`Error::StateHashMismatch`) or does not parse.
pub fn merged_model(
	spec: &RunSpec,
	checkpoints: &[(Vec<u8>, ContentHash)],
	wire: Option<iota_model::Encoding>,
) -> Result<Pipeline, EvalError> {
	let cfg = &spec.model;
	if checkpoints.len() != cfg.n_stages() {
		return Err(EvalError::Input(format!(
			"{} checkpoints for {} stages",
			checkpoints.len(),
			cfg.n_stages()
		)));
	}
	let mut model = Pipeline::new(cfg, spec.seed, DType::F32, &Device::Cpu, wire)?;
	for (stage, (bytes, state_hash)) in model.stages_mut().iter_mut().zip(checkpoints) {
		stage.train_as(&spec.training);
		stage.load_checkpoint(bytes, &state_hash.0)?;
	}
	Ok(model)
}

/// What the chain and the bucket hold of an epoch's merged model.
pub enum Merged {
	/// Every stage's checkpoint bytes (hash-checked against the manifest) and attested state hash.
	Checkpoints(Vec<(Vec<u8>, ContentHash)>),
	/// Not every stage's manifest of the epoch is on chain yet.
	NotYet,
	/// The epoch's model cannot be assembled (a manifest without a checkpoint, a checkpoint gone).
	Unavailable(String),
}

/// The checkpoints of `epoch`'s merged model, `stages` stages, as the chain's merge manifests name
/// them, read from `store` (each checked against the manifest's content hash).
///
/// # Errors
/// [`EvalError::Chain`] and [`EvalError::Storage`] for failed reads (a missing object is
/// [`Merged::Unavailable`]).
pub async fn merged_checkpoints(
	store: &iota_storage::ObjectStore,
	chain: &IotaClient,
	stages: usize,
	epoch: u32,
) -> Result<Merged, EvalError> {
	let mut manifests = Vec::new();
	for stage in 0..stages as u16 {
		match chain.merge_manifest(epoch, stage).await? {
			Some(m) => manifests.push(m),
			None => return Ok(Merged::NotYet),
		}
	}
	let mut checkpoints = Vec::with_capacity(manifests.len());
	for (stage, m) in manifests.into_iter().enumerate() {
		let Some(ck) = m.checkpoint else {
			return Ok(Merged::Unavailable(format!(
				"stage {stage}'s manifest names no checkpoint"
			)));
		};
		let key = String::from_utf8_lossy(&ck.key.0).into_owned();
		match store.get(&key, &ck.content_hash).await {
			Ok(bytes) => checkpoints.push((bytes.to_vec(), m.state_hash)),
			Err(StorageError::NotFound { .. }) => {
				return Ok(Merged::Unavailable(format!("stage {stage}'s checkpoint {key} is gone")))
			},
			Err(e) => return Err(e.into()),
		}
	}
	Ok(Merged::Checkpoints(checkpoints))
}

/// What [`export_epoch`] wrote.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Exported {
	/// The epoch whose merged model it is.
	pub epoch: u32,
	/// Parameters written.
	pub params: usize,
	/// Held-out rows in the reference file, when one was asked for.
	pub reference_rows: Option<usize>,
}

/// The last epoch every stage of `stages` has committed on `chain` (its completion recorded).
///
/// # Errors
/// [`EvalError::Input`] when none is; [`EvalError::Chain`].
pub async fn last_committed_epoch(chain: &IotaClient, stages: usize) -> Result<u32, EvalError> {
	let none = || EvalError::Input("no epoch is committed yet".into());
	// Every stage in epoch `e` has committed the epochs before it.
	let mut current = u32::MAX;
	for s in 0..stages as u16 {
		current = current.min(chain.stage(s).await?.epoch);
	}
	let mut e = current.checked_sub(1).ok_or_else(none)?;
	while chain.epoch_completed_at(e).await?.is_none() {
		e = e.checked_sub(1).ok_or_else(none)?;
	}
	Ok(e)
}

/// Writes the merged model of `epoch` (default: [`last_committed_epoch`]) of the run `spec` as a
/// Hugging Face folder `out` ([`iota_model::hf::export`], with the run's tokenizer), every stage's
/// checkpoint checked against its manifest and its attested state hash ([`merged_checkpoints`],
/// [`merged_model`]; no wire across the cuts: the model as a function). With `reference_out`, also
/// the run's held-out rows (their first `seq_len` tokens) and the exported model's logits for them
/// ([`iota_model::hf::write_reference`]). The caller checks `spec` against the chain's `model_hash`.
///
/// # Errors
/// [`EvalError::Input`] for an epoch not committed at every stage, a model that cannot be
/// assembled, or `reference_out` without a held-out set (refused before anything is written);
/// [`EvalError::Model`], [`EvalError::Storage`], [`EvalError::Chain`], [`EvalError::Spec`].
pub async fn export_epoch(
	store: &iota_storage::ObjectStore,
	chain: &IotaClient,
	spec: &RunSpec,
	epoch: Option<u32>,
	out: &std::path::Path,
	reference_out: Option<&std::path::Path>,
) -> Result<Exported, EvalError> {
	iota_model::hf::LlamaConfig::of(&spec.model)?;
	if reference_out.is_some() && spec.data.heldout.is_none() {
		return Err(EvalError::Input(
			"a reference needs the run's held-out set: it has none".into(),
		));
	}
	let stages = spec.model.n_stages();
	let epoch = match epoch {
		Some(e) => e,
		None => last_committed_epoch(chain, stages).await?,
	};
	let checkpoints = match merged_checkpoints(store, chain, stages, epoch).await? {
		Merged::Checkpoints(c) => c,
		Merged::NotYet => {
			return Err(EvalError::Input(format!("epoch {epoch} is not committed at every stage")))
		},
		Merged::Unavailable(why) => {
			return Err(EvalError::Input(format!(
				"epoch {epoch}'s model cannot be assembled: {why}"
			)))
		},
	};
	let mut model = merged_model(spec, &checkpoints, None)?;
	let tok = &spec.data.tokenizer;
	let tokenizer = store.get(&tok.key, &tok.hash).await?;
	let params = iota_model::hf::export(&model, out, Some(tokenizer.as_ref()))?;
	let reference_rows = match (reference_out, &spec.data.heldout) {
		(Some(path), Some(h)) => {
			let bytes = store.get(&h.object.key, &h.object.hash).await?;
			let rows = spec.data.decode_heldout(&bytes, spec.model.vocab_size)?;
			// A held-out row is seq_len + 1 tokens (inputs and the next token).
			let t = spec.data.seq_len as usize;
			let inputs: Vec<u32> = rows.chunks_exact(t + 1).flat_map(|r| r[..t].to_vec()).collect();
			let batch = spec.data.batch_rows.max(1) as usize;
			Some(iota_model::hf::write_reference(&mut model, &inputs, t, batch, path)?)
		},
		_ => None,
	};
	Ok(Exported { epoch, params, reference_rows })
}

/// What one look at an epoch found.
enum Look {
	/// Evaluated: the loss.
	Loss(f32),
	/// Not every stage's manifest of the epoch is finalized yet.
	NotYet,
	/// The epoch cannot be evaluated (a manifest without a checkpoint, a checkpoint that is gone or
	/// not the attested state): skipped, with the reason logged.
	Skip(String),
}

/// Evaluates `epoch`'s merged model if every stage's manifest of it is finalized.
async fn look(
	orch: &Orchestrator,
	chain: &IotaClient,
	spec: &RunSpec,
	rows: &[u32],
	epoch: u32,
) -> Result<Look, EvalError> {
	let checkpoints =
		match merged_checkpoints(orch.store(), chain, spec.model.n_stages(), epoch).await? {
			Merged::Checkpoints(c) => c,
			Merged::NotYet => return Ok(Look::NotYet),
			Merged::Unavailable(why) => return Ok(Look::Skip(why)),
		};
	let (spec, rows) = (spec.clone(), rows.to_vec());
	let out = tokio::task::spawn_blocking(move || heldout_loss(&spec, &rows, &checkpoints))
		.await
		.map_err(|e| EvalError::Input(format!("evaluation task failed: {e}")))?;
	Ok(match out {
		Ok(loss) if loss.is_finite() => Look::Loss(loss),
		Ok(loss) => Look::Skip(format!("the merged model's held-out loss is {loss}")),
		Err(EvalError::Model(e)) => Look::Skip(format!("a checkpoint does not load: {e}")),
		Err(e) => return Err(e),
	})
}

/// The chain client in `slot`, connecting to `url` first when there is none; `None` (the failure
/// logged for the background task `task`) when the node cannot be reached now: the caller tries again
/// on its next poll.
pub(crate) async fn connected<'a>(
	slot: &'a mut Option<IotaClient>,
	url: &str,
	task: &str,
) -> Option<&'a IotaClient> {
	if slot.is_none() {
		match IotaClient::connect(url).await {
			Ok(c) => *slot = Some(c),
			Err(e) => tracing::warn!(error = %e, "{task}: chain connection"),
		}
	}
	slot.as_ref()
}

/// Runs until aborted: evaluates the run's merged models in epoch order, from the first epoch the
/// state has no held-out loss for, as their manifests finalize on `chain_url`, and records each
/// loss. Returns at once when the spec has no held-out set. Transient failures (chain, store) are
/// logged and retried; an epoch that cannot be evaluated is skipped with a warning.
pub async fn evaluate_merged_models(orch: Arc<Orchestrator>, chain_url: String, poll: Duration) {
	let spec = orch.spec().clone();
	let Some(h) = spec.data.heldout.clone() else { return };
	let rows = loop {
		let got = match orch.store().get(&h.object.key, &h.object.hash).await {
			Ok(bytes) => {
				spec.data.decode_heldout(&bytes, spec.model.vocab_size).map_err(EvalError::from)
			},
			Err(e) => Err(e.into()),
		};
		match got {
			Ok(rows) => break rows,
			Err(e) => {
				tracing::warn!(error = %e, key = %h.object.key, "held-out set unreadable; retrying");
				tokio::time::sleep(poll * 5).await;
			},
		}
	};
	let mut next = orch.with_state(|st| st.next_heldout_epoch());
	let mut chain: Option<IotaClient> = None;
	loop {
		tokio::time::sleep(poll).await;
		let Some(c) = connected(&mut chain, &chain_url, "held-out evaluation").await else {
			continue;
		};
		match look(&orch, c, &spec, &rows, next).await {
			Ok(Look::Loss(loss)) => {
				if let Err(e) = orch.record(vec![Event::HeldOutEvaluated { epoch: next, loss }]) {
					tracing::warn!(epoch = next, error = %e, "recording the held-out loss");
					continue;
				}
				tracing::info!(epoch = next, loss, "held-out loss of the merged model");
				next += 1;
			},
			Ok(Look::NotYet) => {},
			Ok(Look::Skip(why)) => {
				tracing::warn!(epoch = next, %why, "held-out evaluation skipped");
				next += 1;
			},
			Err(e @ EvalError::Chain(_)) => {
				tracing::warn!(epoch = next, error = %e, "held-out evaluation; reconnecting");
				chain = None;
			},
			Err(e) => tracing::warn!(epoch = next, error = %e, "held-out evaluation; retrying"),
		}
	}
}

#[cfg(test)]
mod tests {
	use super::*;
	use iota_model::{ModelConfig, Stage};
	use iota_protocol::optim::{AdamW, Training};
	use iota_protocol::MergeCodec;
	use iota_rpc::{DataManifest, LrSchedule, SpecObject};

	fn run_spec(training: Training) -> RunSpec {
		let obj = SpecObject { key: "k".into(), hash: ContentHash::of(b"k"), size: 0 };
		RunSpec {
			init: None,
			run: "eval-test".into(),
			model: ModelConfig::tiny(),
			seed: 3,
			encoding: "f32".into(),
			adamw: AdamW::default(),
			lr: LrSchedule { peak: 1e-3, warmup_epochs: 0, total_epochs: 1, min_ratio: 1.0 },
			max_norm: None,
			merge_codec: MergeCodec::F32,
			training,
			data: DataManifest {
				tokenizer: obj.clone(),
				seq_len: 8,
				batch_rows: 2,
				rows_per_shard: 2,
				shards: vec![obj],
				heldout: None,
			},
		}
	}

	/// Every stage's checkpoint and attested state hash, of weights moved off the init by `shift`.
	fn checkpoints(spec: &RunSpec, shift: f32) -> Vec<(Vec<u8>, ContentHash)> {
		(0..spec.model.n_stages())
			.map(|s| {
				let mut st =
					Stage::new(&spec.model, s, spec.seed, DType::F32, &Device::Cpu).unwrap();
				st.train_as(&spec.training);
				let flat: Vec<f32> = st.flat_params().unwrap().iter().map(|v| v + shift).collect();
				st.set_flat_params(&flat).unwrap();
				(st.to_checkpoint().unwrap(), ContentHash(st.state_hash().unwrap()))
			})
			.collect()
	}

	#[test]
	fn the_heldout_loss_is_the_mean_over_rows_of_the_attested_model() {
		let spec = run_spec(Training::Sync);
		let rows: Vec<u32> = (0..27u32).map(|i| i * 37 % 512).collect(); // 3 rows of 8 + 1
		let cks = checkpoints(&spec, 0.01);
		let got = heldout_loss(&spec, &rows, &cks).unwrap();
		// The same model loaded by hand, one row at a time: batching (2 + 1 rows) changes nothing.
		let mut p = Pipeline::new(&spec.model, spec.seed, DType::F32, &Device::Cpu, None).unwrap();
		for (st, (bytes, h)) in p.stages_mut().iter_mut().zip(&cks) {
			st.load_checkpoint(bytes, &h.0).unwrap();
		}
		let mut sum = 0.0;
		for row in rows.chunks(9) {
			let (i, t) = iota_protocol::sample::inputs_and_targets(row, 8).unwrap();
			let i = Tensor::from_vec(i, (1, 8), &Device::Cpu).unwrap();
			let t = Tensor::from_vec(t, (1, 8), &Device::Cpu).unwrap();
			sum += p.eval_loss(&i, &t).unwrap();
		}
		assert!((got - sum / 3.0).abs() < 1e-5, "{got} vs {}", sum / 3.0);
		// Other weights, another loss: the checkpoints are what is evaluated.
		let init = heldout_loss(&spec, &rows, &checkpoints(&spec, 0.0)).unwrap();
		assert!((init - got).abs() > 1e-4, "{init} vs {got}");
	}

	#[test]
	fn what_is_not_the_attested_model_is_refused() {
		let spec = run_spec(Training::Sync);
		let rows: Vec<u32> = (0..18u32).collect();
		let cks = checkpoints(&spec, 0.0);
		assert!(matches!(heldout_loss(&spec, &rows, &cks[..2]), Err(EvalError::Input(_))));
		assert!(matches!(heldout_loss(&spec, &rows[..10], &cks), Err(EvalError::Input(_))));
		assert!(matches!(heldout_loss(&spec, &[], &cks), Err(EvalError::Input(_))));
		let mut forged = cks.clone();
		forged[1].1 = ContentHash([7; 32]);
		assert!(matches!(heldout_loss(&spec, &rows, &forged), Err(EvalError::Model(_))));
		// Local mode's checkpoints carry the outer momentum: a sync checkpoint is not one.
		let local = run_spec(Training::IOTA_LOCAL);
		assert!(matches!(heldout_loss(&local, &rows, &cks), Err(EvalError::Model(_))));
		let loss = heldout_loss(&local, &rows, &checkpoints(&local, 0.0)).unwrap();
		assert!(loss.is_finite() && loss > 0.0);
	}
}
